"""BERT WordPiece tokenizer: the original release's `--vocab_file` path.

The original ALBERT release runs with either a SentencePiece model or a BERT
WordPiece vocabulary (its Chinese models, `vocab_chinese.txt`). This is the
WordPiece path, written to give the ids of the original `FullTokenizer`:

  * cleaning: NUL, U+FFFD and control/format characters (Cc, Cf; not tab,
    newline, CR) are dropped, whitespace (tab, newline, CR, Zs) separates;
  * every CJK ideograph (the original's blocks) is a word of its own;
  * with `do_lower_case`, each word is lower-cased, NFD-normalised and its
    non-spacing marks (Mn) dropped (without it the text is kept as is);
  * every punctuation character (Unicode P*, and all ASCII non-alphanumerics)
    is a word of its own;
  * each word: greedy longest-match pieces, continuations prefixed "##"; a
    word the vocabulary cannot spell, or longer than
    `max_input_chars_per_word` characters, is one [UNK].

Every token also keeps the span of the original text it came from
(`encode_with_offsets`), which SQuAD needs to map answers back to
characters. No TensorFlow: data_prep runs without it.
"""

import functools
import unicodedata

import numpy as np

from albert_toolkit import wordpiece_vocab
from albert_toolkit.wordpiece_vocab import CONTINUATION
from albert_toolkit.wordpiece_vocab import MAX_INPUT_CHARS_PER_WORD
from albert_toolkit.wordpiece_vocab import SPECIAL_TOKENS
from albert_toolkit.wordpiece_vocab import UNK


