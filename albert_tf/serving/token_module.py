"""The TF Serving module of a token classifier: a label per word.

  serving_default(text [batch]) / serve_examples: the words of each text are
    its tokens between Unicode White_Space characters (TF Text's
    WhitespaceTokenizer: U+001C..U+001F, which str.split() splits on, are
    not White_Space); each is tokenized alone (as the
    training data was; a word of which normalisation leaves no piece is the
    one piece `<unk>`) and labelled with its first piece's label. A text with
    more pieces than seq_length - 2 is split into windows and each word
    labelled in the window where it has the most context, exactly as
    training and `predict` do (data/conll_data.py `word_positions`). Outputs,
    [batch, most words] (past a text's words: "" / -1):
      label       string, the word's label
      word_start  int32, byte offset of the word in the text
      word_end    int32, byte offset just past it
      num_words   int32 [batch]
  serve_ids(input_word_ids, input_mask, input_type_ids): per piece,
    logits [batch, seq, labels], label_id int32 and label string [batch, seq].

The text path is built of ops with TFLite kernels (builtins and TF Text's),
so a .tflite export runs it too, windows included.
"""

import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.data import conll_data
from albert_tf.serving import task_modules


def _dense(ragged, default, width=None):
  """Ragged [rows, (n)] -> [rows, width (default: the longest row)], padded
  with `default` (gathers: TFLite's RaggedTensorToTensor kernel takes no
  int64 or string values)."""
  lengths = ragged.row_lengths()  # [rows]
  if width is None:
    width = tf.reduce_max(tf.concat([lengths, [0]], 0))
  values = tf.concat([ragged.flat_values,
                      tf.fill([1], tf.cast(default, ragged.dtype))], 0)
  column = tf.range(width, dtype=tf.int64)[None, :]  # [1, width]
  index = ragged.row_starts()[:, None] + column  # [rows, width]
  padding = tf.shape(ragged.flat_values, out_type=tf.int64)[0]
  return tf.gather(values, tf.where(column < lengths[:, None], index,
                                    padding))  # [rows, width]


def _at_least_one_piece(pieces, unk_id):
  """Ragged ids [words, (pieces)] with an empty row made `[unk_id]`."""
  lengths = tf.maximum(pieces.row_lengths(), 1)  # [W]
  dense = _dense(pieces, unk_id, tf.reduce_max(tf.concat([lengths, [1]], 0))
                 )  # [W, most pieces]: an empty row is all <unk>
  keep = tf.range(tf.shape(dense, out_type=tf.int64)[1])[None, :] < (
      lengths[:, None])  # [W, most pieces]
  return tf.RaggedTensor.from_row_lengths(tf.boolean_mask(dense, keep),
                                          lengths)


def _ceil_div(a, b):
  """ceil(a / b) of int64 `a`, in int32 (TFLite's FLOOR_DIV has no int64)."""
  return tf.cast((tf.cast(a, tf.int32) + b - 1) // b, tf.int64)


class TokenClassificationModule(task_modules.TaskServingModule):
  """Words of `text` -> their labels (see the module docstring)."""

  text_fields = ("text",)

  def __init__(self, model, params, config, **kwargs):
    super().__init__(model, params, config, **kwargs)
    self.label_names = task_modules.label_table(params.label_names,
                                                model.num_labels)
    # The labels, then "" (a padded word's), for gathers by label id.
    self._word_labels = tf.concat([self.label_names, [""]], 0)
    self._words = tf_text.WhitespaceTokenizer()

  def outputs(self, features, model_outputs):
    logits = model_outputs["logits"]  # [b, seq, labels]
    label_id = tf.argmax(logits, axis=-1, output_type=tf.int32)  # [b, seq]
    return {"logits": logits, "label_id": label_id,
            "label": tf.gather(self.label_names, label_id)}

  def text_outputs(self, texts):
    words, starts, ends = self._words.tokenize_with_offsets(texts["text"])
    pieces = _at_least_one_piece(
        self.preprocessor.tokenize_ids(words.flat_values),
        self.preprocessor.unk_id)  # [W, (p >= 1)]
    sentence = tf.RaggedTensor.from_row_lengths(
        pieces, words.row_lengths()).merge_dims(1, 2)  # [b, (pieces)]
    budget = self.preprocessor.seq_length - 2
    stride = conll_data.window_stride(budget)
    # Windows (conll_data.windows): k per text (none for an empty text),
    # starting stride apart.
    n = sentence.row_lengths()  # [b]
    k = tf.where(n > 0, 1 + _ceil_div(tf.maximum(n - budget, 0), stride),
                 0)  # [b]
    per_text = tf.RaggedTensor.from_row_lengths(tf.range(tf.reduce_sum(k)),
                                                k)  # [b, (k)] flat ids
    text_of = per_text.value_rowids()  # [windows]
    start = (per_text.flat_values -
             tf.gather(per_text.row_starts(), text_of)) * stride  # [windows]
    length = tf.minimum(tf.gather(n, text_of) - start, budget)  # [windows]
    at = tf.gather(sentence.row_starts(), text_of) + start  # [windows]
    offsets = tf.range(budget, dtype=tf.int64)[None, :]  # [1, budget]
    inside = offsets < length[:, None]  # [windows, budget]
    ids = tf.gather(sentence.flat_values,
                    tf.where(inside, at[:, None] + offsets, 0)
                    )  # [windows, budget]
    window_ids = tf.RaggedTensor.from_row_lengths(
        tf.boolean_mask(ids, inside), length)  # [windows, (length)]
    piece_labels = self.task_outputs(
        self.preprocessor.pack([window_ids]))["label_id"]  # [windows, seq]

    # Each word's first piece and the window with its best context_score
    # (int32: TFLite's ARG_MAX takes no int64).
    rows = words.value_rowids()  # [W]
    before = tf.math.cumsum(pieces.row_lengths(), exclusive=True)  # [W]
    first = before - tf.gather(sentence.row_starts(), rows)  # [W]
    piece = tf.cast(first, tf.int32)[:, None]  # [W, 1]
    # K >= 1 even when no text has words (no windows at all): ARG_MAX
    # refuses an empty axis; the column is then invalid for every word.
    w = tf.range(tf.cast(tf.reduce_max(tf.concat([k, [1]], 0)),
                         tf.int32))[None, :]  # [1, K]
    w_start = w * stride  # [1, K]
    w_length = tf.minimum(
        tf.cast(tf.gather(n, rows), tf.int32)[:, None] - w_start,
        budget)  # [W, K]
    score = (tf.minimum(piece - w_start, w_start + w_length - 1 - piece) *
             (budget + 1) + w_length)  # [W, K]
    valid = ((w < tf.cast(tf.gather(k, rows), tf.int32)[:, None]) &
             (w_start <= piece) & (piece < w_start + w_length))
    best = tf.argmax(tf.where(valid, score, -1), axis=1)  # [W], first max
    window = tf.gather(per_text.row_starts(), rows) + best  # [W]
    position = 1 + first - best * stride  # [W]
    label_id = tf.gather_nd(piece_labels,
                            tf.stack([window, position], axis=1))  # [W]

    def padded(values, default):  # [W] -> [b, most words]
      return _dense(words.with_flat_values(values), default)

    return {"label": tf.gather(self._word_labels,
                               padded(label_id, len(self.label_names))),
            "word_start": padded(starts.flat_values, -1),
            "word_end": padded(ends.flat_values, -1),
            "num_words": tf.cast(words.row_lengths(), tf.int32)}
