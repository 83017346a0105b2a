"""The post-LN Transformer block and ALBERT's cross-layer parameter sharing.

A block is a self-attention sublayer then a feed-forward sublayer, each
`LayerNorm(x + dropout(sublayer(x)))`. ALBERT reuses blocks across layers:
layer l (of L) belongs to group `l * G // L` and a group is `inner_group_num`
blocks applied in sequence. `sharing` selects which sublayers are shared
(the paper's Table 4 ablation).

All matmuls run on 2-D [batch * seq, width] tensors, and Q, K and V come from
one fused matmul: on CPU this keeps every large op a plain GEMM.
"""

import math

import tensorflow as tf
import tf_keras

from albert_tf.modeling import activations
from albert_tf.modeling.layers import layer_utils


def attention_bias(input_mask, dtype):
  """[batch, seq] 1/0 mask -> additive bias [batch, 1, 1, seq] (0 or -10000)."""
  # expand_dims, not [:, None, None, :]: TFLite's strided slice has no
  # new-axis form.
  mask = tf.expand_dims(tf.expand_dims(tf.cast(input_mask, dtype), 1), 1)
  return (1.0 - mask) * tf.cast(-10000.0, dtype)


def norm(layer_norm, x, fused):
  """A sublayer's LayerNorm of `x`, in `x`'s dtype."""
  if fused:
    return layer_utils.fused_layer_norm(layer_norm, x)
  return tf.cast(layer_norm(x), x.dtype)


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class SelfAttention(layer_utils.UnconvertedLayer):
  """Multi-head self-attention, output projection, residual, LayerNorm.

  Call: `layer(x, bias, batch, seq)` with x [batch*seq, H] and the additive
  bias from `attention_bias`; returns [batch*seq, H].
  """

  def __init__(self, hidden_size, num_attention_heads, initializer_range=0.02,
               hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
               **kwargs):
    super().__init__(**kwargs)
    self.hidden_size = hidden_size
    self.num_attention_heads = num_attention_heads
    self.initializer_range = initializer_range
    self.hidden_dropout_prob = hidden_dropout_prob
    self.attention_probs_dropout_prob = attention_probs_dropout_prob
    self.head_size = hidden_size // num_attention_heads

    self.query = layer_utils.dense(hidden_size, initializer_range, "query")
    self.key = layer_utils.dense(hidden_size, initializer_range, "key")
    self.value = layer_utils.dense(hidden_size, initializer_range, "value")
    self.output_dense = layer_utils.dense(hidden_size, initializer_range,
                                          "output_dense")
    self.layer_norm = layer_utils.layer_norm("layer_norm")
    self.probs_dropout = tf_keras.layers.Dropout(attention_probs_dropout_prob)
    self.output_dropout = tf_keras.layers.Dropout(hidden_dropout_prob)

  def build(self, input_shape):
    for layer in (self.query, self.key, self.value, self.output_dense):
      layer_utils.build_in_scope(layer, [None, self.hidden_size])
    layer_utils.build_in_scope(self.layer_norm, [None, self.hidden_size])
    super().build(input_shape)

  def fused_qkv(self, dtype):
    """(kernel [H, 3H], bias [3H]): Q, K and V as one GEMM's weights (the
    checkpoint keeps the original's 3 kernels)."""
    layers = (self.query, self.key, self.value)
    return (tf.concat([tf.cast(l.kernel, dtype) for l in layers], axis=1),
            tf.concat([tf.cast(l.bias, dtype) for l in layers], axis=0))

  def shared_weights(self, dtype, cast):
    """The weights `call` takes as `weights`, made once for every layer that
    shares this sublayer: the fused Q/K/V, and with `cast` the output
    projection in the compute `dtype`."""
    weights = {"qkv": self.fused_qkv(dtype)}
    if cast:
      weights["output"] = layer_utils.cast_dense(self.output_dense, dtype)
    return weights

  def call(self, x, bias, batch, seq, training=None, weights=None,
           bf16_inference=False, query_rows=None):
    """`weights`: `shared_weights(x.dtype, ...)` made once for several calls (a
    shared layer: the concat and casts of the kernels are then not redone
    per layer). `bf16_inference`: computing in bfloat16 at inference (the
    bfloat16 SavedModel): the LayerNorm as `fused_layer_norm`, the softmax
    on bfloat16.
    `query_rows`: only the first `query_rows` positions of each sequence
    attend (keys and values are still every position); returns
    [batch*query_rows, H]."""
    heads, head_size = self.num_attention_heads, self.head_size
    dtype = x.dtype
    weights = weights or {}
    kernel, qkv_bias = weights.get("qkv") or self.fused_qkv(dtype)
    qkv = tf.matmul(x, kernel) + qkv_bias  # [batch*seq, 3H]
    # tf.split, not slicing: its gradient is one concat, where each slice's
    # gradient would write a zero-filled copy of the whole [batch*seq, 3H].
    q, k, v = [tf.transpose(tf.reshape(t, [batch, seq, heads, head_size]),
                            [0, 2, 1, 3])  # [batch, heads, seq, d]
               for t in tf.split(qkv, 3, axis=1)]
    if query_rows is not None:
      q = q[:, :, :query_rows, :]  # [batch, heads, rows, d]
      x = tf.reshape(tf.reshape(x, [batch, seq, self.hidden_size])
                     [:, :query_rows, :], [-1, self.hidden_size])

    q = q * tf.cast(1.0 / math.sqrt(head_size), dtype)
    scores = tf.matmul(q, k, transpose_b=True)  # [batch, heads, rows, seq]
    if bf16_inference:
      # The softmax on bfloat16: at ALBERT-base the same pooled outputs as
      # the float32 softmax below cast to bfloat16, and a batch-32 call
      # 3.5% faster (docs/performance.md).
      probs = tf.nn.softmax(scores + tf.cast(bias, dtype), axis=-1)
    else:
      # Softmax in float32 under mixed precision (training: its gradient).
      scores = tf.cast(scores, tf.float32) + tf.cast(bias, tf.float32)
      probs = tf.cast(tf.nn.softmax(scores, axis=-1), dtype)
    probs = self.probs_dropout(probs, training=training)

    context = tf.matmul(probs, v)  # [batch, heads, rows, d]
    context = tf.transpose(context, [0, 2, 1, 3])  # [batch, rows, heads, d]
    context = tf.reshape(context, [-1, self.hidden_size])  # [batch*rows, H]
    out = layer_utils.apply_dense(self.output_dense, context,
                                  weights.get("output"))
    out = self.output_dropout(out, training=training)
    return norm(self.layer_norm, x + out, bf16_inference)

  def get_config(self):
    config = super().get_config()
    config.update(
        hidden_size=self.hidden_size,
        num_attention_heads=self.num_attention_heads,
        initializer_range=self.initializer_range,
        hidden_dropout_prob=self.hidden_dropout_prob,
        attention_probs_dropout_prob=self.attention_probs_dropout_prob)
    return config


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class FeedForward(layer_utils.UnconvertedLayer):
  """Dense H->I with the activation, dense I->H, residual, LayerNorm.

  Call: `layer(x)` with x [batch*seq, H]; returns [batch*seq, H].
  """

  def __init__(self, hidden_size, intermediate_size, hidden_act="gelu",
               initializer_range=0.02, hidden_dropout_prob=0.0, **kwargs):
    super().__init__(**kwargs)
    self.hidden_size = hidden_size
    self.intermediate_size = intermediate_size
    self.hidden_act = hidden_act
    self.initializer_range = initializer_range
    self.hidden_dropout_prob = hidden_dropout_prob

    self.intermediate = layer_utils.dense(
        intermediate_size, initializer_range, "intermediate",
        activation=activations.get_activation(hidden_act))
    self.output_dense = layer_utils.dense(hidden_size, initializer_range,
                                          "output_dense")
    self.layer_norm = layer_utils.layer_norm("layer_norm")
    self.dropout = tf_keras.layers.Dropout(hidden_dropout_prob)

  def build(self, input_shape):
    layer_utils.build_in_scope(self.intermediate, [None, self.hidden_size])
    layer_utils.build_in_scope(self.output_dense,
                               [None, self.intermediate_size])
    layer_utils.build_in_scope(self.layer_norm, [None, self.hidden_size])
    super().build(input_shape)

  def shared_weights(self, dtype, cast):
    """The weights `call` takes as `weights`: with `cast`, both kernels and
    biases in the compute `dtype`, made once for every layer that shares
    this sublayer; none otherwise."""
    if not cast:
      return {}
    return {"intermediate": layer_utils.cast_dense(self.intermediate, dtype),
            "output": layer_utils.cast_dense(self.output_dense, dtype)}

  def call(self, x, training=None, weights=None, bf16_inference=False):
    """`weights`: `shared_weights(x.dtype, ...)`, or None to read the
    layers'.
    `bf16_inference`: the LayerNorm as `fused_layer_norm`."""
    weights = weights or {}
    h = layer_utils.apply_dense(self.intermediate, x,
                                weights.get("intermediate"))  # [batch*seq, I]
    out = layer_utils.apply_dense(self.output_dense, h,
                                  weights.get("output"))  # [batch*seq, H]
    out = self.dropout(out, training=training)
    return norm(self.layer_norm, x + out, bf16_inference)

  def get_config(self):
    config = super().get_config()
    config.update(
        hidden_size=self.hidden_size,
        intermediate_size=self.intermediate_size,
        hidden_act=self.hidden_act,
        initializer_range=self.initializer_range,
        hidden_dropout_prob=self.hidden_dropout_prob)
    return config


