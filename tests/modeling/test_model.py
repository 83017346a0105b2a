"""The ALBERT model: parameter counts, sharing, numerics against Model Garden."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras
from tensorflow.python.autograph.impl import api as autograph_api

from albert_tf import AlbertConfig, AlbertEncoder, AlbertPretrainer
from albert_tf.modeling.layers import downstream_heads
from albert_tf.modeling.layers import embedding
from albert_tf.modeling.layers import layer_utils
from albert_tf.modeling.layers import pretraining_heads
from albert_tf.modeling.layers import squad_v2_head
from albert_tf.modeling.layers import transformer
from albert_tf.modeling import losses
from official.nlp.modeling import networks

# Ten seconds or more in all: handed out first (tests/conftest.py).
pytestmark = pytest.mark.slow


def tiny_config(**overrides):
  values = dict(vocab_size=97, embedding_size=8, hidden_size=16,
                num_hidden_layers=4, num_attention_heads=2,
                intermediate_size=32, max_position_embeddings=24)
  values.update(overrides)
  return AlbertConfig(**values).validate()


def random_inputs(config, batch=3, seq=10, seed=0, pad=True):
  rng = np.random.default_rng(seed)
  ids = rng.integers(5, config.vocab_size, size=(batch, seq)).astype(np.int32)
  mask = np.ones_like(ids)
  if pad:  # Rows of different real lengths, padded with 0.
    for row in range(batch):
      length = seq - 2 * row
      mask[row, length:] = 0
      ids[row, length:] = 0
  types = np.zeros_like(ids)
  types[:, seq // 2:] = 1
  return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}


def expected_param_count(c, sharing="all"):
  """Parameter count from the architecture's formula (independent of code)."""
  V, E, H, I, L = (c.vocab_size, c.embedding_size, c.hidden_size,
                   c.intermediate_size, c.num_hidden_layers)
  P, T = c.max_position_embeddings, c.type_vocab_size
  embeddings = (V + P + T) * E + 2 * E + (E * H + H if E != H else 0)
  attention = 4 * (H * H + H) + 2 * H
  ffn = H * I + I + I * H + H + 2 * H
  shared_count = c.num_hidden_groups * c.inner_group_num
  per_layer_count = L * c.inner_group_num
  n_attention = shared_count if sharing in ("all", "attention") else per_layer_count
  n_ffn = shared_count if sharing in ("all", "ffn") else per_layer_count
  pooler = H * H + H
  return embeddings + n_attention * attention + n_ffn * ffn + pooler


# --- Parameter counts -------------------------------------------------------

@pytest.fixture
def cheap_init(monkeypatch):
  """Zero init: counting parameters needs variables, not random values."""
  monkeypatch.setattr(layer_utils, "initializer",
                      lambda stddev: tf_keras.initializers.Zeros())


def count_params(model_fn, config):
  return model_fn(config).count_params()


@pytest.mark.parametrize("preset,expected", [
    ("albert_base_v2", 11_683_584),
    ("albert_large_v2", 17_683_968),
    ("albert_xlarge_v2", 58_724_864),
    ("albert_xxlarge_v1", 222_595_584),
])
def test_backbone_parameter_counts(preset, expected, cheap_init):
  config = AlbertConfig.from_preset(preset)
  assert expected_param_count(config) == expected
  assert count_params(AlbertEncoder, config) == expected


def test_pretrainer_parameter_count_base(cheap_init):
  # Backbone + MLM head (H*E + E + 2E + V) + SOP head (2H + 2).
  config = AlbertConfig.from_preset("albert_base_v2")
  assert count_params(AlbertPretrainer, config) == 11_813_810


@pytest.mark.parametrize("embedding_size,sharing,paper_millions", [
    (128, "all", 12), (128, "attention", 64), (128, "ffn", 38),
    (128, "none", 89), (768, "all", 31), (768, "attention", 83),
    (768, "ffn", 57), (768, "none", 108)])
