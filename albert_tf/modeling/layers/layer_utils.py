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


def cast_dense(layer, dtype):
  """(kernel, bias) of a built Dense `layer` in `dtype`: cast once and handed
  to `apply_dense` by every call of a layer that shares it."""
  return tf.cast(layer.kernel, dtype), tf.cast(layer.bias, dtype)


def apply_dense(layer, x, weights=None):
  """`layer(x)` for a Dense layer on [rows, width] `x`; with `weights` (from
  `cast_dense`) the same matmul, bias and activation on those tensors."""
  if weights is None:
    return layer(x)
  kernel, bias = weights
  return layer.activation(tf.nn.bias_add(tf.matmul(x, kernel), bias))


def layer_norm(name):
  """LayerNorm (eps 1e-12) whose statistics stay float32 under mixed precision."""
  return tf_keras.layers.LayerNormalization(
      axis=-1, epsilon=LAYER_NORM_EPSILON, dtype=tf.float32, name=name)


def fused_layer_norm(layer, x):
  """`layer` (a built `layer_norm`) on [rows, width] `x`, in `x`'s dtype, as
  the one fused op oneDNN has for it.

  Written as Keras writes its fused LayerNorm (a training-mode
  FusedBatchNormV3 over the rows, then gamma and beta), the form grappler's
  oneDNN remapper replaces by `_MklLayerNorm`: one pass over a bfloat16 `x`
  (statistics in float32 inside) instead of casts to and from float32 around
  eight element-wise passes. FusedBatchNormV3 itself (where the remapper
  does not run) also keeps its statistics in float32. The raw op, not
  `tf.nn.fused_batch_norm`, which would raise epsilon to 1.001e-5.
  """
  rows, width = tf.shape(x)[0], x.shape[-1]
  normalized = tf.raw_ops.FusedBatchNormV3(
      x=tf.reshape(x, [1, rows, width, 1]), scale=tf.fill([rows], 1.0),
      offset=tf.fill([rows], 0.0), mean=tf.constant([], tf.float32),
      variance=tf.constant([], tf.float32), epsilon=layer.epsilon,
      exponential_avg_factor=1.0, data_format="NCHW", is_training=True)[0]
  normalized = tf.reshape(normalized, tf.shape(x))
  return (normalized * tf.cast(layer.gamma, x.dtype) +
          tf.cast(layer.beta, x.dtype))


def build_in_scope(layer, input_shape):
  """Builds a sublayer under its own name scope, as Keras' __call__ would.

  Variable names then read e.g. "transformer/attention_0/layer_norm/gamma:0",
  which the optimizer's weight-decay exclusion patterns match on.
  """
  with tf.name_scope(layer.name):
    layer.build(input_shape)
