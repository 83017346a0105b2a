"""Pretraining heads: masked-LM (tied to the E-wide word table) and SOP."""

import tensorflow as tf
import tf_keras

from albert_tf.modeling import activations
from albert_tf.modeling.layers import layer_utils


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class MaskedLMHead(layer_utils.UnconvertedLayer):
  """Dense H->E with the activation, LayerNorm, tied output embedding + bias.

  The output projection is the encoder's E-wide word table (transposed), so
  the head adds only H*E + E + 2E + V parameters.

  Call: `layer(sequence_output, masked_lm_positions)` with [batch, seq, H] and
  int [batch, P]; returns float32 logits [batch, P, vocab_size].
  """

  def __init__(self, embedding_table, hidden_act="gelu",
               initializer_range=0.02, **kwargs):
    super().__init__(**kwargs)
    # The tied table belongs to the encoder. Not tracked here, so checkpoints
    # and `weights` hold it once, under the encoder's path only.
    object.__setattr__(self, "embedding_table", embedding_table)  # [V, E]
    self.hidden_act = hidden_act
    self.initializer_range = initializer_range
    vocab_size, embedding_size = embedding_table.shape
    self.dense = layer_utils.dense(
        embedding_size, initializer_range, "transform_dense",
        activation=activations.get_activation(hidden_act))
    self.layer_norm = layer_utils.layer_norm("transform_layer_norm")
    self.vocab_size = int(vocab_size)

  def build(self, input_shape):
    self.output_bias = self.add_weight(
        "output_bias", shape=[self.vocab_size], initializer="zeros")
    super().build(input_shape)

  def call(self, sequence_output, masked_lm_positions):
    x = tf.gather(sequence_output, tf.cast(masked_lm_positions, tf.int32),
                  batch_dims=1)  # [batch, P, H]
    x = self.dense(x)  # [batch, P, E]
    x = tf.cast(self.layer_norm(x), self.compute_dtype)
    table = tf.cast(self.embedding_table, x.dtype)
    logits = tf.matmul(x, table, transpose_b=True)  # [batch, P, V]
    return tf.cast(logits, tf.float32) + tf.cast(self.output_bias, tf.float32)

  def get_config(self):
    # The tied table is a variable of the encoder, rebuilt with it; this head
    # is recreated by AlbertPretrainer.from_config rather than on its own.
    config = super().get_config()
    config.update(hidden_act=self.hidden_act,
                  initializer_range=self.initializer_range)
    return config


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class SentenceOrderHead(layer_utils.UnconvertedLayer):
  """Pooled output [batch, H] -> sentence-order logits [batch, 2] (float32).

  Weights are stored as the original's `output_weights` [2, H] and
  `output_bias` [2].
  """

  def __init__(self, num_classes=2, initializer_range=0.02, **kwargs):
    super().__init__(**kwargs)
    self.num_classes = num_classes
    self.initializer_range = initializer_range

  def build(self, input_shape):
    hidden_size = int(input_shape[-1])
    self.output_weights = self.add_weight(
        "output_weights", shape=[self.num_classes, hidden_size],
        initializer=layer_utils.initializer(self.initializer_range))
    self.output_bias = self.add_weight(
        "output_bias", shape=[self.num_classes], initializer="zeros")
    super().build(input_shape)

  def call(self, pooled_output):
    weights = tf.cast(self.output_weights, pooled_output.dtype)
    logits = tf.matmul(pooled_output, weights, transpose_b=True)  # [batch, 2]
    return tf.cast(logits, tf.float32) + tf.cast(self.output_bias, tf.float32)

  def get_config(self):
    config = super().get_config()
    config.update(num_classes=self.num_classes,
                  initializer_range=self.initializer_range)
    return config
