"""Checkpoint conversion: original TF1 layout <-> albert_tf <-> Model Garden.

TF1 checkpoints here are written the way the original code writes them:
`tf.compat.v1.get_variable` under `variable_scope`s with the original names,
saved by `tf.compat.v1.train.Saver`, never by our own writer. Outputs on the
converted weights are compared with an independent NumPy forward pass of the
original equations on the same TF1 arrays.
"""

import contextlib
import json
import math
import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.checkpoints import canonical_weights as cw
from albert_tf.checkpoints import object_layout
from albert_tf.checkpoints import conversion as cc
from albert_tf.checkpoints import restore as restore_lib
from albert_tf.modeling.albert_config import AlbertConfig
from albert_tf.modeling.networks.albert_encoder import AlbertEncoder
from albert_tf.modeling.models.albert_pretrainer import AlbertPretrainer

TINY = dict(vocab_size=40, embedding_size=8, hidden_size=16,
            num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2,
            num_attention_heads=2, intermediate_size=24, hidden_act="gelu",
            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
            max_position_embeddings=12, type_vocab_size=2,
            initializer_range=0.02)
# Released checkpoints: one group, one inner block.
SINGLE = dict(TINY, num_hidden_layers=3, num_hidden_groups=1,
              inner_group_num=1)


# --- The original layout, written by TF1 code --------------------------------


def original_weights(cfg, seed, heads=True):
  """Original TF1 name -> random array for an `albert_config.json` dict."""
  rng = np.random.RandomState(seed)
  h, e, i = cfg["hidden_size"], cfg["embedding_size"], cfg["intermediate_size"]

  def rand(*shape):
    return (0.3 * rng.standard_normal(shape)).astype(np.float32)

  def norm(prefix, width):
    w[prefix + "/gamma"] = 1.0 + rand(width)
    w[prefix + "/beta"] = rand(width)

  w = {"bert/embeddings/word_embeddings": rand(cfg["vocab_size"], e),
       "bert/embeddings/position_embeddings":
           rand(cfg["max_position_embeddings"], e),
       "bert/embeddings/token_type_embeddings":
           rand(cfg["type_vocab_size"], e)}
  norm("bert/embeddings/LayerNorm", e)
  if e != h:  # The original has no projection when E == H.
    w["bert/encoder/embedding_hidden_mapping_in/kernel"] = rand(e, h)
    w["bert/encoder/embedding_hidden_mapping_in/bias"] = rand(h)
  for g in range(cfg["num_hidden_groups"]):
    for j in range(cfg["inner_group_num"]):
      p = f"bert/encoder/transformer/group_{g}/inner_group_{j}/"
      for part in ("query", "key", "value"):
        w[p + f"attention_1/self/{part}/kernel"] = rand(h, h)
        w[p + f"attention_1/self/{part}/bias"] = rand(h)
      w[p + "attention_1/output/dense/kernel"] = rand(h, h)
      w[p + "attention_1/output/dense/bias"] = rand(h)
      norm(p + "LayerNorm", h)
      w[p + "ffn_1/intermediate/dense/kernel"] = rand(h, i)
      w[p + "ffn_1/intermediate/dense/bias"] = rand(i)
      w[p + "ffn_1/intermediate/output/dense/kernel"] = rand(i, h)
      w[p + "ffn_1/intermediate/output/dense/bias"] = rand(h)
      norm(p + "LayerNorm_1", h)
  w["bert/pooler/dense/kernel"] = rand(h, h)
  w["bert/pooler/dense/bias"] = rand(h)
  if heads:
    w["cls/predictions/transform/dense/kernel"] = rand(h, e)
    w["cls/predictions/transform/dense/bias"] = rand(e)
    norm("cls/predictions/transform/LayerNorm", e)
    w["cls/predictions/output_bias"] = rand(cfg["vocab_size"])
    w["cls/seq_relationship/output_weights"] = rand(2, h)
    w["cls/seq_relationship/output_bias"] = rand(2)
  return w


def _get_variable_in_scopes(full_name, value):
  """tf.compat.v1.get_variable under one variable_scope per name component."""
  *scopes, leaf = full_name.split("/")
  with contextlib.ExitStack() as stack:
    for scope in scopes:
      stack.enter_context(tf.compat.v1.variable_scope(scope))
    return tf.compat.v1.get_variable(leaf, initializer=tf.constant(value))


