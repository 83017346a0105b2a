"""SQuAD answer alignment: tokens with their character spans in the original
context.

Alignment. The tokenizer normalises text (whitespace collapsed, `` and ''
turned into ", NFKD with combining marks dropped, lowercase) before
SentencePiece sees it, so piece boundaries are not positions in the original
context. `tokenize_with_offsets` keeps, for every token, the character span
of the *original* context it came from: the normalisation is replayed
character by character to map each normalised character back to its source
character (checked against `FullTokenizer.normalize`; any disagreement is
resolved by a character alignment), and SentencePiece's own byte offsets
place each piece in the normalised text. An answer's character span then
maps to the tokens overlapping it, and a predicted token span maps back to
the exact original substring (accents, case and punctuation intact), which
is what the official evaluation compares.
"""

import dataclasses
import difflib
from typing import List

import numpy as np

from data_prep import tokenization


def _replay_normalization(text, lower):
  """Normalised chars and, per char, its source span (start, end) in `text`.

  Replays `tokenization.normalize_text` step by step.
  """
  quotes = dict(tokenization.QUOTE_REPLACEMENTS)  # pairs of characters
  chars, source = [], []
  i, n = 0, len(text)
  pending_space = None
  while i < n:
    c = text[i]
    if tokenization.is_dropped_char(c):  # tokenization.clean_invisible
      i += 1
      continue
    if tokenization.is_word_break(c):
      if chars and pending_space is None:
        pending_space = i
      i += 1
      continue
    if pending_space is not None:
      chars.append(" ")
      source.append((pending_space, pending_space + 1))
      pending_space = None
    quote = quotes.get(text[i:i + 2])
    if quote is not None:
      out = "".join(tokenization.character_rule(q, lower) for q in quote)
      width = 2
    else:
      out, width = tokenization.character_rule(c, lower), 1
    for d in out:
      chars.append(d)
      source.append((i, i + width))
    i += width
  return "".join(chars), source


def normalize_with_map(tokenizer, text):
  """(tokenizer.normalize(text), list: normalised index -> source span)."""
  norm = tokenizer.normalize(text)
  replay, source = _replay_normalization(text, tokenizer.do_lower_case)
  if replay == norm:
    return norm, source
  # Rare (context-dependent case mappings, NFKD producing spaces): align the
  # replayed string to the real one and borrow the nearest mapped source.
  mapping = [None] * len(norm)
  matcher = difflib.SequenceMatcher(None, norm, replay, autojunk=False)
  for op, a0, a1, b0, b1 in matcher.get_opcodes():
    if op == "equal" or (op == "replace" and a1 - a0 == b1 - b0):
      for k in range(a1 - a0):
        mapping[a0 + k] = source[b0 + k]
  last = (0, 0)
  for k, m in enumerate(mapping):
    mapping[k] = last = last if m is None else m
  return norm, mapping


@dataclasses.dataclass
class TokenizedText:
  ids: List[int]
  starts: List[int]     # per token: first original character
  ends: List[int]       # per token: one past its last original character


def tokenize_with_offsets(tokenizer, text):
  """Tokenizes `text` exactly as `tokenizer.encode_ids` and keeps char spans.

  A token made only of the word-start marker (no visible character) gets an
  empty span at the next character. A WordPiece tokenizer keeps the spans
  itself (each piece: the source characters of its part of the word).
  """
  if tokenizer.kind == "wordpiece":
    return TokenizedText(*tokenizer.encode_with_offsets(text))
  norm, to_orig = normalize_with_map(tokenizer, text)
  ids = tokenizer.encode_ids(text)
  proto = tokenizer.sp_model.encode(norm, out_type="immutable_proto")
  # SentencePiece reports offsets in characters (recent Python wrappers) or
  # UTF-8 bytes (older ones); the last piece's end tells which.
  raw = norm.encode("utf-8")
  in_bytes = (len(raw) != len(norm) and proto.pieces and
              proto.pieces[-1].end == len(raw))
  char_of = np.arange(len(norm) + 1)  # offset -> normalised character
  if in_bytes:  # each character's index once per byte of it
    widths = [len(ch.encode("utf-8")) for ch in norm]
    char_of = np.append(np.repeat(char_of[:-1], widths), len(norm))
  norm_spans = []
  k = 0
  for piece in proto.pieces:
    b, e = int(char_of[piece.begin]), int(char_of[piece.end])
    if k < len(ids) and ids[k] == piece.id:
      norm_spans.append((b, e))
      k += 1
      continue
    # The tokenizer split this piece (e.g. "1990," -> "1990" ","): place the
    # sub-pieces right-aligned in the piece's span by their visible length.
    surface = piece.piece.replace(tokenization.SPIECE_UNDERLINE, "")
    subs, length = [], 0
    while k < len(ids) and length < len(surface):
      sub = tokenizer.convert_ids_to_tokens([ids[k]])[0]
      width = len(sub.replace(tokenization.SPIECE_UNDERLINE, ""))
      subs.append(width)
      length += width
      k += 1
    cursor = e - length
    for width in subs:
      norm_spans.append((max(cursor, b), cursor + width))
      cursor += width
  if k != len(ids):
    raise AssertionError("offset tokenization disagrees with encode_ids")
  starts, ends = [], []
  for b, e in norm_spans:
    visible = [j for j in range(b, e) if j < len(norm) and norm[j] != " "]
    at = to_orig[e][0] if e < len(norm) else len(text)  # if none visible
    starts.append(to_orig[visible[0]][0] if visible else at)
    # A source character split over two tokens (e.g. a ligature) ends the
    # first token after the whole character.
    ends.append(max(starts[-1], to_orig[visible[-1]][1] if visible else at))
  return TokenizedText(ids, starts, ends)


def char_span_to_tokens(tokens, start_char, end_char):
  """First and last token overlapping [start_char, end_char), or None."""
  hit = [i for i, (s, e) in enumerate(zip(tokens.starts, tokens.ends))
         if s < end_char and e > start_char]
  return (hit[0], hit[-1]) if hit else None


def tokens_to_text(context, tokens, first, last):
  """The original substring covered by tokens first..last."""
  return context[tokens.starts[first]:tokens.ends[last]]
