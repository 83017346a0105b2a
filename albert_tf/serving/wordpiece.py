"""BERT's WordPiece tokenization (the original release's `--vocab_file`:
`tokenization.FullTokenizer` without a SentencePiece model) as TF Text's fast
tokenizer models, for the text-in SavedModels and .tflite files.

BERT's `BasicTokenizer` + `WordpieceTokenizer` are, per text:
  1. drop NUL, U+FFFD and control/format characters (Cc, Cf) but tab, LF,
     CR; tab, LF, CR and space separators (Zs) become spaces;
  2. a space around every CJK ideograph;
  3. split on whitespace; when lower-casing, each word `str.lower()`-ed,
     then NFD with the nonspacing marks (Mn) dropped;
  4. split off every punctuation character (ASCII non-alphanumerics and P*);
  5. greedy longest-match WordPiece per word ("##" marks a continuation);
     a word of more than `MAX_INPUT_CHARS_PER_WORD` characters, or one the
     vocabulary cannot cover, is one [UNK].

Here: TF Text's `FastBertNormalizer` runs steps 1 and 3's per-character part
from a model built from Python's own rules (`normalizer_model`: every code
point mapped as above, so its Unicode tables are the exporting Python's, not
ICU's); `FastWordpieceTokenizer` splits (2, 4: the same CJK ranges and
punctuation rule, ICU's Unicode version) and runs 5, counting bytes, so the
character limit is applied after it (`long_words_unknown`).

`str.lower` is per character but for the final sigma ("Σ" -> "ς" at a word's
end): `pre_rules` decides it on the cleaned text before the normaliser (in
the SavedModel graph as regexes, `graph_pre_rules`; for a .tflite the runner
applies the Python `pre_rules`).

What remains different from BERT's Python tokenizer: code points that
Python's Unicode tables (Unicode 14 in Python 3.11) leave unassigned and
ICU's newer tables make punctuation are split off as punctuation
(`fast_punctuation_differences`); and, lower-cased, the order of two
adjacent combining marks that survive accent stripping (the 25 spacing
marks, Mc, with a combining class, e.g. the musical stems U+1D165 and
U+1D16D): NFD of the whole word puts them in canonical order, the
normaliser maps one code point at a time and keeps the text's order.
"""

import functools
import struct
import sys
import unicodedata

import flatbuffers
import numpy as np
import tensorflow as tf

from albert_tf.serving import lite_tokenizer
from albert_tf.serving.unicode_classes import char_class
from albert_toolkit import wordpiece_vocab
from albert_toolkit.wordpiece_vocab import CONTINUATION
from albert_toolkit.wordpiece_vocab import MAX_INPUT_CHARS_PER_WORD

PAD_ID = 0  # The original's packing pads with id 0 whatever token it is.
# FastWordpieceTokenizer's limit is in UTF-8 bytes: 4 per character at most.
MAX_BYTES_PER_WORD = 4 * MAX_INPUT_CHARS_PER_WORD
_SIGMA, _FINAL_SIGMA = "\u03a3", "\u03c2"
# FastBertNormalizerModel value bits (tensorflow_text fast_bert_normalizer.h).
_CHANGED = 0x40000000
_LENGTH_BITS = 6


# --- The vocabulary -----------------------------------------------------------


def read_vocab(vocab_file):
  """The tokens of a BERT vocabulary file (a local path or a URL
  `tf.io.gfile` reads), by albert_toolkit/wordpiece_vocab.py's rule.

  Raises ValueError in one line naming the file (and line) when it is
  missing or the rule refuses it.
  """
  if not vocab_file or not tf.io.gfile.exists(vocab_file):
    raise ValueError(f"{vocab_file}: no such WordPiece vocabulary file "
                     "(--vocab_file)")
  with tf.io.gfile.GFile(vocab_file, "rb") as f:
    return wordpiece_vocab.parse_tokens(f.read(), vocab_file)


def check_vocab(vocab_file, vocab_size=None):
  """The tokens of `vocab_file` (`read_vocab`), after checking that there
  are `vocab_size` of them (the model's): other ids would be silently
  other tokens."""
  tokens = read_vocab(vocab_file)
  if vocab_size is not None and len(tokens) != vocab_size:
    raise ValueError(f"{vocab_file}: {len(tokens)} tokens, but the model's "
                     f"vocab_size is {vocab_size}")
  return tokens