def save_original(directory, weights, cfg, module=False, adam=False,
                  classifier_labels=0, squad=False, name="model.ckpt-best"):
  """Writes `weights` as the original's Estimator run would; returns prefix."""
  os.makedirs(directory, exist_ok=True)
  prefix = os.path.join(directory, name)
  with tf.Graph().as_default():
    model_vars = []
    with contextlib.ExitStack() as stack:
      if module:  # TF-Hub modules scope every variable under module/.
        stack.enter_context(tf.compat.v1.variable_scope("module"))
      for full_name, value in sorted(weights.items()):
        model_vars.append(_get_variable_in_scopes(full_name, value))
      if classifier_labels:  # run_classifier's head, at the top level.
        h = cfg["hidden_size"]
        tf.compat.v1.get_variable(
            "output_weights", [classifier_labels, h],
            initializer=tf.compat.v1.truncated_normal_initializer(0.02))
        tf.compat.v1.get_variable(
            "output_bias", [classifier_labels],
            initializer=tf.compat.v1.zeros_initializer())
      if squad:  # run_squad_v2's head scope.
        with tf.compat.v1.variable_scope("cls/squad"):
          tf.compat.v1.get_variable("output_weights", [2, cfg["hidden_size"]])
          tf.compat.v1.get_variable("output_bias", [2])
    if adam:  # The original's AdamW/LAMB slots and the global step.
      for var in model_vars:
        for slot in ("adam_m", "adam_v"):
          tf.compat.v1.get_variable(
              var.op.name + "/" + slot, var.shape, trainable=False,
              initializer=tf.compat.v1.zeros_initializer())
      tf.compat.v1.train.get_or_create_global_step()
    saver = tf.compat.v1.train.Saver()
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      saver.save(sess, prefix, write_meta_graph=False)
  with open(os.path.join(directory, "albert_config.json"), "w") as f:
    json.dump(dict(cfg, net_structure_type=0, gap_size=0), f)
  with open(os.path.join(directory, "30k-clean.model"), "wb") as f:
    f.write(b"\x0a\x05fake-spm")
  return prefix


def restore_with_original_code(prefix, names_and_shapes):
  """Restores `prefix` into tf.compat.v1 variables made under the original's
  scope names, with a Saver (what the original's code does); returns arrays."""
  with tf.Graph().as_default():
    variables = {}
    for full_name, shape in names_and_shapes.items():
      *scopes, leaf = full_name.split("/")
      with contextlib.ExitStack() as stack:
        for scope in scopes:
          stack.enter_context(tf.compat.v1.variable_scope(scope))
        variables[full_name] = tf.compat.v1.get_variable(leaf, shape)
    saver = tf.compat.v1.train.Saver(variables)
    with tf.compat.v1.Session() as sess:
      saver.restore(sess, prefix)
      return sess.run(variables)


# --- An independent NumPy forward pass of the original equations --------------


def _gelu(x):
  return 0.5 * x * (1.0 + np.tanh(math.sqrt(2 / math.pi) *
                                  (x + 0.044715 * x ** 3)))


def _layer_norm(x, w, prefix):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return ((x - mean) / np.sqrt(var + 1e-12) * w[prefix + "/gamma"] +
          w[prefix + "/beta"])


def _dense(x, w, prefix):
  return x @ w[prefix + "/kernel"] + w[prefix + "/bias"]


