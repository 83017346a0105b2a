"""The original SQuAD 2.0 head (XLNet style, `squad_utils.create_v2_model`).

Start logits come from one dense unit per token. End logits are conditioned
on a start: a dense layer (tanh) over [token ; start token], LayerNorm, one
dense unit. Training conditions on the gold start; inference keeps the
`start_n_top` best starts and, for each, the `end_n_top` best ends. An
answer-class logit (> 0: no answer) reads [CLS] and the start-probability
weighted token state. Positions that cannot hold an answer (question,
[SEP], padding; [CLS] stays allowed as the null position) are masked with
-1e30 before every softmax, as the original's `p_mask`.

The sublayers' names follow the original's variable scopes
(`start_logits/dense`, `end_logits/dense_0`, `end_logits/LayerNorm`,
`end_logits/dense_1`, `answer_class/dense_0`, `answer_class/dense_1`), so a
checkpoint of `run_squad_v2.py` maps one to one
(`albert_tf.checkpoints.squad_v2_checkpoint`).

Example:

>>> import numpy as np
>>> head = XLNetSquadHead(start_n_top=2, end_n_top=3)
>>> seq = np.zeros([1, 6, 8], np.float32)
>>> mask = np.array([[1, 1, 1, 1, 1, 0]], np.int32)
>>> types = np.array([[0, 0, 1, 1, 1, 0]], np.int32)
>>> head(seq, mask, types)["end_top_index"].shape
TensorShape([1, 6])
"""

import tensorflow as tf
import tf_keras

from albert_tf.modeling.layers import layer_utils

_MASKED = 1e30


def answer_position_mask(input_mask, input_type_ids):
  """float32 [batch, seq]: 1 where no answer can start or end (the original's
  `p_mask`): question and its [SEP], the context's closing [SEP], padding.

  [CLS] (position 0) is the null answer and stays 0. Context tokens are the
  real (mask 1) segment-1 tokens except the last real token, its [SEP].
  """
  mask = tf.cast(input_mask, tf.int32)  # [batch, seq]
  types = tf.cast(input_type_ids, tf.int32)
  seq_length = tf.shape(mask)[1]
  positions = tf.range(seq_length)[None, :]  # [1, seq]
  last_real = tf.reduce_sum(mask, axis=1, keepdims=True) - 1  # [batch, 1]
  context = (mask > 0) & (types > 0) & (positions < last_real)
  allowed = context | tf.equal(positions, 0)  # [batch, seq]
  return 1.0 - tf.cast(allowed, tf.float32)


