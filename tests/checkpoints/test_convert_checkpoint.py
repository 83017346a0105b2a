"""Checkpoint conversion: original TF1 layout <-> albert_tf <-> Model Garden.

TF1 checkpoints are written by the original's TF1 code path and outputs on
the converted weights compared with an independent NumPy forward pass of the
original equations (both in `tests/testing/tf1_reference.py`).
"""

import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.checkpoints import canonical_weights as cw
from albert_tf.checkpoints import conversion as cc
from albert_tf.checkpoints import restore as restore_lib
from albert_tf.modeling.albert_config import AlbertConfig
from albert_tf.modeling.networks.albert_encoder import AlbertEncoder
from albert_tf.modeling.models.albert_pretrainer import AlbertPretrainer
from tests.testing.tf1_reference import (
    TINY,
    SINGLE,
    original_weights,
    save_original,
    restore_with_original_code,
    inputs_for,
    run_model,
    assert_matches_reference,
)

# Ten seconds or more in all: handed out first (tests/conftest.py).
pytestmark = pytest.mark.slow


# --- Tests --------------------------------------------------------------------


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
  assert restore_lib.restore(model, out_dir).path == path
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
  with pytest.raises(cw.CheckpointConversionError) as e:
    cc.convert(prefix2, str(tmp_path / "out"), "tf1", "albert_tf",
               config=dict(TINY, num_hidden_groups=1))
  # One line, however many variables (it listed 20, one a line).
  block = "bert/encoder/transformer/group_1/inner_group_0/"
  assert str(e.value) == (
      f"{prefix2}: 32 variable(s) do not fit the config (wrong "
      "albert_config.json?): group_1/inner_group_0, group_1/inner_group_1 "
      "do not exist with num_hidden_groups=1, inner_group_num=2 "
      f"({block}LayerNorm/beta, {block}LayerNorm/gamma, ... (32 in all))")
  assert not os.path.exists(tmp_path / "out")


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


# --- Model Garden -------------------------------------------------------------


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


def _files(directory):
  return {name: open(os.path.join(directory, name), "rb").read()
          for name in sorted(os.listdir(directory))}


def test_output_into_the_inputs_directory_is_refused(tmp_path):
  """`--from=tf1 --to=tf1 --output_dir=<the input's directory>` replaced the
  release in place: 32 variables -> 25, every cls/* head gone."""
  weights = original_weights(TINY, seed=4)
  prefix = save_original(str(tmp_path / "release"), weights, TINY,
                         name="model.ckpt")
  before = _files(tmp_path / "release")
  for to in ("tf1", "albert_tf"):
    with pytest.raises(cc.CheckpointConversionError) as info:
      cc.convert(prefix, str(tmp_path / "release"), "tf1", to,
                 model="encoder")
    assert str(info.value) == (
        f"--output_dir {tmp_path / 'release'} holds the input checkpoint "
        f"{prefix}: the conversion would overwrite it (its checkpoint files, "
        "albert_config.json); use another directory")
  assert _files(tmp_path / "release") == before


def test_replacing_a_checkpoint_needs_overwrite_and_says_so(tmp_path):
  prefix = save_original(str(tmp_path / "release"), original_weights(
      TINY, seed=5), TINY)
  out = tmp_path / "out"
  cc.convert(prefix, str(out), "tf1", "albert_tf", output_name="old")
  (out / "old.meta").write_bytes(b"the old checkpoint's TF1 graph")
  before = _files(out)
  with pytest.raises(cc.CheckpointConversionError,
                     match=rf"--output_dir {out} already holds checkpoint "
                     rf"{out}/old; use another directory, or pass "
                     "--overwrite to replace it"):
    cc.convert(prefix, str(out), "tf1", "tf1")
  assert _files(out) == before
  said = []
  path, _ = cc.convert(prefix, str(out), "tf1", "tf1", overwrite=True,
                       log=said.append)
  assert said == [f"--overwrite: replacing checkpoint {out}/old in {out} "
                  f"with {out}/model.ckpt"]
  # One checkpoint, the one the config and state file describe; the old
  # one's graph went with it.
  assert [p[:-len(".index")] for p in tf.io.gfile.glob(f"{out}/*.index")] == [
      path]
  assert not (out / "old.meta").exists()
  assert tf.train.latest_checkpoint(str(out)) == path


def test_tf1_chinese_checkpoint_with_wordpiece_vocabulary(tmp_path):
  """The original's Chinese release: relu, a WordPiece vocab_chinese.txt
  beside the checkpoint (no SentencePiece model); the vocabulary travels
  with the converted checkpoint and the model computes the original's
  equations."""
  cfg = dict(SINGLE, hidden_act="relu")
  weights = original_weights(cfg, seed=3)
  source = tmp_path / "albert_tiny_zh"
  prefix = save_original(str(source), weights, cfg)
  os.remove(source / "30k-clean.model")
  vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n" + "".join(
      f"{c}\n" for c in "的一是了我不人在他有这个上们来到时大地为子中你说生国年着")
  (source / "vocab_chinese.txt").write_text(vocab, encoding="utf-8")
  out_dir = str(tmp_path / "converted")
  cc.convert(prefix, out_dir, "tf1", "albert_tf")
  with open(os.path.join(out_dir, "vocab_chinese.txt"), encoding="utf-8") as f:
    assert f.read() == vocab
  assert sorted(os.listdir(out_dir)) == [
      "albert_config.json", "checkpoint", "ckpt.data-00000-of-00001",
      "ckpt.index", "vocab_chinese.txt"]
  config = AlbertConfig.from_json_file(os.path.join(out_dir,
                                                    "albert_config.json"))
  assert config.hidden_act == "relu"
  model = AlbertPretrainer(config)
  restore_lib.restore(model, out_dir)
  assert_matches_reference(model, weights, cfg)