def reference_forward(w, cfg, ids, mask, types, positions=None):
  """The original modeling.py / run_pretraining.py equations, float64."""
  w = {k: v.astype(np.float64) for k, v in w.items()}
  batch, seq = ids.shape
  heads = cfg["num_attention_heads"]
  h = cfg["hidden_size"]
  d = h // heads
  x = (w["bert/embeddings/word_embeddings"][ids] +
       w["bert/embeddings/token_type_embeddings"][types] +
       w["bert/embeddings/position_embeddings"][:seq][None])
  x = _layer_norm(x, w, "bert/embeddings/LayerNorm")
  if "bert/encoder/embedding_hidden_mapping_in/kernel" in w:
    x = _dense(x, w, "bert/encoder/embedding_hidden_mapping_in")
  adder = (1.0 - mask[:, None, None, :]) * -10000.0
  num_layers, groups = cfg["num_hidden_layers"], cfg["num_hidden_groups"]
  for layer in range(num_layers):
    group = int(layer / num_layers * groups)
    for inner in range(cfg["inner_group_num"]):
      p = f"bert/encoder/transformer/group_{group}/inner_group_{inner}/"

      def split(t):
        return t.reshape(batch, seq, heads, d).transpose(0, 2, 1, 3)
      q = split(_dense(x, w, p + "attention_1/self/query"))
      k = split(_dense(x, w, p + "attention_1/self/key"))
      v = split(_dense(x, w, p + "attention_1/self/value"))
      scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) + adder
      probs = np.exp(scores - scores.max(-1, keepdims=True))
      probs /= probs.sum(-1, keepdims=True)
      context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, h)
      attn = _dense(context, w, p + "attention_1/output/dense")
      x = _layer_norm(x + attn, w, p + "LayerNorm")
      ffn = _dense(_gelu(_dense(x, w, p + "ffn_1/intermediate/dense")), w,
                   p + "ffn_1/intermediate/output/dense")
      x = _layer_norm(x + ffn, w, p + "LayerNorm_1")
  out = {"sequence_output": x,
         "pooled_output": np.tanh(_dense(x[:, 0], w, "bert/pooler/dense"))}
  if positions is not None and "cls/predictions/output_bias" in w:
    t = np.take_along_axis(x, positions[:, :, None], axis=1)
    t = _gelu(_dense(t, w, "cls/predictions/transform/dense"))
    t = _layer_norm(t, w, "cls/predictions/transform/LayerNorm")
    out["mlm_logits"] = (t @ w["bert/embeddings/word_embeddings"].T +
                         w["cls/predictions/output_bias"])
    out["sop_logits"] = (out["pooled_output"] @
                         w["cls/seq_relationship/output_weights"].T +
                         w["cls/seq_relationship/output_bias"])
  return out


def inputs_for(cfg, seed=7):
  rng = np.random.RandomState(seed)
  ids = rng.randint(5, cfg["vocab_size"], size=(2, 7)).astype(np.int32)
  mask = np.ones_like(ids)
  mask[1, 5:] = 0  # padding exercises the attention mask
  types = np.zeros_like(ids)
  types[:, 4:] = 1
  positions = np.array([[1, 3], [2, 4]], dtype=np.int32)
  return dict(input_word_ids=ids, input_mask=mask, input_type_ids=types,
              masked_lm_positions=positions)


def run_model(model, inputs):
  if isinstance(model, AlbertPretrainer):
    out = model(inputs)
    enc = model.encoder({k: inputs[k] for k in
                         ("input_word_ids", "input_mask", "input_type_ids")})
    out = dict(out, sequence_output=enc["sequence_output"],
               pooled_output=enc["pooled_output"])
  else:
    out = model({k: inputs[k] for k in
                 ("input_word_ids", "input_mask", "input_type_ids")})
  return {k: np.asarray(v) for k, v in out.items() if k != "encoder_outputs"}


def assert_matches_reference(model, weights, cfg, atol=2e-4):
  inputs = inputs_for(cfg)
  ours = run_model(model, inputs)
  ref = reference_forward(weights, cfg, inputs["input_word_ids"],
                          inputs["input_mask"], inputs["input_type_ids"],
                          inputs["masked_lm_positions"])
  for key in ours:
    np.testing.assert_allclose(ours[key], ref[key], atol=atol, rtol=1e-4,
                               err_msg=key)
  assert set(ours) <= set(ref)
  return ours


# --- Tests ---------------------------------------------------------------------