def test_sharing_ablation_counts_follow_paper_table4(embedding_size, sharing,
                                                     paper_millions, cheap_init):
  config = AlbertConfig.from_preset("albert_base_v2")
  config = config.replace(embedding_size=embedding_size, sharing=sharing)
  count = count_params(AlbertEncoder, config)
  assert count == expected_param_count(config, sharing)
  # The paper rounds (BERT-base's 108.9M is printed as 108M).
  assert abs(count / 1e6 - paper_millions) < 1.1, count


# --- Groups -----------------------------------------------------------------

def test_groups_and_inner_groups_variables_and_assignment():
  config = tiny_config(num_hidden_groups=2, inner_group_num=2)
  encoder = AlbertEncoder(config)
  assert encoder.count_params() == expected_param_count(config)
  stack = encoder.transformer
  assert len(stack.attention_layers) == 4 and len(stack.ffn_layers) == 4
  # 3 embedding tables + LN(2) + projection(2); 4 blocks x (8 attn + 2 LN +
  # 4 ffn + 2 LN); pooler 2.
  assert len(encoder.trainable_variables) == 7 + 4 * 16 + 2

  inputs = random_inputs(config)
  base = [o.numpy() for o in encoder(inputs)["encoder_outputs"]]

  def perturbed_outputs(sublayers):
    saved = [v.numpy() for l in sublayers for v in l.weights]
    for layer in sublayers:
      for v in layer.weights:
        v.assign_add(tf.fill(v.shape, 0.5))
    out = [o.numpy() for o in encoder(inputs)["encoder_outputs"]]
    for v, value in zip([v for l in sublayers for v in l.weights], saved):
      v.assign(value)
    return out

  # Group 1 = sublayers 2 and 3 (2 inner blocks): layers 0, 1 do not use it.
  out = perturbed_outputs([stack.attention_layers[2], stack.ffn_layers[3]])
  np.testing.assert_array_equal(out[0], base[0])
  np.testing.assert_array_equal(out[1], base[1])
  assert not np.allclose(out[2], base[2])
  # Group 0 changes layer 0 already.
  out = perturbed_outputs([stack.ffn_layers[1]])
  assert not np.allclose(out[0], base[0])
  assert [stack.block_indices(l, i) for l in range(4) for i in range(2)] == [
      (0, 0), (1, 1), (0, 0), (1, 1), (2, 2), (3, 3), (2, 2), (3, 3)]


def test_released_config_creates_one_block():
  encoder = AlbertEncoder(tiny_config())
  assert len(encoder.transformer.attention_layers) == 1
  assert len(encoder.transformer.ffn_layers) == 1


# --- Numerics against Model Garden ------------------------------------------

