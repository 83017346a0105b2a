"""The original's pretraining loss and its four metrics.

loss = sum_i w_i * CE(mlm_i) / (sum_i w_i + 1e-5) + mean_b CE(sop_b)

`pretraining_sums` returns the additive pieces (sums and counts), so a
distributed loop can add them across replicas and micro-batches before
dividing; `pretraining_loss` is the single-batch formula built on them.
"""

import tensorflow as tf


def pretraining_sums(outputs, features):
  """Additive loss/metric pieces for one batch.

  Args:
    outputs: dict with float32 `mlm_logits` [batch, P, V] and `sop_logits`
      [batch, 2].
    features: dict with `masked_lm_ids` [batch, P], `masked_lm_weights`
      [batch, P] and optionally `next_sentence_labels` [batch] or [batch, 1]
      (without them the SOP terms are zero, for `sentence_pair_task=none`).

  Returns:
    dict of float32 scalars: mlm_loss_sum, mlm_correct, mlm_weight,
    sop_loss_sum, sop_correct, sop_count.
  """
  mlm_logits = tf.cast(outputs["mlm_logits"], tf.float32)
  ids = tf.cast(features["masked_lm_ids"], tf.int32)  # [batch, P]
  weights = tf.cast(features["masked_lm_weights"], tf.float32)  # [batch, P]
  mlm_ce = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=ids, logits=mlm_logits)  # [batch, P]
  mlm_hit = tf.cast(tf.equal(tf.argmax(mlm_logits, -1, output_type=tf.int32),
                             ids), tf.float32)
  sums = {
      "mlm_loss_sum": tf.reduce_sum(mlm_ce * weights),
      "mlm_correct": tf.reduce_sum(mlm_hit * weights),
      "mlm_weight": tf.reduce_sum(weights),
  }
  labels = features.get("next_sentence_labels")
  if labels is None or "sop_logits" not in outputs:
    zero = tf.constant(0.0)
    sums.update(sop_loss_sum=zero, sop_correct=zero, sop_count=zero)
    return sums
  sop_logits = tf.cast(outputs["sop_logits"], tf.float32)
  labels = tf.reshape(tf.cast(labels, tf.int32), [-1])  # [batch]
  sop_ce = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=labels, logits=sop_logits)  # [batch]
  sop_hit = tf.cast(tf.equal(tf.argmax(sop_logits, -1, output_type=tf.int32),
                             labels), tf.float32)
  sums.update(sop_loss_sum=tf.reduce_sum(sop_ce),
              sop_correct=tf.reduce_sum(sop_hit),
              sop_count=tf.cast(tf.size(labels), tf.float32))
  return sums


def metrics_from_sums(sums):
  """Sums (possibly added over replicas/batches) -> loss and four metrics."""
  mlm_loss = sums["mlm_loss_sum"] / (sums["mlm_weight"] + 1e-5)
  sop_count = tf.maximum(sums["sop_count"], 1.0)
  sop_loss = sums["sop_loss_sum"] / sop_count
  return {
      "loss": mlm_loss + sop_loss,
      "masked_lm_loss": mlm_loss,
      "masked_lm_accuracy": sums["mlm_correct"] / (sums["mlm_weight"] + 1e-5),
      "sentence_order_loss": sop_loss,
      "sentence_order_accuracy": sums["sop_correct"] / sop_count,
  }


def pretraining_loss(outputs, features):
  """The original's per-batch loss; returns (loss, metrics dict)."""
  metrics = metrics_from_sums(pretraining_sums(outputs, features))
  return metrics["loss"], metrics