def test_tf1_training_checkpoint_to_albert_tf_matches_numpy(tmp_path):
  """A TF1 run with 2 groups x 2 inner groups, Adam slots, global_step and a
  classifier head: every source variable is mapped or skipped with a reason,
  and our model on the result computes the original equations."""
  weights = original_weights(TINY, seed=1)
  prefix = save_original(str(tmp_path / "tf1"), weights, TINY, adam=True,
                         classifier_labels=3, squad=True)
  out_dir = str(tmp_path / "converted")
  path, report = cc.convert(prefix, out_dir, "tf1", "albert_tf")

  assert sorted(report.mapped.values()) == sorted(weights)
  stored = set(tf.train.load_checkpoint(prefix).get_variable_to_shape_map())
  assert set(report.mapped.values()) | set(report.skipped) == stored
  assert report.skipped["global_step"] == "training step counter"
  assert report.skipped["bert/pooler/dense/kernel/adam_m"] == "optimizer slot"
  assert "classifier" in report.skipped["output_weights"]
  assert report.extras["output_weights"].shape == (3, 16)
  assert "SQuAD" in report.skipped["cls/squad/output_weights"]
  # Config and SentencePiece model travel with the checkpoint.
  assert AlbertConfig.from_json_file(
      os.path.join(out_dir, "albert_config.json")).num_hidden_groups == 2
  with open(os.path.join(out_dir, "30k-clean.model"), "rb") as f:
    assert f.read() == b"\x0a\x05fake-spm"

  model = AlbertPretrainer(AlbertConfig(**TINY))
  assert object_layout.restore_model(model, out_dir) == path
  assert_matches_reference(model, weights, TINY)


def test_hub_module_with_e_equal_h_loads_on_the_fly(tmp_path):
  """`module/` prefix, E == H (no embedding_hidden_mapping_in): loaded
  straight into an encoder by restore(), MLM/SOP heads skipped."""
  cfg = dict(SINGLE, embedding_size=16)
  weights = original_weights(cfg, seed=2)
  assert not any("embedding_hidden_mapping_in" in n for n in weights)
  prefix = save_original(str(tmp_path / "hub"), weights, cfg, module=True)
  assert all(n.startswith("module/") for n, _ in
             tf.train.list_variables(prefix))
  encoder = AlbertEncoder(AlbertConfig(**cfg))
  report = restore_lib.restore(encoder, str(tmp_path / "hub"))
  assert report.layout.startswith("tf1")
  assert report.skipped["module/cls/predictions/output_bias"].startswith(
      "pretraining head")
  assert_matches_reference(encoder, weights, cfg)


def test_round_trip_albert_tf_tf1_albert_tf(tmp_path):
  """Random AlbertPretrainer (2 groups x 2 inner) -> tf1 -> albert_tf gives
  identical weights and outputs; the tf1 file restores with TF1 code."""
  config = AlbertConfig(**TINY)
  model = AlbertPretrainer(config)
  inputs = inputs_for(TINY)
  src = str(tmp_path / "ours")
  cc.write_weights(model, os.path.join(src, "ckpt"), "albert_tf")
  config.to_json_file(os.path.join(src, "albert_config.json"))

  tf1_path, report = cc.convert(src, str(tmp_path / "tf1"), "albert_tf",
                                "tf1", global_step=1234)
  assert set(report.skipped) == {"_CHECKPOINTABLE_OBJECT_GRAPH"}
  before = {n: v.numpy() for n, v in cw.model_variables(model).items()}
  expected = original_weights(TINY, seed=0)  # names and shapes to expect
  stored = dict(tf.train.list_variables(tf1_path))
  assert stored.pop("global_step") == []
  assert stored == {n: list(v.shape) for n, v in expected.items()}
  restored = restore_with_original_code(
      tf1_path, {n: v.shape for n, v in expected.items()})
  # group_1/inner_group_1 is our sublayer 3.
  np.testing.assert_array_equal(
      restored["bert/encoder/transformer/group_1/inner_group_1/"
               "ffn_1/intermediate/output/dense/kernel"],
      before["transformer/ffn_3/output_dense/kernel"])
  # The original equations on the TF1 arrays give our model's outputs.
  assert_matches_reference(model, restored, TINY)

  back = AlbertPretrainer(config)
  restore_lib.restore(back, str(tmp_path / "tf1"))
  after = {n: v.numpy() for n, v in cw.model_variables(back).items()}
  assert before.keys() == after.keys()
  for name in before:
    np.testing.assert_array_equal(before[name], after[name], err_msg=name)
  ours, again = run_model(model, inputs), run_model(back, inputs)
  for key in ours:
    np.testing.assert_array_equal(ours[key], again[key])