def copy_into_model_garden(ours, config):
  """Builds MG's AlbertEncoder and copies our weights into it."""
  mg = networks.AlbertEncoder(
      vocab_size=config.vocab_size, embedding_width=config.embedding_size,
      hidden_size=config.hidden_size, num_layers=config.num_hidden_layers,
      num_attention_heads=config.num_attention_heads,
      max_sequence_length=config.max_position_embeddings,
      type_vocab_size=config.type_vocab_size,
      intermediate_size=config.intermediate_size, dropout_rate=0.0,
      attention_dropout_rate=0.0, dict_outputs=True)
  heads, d, H = config.num_attention_heads, config.hidden_size // config.num_attention_heads, config.hidden_size
  emb, attn = ours.embeddings, ours.transformer.attention_layers[0]
  ffn = ours.transformer.ffn_layers[0]
  values = {
      "word_embeddings/embeddings:0": emb.word_embeddings,
      "position_embedding/embeddings:0": emb.position_embeddings,
      "type_embeddings/embeddings:0": emb.token_type_embeddings,
      "embeddings/layer_norm/gamma:0": emb.layer_norm.gamma,
      "embeddings/layer_norm/beta:0": emb.layer_norm.beta,
      "embedding_projection/kernel:0": emb.projection.kernel,
      "embedding_projection/bias:0": emb.projection.bias,
      "transformer/self_attention/query/kernel:0": tf.reshape(attn.query.kernel, [H, heads, d]),
      "transformer/self_attention/query/bias:0": tf.reshape(attn.query.bias, [heads, d]),
      "transformer/self_attention/key/kernel:0": tf.reshape(attn.key.kernel, [H, heads, d]),
      "transformer/self_attention/key/bias:0": tf.reshape(attn.key.bias, [heads, d]),
      "transformer/self_attention/value/kernel:0": tf.reshape(attn.value.kernel, [H, heads, d]),
      "transformer/self_attention/value/bias:0": tf.reshape(attn.value.bias, [heads, d]),
      "transformer/self_attention/attention_output/kernel:0": tf.reshape(attn.output_dense.kernel, [heads, d, H]),
      "transformer/self_attention/attention_output/bias:0": attn.output_dense.bias,
      "transformer/self_attention_layer_norm/gamma:0": attn.layer_norm.gamma,
      "transformer/self_attention_layer_norm/beta:0": attn.layer_norm.beta,
      "transformer/intermediate/kernel:0": ffn.intermediate.kernel,
      "transformer/intermediate/bias:0": ffn.intermediate.bias,
      "transformer/output/kernel:0": ffn.output_dense.kernel,
      "transformer/output/bias:0": ffn.output_dense.bias,
      "transformer/output_layer_norm/gamma:0": ffn.layer_norm.gamma,
      "transformer/output_layer_norm/beta:0": ffn.layer_norm.beta,
      "pooler_transform/kernel:0": ours.pooler.kernel,
      "pooler_transform/bias:0": ours.pooler.bias,
  }
  assert {w.name for w in mg.weights} == set(values)
  for w in mg.weights:
    w.assign(tf.convert_to_tensor(values[w.name]))
  return mg


def test_matches_model_garden_albert_encoder():
  config = tiny_config(max_position_embeddings=16)
  ours = AlbertEncoder(config)
  # Non-trivial LayerNorm parameters so they are really compared.
  for v in ours.weights:
    if "layer_norm" in v.name:
      v.assign(tf.random.normal(v.shape, mean=1.0 if "gamma" in v.name else 0.0, stddev=0.3, seed=1))
  mg = copy_into_model_garden(ours, config)
  inputs = random_inputs(config, batch=3, seq=12)
  a = ours(inputs)
  b = mg(inputs)
  np.testing.assert_allclose(a["sequence_output"], b["sequence_output"], atol=1e-5)
  np.testing.assert_allclose(a["pooled_output"], b["pooled_output"], atol=1e-5)
  for x, y in zip(a["encoder_outputs"], b["encoder_outputs"]):
    np.testing.assert_allclose(x, y, atol=1e-5)


# --- Heads and loss -----------------------------------------------------------

def _layer_norm(x, gamma, beta):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + 1e-12) * gamma + beta


