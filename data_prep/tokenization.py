"""Text normalisation and the SentencePiece tokenizer used by ALBERT, and
the one entry to either kind of vocabulary (`load_tokenizer`: a
SentencePiece model or a BERT WordPiece vocabulary, data_prep/wordpiece.py;
both give `TOKENIZER_INTERFACE`).

This module is the single place where text becomes pieces and ids, and where
the normalisation rule is written. Pretraining data creation and fine-tuning
feature conversion call it; the in-graph preprocessing
(albert_tf/serving/preprocessing.py) builds its regexes from the predicates
and tables below, SQuAD alignment (albert_tf/data/squad_alignment.py) replays
`character_rule` per character and the TFLite tokenizer
(albert_tf/serving/lite_tokenizer.py) folds `character_rule` into a charsmap.

Normalisation follows the original release's `preprocess_text` (after
dropping invisible control/format characters, `clean_invisible`): whitespace is
collapsed, LaTeX-style quotes (`` and '') become ", the text is NFKD-normalised,
combining marks are dropped and, optionally, the text is lowercased.
"""

import os
import unicodedata

import numpy as np
import sentencepiece as spm

from data_prep import wordpiece

SPIECE_UNDERLINE = "\u2581"

# Pieces that always start a whole-word unit (original `_is_start_piece`).
_PUNCTUATION = frozenset('!"#$%&\'()*+,-./:;?@[\\]^_`{|}~') | {"\u20ac", "\u00a3"}
_ENGLISH_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz")

CLS_PIECE = "[CLS]"
SEP_PIECE = "[SEP]"
MASK_PIECE = "[MASK]"


# Invisible characters: one rule for the data tools' reader
# (text_reader.py), this tokenizer and serving's in-graph normalisation
# (albert_tf/serving/preprocessing.py), so data prep never glues words that
# serving splits. Whitespace (including \v, \f, \x1c-\x1f, U+0085) separates
# words, and so does the zero-width space U+200B; every other control or
# format character (NUL, soft hyphen U+00AD, ZWNJ/ZWJ, word joiner, BOM)
# sits inside a word and is dropped.
WORD_BREAK_CHARS = "\u200b"
# The original's LaTeX-quote rule, applied after whitespace is collapsed.
QUOTE_REPLACEMENTS = (("``", '"'), ("''", '"'))
_DROPPED_CATEGORIES = ("Cc", "Cf", "Cs")


def is_word_break(c):
  """True for a character that separates words (-> a space)."""
  return c.isspace() or c in WORD_BREAK_CHARS


def is_dropped_char(c):
  """True for an invisible character that is removed (see above)."""
  return (unicodedata.category(c) in _DROPPED_CATEGORIES and
          not is_word_break(c))


def clean_invisible(text):
  """(text with the rule applied, changed?): U+200B becomes a space, dropped
  characters are removed; whitespace is kept (split later)."""
  if text.isprintable():  # no control, format or space other than " "
    return text, False
  out = "".join(" " if c in WORD_BREAK_CHARS else c for c in text
                if not is_dropped_char(c))
  return out, out != text


def strip_marks(text):
  """NFKD without combining marks (ASCII text already is)."""
  if text.isascii():
    return text
  text = unicodedata.normalize("NFKD", text)
  return "".join(c for c in text if not unicodedata.combining(c))


def character_rule(c, lower):
  """What `normalize_text` makes of the single character `c` inside a text
  (a word break: a separating space). After the whitespace and quote rules
  `normalize_text` is this per character, but for `str.lower`'s final sigma
  (NFKD's reordering only moves the combining marks dropped here)."""
  if is_word_break(c):
    return " "
  if is_dropped_char(c):
    return ""
  out = strip_marks(c)
  return out.lower() if lower else out


def normalize_text(text, lower=True):
  """`text` (str; bytes are decoded as UTF-8, invalid bytes replaced)
  normalised the way the original ALBERT tokenizer does, after the
  invisible-character rule above; lowercased if `lower`."""
  if isinstance(text, bytes):
    text = text.decode("utf-8", errors="replace")
  text, _ = clean_invisible(text)
  out = " ".join(text.split())
  for old, new in QUOTE_REPLACEMENTS:
    out = out.replace(old, new)
  out = strip_marks(out)
  if lower:
    out = out.lower()
  return out


