"""SQuAD (span) serving: `question` + `context` -> the best answer span.

One window per example: the question is capped at `max_query_length` tokens
and the passage gets the rest of `seq_length` (truncation "first_fixed").
The best span maximises start + end logit over spans inside the passage of
at most `max_answer_length` tokens.
"""

import tensorflow as tf

from albert_tf.serving import preprocessing
from albert_tf.serving import task_modules

# A finite "minus infinity" (JSON has no -inf) for impossible spans.
_NEG = -1e30


def span_scores(start_logits, end_logits, may_start, may_end,
                max_answer_length, neg=_NEG):
  """Start + end logit of every span, float [b, start, end]: `neg` unless
  it starts where `may_start` and ends where `may_end` (bool [b, seq]) and
  0 <= end - start < max_answer_length. Returns (scores, allowed)."""
  seq_length = tf.shape(start_logits)[1]
  positions = tf.range(seq_length)
  # expand_dims, not [:, None]: TFLite's strided slice has no new-axis form.
  offset = (tf.expand_dims(positions, 0) -
            tf.expand_dims(positions, 1))  # [seq, seq]: end - start
  in_band = (offset >= 0) & (offset < max_answer_length)
  allowed = (tf.expand_dims(in_band, 0) & tf.expand_dims(may_start, 2) &
             tf.expand_dims(may_end, 1))  # [b, start, end]
  scores = (tf.expand_dims(start_logits, 2) +
            tf.expand_dims(end_logits, 1))  # [b, s, s]
  return tf.where(allowed, scores, neg), allowed


def best_spans(start_logits, end_logits, in_context, max_answer_length):
  """Best span per row inside `in_context` (bool [b, seq]): start, end
  int32 [b] sequence positions (0, 0 when no span is allowed), score float
  [b] (start + end logit, `_NEG` when none), found bool [b]."""
  seq_length = tf.shape(start_logits)[1]
  scores, allowed = span_scores(start_logits, end_logits, in_context,
                                in_context, max_answer_length)
  best = tf.argmax(tf.reshape(scores, [-1, seq_length * seq_length]),
                   axis=-1, output_type=tf.int32)  # [b]
  found = tf.reduce_any(allowed, axis=[1, 2])  # [b]
  start = tf.where(found, best // seq_length, 0)
  end = tf.where(found, best % seq_length, 0)
  score = tf.where(found, tf.reduce_max(scores, axis=[1, 2]), _NEG)
  return start, end, score, found


class SquadModule(task_modules.TaskServingModule):
  """start_logits, end_logits [b, seq]; answer_start, answer_end int32 [b]
  (context token positions: 0 is the first token after the question's
  [SEP]; -1, -1 when no span is found); answer_score [b]; answer_text [b]
  (normalised text of the span, "" when none); answerable_probability [b]
  when the model has an answerability head."""

  text_fields = ("question", "context")

  @classmethod
  def make_preprocessor(cls, params):
    return preprocessing.make_preprocessor(
        params.spm_model_file, params.vocab_file,
        do_lower_case=params.do_lower_case,
        seq_length=params.max_seq_length, truncation="first_fixed",
        max_first_segment_length=params.max_query_length)

  def outputs(self, features, model_outputs):
    ids = features["input_word_ids"]  # [b, seq]
    # Answers lie in the passage: segment 1, not padding, not the final [SEP].
    in_context = ((features["input_type_ids"] == 1) &
                  (features["input_mask"] == 1) &
                  (ids != self.preprocessor.sep_id))  # [b, seq]
    start, end, score, found = best_spans(
        model_outputs["start_logits"], model_outputs["end_logits"],
        in_context, self.params.max_answer_length)
    positions = tf.expand_dims(tf.range(tf.shape(ids)[1]), 0)  # [1, seq]
    keep = ((positions >= tf.expand_dims(start, 1)) &
            (positions <= tf.expand_dims(end, 1)) &
            tf.expand_dims(found, 1))  # [b, seq]
    span_ids = tf.ragged.boolean_mask(ids, keep)  # [b, (span)]
    # Context positions, as the windowed text signatures give them: the
    # context starts after [CLS] question [SEP] (the real segment-0 tokens).
    doc_offset = tf.reduce_sum(tf.cast(
        (features["input_type_ids"] == 0) & (features["input_mask"] == 1),
        tf.int32), axis=1)  # [b]
    result = {
        "start_logits": model_outputs["start_logits"],
        "end_logits": model_outputs["end_logits"],
        "answer_start": tf.where(found, start - doc_offset, -1),
        "answer_end": tf.where(found, end - doc_offset, -1),
        "answer_score": score,
        "answer_text": self.preprocessor.detokenize(
            span_ids, max_length=self.params.max_answer_length),
    }
    if "answerable_logits" in model_outputs:
      result["answerable_probability"] = tf.sigmoid(
          model_outputs["answerable_logits"])
    return result