def _gelu(x):
  return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def test_pretraining_heads_and_loss_against_numpy():
  config = tiny_config()
  model = AlbertPretrainer(config)
  for v in model.mlm_head.weights + model.sop_head.weights:
    v.assign(tf.random.normal(v.shape, stddev=0.2, seed=3))
  inputs = random_inputs(config, pad=False)
  positions = np.array([[1, 4], [2, 3], [0, 7]], np.int32)
  out = model(dict(inputs, masked_lm_positions=positions))
  enc = model.encoder(inputs)
  seq, pooled = enc["sequence_output"].numpy(), enc["pooled_output"].numpy()

  head = model.mlm_head
  x = np.take_along_axis(seq, positions[..., None], axis=1)  # [B, P, H]
  x = _gelu(x @ head.dense.kernel.numpy() + head.dense.bias.numpy())
  x = _layer_norm(x, head.layer_norm.gamma.numpy(), head.layer_norm.beta.numpy())
  mlm = x @ model.encoder.word_embeddings.numpy().T + head.output_bias.numpy()
  np.testing.assert_allclose(out["mlm_logits"], mlm, atol=1e-4)
  sop = pooled @ model.sop_head.output_weights.numpy().T + model.sop_head.output_bias.numpy()
  np.testing.assert_allclose(out["sop_logits"], sop, atol=1e-5)

  ids = np.array([[5, 6], [7, 8], [9, 9]], np.int32)
  weights = np.array([[1, 1], [1, 0], [1, 0]], np.float32)
  labels = np.array([0, 1, 1], np.int32)
  loss, metrics = losses.pretraining_loss(
      out, {"masked_lm_ids": ids, "masked_lm_weights": weights,
            "next_sentence_labels": labels[:, None]})

  def log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))
  mlm_ce = -np.take_along_axis(log_softmax(mlm), ids[..., None], -1)[..., 0]
  mlm_loss = (mlm_ce * weights).sum() / (weights.sum() + 1e-5)
  sop_loss = -np.take_along_axis(log_softmax(sop), labels[:, None], -1).mean()
  np.testing.assert_allclose(metrics["masked_lm_loss"], mlm_loss, rtol=1e-5)
  np.testing.assert_allclose(metrics["sentence_order_loss"], sop_loss, rtol=1e-5)
  np.testing.assert_allclose(loss, mlm_loss + sop_loss, rtol=1e-5)
  mlm_acc = ((mlm.argmax(-1) == ids) * weights).sum() / (weights.sum() + 1e-5)
  np.testing.assert_allclose(metrics["masked_lm_accuracy"], mlm_acc, rtol=1e-5)
  np.testing.assert_allclose(metrics["sentence_order_accuracy"],
                             (sop.argmax(-1) == labels).mean(), rtol=1e-6)


# --- Serialization ------------------------------------------------------------

def test_get_config_round_trip_and_keras_savedmodel(tmp_path):
  config = tiny_config(num_hidden_groups=2, inner_group_num=2, sharing="ffn")
  model = AlbertPretrainer(config)
  inputs = dict(random_inputs(config), masked_lm_positions=np.array(
      [[1, 2], [3, 4], [0, 5]], np.int32))
  expected = model(inputs)

  clone = AlbertPretrainer.from_config(model.get_config())
  assert clone.config == model.config
  clone.set_weights(model.get_weights())
  for key in expected:
    np.testing.assert_array_equal(clone(inputs)[key], expected[key])

  path = str(tmp_path / "keras_savedmodel")
  model.save(path, save_format="tf")
  loaded = tf_keras.models.load_model(path)
  assert isinstance(loaded, AlbertPretrainer)
  for key in expected:
    np.testing.assert_allclose(loaded(inputs)[key], expected[key], atol=1e-6)


# --- Options: gradient checkpointing, mixed precision, errors ----------------

def test_gradient_checkpointing_gives_same_gradients():
  config = tiny_config(num_hidden_layers=2, num_hidden_groups=2,
                       inner_group_num=2)
  plain = AlbertPretrainer(config)
  recompute = AlbertPretrainer(config.replace(gradient_checkpointing=True))
  recompute.set_weights(plain.get_weights())
  inputs = dict(random_inputs(config), masked_lm_positions=np.array(
      [[1, 2], [3, 4], [0, 5]], np.int32))
  features = {"masked_lm_ids": np.full((3, 2), 7, np.int32),
              "masked_lm_weights": np.ones((3, 2), np.float32),
              "next_sentence_labels": np.array([0, 1, 0], np.int32)}

  @tf.function
  def grads(model):
    with tf.GradientTape() as tape:
      loss, _ = losses.pretraining_loss(model(inputs, training=True), features)
    return tape.gradient(loss, model.trainable_variables)

  for a, b in zip(grads(plain), grads(recompute)):
    np.testing.assert_allclose(tf.convert_to_tensor(a), tf.convert_to_tensor(b), atol=1e-5)


def _mixed_copy(model_cls, config, policy, reference):
  """`model_cls(config)` built under the Keras `policy`, with `reference`'s
  weights."""
  tf_keras.mixed_precision.set_global_policy(policy)
  try:
    mixed = model_cls(config)
  finally:
    tf_keras.mixed_precision.set_global_policy("float32")
  mixed.set_weights(reference.get_weights())
  return mixed