def test_init_from_group0(tmp_path):
  """A 1-group checkpoint initialises every group of a 2-group model."""
  weights = original_weights(dict(TINY, num_hidden_groups=1), seed=3)
  prefix = save_original(str(tmp_path / "g1"), weights,
                         dict(TINY, num_hidden_groups=1))
  model = AlbertEncoder(AlbertConfig(**TINY))
  with pytest.raises(cw.CheckpointConversionError,
                     match=r"not in the checkpoint: transformer/attention_2"):
    restore_lib.restore(model, prefix)
  report = restore_lib.restore(model, prefix, init_from_group0=True)
  layers = model.transformer.attention_layers
  np.testing.assert_array_equal(layers[2].query.kernel.numpy(),
                                layers[0].query.kernel.numpy())
  np.testing.assert_array_equal(
      layers[3].query.kernel.numpy(),
      weights["bert/encoder/transformer/group_0/inner_group_1/"
              "attention_1/self/query/kernel"])
  assert "init_from_group0" in report.mapped[
      "transformer/attention_3/query/kernel"]


def test_wrong_config_names_both_variables(tmp_path):
  prefix = save_original(str(tmp_path / "base"), original_weights(SINGLE, 4),
                         SINGLE)
  bigger = AlbertConfig(**dict(SINGLE, hidden_size=32,
                               intermediate_size=48))  # "large on base"
  with pytest.raises(cw.CheckpointConversionError) as e:
    restore_lib.restore(AlbertEncoder(bigger), prefix)
  message = str(e.value)
  assert "shape mismatch" in message and "wrong config" in message
  assert "\n" not in message and message.startswith(f"cannot load {prefix}:")
  assert ("bert/encoder/embedding_hidden_mapping_in/kernel [8, 16] in the "
          "checkpoint vs embeddings/embedding_hidden_mapping_in/kernel "
          "[8, 32] in the model") in message
  # A 2-group checkpoint with a 1-group config: group_1 has no place.
  prefix2 = save_original(str(tmp_path / "g2"), original_weights(TINY, 5),
                          TINY)
  with pytest.raises(cw.CheckpointConversionError,
                     match="group_1/inner_group_0 does not exist"):
    cc.convert(prefix2, str(tmp_path / "out"), "tf1", "albert_tf",
               config=dict(TINY, num_hidden_groups=1))