def check_vocab_size(vocab_path, pieces, vocab_size, setting):
  """The one check that a vocabulary (SentencePiece model or WordPiece
  file) of `pieces` pieces fits `vocab_size` (None: not checked), the value
  of `setting` (a config field or a --flag): ValueError naming the file,
  else every id is another piece's, silently."""
  if vocab_size is None or pieces == vocab_size:
    return
  named = (f"{setting}={vocab_size}" if setting.startswith("--") else
           f"{setting} is {vocab_size}")
  raise ValueError(
      f"{vocab_path}: {pieces} pieces but {named}; every token id would "
      "be another piece's (use the model's own vocabulary)")


# The tokenizer interface both kinds give (FullTokenizer below,
# wordpiece.WordPieceTokenizer); the data tools and fine-tuning readers use
# only these names.
TOKENIZER_INTERFACE = (
    "kind", "vocab_path", "do_lower_case", "vocab_size", "pad_id", "unk_id",
    "cls_id", "sep_id", "mask_id", "is_start", "control_ids",
    "replacement_ids", "encode_ids", "encode_ids_batch", "tokenize",
    "convert_tokens_to_ids", "convert_ids_to_tokens", "decode_ids",
    "is_control_or_unknown")
VOCAB_KINDS = {"spm_model_file": "sentencepiece", "vocab_file": "wordpiece"}


def check_one_vocabulary(spm_model_file, vocab_file,
                         names=("--spm_model_file", "--vocab_file")):
  """ValueError unless exactly one of the two vocabularies is given;
  `names` spell the two settings in the message (flags, config fields)."""
  if bool(spm_model_file) != bool(vocab_file):
    return
  problem = "both are set" if spm_model_file else "neither is set"
  raise ValueError(
      f"give exactly one of {names[0]} (SentencePiece) and {names[1]} (BERT "
      f"WordPiece): {problem}")


def load_tokenizer(spm_model_file="", vocab_file="", do_lower_case=True,
                   file_bytes=None, names=("--spm_model_file", "--vocab_file")):
  """The tokenizer of whichever vocabulary is given (exactly one).

  Args:
    spm_model_file: a SentencePiece model (FullTokenizer).
    vocab_file: a BERT WordPiece vocabulary (wordpiece.WordPieceTokenizer).
    do_lower_case: each kind's lower-casing rule.
    file_bytes: the file's contents, read by the caller (e.g. a Beam worker
      has no file); the path then only names it.
    names: how the two settings are spelled in the error for both or
      neither.
  """
  check_one_vocabulary(spm_model_file, vocab_file, names)
  if vocab_file:
    return wordpiece.WordPieceTokenizer(vocab_file, do_lower_case,
                                        vocab_text=file_bytes)
  return FullTokenizer(spm_model_file, do_lower_case, model_proto=file_bytes)


def is_start_piece(piece):
  """True if `piece` begins a new whole-word unit (original's rule).

  A piece starts a unit if it begins with U+2581 (word start), begins with "<"
  (e.g. <unk>), is a punctuation piece, or holds any character other than a-z
  and punctuation (so digits and non-Latin text are their own units).
  """
  if piece.startswith((SPIECE_UNDERLINE, "<")) or piece in _PUNCTUATION:
    return True
  return not all(c.lower() in _ENGLISH_CHARS or c in _PUNCTUATION for c in piece)