def test_mixed_precision_policy():
  config = tiny_config()
  reference = AlbertPretrainer(config)
  inputs = dict(random_inputs(config), masked_lm_positions=np.array(
      [[1, 2], [3, 4], [0, 5]], np.int32))
  mixed = _mixed_copy(AlbertPretrainer, config, "mixed_float16", reference)
  attention = mixed.encoder.transformer.attention_layers[0]
  assert attention.compute_dtype == "float16"
  assert attention.layer_norm.compute_dtype == "float32"
  assert all(v.dtype == tf.float32 for v in mixed.weights)
  out, ref = mixed(inputs), reference(inputs)
  for key in ("mlm_logits", "sop_logits"):
    assert out[key].dtype == tf.float32
    np.testing.assert_allclose(out[key], ref[key], atol=5e-2)


def _traced_ops(model, inputs, training):
  """The ops of `model(inputs, training=...)` traced as a tf.function, and
  the graph's placeholder for each captured variable handle (by name)."""
  graph = tf.function(lambda: model(inputs, training=training)
                      ).get_concrete_function().graph
  handles = {id(external): internal for external, internal in graph.captures}
  return graph.get_operations(), {
      v.name: handles.get(id(v.handle)) for v in model.weights}


def test_bfloat16_casts_shared_weights_once_and_fuses_layer_norm():
  """Under mixed_bfloat16 at inference a call casts each shared weight to
  bfloat16 once, not once per layer that shares it (training still casts
  per layer), and each block's LayerNorm is one FusedBatchNormV3 (the form
  oneDNN fuses), within bfloat16 of Keras' float32 LayerNorm (training's)
  and of the float32 model."""
  config = tiny_config(num_hidden_layers=3)
  reference = AlbertEncoder(config)
  rng = np.random.default_rng(0)
  for v in reference.weights:  # LayerNorms not the identity they start as
    if "layer_norm" in v.name:
      v.assign(v + rng.normal(0, 0.3, v.shape).astype(np.float32))
  mixed = _mixed_copy(AlbertEncoder, config, "mixed_bfloat16", reference)
  inputs = random_inputs(config)
  kernel = mixed.transformer.ffn_layers[0].intermediate.kernel.name
  for training in (False, True):
    ops, placeholders = _traced_ops(mixed, inputs, training)
    reads = [op for op in ops if op.type == "ReadVariableOp" and
             op.inputs[0] is placeholders[kernel]]
    assert len(reads) == (config.num_hidden_layers if training else 1)
    norms = [op for op in ops if op.type == "FusedBatchNormV3"]
    assert len(norms) == (0 if training else 2 * config.num_hidden_layers)
  ops, _ = _traced_ops(reference, inputs, False)
  assert not [op for op in ops if op.type == "FusedBatchNormV3"]

  want = reference(inputs)["sequence_output"].numpy()
  fused = mixed(inputs, training=False)["sequence_output"].numpy()
  keras_norm = mixed(inputs, training=True)["sequence_output"].numpy()
  assert fused.dtype == np.float32
  scale = np.abs(want).max()
  assert np.abs(fused - want).max() / scale < 0.05
  assert np.abs(fused - keras_norm).max() / scale < 0.05
  assert not np.array_equal(fused, keras_norm)  # really the fused form


def test_bfloat16_inference_softmax_on_bfloat16_training_in_float32():
  """At bfloat16 inference each layer's softmax runs on bfloat16 (no casts
  around it); training and float32 keep it in float32; the output stays
  within bfloat16 of the float32 model's."""
  config = tiny_config(num_hidden_layers=3)
  reference = AlbertEncoder(config)
  mixed = _mixed_copy(AlbertEncoder, config, "mixed_bfloat16", reference)
  inputs = random_inputs(config)
  for model, training, dtype in ((mixed, False, tf.bfloat16),
                                 (mixed, True, tf.float32),
                                 (reference, False, tf.float32)):
    ops, _ = _traced_ops(model, inputs, training)
    softmaxes = [op for op in ops if op.type == "Softmax"]
    assert [op.inputs[0].dtype for op in softmaxes] == (
        [dtype] * config.num_hidden_layers)
  want = reference(inputs)["sequence_output"].numpy()
  got = mixed(inputs, training=False)["sequence_output"].numpy()
  assert np.abs(got - want).max() / np.abs(want).max() < 0.05