def mask_logits(logits, p_mask):
  """logits * (1 - p_mask) - 1e30 * p_mask, in float32 (the original's)."""
  logits = tf.cast(logits, tf.float32)
  return logits * (1.0 - p_mask) - _MASKED * p_mask


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class XLNetSquadHead(layer_utils.UnconvertedLayer):
  """Sequence output [batch, seq, H] -> the original v2 outputs.

  `call(sequence_output, input_mask, input_type_ids, start_positions=None)`:
  with `start_positions` [batch] (training) returns float32
  `start_log_probs`, `end_log_probs` [batch, seq] and `cls_logits` [batch];
  without, the beam: `start_top_log_probs`, `start_top_index`
  [batch, start_n_top], `end_top_log_probs`, `end_top_index`
  [batch, start_n_top * end_n_top] (row i * end_n_top + j is end j of start
  i) and `cls_logits` [batch].

  Args:
    start_n_top, end_n_top: beam sizes at inference (the original's 5 x 5).
    initializer_range: stddev of the truncated-normal kernel init.
    dropout_rate: dropout in the answer-class branch (the original's
      `--dropout_prob`, 0.1).
  """

  def __init__(self, start_n_top=5, end_n_top=5, initializer_range=0.02,
               dropout_rate=0.1, **kwargs):
    super().__init__(**kwargs)
    self.start_n_top = start_n_top
    self.end_n_top = end_n_top
    self.initializer_range = initializer_range
    self.dropout_rate = dropout_rate

  def build(self, input_shape):
    hidden = int(input_shape[-1])
    std = self.initializer_range
    self.start_dense = layer_utils.dense(1, std, "start_logits_dense")
    self.end_dense_0 = layer_utils.dense(hidden, std, "end_logits_dense_0",
                                         activation="tanh")
    self.end_layer_norm = layer_utils.layer_norm("end_logits_layer_norm")
    self.end_dense_1 = layer_utils.dense(1, std, "end_logits_dense_1")
    self.answer_dense_0 = layer_utils.dense(
        hidden, std, "answer_class_dense_0", activation="tanh")
    self.answer_dropout = tf_keras.layers.Dropout(self.dropout_rate)
    self.answer_dense_1 = tf_keras.layers.Dense(
        1, use_bias=False, name="answer_class_dense_1",
        kernel_initializer=layer_utils.initializer(std))
    # Built on [None, width]: every sublayer reads only the last axis (the
    # LayerNorm is applied to flattened rows, since end logits are rank 3
    # in training and rank 4 in the beam).
    for layer, width in ((self.start_dense, hidden),
                         (self.end_dense_0, 2 * hidden),
                         (self.end_layer_norm, hidden),
                         (self.end_dense_1, hidden),
                         (self.answer_dense_0, 2 * hidden),
                         (self.answer_dense_1, hidden)):
      layer_utils.build_in_scope(layer, tf.TensorShape([None, width]))
    super().build(input_shape)

  def _end_logits(self, tokens, starts):
    """tokens [b, 1?, s, H] and start states [b, k?, 1, H] -> float32 end
    logits [b, k?, s] (each token scored against each start)."""
    shape = tf.broadcast_dynamic_shape(tf.shape(tokens), tf.shape(starts))
    pair = tf.concat([tf.broadcast_to(tokens, shape),
                      tf.broadcast_to(starts, shape)], axis=-1)  # [.., 2H]
    x = self.end_dense_0(pair)  # [b, k?, s, H]
    rows = tf.reshape(x, [-1, tf.shape(x)[-1]])  # [b * k? * s, H]
    x = tf.reshape(self.end_layer_norm(rows), tf.shape(x))
    return tf.cast(self.end_dense_1(x)[..., 0], tf.float32)  # [b, k?, s]

  def _cls_logits(self, sequence_output, start_logits_masked, training):
    start_p = tf.nn.softmax(start_logits_masked, axis=-1)  # [b, s]
    start_p = tf.cast(start_p, sequence_output.dtype)
    start_feature = tf.einsum("bsh,bs->bh", sequence_output, start_p)
    cls_feature = sequence_output[:, 0]  # [b, H]
    x = self.answer_dense_0(tf.concat([start_feature, cls_feature], -1))
    x = self.answer_dropout(x, training=training)
    return tf.cast(self.answer_dense_1(x)[:, 0], tf.float32)  # [b]

  def call(self, sequence_output, input_mask, input_type_ids,
           start_positions=None, training=None):
    p_mask = answer_position_mask(input_mask, input_type_ids)  # [b, s]
    start_logits = tf.cast(self.start_dense(sequence_output)[..., 0],
                           tf.float32)  # [b, s]
    start_masked = mask_logits(start_logits, p_mask)
    start_log_probs = tf.nn.log_softmax(start_masked, -1)  # [b, s]
    cls_logits = self._cls_logits(sequence_output, start_masked, training)
    if start_positions is not None:
      positions = tf.reshape(tf.cast(start_positions, tf.int32), [-1])
      gold = tf.gather(sequence_output, positions, batch_dims=1)  # [b, H]
      end_logits = self._end_logits(sequence_output,
                                    gold[:, None])  # [b, s]
      end_log_probs = tf.nn.log_softmax(mask_logits(end_logits, p_mask), -1)
      return {"start_log_probs": start_log_probs,
              "end_log_probs": end_log_probs,  # [b, s]
              "cls_logits": cls_logits}
    start_top_log_probs, start_top_index = tf.nn.top_k(
        start_log_probs, k=self.start_n_top)  # [b, k1]
    starts = tf.gather(sequence_output, start_top_index,
                       batch_dims=1)  # [b, k1, H]
    end_logits = self._end_logits(sequence_output[:, None],
                                  starts[:, :, None])  # [b, k1, s]
    end_log_probs = tf.nn.log_softmax(
        mask_logits(end_logits, p_mask[:, None]), -1)  # [b, k1, s]
    end_top_log_probs, end_top_index = tf.nn.top_k(
        end_log_probs, k=self.end_n_top)  # [b, k1, k2]
    beam = self.start_n_top * self.end_n_top
    return {"start_top_log_probs": start_top_log_probs,
            "start_top_index": start_top_index,
            "end_top_log_probs": tf.reshape(end_top_log_probs, [-1, beam]),
            "end_top_index": tf.reshape(end_top_index, [-1, beam]),
            "cls_logits": cls_logits}

  def get_config(self):
    return dict(super().get_config(), **{k: getattr(self, k) for k in (
        "start_n_top", "end_n_top", "initializer_range", "dropout_rate")})