# The original's "Chinese character" blocks (CJK Unified Ideographs, its
# extensions A-E, the compatibility ideographs and their supplement).
_CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF),
               (0x2A700, 0x2B73F), (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF),
               (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def is_cjk_char(c):
  """True for a CJK ideograph (a word of its own)."""
  cp = ord(c)
  return any(lo <= cp <= hi for lo, hi in _CJK_RANGES)


@functools.lru_cache(maxsize=65536)
def is_punctuation(c):
  """True for Unicode punctuation and every ASCII non-alphanumeric symbol."""
  cp = ord(c)
  if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
    return True
  return unicodedata.category(c).startswith("P")


def is_whitespace(c):
  """True for a character that separates words in the original's cleaning."""
  return c in " \t\n\r" or unicodedata.category(c) == "Zs"


def is_dropped(c):
  """True for a character the original's cleaning removes."""
  if c in "\t\n\r":
    return False
  return c in "\x00\ufffd" or unicodedata.category(c) in ("Cc", "Cf")


_KEEP, _DROP, _SPACE, _CJK = range(4)


@functools.lru_cache(maxsize=65536)
def _char_class(c):
  """What the basic tokenizer's first pass does with `c` (cached: each
  character's rule is looked up once)."""
  if is_dropped(c):
    return _DROP
  if is_whitespace(c) or c.isspace():
    return _SPACE
  return _CJK if is_cjk_char(c) else _KEEP


@functools.lru_cache(maxsize=65536)
def _lower_strip(text):
  """Lower-cased, NFD, without non-spacing marks (the original's order)."""
  text = unicodedata.normalize("NFD", text.lower())
  return "".join(c for c in text if unicodedata.category(c) != "Mn")


def _normalize_word(chars, spans, lower):
  """A whitespace-delimited word (its characters and their source spans)
  after lower-casing and accent stripping: (characters, spans)."""
  if not lower:
    return chars, spans
  word = "".join(chars)
  if word.isascii():  # one character each, no marks
    return list(word.lower()), spans
  word = _lower_strip(word)
  per_char = [_lower_strip(c) for c in chars]
  if sum(len(p) for p in per_char) == len(word):
    # One rule per character (a context rule such as the final sigma keeps
    # the length): each output character comes from its source character.
    out_spans = [s for p, s in zip(per_char, spans) for _ in p]
    return list(word), out_spans
  whole = (spans[0][0], spans[-1][1])
  return list(word), [whole] * len(word)


def basic_words(text, lower):
  """The original's BasicTokenizer with offsets: [(word, [(start, end)] per
  character of word)], spans in `text`'s characters."""
  words = []
  chars, spans = [], []

  def flush():
    if chars:
      _split_word(*_normalize_word(chars, spans, lower), words)
      chars.clear()
      spans.clear()

  for i, c in enumerate(text):
    kind = _char_class(c)
    if kind == _KEEP:
      chars.append(c)
      spans.append((i, i + 1))
    elif kind == _SPACE:
      flush()
    elif kind == _CJK:
      flush()
      _split_word(*_normalize_word([c], [(i, i + 1)], lower), words)
  flush()
  return words


def _split_word(chars, spans, words):
  """Appends the parts of a normalised word split at punctuation (each
  punctuation character alone) and at any whitespace the normalisation
  made."""
  cur, cur_spans = [], []
  for c, s in zip(chars, spans):
    punct = is_punctuation(c)
    if punct or c.isspace():
      if cur:
        words.append(("".join(cur), cur_spans))
      cur, cur_spans = [], []
      if punct:
        words.append((c, [s]))
    else:
      cur.append(c)
      cur_spans.append(s)
  if cur:
    words.append(("".join(cur), cur_spans))


class WordPieceTokenizer:
  """The original's FullTokenizer over a WordPiece vocabulary.

  The interface of `tokenization.FullTokenizer` (see tokenization.py): kind
  ("wordpiece"), vocab_path (= vocab_file), vocab_size, pad_id, unk_id,
  cls_id, sep_id, mask_id, is_start (np.bool_ [vocab_size]: False for "##"
  continuations), control_ids (ids the tokenizer never produces from text:
  the special tokens, [unusedN], "##" + a CJK character or punctuation,
  upper-case tokens when lower-casing, ...; never a random replacement) and
  replacement_ids (np.int64: all the others).

  Args:
    vocab_file: the vocabulary, one token a line (line n: id n - 1).
    do_lower_case: lower-case and strip accents (the original's rule).
    vocab_text: the file's contents, read by the caller; `vocab_file` then
      only names it.
    max_input_chars_per_word: longer words become one [UNK].
  """

  kind = "wordpiece"
  spm_model_file = ""

  def __init__(self, vocab_file, do_lower_case=True, vocab_text=None,
               max_input_chars_per_word=MAX_INPUT_CHARS_PER_WORD):
    if not vocab_file:
      raise ValueError("A WordPiece vocabulary file is required (vocab_file).")
    self.vocab_file = self.vocab_path = vocab_file
    self.do_lower_case = do_lower_case
    self.max_input_chars_per_word = max_input_chars_per_word
    self._tokens = (wordpiece_vocab.read_tokens(vocab_file)
                    if vocab_text is None else
                    wordpiece_vocab.parse_tokens(vocab_text, vocab_file))
    self.vocab = {t: i for i, t in enumerate(self._tokens)}
    self.vocab_size = len(self._tokens)
    self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = (
        self.vocab[t] for t in SPECIAL_TOKENS)
    self._longest = max(len(t) for t in self._tokens)
    self.is_start = np.array([not t.startswith(CONTINUATION)
                              for t in self._tokens], dtype=bool)
    self.control_ids = [i for i, t in enumerate(self._tokens)
                        if not self._producible(t)]
    self._control_set = frozenset(self.control_ids)
    self.replacement_ids = np.array(
        [i for i in range(self.vocab_size) if i not in self._control_set],
        dtype=np.int64)

  def _producible(self, token):
    """Can tokenizing some text give `token`?"""
    continuation = token.startswith(CONTINUATION)
    surface = token[len(CONTINUATION):] if continuation else token
    if not surface or token == UNK:
      return False
    words = basic_words(surface, self.do_lower_case)
    if len(words) != 1 or words[0][0] != surface:
      return False
    # A CJK character or punctuation is always a whole word.
    return not (continuation and len(surface) == 1 and (
        is_cjk_char(surface) or is_punctuation(surface)))

  def _word_pieces(self, word, spans, ids, starts, ends):
    """Appends the pieces of one basic word (greedy longest match)."""
    n = len(word)
    if n > self.max_input_chars_per_word:
      ids.append(self.unk_id)
      starts.append(spans[0][0])
      ends.append(spans[-1][1])
      return
    vocab, found = self.vocab, []
    start = 0
    while start < n:
      prefix = CONTINUATION if start else ""
      end = min(n, start + self._longest)  # no longer token can match
      while end > start and prefix + word[start:end] not in vocab:
        end -= 1
      if end == start:  # nothing matches: the whole word is unknown
        ids.append(self.unk_id)
        starts.append(spans[0][0])
        ends.append(spans[-1][1])
        return
      found.append((vocab[prefix + word[start:end]], start, end))
      start = end
    for i, b, e in found:
      ids.append(i)
      starts.append(spans[b][0])
      ends.append(spans[e - 1][1])

  def encode_with_offsets(self, text):
    """(ids, starts, ends): per token, the span [start, end) of `text` (in
    characters) it came from; an [UNK] spans its whole word."""
    if isinstance(text, bytes):
      text = text.decode("utf-8", errors="ignore")
    ids, starts, ends = [], [], []
    for word, spans in basic_words(text, self.do_lower_case):
      self._word_pieces(word, spans, ids, starts, ends)
    return ids, starts, ends

  def encode_ids(self, text):
    """Text -> list of ids."""
    return self.encode_with_offsets(text)[0]

  def encode_ids_batch(self, texts):
    """List of texts -> list of id lists."""
    return [self.encode_ids(t) for t in texts]

  def tokenize(self, text):
    """Text -> list of pieces."""
    return self.convert_ids_to_tokens(self.encode_ids(text))

  def convert_tokens_to_ids(self, tokens):
    """Pieces -> ids (a piece not in the vocabulary: [UNK]'s id)."""
    return [self.vocab.get(t, self.unk_id) for t in tokens]

  def convert_ids_to_tokens(self, ids):
    return [self._tokens[int(i)] for i in ids]

  def decode_ids(self, ids):
    """Ids -> text: pieces joined by spaces, continuations glued on."""
    out = []
    for piece in self.convert_ids_to_tokens(ids):
      if piece.startswith(CONTINUATION) and out:
        out[-1] += piece[len(CONTINUATION):]
      else:
        out.append(piece)
    return " ".join(out)

  def is_control_or_unknown(self, token_id):
    return int(token_id) in self._control_set
