"""The TF Serving module of a token classifier: a label per word.

  serving_default(text [batch]) / serve_examples: the words of each text are
    its whitespace-separated tokens; each is tokenized alone (as the
    training data was) and labelled with its first piece's label. Outputs,
    [batch, most words] (past a text's words: "" / -1):
      label       string, the word's label ("O" for a word of which
                  normalisation leaves no piece)
      word_start  int32, byte offset of the word in the text
      word_end    int32, byte offset just past it
      num_words   int32 [batch]
    A text whose pieces do not fit the packed length is refused with an
    error (never cut).
  serve_ids(input_word_ids, input_mask, input_type_ids): per piece,
    logits [batch, seq, labels], label_id int32 and label string [batch, seq].
"""

import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.serving import serving_modules
from albert_tf.serving import task_modules

# The label of a word of which normalisation leaves no piece.
OUTSIDE = "O"


class TokenClassificationModule(task_modules.TaskServingModule):
  """Words of `text` -> their labels (see the module docstring)."""

  text_fields = ("text",)

  def __init__(self, model, params, config, **kwargs):
    super().__init__(model, params, config, **kwargs)
    self.label_names = task_modules.label_table(params.label_names,
                                                model.num_labels)
    self._words = tf_text.WhitespaceTokenizer()

  def outputs(self, features, model_outputs):
    logits = model_outputs["logits"]  # [b, seq, labels]
    label_id = tf.argmax(logits, axis=-1, output_type=tf.int32)  # [b, seq]
    return {"logits": logits, "label_id": label_id,
            "label": tf.gather(self.label_names, label_id)}

  def text_outputs(self, texts):
    words, starts, ends = self._words.tokenize_with_offsets(texts["text"])
    pieces = self.preprocessor.tokenize_ids(words.flat_values)  # [W, (p)]
    per_word = pieces.row_lengths()  # [W]
    sentence = tf.RaggedTensor.from_row_lengths(
        pieces, words.row_lengths()).merge_dims(1, 2)  # [b, (pieces)]
    budget = self.preprocessor.seq_length - 2
    check = tf.debugging.assert_less_equal(
        sentence.row_lengths(), tf.cast(budget, tf.int64),
        message=f"text: a text has more pieces than seq_length - 2 = "
        f"{budget} (texts are not cut; split it)")
    packed = self.preprocessor.pack([serving_modules.after([check], sentence)])
    piece_labels = self.task_outputs(packed)["label"]  # [b, seq]
    # Each word's first piece: 1 ([CLS]) + the pieces before it in its text.
    before = tf.math.cumsum(per_word, exclusive=True)  # [W]
    row_first = tf.gather(tf.concat([before, [tf.reduce_sum(per_word)]], 0),
                          words.row_starts())  # [b]
    rows = words.value_rowids()  # [W]
    position = 1 + before - tf.gather(row_first, rows)
    label = tf.gather_nd(piece_labels, tf.stack([rows, position], axis=1))
    label = tf.where(per_word > 0, label, OUTSIDE)

    def per_text(values, default):
      return words.with_flat_values(values).to_tensor(default)

    return {"label": per_text(label, ""),
            "word_start": per_text(starts.flat_values, -1),
            "word_end": per_text(ends.flat_values, -1),
            "num_words": tf.cast(words.row_lengths(), tf.int32)}