def sublayer_indices(layer, inner, num_layers, num_groups, inner_group_num,
                     shared):
  """Which attention/FFN sublayer serves block `inner` of layer `layer`.

  Shared sublayers follow the original's group assignment (group
  `layer * G // L`, the exact form of its `int(layer / L * G)`); unshared
  ones get one sublayer per (layer, inner block).
  """
  if shared:
    group = layer * num_groups // num_layers
    return group * inner_group_num + inner
  return layer * inner_group_num + inner


def num_sublayers(num_layers, num_groups, inner_group_num, shared):
  return (num_groups if shared else num_layers) * inner_group_num


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class SharedTransformerStack(layer_utils.UnconvertedLayer):
  """`num_hidden_layers` layers built from shared attention and FFN sublayers.

  Call: `layer(x, input_mask, output_range=None)` with x [batch, seq, H] and
  input_mask [batch, seq]; returns a list of num_hidden_layers tensors
  [batch, seq, H]. With `output_range=n` (Model Garden's name) the last
  layer computes only the first n positions (all a pooled output needs):
  its tensor is [batch, n, H].
  With `gradient_checkpointing` each layer's activations are recomputed in the
  backward pass instead of being kept (dropout masks are then redrawn, so use
  it with dropout 0 when exact gradients matter).
  """

  def __init__(self, hidden_size, num_hidden_layers, num_attention_heads,
               intermediate_size, num_hidden_groups=1, inner_group_num=1,
               hidden_act="gelu", initializer_range=0.02,
               hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
               sharing="all", gradient_checkpointing=False, **kwargs):
    super().__init__(**kwargs)
    self.hidden_size = hidden_size
    self.num_hidden_layers = num_hidden_layers
    self.num_attention_heads = num_attention_heads
    self.intermediate_size = intermediate_size
    self.num_hidden_groups = num_hidden_groups
    self.inner_group_num = inner_group_num
    self.hidden_act = hidden_act
    self.initializer_range = initializer_range
    self.hidden_dropout_prob = hidden_dropout_prob
    self.attention_probs_dropout_prob = attention_probs_dropout_prob
    self.sharing = sharing
    self.gradient_checkpointing = gradient_checkpointing

    self.share_attention = sharing in ("all", "attention")
    self.share_ffn = sharing in ("all", "ffn")
    shape = (num_hidden_layers, num_hidden_groups, inner_group_num)
    self.attention_layers = [
        SelfAttention(hidden_size, num_attention_heads, initializer_range,
                      hidden_dropout_prob, attention_probs_dropout_prob,
                      name=f"attention_{i}")
        for i in range(num_sublayers(*shape, self.share_attention))]
    self.ffn_layers = [
        FeedForward(hidden_size, intermediate_size, hidden_act,
                    initializer_range, hidden_dropout_prob, name=f"ffn_{i}")
        for i in range(num_sublayers(*shape, self.share_ffn))]

  def build(self, input_shape):
    for layer in self.attention_layers + self.ffn_layers:
      layer_utils.build_in_scope(layer, [None, self.hidden_size])
    super().build(input_shape)

  def block_indices(self, layer, inner):
    """(attention index, ffn index) used by block `inner` of `layer`."""
    shape = (self.num_hidden_layers, self.num_hidden_groups,
             self.inner_group_num)
    return (sublayer_indices(layer, inner, *shape, self.share_attention),
            sublayer_indices(layer, inner, *shape, self.share_ffn))

  def _layer_fn(self, layer, bias, batch, seq, training, weights,
                bf16_inference, output_range):
    """Layer `layer`'s blocks; `output_range` (the last layer's) applies to
    its last block's attention."""
    def apply(x):
      for inner in range(self.inner_group_num):
        attention, ffn = self.block_indices(layer, inner)
        x = self.attention_layers[attention](
            x, bias, batch, seq, training=training,
            weights=weights["attention"].get(attention),
            bf16_inference=bf16_inference,
            query_rows=(output_range if inner == self.inner_group_num - 1
                        else None))
        x = self.ffn_layers[ffn](x, training=training,
                                 weights=weights["ffn"].get(ffn),
                                 bf16_inference=bf16_inference)
      return x
    if self.gradient_checkpointing:
      return tf.recompute_grad(apply)
    return apply

  def call(self, x, input_mask, training=None, output_range=None):
    batch, seq = tf.shape(x)[0], tf.shape(x)[1]
    bias = attention_bias(input_mask, x.dtype)  # [batch, 1, 1, seq]
    x = tf.reshape(x, [-1, self.hidden_size])  # [batch*seq, H]
    # Each sublayer's fused Q/K/V weights once per call, not once per layer
    # that shares it (12 concats of [H, 3H] at ALBERT-base). Not with
    # recompute_grad: it differentiates only the variables read inside.
    # Under a mixed policy at inference, also its other kernels and biases
    # in the compute dtype (12 casts of each at ALBERT-base, a tenth of a
    # batch-1 bfloat16 call). Not in training, where it did not measurably
    # help and would sum a weight's per-layer gradients in bfloat16.
    inference = not tf.is_tensor(training) and not training
    cast = x.dtype != self.dtype and inference
    weights = {"attention": {}, "ffn": {}}
    if not self.gradient_checkpointing:
      weights = {name: {i: sublayer.shared_weights(x.dtype, cast)
                        for i, sublayer in enumerate(layers)}
                 for name, layers in (("attention", self.attention_layers),
                                      ("ffn", self.ffn_layers))}
    # Computing in bfloat16 at inference (the bfloat16 SavedModel), the
    # LayerNorms as one fused op on bfloat16 and the softmax on bfloat16
    # (training keeps Keras' float32 LayerNorm, the float32 softmax and
    # their gradients; float16 keeps them too: cuDNN's batch norm takes no
    # epsilon below 1e-5, and float16 has not bfloat16's range).
    bf16_inference = x.dtype == tf.bfloat16 and inference
    outputs = []
    for layer in range(self.num_hidden_layers):
      last = layer == self.num_hidden_layers - 1
      x = self._layer_fn(layer, bias, batch, seq, training, weights,
                         bf16_inference, output_range if last else None)(x)
      outputs.append(tf.reshape(x, [batch, -1, self.hidden_size]))
    return outputs

  def get_config(self):
    config = super().get_config()
    config.update(
        hidden_size=self.hidden_size,
        num_hidden_layers=self.num_hidden_layers,
        num_attention_heads=self.num_attention_heads,
        intermediate_size=self.intermediate_size,
        num_hidden_groups=self.num_hidden_groups,
        inner_group_num=self.inner_group_num,
        hidden_act=self.hidden_act,
        initializer_range=self.initializer_range,
        hidden_dropout_prob=self.hidden_dropout_prob,
        attention_probs_dropout_prob=self.attention_probs_dropout_prob,
        sharing=self.sharing,
        gradient_checkpointing=self.gradient_checkpointing)
    return config