class FullTokenizer:
  """SentencePiece tokenizer with ALBERT's normalisation.

  Attributes: vocab_size (pieces); cls_id, sep_id, mask_id, pad_id, unk_id;
  is_start (np.bool_ [vocab_size], `is_start_piece` per id); control_ids
  (sorted ids of control, unknown and unused pieces: never a random
  replacement in masking) and replacement_ids (np.int64: all the others);
  kind ("sentencepiece") and vocab_path (= spm_model_file): with these,
  the `TOKENIZER_INTERFACE` both kinds give.
  """

  kind = "sentencepiece"

  def __init__(self, spm_model_file, do_lower_case=True, model_proto=None):
    """model_proto: the model file's bytes, read by the caller (e.g. from
    gs://); `spm_model_file` then only names it."""
    if not spm_model_file:
      raise ValueError("A SentencePiece model file is required (spm_model_file).")
    if model_proto is None and not os.path.isfile(spm_model_file):
      raise FileNotFoundError(
          f"SentencePiece model file not found: {spm_model_file}")
    self.spm_model_file = self.vocab_path = spm_model_file
    self.do_lower_case = do_lower_case
    self.sp_model = spm.SentencePieceProcessor()
    try:
      if model_proto is None:
        with open(spm_model_file, "rb") as f:
          model_proto = f.read()
      self.sp_model.LoadFromSerializedProto(model_proto)
    except Exception as e:  # sentencepiece raises a bare RuntimeError/OSError.
      raise ValueError(
          f"Could not load SentencePiece model {spm_model_file}: {e}") from e
    sp = self.sp_model
    self.vocab_size = sp.get_piece_size()
    self.cls_id = self._required_id(CLS_PIECE)
    self.sep_id = self._required_id(SEP_PIECE)
    self.mask_id = self._required_id(MASK_PIECE)
    self.pad_id = sp.pad_id() if sp.pad_id() >= 0 else 0
    self.unk_id = sp.unk_id()
    pieces = [sp.id_to_piece(i) for i in range(self.vocab_size)]
    self._pieces = pieces
    self.is_start = np.array([is_start_piece(p) for p in pieces], dtype=bool)
    self.control_ids = [i for i in range(self.vocab_size) if sp.is_control(i)
                        or sp.is_unknown(i) or sp.is_unused(i)]
    self._control_set = frozenset(self.control_ids)
    self.replacement_ids = np.array(
        [i for i in range(self.vocab_size) if i not in self._control_set],
        dtype=np.int64)
    # Ids whose piece ends in "<digit>," need the original's re-encoding fix.
    self._digit_comma = frozenset(
        i for i, p in enumerate(pieces)
        if len(p) > 1 and p[-1] == "," and p[-2].isdigit())

  def _required_id(self, piece):
    i = self.sp_model.piece_to_id(piece)
    if i == self.sp_model.unk_id() and piece != self.sp_model.id_to_piece(i):
      raise ValueError(
          f"SentencePiece model {self.spm_model_file} has no {piece} piece; "
          "train it with data_prep/train_sentencepiece.py.")
    return i

  def normalize(self, text):
    return normalize_text(text, lower=self.do_lower_case)

  def _fix_digit_comma(self, ids):
    """Splits pieces like '1990,' into '1990' ',' (original encode_pieces)."""
    if not self._digit_comma.intersection(ids):
      return ids
    out = []
    for i in ids:
      if i not in self._digit_comma:
        out.append(i)
        continue
      piece = self._pieces[i]
      sub = self.sp_model.encode(
          piece[:-1].replace(SPIECE_UNDERLINE, ""), out_type=str)
      if sub and piece[0] != SPIECE_UNDERLINE and sub[0][0] == SPIECE_UNDERLINE:
        if len(sub[0]) == 1:
          sub = sub[1:]
        else:
          sub[0] = sub[0][1:]
      out.extend(self.sp_model.piece_to_id(p) for p in sub)
      out.append(self.sp_model.piece_to_id(piece[-1]))
    return out

  def encode_ids(self, text):
    """Normalised text -> list of ids."""
    return self._fix_digit_comma(self.sp_model.encode(self.normalize(text)))

  def encode_ids_batch(self, texts):
    """List of texts -> list of id lists (one SentencePiece call)."""
    norm = [self.normalize(t) for t in texts]
    return [self._fix_digit_comma(ids)
            for ids in self.sp_model.encode(norm, num_threads=1)]

  def tokenize(self, text):
    """Text -> list of pieces."""
    return self.convert_ids_to_tokens(self.encode_ids(text))

  def convert_tokens_to_ids(self, tokens):
    return [self.sp_model.piece_to_id(t) for t in tokens]

  def convert_ids_to_tokens(self, ids):
    return [self._pieces[int(i)] for i in ids]

  def decode_ids(self, ids):
    """Ids -> text (specials kept as their piece strings)."""
    return self.sp_model.decode([int(i) for i in ids])

  def is_control_or_unknown(self, token_id):
    return int(token_id) in self._control_set
