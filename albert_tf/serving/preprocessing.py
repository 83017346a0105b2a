"""In-graph text preprocessing: text -> normalised text -> ids -> packed inputs.

The same steps as `data_prep.tokenization.FullTokenizer` (and so as the
pretraining and fine-tuning data), written as TensorFlow + tensorflow_text ops
so they can live inside a SavedModel:

0. invisible characters, as the data tools (`tokenization.clean_invisible`):
   control and format characters are dropped, except word breaks;
1. whitespace collapse: runs of word breaks (`tokenization.is_word_break`:
   what Python's `str.split()` splits on, and U+200B) become one space,
   leading/trailing ones are dropped;
2. the quote rule (`tokenization.QUOTE_REPLACEMENTS`: `` and '' become ");
3. NFKD (`tf_text.normalize_utf8`), then characters whose canonical combining
   class is non-zero are dropped (Python's `unicodedata.combining`; this is
   not the same set as \\p{Mn}: e.g. the emoji variation selector U+FE0F is Mn
   with class 0 and is kept);
4. optional lowercasing with `tf.strings.lower(encoding="utf-8")`, which
   matches `str.lower` including the final-sigma rule and U+0130 (unlike
   `tf_text.case_fold_utf8`, which also NFKC-folds, e.g. "ß" -> "ss");
5. SentencePiece ids (`tf_text.SentencepieceTokenizer`, no sampling);
6. the original's "<digit>," fix: a piece like "1990," becomes "1990" ",",
   applied as a per-id expansion table computed at export time from the
   Python tokenizer itself.

With a BERT WordPiece vocabulary (`--vocab_file`) steps 0-6 are BERT's
tokenizer instead (`WordPiecePreprocessor`, albert_tf/serving/wordpiece.py);
`make_preprocessor` chooses by the file given. Packing is the same.

The character classes come from the exporting Python's `unicodedata`
(Unicode 14 on Python 3.11); ICU's NFKD inside TF knows newer characters, so
only code points added after Unicode 14 may differ.

Packing follows the original `run_classifier.py`: `[CLS] A [SEP]` or
`[CLS] A [SEP] B [SEP]`, type ids 0 up to the first [SEP] and 1 after,
zero-padded to `seq_length`. A pair is cut by removing tokens from the end of
the longer segment (B on ties) until it fits ("longest_first"), or, for
SQuAD-style question + passage, the first segment is capped at
`max_first_segment_length` and the second gets the rest ("first_fixed").
"""

import re
import unicodedata

import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.serving import wordpiece
from albert_tf.serving.unicode_classes import char_class
from albert_toolkit import wordpiece_vocab
from data_prep import tokenization

TRUNCATION_MODES = ("longest_first", "first_fixed")
STRINGS = tf.TensorSpec([None], tf.string)  # string [batch]


def normalize_text(text, lower=True):
  """In-graph `data_prep.tokenization.normalize_text` on a string tensor.

  Invalid UTF-8 becomes U+FFFD, as the Python function's
  `decode(errors="replace")`.
  """
  text = tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="replace",
                                      replacement_char=0xFFFD)
  # tokenization.clean_invisible: the same rule as the data tools
  # (is_word_break: what str.split() splits on, and WORD_BREAK_CHARS).
  text = tf.strings.regex_replace(
      text, char_class(tokenization.is_dropped_char), "")
  text = tf.strings.regex_replace(
      text, char_class(tokenization.is_word_break) + "+", " ")
  text = tf.strings.regex_replace(text, "^ | $", "")
  for old, new in tokenization.QUOTE_REPLACEMENTS:
    text = tf.strings.regex_replace(text, re.escape(old), new)
  # tokenization.strip_marks:
  text = tf_text.normalize_utf8(text, "NFKD")
  text = tf.strings.regex_replace(text, char_class(unicodedata.combining),
                                  "")
  if lower:
    text = lower_utf8(text)
  return text


def lower_utf8(text):
  """`str.lower` on a UTF-8 string tensor, NUL bytes included.

  `tf.strings.lower(encoding="utf-8")` stops at the first NUL (ICU reads a C
  string), which would silently drop the rest of the text; Python keeps it.
  So the text is lowered between NULs and put back together. Cutting at NUL
  cannot change a final sigma: NUL is neither cased nor case-ignorable.
  """
  parts = tf.strings.split(text, sep="\x00")  # [batch, (parts)]
  lowered = tf.strings.lower(parts.flat_values, encoding="utf-8")
  # A NUL after every part but the last of its row. (reduce_join's
  # `separator` is a C-string attribute and cannot be NUL.)
  last = parts.row_limits() - 1  # [batch]; every row has >= 1 part
  is_last = tf.scatter_nd(last[:, None], tf.ones_like(last, tf.int32),
                          tf.shape(lowered, out_type=tf.int64)) > 0  # [parts]
  lowered = tf.strings.join([lowered, tf.where(is_last, "", "\x00")])
  return tf.strings.reduce_join(parts.with_flat_values(lowered), axis=-1)