def test_truncated_and_incomplete_checkpoints(tmp_path):
  weights = original_weights(SINGLE, seed=6)
  prefix = save_original(str(tmp_path / "t"), weights, SINGLE)
  (data_file,) = [p for p in os.listdir(tmp_path / "t") if ".data-" in p]
  data_path = os.path.join(tmp_path, "t", data_file)
  size = os.path.getsize(data_path)
  with open(data_path, "r+b") as f:
    f.truncate(size // 2)
  with pytest.raises(cw.CheckpointConversionError,
                     match="truncated or corrupt"):
    cc.convert(prefix, str(tmp_path / "out"), "tf1", "albert_tf")

  partial = {n: v for n, v in weights.items() if "LayerNorm_1" not in n}
  prefix = save_original(str(tmp_path / "p"), partial, SINGLE)
  with pytest.raises(cw.CheckpointConversionError) as e:
    cc.convert(prefix, str(tmp_path / "out2"), "tf1", "albert_tf")
  assert "2 model variable(s) not in the checkpoint" in str(e.value)
  assert "\n" not in str(e.value)
  assert "transformer/ffn_0/layer_norm/gamma" in str(e.value)
  with pytest.raises(cw.CheckpointConversionError, match="no such checkpoint"):
    cc.convert(str(tmp_path / "nothing"), str(tmp_path / "o"), "tf1",
               "albert_tf")


def test_unknown_layouts(tmp_path):
  prefix = save_original(str(tmp_path / "x"),
                         {"foo/dense/kernel": np.ones((2, 2), np.float32)},
                         SINGLE)
  with pytest.raises(cw.CheckpointConversionError,
                     match="unknown checkpoint layout.*foo/dense/kernel"):
    restore_lib.restore(AlbertEncoder(AlbertConfig(**SINGLE)), prefix)
  bert = save_original(str(tmp_path / "bert"), {
      "bert/embeddings/word_embeddings": np.ones((4, 2), np.float32),
      "bert/encoder/layer_0/attention/self/query/kernel":
          np.ones((2, 2), np.float32)}, SINGLE)
  with pytest.raises(cw.CheckpointConversionError, match="BERT checkpoint"):
    cc.detect_layout(bert)
  good = save_original(str(tmp_path / "g"), original_weights(SINGLE, 8),
                       SINGLE)
  with pytest.raises(cw.CheckpointConversionError,
                     match="--from=model_garden but the variable names are "
                     "of the tf1 layout"):
    cc.convert(good, str(tmp_path / "o"), "model_garden", "albert_tf")


# --- Model Garden ---------------------------------------------------------------


def _mg_outputs(mg_encoder, inputs):
  out = mg_encoder([inputs["input_word_ids"], inputs["input_mask"],
                    inputs["input_type_ids"]])
  return {k: np.asarray(out[k]) for k in ("sequence_output", "pooled_output")}


def test_model_garden_round_trip_and_outputs(tmp_path):
  from albert_tf.checkpoints import model_garden_checkpoint as mg  # pylint: disable=g-import-not-at-top
  config = AlbertConfig(**SINGLE)
  model = AlbertPretrainer(config)
  inputs = inputs_for(SINGLE)
  ours = run_model(model, inputs)
  path = cc.write_weights(model, str(tmp_path / "mg" / "ckpt"),
                          "model_garden")

  # Model Garden's own classes read it and compute our outputs.
  mg_encoder = mg.build_encoder(config)
  mg_pretrainer = mg.build_pretrainer(config, mg_encoder)
  tf.train.Checkpoint(**mg_pretrainer.checkpoint_items, model=mg_pretrainer
                     ).read(path).assert_existing_objects_matched()
  got = _mg_outputs(mg_encoder, inputs)
  for key in got:
    np.testing.assert_allclose(got[key], ours[key], atol=1e-5, err_msg=key)
  mg_out = mg_pretrainer(inputs)
  np.testing.assert_allclose(mg_out["mlm_logits"], ours["mlm_logits"],
                             atol=1e-5)
  np.testing.assert_allclose(mg_out["next_sentence"], ours["sop_logits"],
                             atol=1e-5)

  back = AlbertPretrainer(config)
  report = restore_lib.restore(back, path)
  assert report.layout == "model_garden (pretrainer)"
  for name, var in cw.model_variables(back).items():
    np.testing.assert_array_equal(
        var.numpy(), cw.model_variables(model)[name].numpy(), err_msg=name)

  with pytest.raises(cw.CheckpointConversionError,
                     match="supports only num_hidden_groups=1"):
    mg.write_model_garden_checkpoint({}, str(tmp_path / "no" / "ckpt"),
                                     AlbertConfig(**TINY))


def test_model_garden_own_converter_output_loads(tmp_path):
  """A TF1 file -> Model Garden's tf2_albert_encoder_checkpoint_converter ->
  restore(); outputs match the NumPy reference and MG's encoder."""
  from official.legacy.albert import configs as mg_configs  # pylint: disable=g-import-not-at-top
  from official.nlp.tools import tf2_albert_encoder_checkpoint_converter as mg_conv  # pylint: disable=g-import-not-at-top
  weights = original_weights(SINGLE, seed=9)
  prefix = save_original(str(tmp_path / "tf1"), weights, SINGLE, adam=True)
  out = str(tmp_path / "mg_conv" / "ckpt")
  os.makedirs(os.path.dirname(out))  # The converter expects the directory.
  mg_conv.convert_checkpoint(mg_configs.AlbertConfig.from_dict(SINGLE), out,
                             prefix, "encoder", converted_model="encoder")
  mg_path = tf.train.latest_checkpoint(str(tmp_path / "mg_conv"))
  assert cc.detect_layout(mg_path) == "model_garden"

  encoder = AlbertEncoder(AlbertConfig(**SINGLE))
  report = restore_lib.restore(encoder, mg_path)
  assert report.layout == "model_garden (encoder)"
  ours = assert_matches_reference(encoder, weights, SINGLE)
  mg_encoder = mg_conv._create_albert_model(  # pylint: disable=protected-access
      mg_configs.AlbertConfig.from_dict(SINGLE))
  tf.train.Checkpoint(encoder=mg_encoder).read(
      mg_path).assert_existing_objects_matched()
  got = mg_encoder([inputs_for(SINGLE)[k] for k in
                    ("input_word_ids", "input_mask", "input_type_ids")])
  np.testing.assert_allclose(got[0], ours["sequence_output"], atol=1e-5)
  np.testing.assert_allclose(got[1], ours["pooled_output"], atol=1e-5)
