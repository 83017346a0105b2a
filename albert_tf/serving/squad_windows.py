"""SQuAD serving over doc-stride windows, inside the SavedModel.

The text signatures of a SQuAD export split a long context the way training
and the offline predictor do (`squad_data.doc_windows`): windows of
`seq_length - len(question) - 3` context tokens, each `doc_stride` tokens
after the previous one, `[CLS] question [SEP] window [SEP]`. Every window
runs through the model; a span may start only at a token in its
max-context window (the original's rule), must end at or after its start,
within `max_answer_length` tokens and inside the window's context. The
answer is the best-scoring (start + end logit) span over all windows; on a
tie, the earliest window, as the offline predictor's stable sort.

A request whose context needs more than `max_windows` windows fails with an
error naming the limit (memory grows with windows x seq_length^2).

The original's SQuAD 2.0 model (`AlbertSquadV2`) is served the same way
from its beam: the best valid (start, end) pair by start + end log-prob
(`squad_v2_postprocess`' rules), `null_score` = the smallest window
`cls_logits`, and "" when it reaches the export's null threshold.

Differences from the offline simple-head predictor (`squad_data.
postprocess`), both corner cases: it ranks only the n-best starts and ends
of each window, and skips spans with no visible text.
"""

import tensorflow as tf

from albert_tf.modeling.models import albert_squad_v2
from albert_tf.serving import serving_modules
from albert_tf.serving import squad_module

_NEG = -1e9


def window_layout(num_tokens, max_tokens, doc_stride):
  """int64 [b] context lengths and per-example room -> (num_windows,
  stride) [b], as `squad_data.doc_windows` (full windows but the last)."""
  stride = tf.maximum(tf.minimum(max_tokens, doc_stride), 1)
  extra = tf.maximum(num_tokens - max_tokens, 0)
  num_windows = 1 + (extra + stride - 1) // stride
  return num_windows, stride


def max_context(starts, lengths, window, max_tokens):
  """Per window, per context token j < max_tokens: is the window the
  token's max-context one (score min(left, right) + 0.01 * length, first
  window on ties)?

  starts, lengths: int64 [N, W] of the windows of each row's example
  (length 0 for windows that do not exist); window: int64 [N] the row's own
  window index. Returns bool [N, max_tokens].
  """
  j = tf.range(max_tokens, dtype=tf.int64)[None, :, None]  # [1, T, 1]
  own_start = tf.gather(starts, window, batch_dims=1)[:, None, None]
  pos = own_start + j  # [N, T, 1]: token position in the context
  s, n = starts[:, None, :], lengths[:, None, :]  # [N, 1, W]
  inside = (pos >= s) & (pos < s + n)  # [N, T, W]
  score = (tf.cast(tf.minimum(pos - s, s + n - 1 - pos), tf.float64) +
           0.01 * tf.cast(n, tf.float64))
  score = tf.where(inside, score, -1.0)
  return tf.equal(_first_argmax(score), window[:, None])  # [N, T]


