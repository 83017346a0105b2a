"""Small helpers shared by the ALBERT layers."""

import tensorflow as tf
import tf_keras

LAYER_NORM_EPSILON = 1e-12


class UnconvertedLayer(tf_keras.layers.Layer):
  """Base of albert_tf's layers: `call` runs as written, not rewritten by
  AutoGraph.

  Keras converts a subclassed layer's `call` with AutoGraph whenever it is
  traced outside an `autograph=False` tf.function, building a functional
  model included: 0.7 of the 7.2 CPU-seconds of exporting a 2-layer model
  (every tool start paid it). No ALBERT layer branches or loops on a
  tensor, so the conversion changed nothing but the time; the serving
  functions (`autograph=False`) already ran them unconverted. tf_keras
  (pinned) has no public switch: `_should_use_autograph` is the hook its
  Layer consults.
  """

  def _should_use_autograph(self):
    return False


def initializer(stddev):
  """The original's weight init: truncated normal with `initializer_range`."""
  return tf_keras.initializers.TruncatedNormal(stddev=stddev)


def dense(units, stddev, name, activation=None):
  return tf_keras.layers.Dense(units, activation=activation,
                               kernel_initializer=initializer(stddev),
                               name=name)


def layer_norm(name):
  """LayerNorm (eps 1e-12) whose statistics stay float32 under mixed precision."""
  return tf_keras.layers.LayerNormalization(
      axis=-1, epsilon=LAYER_NORM_EPSILON, dtype=tf.float32, name=name)


def build_in_scope(layer, input_shape):
  """Builds a sublayer under its own name scope, as Keras' __call__ would.

  Variable names then read e.g. "transformer/attention_0/layer_norm/gamma:0",
  which the optimizer's weight-decay exclusion patterns match on.
  """
  with tf.name_scope(layer.name):
    layer.build(input_shape)