def tokenizer_vocab(tokens):
  """`tokens` as TF Text's tokenizer takes them: a blank line's token " "
  (which the original never produces from text, and TF Text would match
  across a space) becomes a bracketed stand-in, which text cannot produce
  either (brackets are words of their own); every id stays."""
  if wordpiece_vocab.BLANK_LINE_TOKEN not in tokens:
    return list(tokens)
  stand_in = "[blank_line]"
  while stand_in in tokens:
    stand_in += "_"
  return [stand_in if t == wordpiece_vocab.BLANK_LINE_TOKEN else t
          for t in tokens]


def piece_text(token):
  """(text as a span's first piece, text after another piece) of a token:
  a "##" piece joins the previous one, any other is a new word."""
  if token in ("[CLS]", "[SEP]", "[PAD]", "[MASK]"):
    return "", ""
  if token.startswith(CONTINUATION) and len(token) > len(CONTINUATION):
    return token[len(CONTINUATION):], token[len(CONTINUATION):]
  return token, " " + token


def decode(tokens, ids):
  """Text of `ids` (ints) of vocabulary `tokens`, pieces joined."""
  return "".join(piece_text(tokens[i])[bool(n)]
                 for n, i in enumerate(ids)).strip()


# --- The per-character rules --------------------------------------------------


def is_dropped(c):
  """BERT's `_clean_text` removes it."""
  return c in ("\x00", "\ufffd") or (
      c not in "\t\n\r" and unicodedata.category(c) in ("Cc", "Cf"))


def is_whitespace(c):
  """BERT's `_is_whitespace`: it separates words (-> a space)."""
  return c in " \t\n\r" or unicodedata.category(c) == "Zs"


def char_rule(c, lower):
  """What BERT's normalisation makes of the character `c` (steps 1 and 3 of
  the module doc)."""
  if is_dropped(c):
    return ""
  if is_whitespace(c):
    return " "
  if not lower:
    return c
  return "".join(x for x in unicodedata.normalize("NFD", c.lower())
                 if unicodedata.category(x) != "Mn")


def _code_points():
  return (chr(cp) for cp in range(sys.maxunicode + 1)
          if not 0xD800 <= cp <= 0xDFFF)


@functools.lru_cache(maxsize=2)
def normalizer_model(lower):
  """FastBertNormalizerModel flatbuffer bytes mapping every code point by
  `char_rule` (TF Text's own model maps by ICU's NFKC case folding and keeps
  control characters as spaces)."""
  rules = {c: char_rule(c, lower) for c in _code_points()}
  rules = {c: r for c, r in rules.items() if r != c}
  pool, offsets = bytearray(), {}

  def data(replacement):
    raw = replacement.encode("utf-8")
    if raw and raw not in offsets:
      offsets[raw] = len(pool)
      pool.extend(raw)
    return _CHANGED | (offsets[raw] << _LENGTH_BITS | len(raw) if raw else 0)

  zero = data(rules.pop("\x00"))  # a trie key cannot be empty
  units = _trie(rules, data)
  builder = flatbuffers.Builder(4 * len(units) + len(pool) + 64)
  pool_vector = builder.CreateByteVector(bytes(pool) or b"\0")
  trie_vector = builder.CreateNumpyVector(units)
  builder.StartObject(4)
  builder.PrependBoolSlot(0, bool(lower), False)
  builder.PrependUOffsetTRelativeSlot(1, trie_vector, 0)
  builder.PrependInt32Slot(2, zero, 0)
  builder.PrependUOffsetTRelativeSlot(3, pool_vector, 0)
  builder.Finish(builder.EndObject())
  return bytes(builder.Output())


def _trie(rules, data):
  """Darts-clone units (uint32) whose keys are the UTF-8 of `rules`' keys
  and whose values are `data(replacement)`.

  The trie is SentencePiece's compiled normaliser map of the same keys
  (the darts-clone format TF Text reads too); its values, offsets into
  SentencePiece's string pool, are then replaced by TF Text's encoding.
  """
  charsmap = lite_tokenizer.compile_charsmap(rules)
  size = struct.unpack("<I", charsmap[:4])[0]
  units = np.frombuffer(charsmap[4:4 + size], "<u4").copy()

  def offset(unit):
    return int((unit >> 10) << ((unit & 0x200) >> 6))

  for key, replacement in rules.items():
    node = 0
    for byte in key.encode("utf-8"):
      node ^= offset(units[node]) ^ byte
      if units[node] & 0x800000FF != byte:
        raise AssertionError(f"U+{ord(key):04X} missing from the trie")
    units[node ^ offset(units[node])] = (1 << 31) | data(replacement)
  return units