class SquadWindowServingModule(squad_module.SquadModule):
  """`SquadModule` whose text signatures slide windows.

  Text outputs (per question, [batch]): answer_text (normalised text),
  answer_start / answer_end (int32 context token indices; -1, -1 with
  answer_text "" when there is no answer), answer_score (start + end
  logit), answer_window, num_windows, and answerable_probability (the best
  window's) when the model has an answerability head. For `AlbertSquadV2`:
  answer_score is start + end log-prob, plus null_score (no answer when it
  is >= `null_score_diff_threshold`, as the offline prediction's).
  `serve_ids` is unchanged (one window per row; the raw beam for
  `AlbertSquadV2`).
  """

  tflite_refusal = (
      "SQuAD's doc-stride windows need ragged ops TFLite has no kernels "
      "for; export with --doc_stride=0 (one window per question, the "
      "passage cut to max_seq_length; simple head only)")

  def __init__(self, model, params, config, **kwargs):
    super().__init__(model, params, config, **kwargs)
    # AlbertSquadV2 (the original's v2 head) outputs a beam, not logits.
    self.beam = isinstance(model, albert_squad_v2.AlbertSquadV2)

  def _windows(self, question, context):
    """Text [b] -> dict: packed inputs [N, seq] of every window (N over the
    batch), per window its example, window index, start (context token),
    doc_offset (sequence position of its first context token) and
    max-context flags [N, seq]; per example the context ids [b, (n)] and
    num_windows [b]."""
    seq_length, p = self.preprocessor.seq_length, self.params
    q = self.preprocessor.tokenize_ids(question)[:, :p.max_query_length]
    c = self.preprocessor.tokenize_ids(context)  # [b, (n)]
    max_tokens = seq_length - q.row_lengths() - 3  # [b]
    num_windows, stride = window_layout(c.row_lengths(), max_tokens,
                                        p.doc_stride)
    check = tf.debugging.assert_less_equal(
        num_windows, tf.cast(p.max_windows, tf.int64),
        message=f"context needs more than max_windows={p.max_windows} "
        f"doc-stride windows of seq_length {seq_length}; shorten it")
    with tf.control_dependencies([check]):
      example = tf.repeat(tf.range(tf.size(num_windows, out_type=tf.int64)),
                          num_windows)  # [N]
    window = tf.ragged.range(num_windows).flat_values  # [N]
    k = tf.ragged.range(num_windows).to_tensor(-1)  # [b, W]
    all_starts = k * stride[:, None]
    all_lengths = tf.where(
        k >= 0, tf.minimum(max_tokens[:, None],
                           c.row_lengths()[:, None] - all_starts), 0)
    starts = tf.gather(all_starts, example)  # [N, W]
    lengths = tf.gather(all_lengths, example)
    start = tf.gather(starts, window, batch_dims=1)  # [N]
    length = tf.gather(lengths, window, batch_dims=1)
    offsets = tf.gather(c.row_starts(), example) + start  # [N]
    piece = tf.ragged.range(offsets, offsets + length)  # [N, (len)]
    window_ids = tf.RaggedTensor.from_row_lengths(
        tf.gather(c.flat_values, piece.flat_values), length)
    packed = self.preprocessor.pack([tf.gather(q, example), window_ids])
    return {"packed": packed, "example": example, "window": window,
            "start": start, "length": length,
            "doc_offset": tf.gather(q.row_lengths(), example) + 2,
            "max_context": max_context(starts, lengths, window, seq_length),
            "context_ids": c, "num_windows": num_windows}

  def task_outputs(self, features):
    """serve_ids: the beam outputs of an `AlbertSquadV2` as they are (one
    window per row); other models as `SquadModule`."""
    if not self.beam:
      return super().task_outputs(features)
    return dict(serving_modules.as_float32(
        self.model(self.checked_ids(features), training=False)))

  def _context_mask(self, w):
    """bool [N, seq]: the window's context tokens; int64 [N, seq]: their
    context-window index (position - doc_offset)."""
    packed = w["packed"]
    positions = tf.range(tf.shape(packed["input_word_ids"])[1],
                         dtype=tf.int64)[None, :]  # [1, seq]
    real = tf.reduce_sum(tf.cast(packed["input_mask"], tf.int64), 1,
                         keepdims=True)  # [N, 1]
    in_context = ((packed["input_type_ids"] == 1) &
                  (packed["input_mask"] == 1) & (positions < real - 1))
    return in_context, positions - w["doc_offset"][:, None]

  def _logit_spans(self, w, outputs):
    """Span-labeling model: per window the best allowed (start + end logit)
    -> (score [N], first [N], last [N]) as window sequence positions."""
    in_context, j = self._context_mask(w)
    may_start = in_context & tf.gather(w["max_context"], tf.maximum(j, 0),
                                       batch_dims=1)
    scores, _ = squad_module.span_scores(
        outputs["start_logits"], outputs["end_logits"], may_start,
        in_context, self.params.max_answer_length, _NEG)  # [N, s, e]
    flat = tf.reshape(scores, [tf.shape(scores)[0], -1])  # [N, s * e]
    best = _first_argmax(flat)
    seq64 = tf.cast(tf.shape(in_context)[1], tf.int64)
    return (tf.reduce_max(flat, axis=-1), best // seq64, best % seq64)

  def _beam_spans(self, w, outputs):
    """AlbertSquadV2: per window the best valid beam pair (start + end
    log-prob, `squad_answers.beam_candidates`' rules)."""
    ends = tf.cast(outputs["end_top_index"], tf.int64)  # [N, k1 * k2]
    k1 = tf.shape(outputs["start_top_index"])[1]
    per_start = tf.shape(ends)[1] // k1
    starts = tf.repeat(tf.cast(outputs["start_top_index"], tf.int64),
                       per_start, axis=1)  # [N, k1 * k2]
    scores = (tf.repeat(outputs["start_top_log_probs"], per_start, axis=1) +
              outputs["end_top_log_probs"])  # [N, k1 * k2]
    _, j = self._context_mask(w)
    off = w["doc_offset"][:, None]
    length = w["length"][:, None]
    start_j, end_j = starts - off, ends - off
    valid = ((start_j >= 0) & (start_j < length) & (end_j < length) &
             tf.gather(w["max_context"], tf.clip_by_value(start_j, 0, tf.cast(
                 tf.shape(j)[1] - 1, tf.int64)), batch_dims=1) &
             (ends >= starts) &
             (ends - starts < self.params.max_answer_length))
    flat = tf.where(valid, scores, _NEG)
    best = _first_argmax(flat)[:, None]
    return (tf.reduce_max(flat, axis=-1),
            tf.gather(starts, best, batch_dims=1)[:, 0],
            tf.gather(ends, best, batch_dims=1)[:, 0])

  def text_outputs(self, texts):
    question, context = serving_modules.same_batch(
        texts["question"], texts["context"], "question", "context")
    w = self._windows(question, context)
    outputs = serving_modules.as_float32(
        self.model(self.checked_ids(w["packed"]), training=False))
    spans = self._beam_spans if self.beam else self._logit_spans
    score, first, last = spans(w, outputs)  # [N], window positions
    example, c = w["example"], w["context_ids"]
    first = w["start"] + first - w["doc_offset"]  # [N] context token index
    last = w["start"] + last - w["doc_offset"]
    # Per example: the best window (first on ties).
    batch = tf.size(w["num_windows"])
    top = tf.math.unsorted_segment_max(score, example, batch)  # [b]
    rows = tf.range(tf.size(example, out_type=tf.int64))
    pick = tf.math.unsorted_segment_min(
        tf.where(score == tf.gather(top, example), rows,
                 tf.size(example, out_type=tf.int64)), example, batch)  # [b]
    found = tf.gather(score, pick) > _NEG / 2
    first = tf.where(found, tf.gather(first, pick), 0)
    last = tf.where(found, tf.gather(last, pick), 0)
    span = tf.ragged.range(c.row_starts() + first,
                           c.row_starts() + tf.where(found, last + 1, first))
    text = self.preprocessor.detokenize(tf.RaggedTensor.from_row_lengths(
        tf.gather(c.flat_values, span.flat_values), span.row_lengths()))
    result = {"answer_text": text,
              "answer_start": tf.cast(tf.where(found, first, -1), tf.int32),
              "answer_end": tf.cast(tf.where(found, last, -1), tf.int32),
              "answer_score": tf.where(found, top, _NEG),
              "answer_window": tf.cast(tf.gather(w["window"], pick),
                                       tf.int32),
              "num_windows": tf.cast(w["num_windows"], tf.int32)}
    if "answerable_logits" in outputs:
      result["answerable_probability"] = tf.sigmoid(
          tf.math.unsorted_segment_max(outputs["answerable_logits"], example,
                                       batch))
    if "cls_logits" in outputs:  # the original's null score and rule
      null = tf.math.unsorted_segment_min(outputs["cls_logits"], example,
                                          batch)  # [b]
      result["null_score"] = null
      none = null >= self.params.null_score_diff_threshold
      result["answer_text"] = tf.where(none, "", text)
      for key in ("answer_start", "answer_end"):
        result[key] = tf.where(none, -1, result[key])
    return result


def _first_argmax(x):
  """int64 [...]: index of the first maximum on the last axis (tf.argmax
  leaves ties unspecified; the offline predictor's sort keeps the first)."""
  width = tf.shape(x, out_type=tf.int64)[-1]
  hit = x == tf.reduce_max(x, axis=-1, keepdims=True)
  return tf.reduce_min(tf.where(hit, tf.range(width), width), axis=-1)