def check_spm_model(spm_model_file, vocab_size=None):
  """The Python tokenizer of `spm_model_file`, after checking it.

  Fails (ValueError, one line naming the file) when the file is missing or
  not a SentencePiece model with [CLS]/[SEP]/[MASK], or when its piece count
  is not the model's `vocab_size`: a tokenizer of another size would feed
  the model ids of other pieces, silently.
  """
  if not spm_model_file or not tf.io.gfile.exists(spm_model_file):
    raise ValueError(f"{spm_model_file}: no such SentencePiece model file "
                     "(--spm_model_file)")
  tokenizer = tokenization.FullTokenizer(spm_model_file)
  tokenization.check_vocab_size(spm_model_file, tokenizer.vocab_size,
                                vocab_size, "the model's vocab_size")
  return tokenizer


def _gather_rows(ids, index):
  """ids[i, index[i, j]] for ragged ids [batch, (n)], index [batch, seq].

  Out-of-range indices give 0 (callers mask those positions).
  """
  values = tf.concat([tf.cast(ids.values, tf.int32), [0]], axis=0)
  size = tf.shape(ids.values, out_type=tf.int64)[0]
  flat = ids.row_starts()[:, None] + index  # [batch, seq]
  valid = (index >= 0) & (index < ids.row_lengths()[:, None])
  return tf.gather(values, tf.where(valid, flat, size))


def check_first_segment_cap(cap, seq_length,
                            name="--max_first_segment_length",
                            second="the second segment"):
  """Refuses a cap on segment A that packs no B: `[CLS] A [SEP] B [SEP]`
  needs 1 <= cap <= seq_length - 4 for B to keep at least one token.

  Args:
    cap: the most tokens segment A keeps (a SQuAD question, ...).
    seq_length: the packed length, [CLS] and [SEP]s included.
    name: the flag the cap comes from, for the message.
    second: what segment B holds, for the message.
  """
  if cap < 1:
    raise ValueError(f"{name} must be >= 1, got {cap}")
  if cap > seq_length - 4:
    raise ValueError(
        f"--max_seq_length {seq_length} leaves no room for {second} after "
        f"{name} {cap} (at most {seq_length - 4}); reduce {name} or raise "
        "--max_seq_length")


