"""Text preprocessing that runs in TFLite: `LitePreprocessor`, the
SavedModel's `TextPreprocessor` with its tokenizer and detokenizer made of
ops that have TFLite kernels (builtins and TF Text's).

Tokenizing: the SentencePiece model with ALBERT's normalisation folded into
its normaliser (`lite_tokenizer.folded_model`) in TF Text's
`FastSentencepieceTokenizer`; the "<digit>," fix as dense gathers.
Packing is the SavedModel's (dense index arithmetic already).
`LiteWordPiecePreprocessor`: BERT WordPiece (`--vocab_file`), whose TF Text
tokenizer already has TFLite kernels.
"""

import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2
import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.serving import lite_tokenizer
from albert_tf.serving import preprocessing


class LitePreprocessor(preprocessing.TextPreprocessor):
  """`TextPreprocessor` whose tokenizer runs in TFLite (see module doc)."""

  def _build_tokenizer(self, python_tokenizer):
    self._pieces = None  # detokenize's piece tables, built when used
    self._tokenizer = tf_text.FastSentencepieceTokenizer(
        lite_tokenizer.folded_model(self.spm_model_path, self.do_lower_case))
    rows = preprocessing.expansion_rows(python_tokenizer)
    self._expansion = None
    if rows is not None:
      ragged = tf.ragged.constant(rows, dtype=tf.int32, ragged_rank=1)
      self._expansion = ragged.to_tensor(-1)  # [vocab, width], -1 padded
      self._expansion_counts = ragged.row_lengths()  # [vocab] int64

  def tokenize_ids(self, text):
    """String [batch] -> ragged int32 ids [batch, (tokens)], no truncation
    (the caller applied `lite_tokenizer.pre_rules`)."""
    # int64 row splits, as the SavedModel tokenizer's (packing reads them).
    ids = self._tokenizer.tokenize(text).with_row_splits_dtype(
        tf.int64)  # [batch, (tokens)]
    if self._expansion is None:
      return ids
    values = ids.flat_values  # [n]
    rows = tf.gather(self._expansion, values)  # [n, width]
    new_values = tf.boolean_mask(rows, rows >= 0)  # [n']
    # Row limits move by the pieces each earlier token became.
    counts = tf.gather(self._expansion_counts, values)  # [n]
    ends = tf.concat([tf.zeros([1], tf.int64), tf.cumsum(counts)], 0)
    splits = tf.gather(ends, ids.row_splits)  # [batch + 1]
    return tf.RaggedTensor.from_row_splits(new_values, splits,
                                           validate=False)


  def detokenize(self, ids, max_length=None):
    """Ragged int32 ids [batch, (n <= max_length)] -> text [batch].

    TF Text's TFLite detokenizer writes one string whatever the batch (and
    past its output with more), so the text is joined here from piece
    strings instead (the SentencePiece decoder's rules: "\u2581" is a
    space, the first one dropped, control pieces empty; `join_pieces`).
    """
    if self._pieces is None:
      self._pieces = _piece_tables(self.spm_model_path)
    return join_pieces(ids, *self._pieces, max_length)


class LiteWordPiecePreprocessor(preprocessing.WordPiecePreprocessor):
  """`WordPiecePreprocessor` for TFLite: the same TF Text models (their ops
  have TFLite kernels); the text rules the normaliser cannot hold are the
  runner's (`wordpiece.pre_rules`); spans are joined by `join_pieces`."""

  def pre_rules(self, text):
    return text

  def detokenize(self, ids, max_length=None):
    return join_pieces(ids, self._piece_strings, len(self.tokens) + 1,
                       max_length)


def lite_form(preprocessor):
  """The TFLite preprocessor of a SavedModel one (same tokenizer file and
  settings)."""
  lite_class = (LiteWordPiecePreprocessor
                if isinstance(preprocessor, preprocessing.WordPiecePreprocessor)
                else LitePreprocessor)
  return lite_class(preprocessor.vocabulary_path, **preprocessor.settings())


def join_pieces(ids, table, size, max_length):
  """Ragged int ids [batch, (n <= max_length)] -> text [batch] from string
  `table` [2 * size]: id i's text as a text's first piece at i, after
  another piece at size + i; index size - 1 of each half is "".

  Joined by TF Text's TFLite ngram join, whose width must be static
  (`max_length`).
  """
  if max_length is None:
    raise ValueError("a .tflite detokenizes spans of a static maximum "
                     "length (max_length)")
  blank = size - 1  # ""
  dense = tf.cast(ids.to_tensor(default_value=blank,
                                shape=[None, max_length]),
                  tf.int32)  # [batch, max_length]
  later = tf.cast(tf.range(max_length) > 0, tf.int32) * size  # [max_length]
  pieces = tf.gather(table, dense + later)  # [batch, max_length]
  joined = tf_text.ngrams(pieces, max_length, axis=-1,
                          reduction_type=tf_text.Reduction.STRING_JOIN,
                          string_separator="")  # [batch, 1]
  return tf.reshape(joined, [-1])


def _piece_tables(spm_model_file):
  """(table, size): a string tensor [2 * size], each id's text as the first
  piece of a text, then after it; index size - 1 (= vocab) is ""."""
  with open(spm_model_file, "rb") as f:
    proto = sentencepiece_model_pb2.ModelProto.FromString(f.read())
  if proto.trainer_spec.byte_fallback:
    raise ValueError(f"{spm_model_file}: byte-fallback pieces cannot be "
                     "joined into text piece by piece in a .tflite")
  processor = spm.SentencePieceProcessor(model_proto=proto.SerializeToString())
  rest = []
  for i in range(processor.get_piece_size()):
    if processor.is_control(i):
      rest.append("")
    elif processor.is_unknown(i):
      rest.append(processor.decode([i]))
    else:
      rest.append(processor.id_to_piece(i).replace("\u2581", " "))
  first = [p[1:] if p.startswith(" ") else p for p in rest]
  return tf.constant(first + [""] + rest + [""]), len(rest) + 1