def test_invalid_configs_name_the_field():
  cases = {
      "num_attention_heads": dict(hidden_size=30, num_attention_heads=4),
      "num_hidden_groups": dict(num_hidden_layers=5, num_hidden_groups=2),
      "embedding_size": dict(embedding_size=0),
      "hidden_act": dict(hidden_act="gelu_fancy"),
      "sharing": dict(sharing="some"),
  }
  for field, overrides in cases.items():
    with pytest.raises(ValueError, match=field):
      tiny_config(**overrides)


def test_from_json_file_accepts_release_keys(tmp_path):
  path = tmp_path / "albert_config.json"
  path.write_text("""{
    "attention_probs_dropout_prob": 0, "hidden_act": "gelu",
    "hidden_dropout_prob": 0, "embedding_size": 128, "hidden_size": 768,
    "initializer_range": 0.02, "intermediate_size": 3072,
    "max_position_embeddings": 512, "num_attention_heads": 12,
    "num_hidden_layers": 12, "num_hidden_groups": 1,
    "net_structure_type": 0, "gap_size": 0, "num_memory_blocks": 0,
    "inner_group_num": 1, "down_scale_factor": 1, "type_vocab_size": 2,
    "vocab_size": 30000, "layers_to_keep": []}""")
  config = AlbertConfig.from_json_file(str(path))
  assert config == AlbertConfig.from_preset("albert_base_v2")
  bad = tmp_path / "bad.json"
  bad.write_text('{"hidden_size": 768, "hiden_layers": 3}')
  with pytest.raises(ValueError, match="bad.json.*hiden_layers"):
    AlbertConfig.from_json_file(str(bad))


def test_sequence_longer_than_positions_is_an_error():
  config = tiny_config(max_position_embeddings=8)
  encoder = AlbertEncoder(config)
  inputs = random_inputs(config, seq=9, pad=False)
  with pytest.raises(ValueError, match="max_position_embeddings=8"):
    encoder(inputs)
  dynamic = tf.function(encoder, input_signature=[{
      k: tf.TensorSpec([None, None], tf.int32) for k in inputs}])
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match="max_position_embeddings=8"):
    dynamic(inputs)


def test_no_layer_of_ours_is_rewritten_by_autograph(monkeypatch):
  """Keras rewrites a subclassed layer's `call` with AutoGraph when it is
  traced (building a functional model included), 0.7 CPU-s of every tool
  start; ours opt out (layer_utils.UnconvertedLayer): no albert_tf code is
  converted building the pretrainer and tracing it in a default
  (autograph=True) tf.function."""
  converted = []
  convert = autograph_api._convert_actual  # pylint: disable=protected-access
  monkeypatch.setattr(autograph_api, "_convert_actual", lambda entity, ctx: (
      converted.append(getattr(entity, "__module__", "")),
      convert(entity, ctx))[1])
  config = tiny_config()
  model = AlbertPretrainer(config)
  inputs = random_inputs(config)
  inputs["masked_lm_positions"] = np.array([[1, 2]] * 3, np.int32)
  eager = model(inputs)["mlm_logits"]
  traced = tf.function(model)(inputs)["mlm_logits"]
  np.testing.assert_allclose(traced, eager, atol=1e-6)
  assert converted and not [m for m in converted if m.startswith("albert_tf")]
  # Every layer class of ours opts out, not only those the pretrainer uses.
  for module in (downstream_heads, embedding, pretraining_heads,
                 squad_v2_head, transformer):
    for value in vars(module).values():
      if isinstance(value, type) and issubclass(value, tf_keras.layers.Layer):
        assert issubclass(value, layer_utils.UnconvertedLayer), value