def truncated_lengths(len_a, len_b, budget, mode="longest_first",
                      max_first_segment_length=None):
  """Per-row lengths (a', b') after cutting a pair to `budget` tokens.

  "longest_first" equals the original's loop `while len(a)+len(b) > budget:
  (a if len(a) > len(b) else b).pop()`, in closed form: a keeps
  min(len_a, max(budget - len_b, ceil(budget / 2))), b the rest.
  """
  if mode == "longest_first":
    keep_a = tf.minimum(len_a, tf.maximum(budget - len_b, (budget + 1) // 2))
  elif mode == "first_fixed":
    cap = budget if max_first_segment_length is None else tf.minimum(
        budget, tf.cast(max_first_segment_length, budget.dtype))
    keep_a = tf.minimum(len_a, cap)
  else:
    raise ValueError(f"truncation must be one of {TRUNCATION_MODES}, got "
                     f"{mode!r}")
  keep_b = tf.minimum(len_b, budget - keep_a)
  return keep_a, keep_b


class TextPreprocessor(tf.Module):
  """SentencePiece tokenizer + packer, graph-building methods called inside
  the functions of a module that holds it (a task's serving module,
  `export_lib.HubPreprocessor`). A tf.Module without functions of its own:
  its tokenizer and the SentencePiece model file (an asset) are saved with
  the module holding it, and a task's export traces only its signatures.

  `seq_length` counts [CLS] and [SEP]s; `truncation` is "longest_first" or
  "first_fixed" (capping segment A at `max_first_segment_length`, see the
  module doc). `cls_id`, `sep_id`, `pad_id`, `unk_id`: Python ints. Subclasses
  change the tokenizer only (`_load`, `tokenize_ids`, `detokenize`).
  """

  tokenizer_name = "sentencepiece"

  def __init__(self, tokenizer_file, do_lower_case=True, seq_length=128,
               truncation="longest_first", max_first_segment_length=None):
    super().__init__()
    if truncation not in TRUNCATION_MODES:
      raise ValueError(f"truncation must be one of {TRUNCATION_MODES}, got "
                       f"{truncation!r}")
    if seq_length < 3:
      raise ValueError(f"seq_length must be >= 3, got {seq_length}")
    if truncation == "first_fixed" and max_first_segment_length is not None:
      check_first_segment_cap(max_first_segment_length, seq_length)
    self.seq_length = seq_length
    self.do_lower_case = do_lower_case
    self.truncation = truncation
    self.max_first_segment_length = max_first_segment_length
    self.vocabulary_path = tokenizer_file
    self._load(tokenizer_file)

  def _load(self, spm_model_file):
    """Reads the tokenizer file: special ids, asset, in-graph tokenizer."""
    python_tokenizer = check_spm_model(spm_model_file)
    self.cls_id = python_tokenizer.cls_id
    self.sep_id = python_tokenizer.sep_id
    self.pad_id = python_tokenizer.pad_id
    self.unk_id = python_tokenizer.unk_id
    self.spm_model_path = spm_model_file
    self.sp_model_file = tf.saved_model.Asset(spm_model_file)
    self._build_tokenizer(python_tokenizer)

  def settings(self):
    """The constructor's arguments but the model file (what a preprocessor
    like this one is built with)."""
    return dict(do_lower_case=self.do_lower_case, seq_length=self.seq_length,
                truncation=self.truncation,
                max_first_segment_length=self.max_first_segment_length)

  def decode_ids(self, ids):
    """Python text of a list of ids (int8 calibration's examples)."""
    return tokenization.FullTokenizer(self.spm_model_path).decode_ids(ids)

  def _build_tokenizer(self, python_tokenizer):
    """The in-graph SentencePiece tokenizer and "<digit>," fix."""
    with open(self.spm_model_path, "rb") as f:
      model_proto = f.read()
    self._tokenizer = tf_text.SentencepieceTokenizer(
        model=model_proto, out_type=tf.int32, nbest_size=0, add_bos=False,
        add_eos=False)
    rows = expansion_rows(python_tokenizer)
    self._expansion = (None if rows is None else
                       tf.ragged.constant(rows, dtype=tf.int32, ragged_rank=1))

  # --- Plain graph-building helpers (usable inside other tf.functions). ---

  def tokenize_ids(self, text):
    """String [batch] -> ragged int32 ids [batch, (tokens)], no truncation."""
    text = normalize_text(text, lower=self.do_lower_case)
    ids = self._tokenizer.tokenize(text)  # [batch, (tokens)]
    if self._expansion is not None:
      # [batch, (tokens), (pieces per token)] -> [batch, (tokens')]
      ids = tf.gather(self._expansion, ids).merge_dims(1, 2)
    return ids

  def pack(self, segments):
    """One or two ragged id segments -> dict of int32 [batch, seq_length].

    Keys: `input_word_ids`, `input_mask`, `input_type_ids`. Built with dense
    index arithmetic (a few dozen ops) rather than ragged concatenation.
    """
    seq_length = self.seq_length
    if len(segments) not in (1, 2):
      raise ValueError(f"pack takes 1 or 2 segments, got {len(segments)}")
    pair = len(segments) == 2
    a = segments[0]
    len_a = a.row_lengths()  # [batch] int64
    if pair:
      b = segments[1]
      keep_a, keep_b = truncated_lengths(
          len_a, b.row_lengths(), tf.cast(seq_length - 3, tf.int64),
          self.truncation, self.max_first_segment_length)
    else:
      b = a
      keep_a = tf.minimum(len_a, seq_length - 2)
      keep_b = tf.zeros_like(keep_a)
    pos = tf.range(seq_length, dtype=tf.int64)[None, :]  # [1, seq]
    la = keep_a[:, None]  # [batch, 1]
    lb = keep_b[:, None]
    a_ids = _gather_rows(a, pos - 1)  # [batch, seq]: a[p - 1]
    b_ids = _gather_rows(b, pos - la - 2)  # [batch, seq]: b[p - la - 2]
    end_a = la + 1  # position of the first [SEP]
    end_b = end_a + lb + 1  # position of the second [SEP]
    total = end_b + 1 if pair else end_a + 1  # [batch, 1] tokens used
    ids = tf.where(pos == 0, self.cls_id,
          tf.where(pos < end_a, a_ids,
          tf.where(pos == end_a, self.sep_id,
          tf.where(pos < end_b, b_ids,
          tf.where(pos == end_b, self.sep_id, self.pad_id)))))
    in_seq = pos < total  # [batch, seq]
    ids = tf.where(in_seq, ids, self.pad_id)
    return {
        "input_word_ids": ids,
        "input_mask": tf.cast(in_seq, tf.int32),
        "input_type_ids": tf.cast(in_seq & (pos > end_a), tf.int32),
    }

  def preprocess(self, texts):
    """List of 1 or 2 string [batch] tensors -> packed model inputs."""
    return self.pack([self.tokenize_ids(t) for t in texts])

  def detokenize(self, ids, max_length=None):
    """Ragged int32 ids [batch, (n)] -> normalised text [batch].
    max_length: a static bound on n (the TFLite preprocessor needs one)."""
    del max_length
    return self._tokenizer.detokenize(ids)


def expansion_rows(python_tokenizer):
  """id -> ids after the "<digit>," fix, one list per id; None when no id
  changes.

  Computed by running the Python tokenizer's own fix on each id, so the
  graph cannot drift from data_prep.
  """
  fix = python_tokenizer._fix_digit_comma  # pylint: disable=protected-access
  rows = [list(fix([i])) for i in range(python_tokenizer.vocab_size)]
  if all(len(r) == 1 and r[0] == i for i, r in enumerate(rows)):
    return None
  return rows


class WordPiecePreprocessor(TextPreprocessor):
  """`TextPreprocessor` with BERT's WordPiece tokenizer (albert_tf/serving/
  wordpiece.py: TF Text's `FastBertTokenizer` on models built to give the
  original `FullTokenizer`'s ids), the vocabulary file as asset
  `vocab_file`. Packing is the same."""

  tokenizer_name = "wordpiece"

  def _load(self, vocab_file):
    self.tokens = wordpiece.read_vocab(vocab_file)
    ids = {t: i for i, t in enumerate(self.tokens)}
    self.cls_id = ids[wordpiece_vocab.CLS]
    self.sep_id = ids[wordpiece_vocab.SEP]
    self.unk_id = ids[wordpiece_vocab.UNK]
    self.pad_id = wordpiece.PAD_ID
    self.vocab_file = tf.saved_model.Asset(vocab_file)
    self._tokenizer = tf_text.FastBertTokenizer(
        vocab=wordpiece.tokenizer_vocab(self.tokens),
        suffix_indicator=wordpiece_vocab.CONTINUATION,
        max_bytes_per_word=wordpiece.MAX_BYTES_PER_WORD,
        token_out_type=tf.int64, unknown_token=wordpiece_vocab.UNK,
        fast_bert_normalizer_model_buffer=wordpiece.normalizer_model(
            bool(self.do_lower_case)))
    self._piece_tables = wordpiece.piece_tables(self.tokens)
    first, later = zip(*map(wordpiece.piece_text, self.tokens))
    # Each id's text as a span's first piece, then after another; id
    # len(tokens) of each half is "".
    self._piece_strings = tf.constant(list(first) + [""] + list(later) + [""])

  def decode_ids(self, ids):
    return wordpiece.decode(self.tokens, ids)

  def pre_rules(self, text):
    """The text rules the normaliser cannot hold (`wordpiece.pre_rules`)."""
    return wordpiece.graph_pre_rules(text, self.do_lower_case)

  def tokenize_ids(self, text):
    ids = self._tokenizer.tokenize(self.pre_rules(text))  # [batch, (pieces)]
    return wordpiece.long_words_unknown(ids, *self._piece_tables,
                                        self.unk_id)

  def piece_index(self, ids):
    """Index into `_piece_strings` of each id of ragged ids [batch, (n)]:
    the first half for a row's first piece, the second for the others."""
    size = len(self.tokens) + 1
    position = tf.range(tf.size(ids.flat_values, out_type=tf.int64)) - (
        tf.gather(ids.row_starts(), ids.value_rowids()))  # [n]
    later = tf.cast(position > 0, tf.int32) * size
    return tf.cast(ids.flat_values, tf.int32) + later  # [n]

  def detokenize(self, ids, max_length=None):
    """Ragged ids [batch, (n)] -> text [batch]: pieces joined, a "##" piece
    to the one before, others after a space; [CLS]/[SEP]/[PAD]/[MASK]
    empty."""
    del max_length
    pieces = ids.with_flat_values(
        tf.gather(self._piece_strings, self.piece_index(ids)))
    return tf.strings.reduce_join(pieces, axis=-1)


def check_tokenizer_files(spm_model_file: str, vocab_file: str,
                          vocab_size: int) -> None:
  """Before anything is built: at most one tokenizer file, fitting a model
  of `vocab_size` (one line naming the file)."""
  if spm_model_file and vocab_file:
    tokenization.check_one_vocabulary(spm_model_file, vocab_file)
  if spm_model_file:
    check_spm_model(spm_model_file, vocab_size)
  if vocab_file:
    wordpiece.check_vocab(vocab_file, vocab_size)


def make_preprocessor(spm_model_file="", vocab_file="", **settings):
  """The text preprocessor of a tokenizer: SentencePiece (`spm_model_file`)
  or BERT WordPiece (`vocab_file`), exactly one; `settings` are
  `TextPreprocessor`'s."""
  tokenization.check_one_vocabulary(spm_model_file, vocab_file)
  if vocab_file:
    return WordPiecePreprocessor(vocab_file, **settings)
  return TextPreprocessor(spm_model_file, **settings)