# --- The final sigma ----------------------------------------------------------


def _sigma_classes():
  """(cased, case_ignorable) sets of characters, as `str.lower`'s final
  sigma rule sees them (probed on `str.lower` itself): a "Σ" after a cased
  character (case-ignorable ones between) and not before one is final."""
  cased, ignorable = set(), set()
  for c in _code_points():
    if (c + _SIGMA).lower()[-1] == _FINAL_SIGMA:
      cased.add(c)
    elif ("A" + c + _SIGMA).lower()[-1] == _FINAL_SIGMA:
      ignorable.add(c)
  return cased, ignorable


def pre_rules(text, lower):
  """`text` as the normaliser must see it (a .tflite's runner applies this):
  BERT's dropped characters removed and, when lower-casing, a capital sigma
  that `str.lower` makes final replaced by "ς"."""
  text = "".join(c for c in text if not is_dropped(c))
  return lite_tokenizer.pre_rules(text, lower) if lower else text


@functools.lru_cache(maxsize=1)
def _sigma_pattern():
  cased, ignorable = _sigma_classes()
  either = cased | ignorable
  cased_re, ignorable_re = (char_class(cased.__contains__),
                            char_class(ignorable.__contains__))
  neither_re = char_class(lambda c: c not in either)
  # (cased ignorable*) Σ (ignorable*) (neither | end): a "Σ" that ends a
  # cased word. The last group consumes a character that can start no
  # other match's left context, so consecutive matches are all found.
  return (f"({cased_re}{ignorable_re}*){_SIGMA}({ignorable_re}*)"
          f"({neither_re}|$)", f"\\1{_FINAL_SIGMA}\\2\\3")


def graph_pre_rules(text, lower):
  """`pre_rules` on a string tensor (regex ops: a SavedModel's graph)."""
  text = tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="replace",
                                      replacement_char=0xFFFD)
  if not lower:
    return text  # the normaliser drops them itself
  text = tf.strings.regex_replace(text, char_class(is_dropped),
                                  "")
  pattern, rewrite = _sigma_pattern()
  return tf.strings.regex_replace(text, pattern, rewrite)


# --- The character limit ------------------------------------------------------


def piece_tables(tokens):
  """int32 constants [vocab]: 1 for a "##" piece, each piece's characters
  (without "##")."""
  suffix = [int(t.startswith(CONTINUATION) and len(t) > len(CONTINUATION))
            for t in tokens]
  chars = [len(t) - len(CONTINUATION) * s for t, s in zip(tokens, suffix)]
  return tf.constant(suffix, tf.int32), tf.constant(chars, tf.int32)


def long_words_unknown(ids, is_suffix, chars, unknown_id):
  """Ragged ids [batch, (n)] -> [batch, (n')] with each word (a piece and
  the "##" pieces after it) of more than `MAX_INPUT_CHARS_PER_WORD`
  characters made one [UNK], as the original's `WordpieceTokenizer`."""
  values = tf.cast(ids.flat_values, tf.int32)  # [n]
  starts = 1 - tf.gather(is_suffix, values)  # [n]: 1 where a word starts
  word = tf.cumsum(starts) - 1  # [n]: its word's index
  total = tf.math.unsorted_segment_sum(
      tf.gather(chars, values), word, tf.size(values))  # [n] per word
  long = tf.gather(total, word) > MAX_INPUT_CHARS_PER_WORD  # [n]
  keep = (starts > 0) | ~long
  new_values = tf.boolean_mask(tf.where(long, unknown_id, values), keep)
  ends = tf.concat([tf.zeros([1], tf.int64),
                    tf.cumsum(tf.cast(keep, tf.int64))], 0)
  return tf.RaggedTensor.from_row_splits(
      new_values, tf.gather(ends, ids.row_splits), validate=False)
