"""Hugging Face ALBERT directories <-> albert_tf, every head, both ways.

The HF directories are written with NumPy + safetensors in transformers'
names and orientations (tests/testing/hf_testlib.py, no torch); our models
on the converted weights are compared with an independent NumPy forward
pass of the HF layout, and ours -> HF -> ours must round-trip bit-exactly.
"""

import json
import os
import re
import sys

import numpy as np
import pytest
import tensorflow as tf
from safetensors import numpy as safetensors_numpy

from albert_tf.checkpoints import conversion
from albert_tf.checkpoints import hf_files
from albert_tf.checkpoints import restore as restore_lib
from albert_tf.checkpoints.canonical_weights import CheckpointConversionError
from albert_tf.core import run_record
from albert_tf.modeling.albert_config import AlbertConfig
from albert_tf.modeling.models import downstream_models
from albert_tf.modeling.models.albert_pretrainer import AlbertPretrainer
from albert_tf.serving import serving_params
from albert_tf.tasks import all_tasks  # noqa: F401 (registers the tasks)
from albert_tf.tasks import finetuning
from albert_tf.tasks import hf_export
from albert_tf.tasks import hf_models
from albert_tf.tasks import registry
from tests.testing import converted_testlib as converted
from tests.testing import export_testlib
from tests.testing import hf_testlib
from tests.testing import pretrain_testutil
from tests.testing import tool_server
from tests.testing.converted_testlib import BATCH, SEQ
from tests.testing.repo_paths import HF_FIXTURES, ROOT

@pytest.fixture(scope="module")
def spm_file(tmp_path_factory):
  return export_testlib.train_spm(str(tmp_path_factory.mktemp("spm")))


@pytest.fixture(scope="module")
def vocab_size(spm_file):
  import sentencepiece as spm  # pylint: disable=g-import-not-at-top
  return spm.SentencePieceProcessor(model_file=spm_file).get_piece_size()


def _convert(tmp_path, spm_file, vocab, arch, act="gelu_new", **kw):
  config = hf_testlib.hf_config(arch, vocab, act, **kw)
  hf_dir, out = str(tmp_path / "hf"), str(tmp_path / "ours")
  tensors = hf_testlib.write_hf_dir(hf_dir, config, spm_file)
  hf_models.import_hf(hf_dir, out)
  return config, tensors, out


CASES = [
    # 4 layer steps over 2 groups of 2 layers: the schedule and inner layers.
    pytest.param("AlbertForPreTraining", "gelu_new",
                 {"num_hidden_layers": 4, "inner_group_num": 2},
                 marks=pytest.mark.slow),
    ("AlbertForSequenceClassification", "gelu", {"num_labels": 3}),
    ("AlbertForSequenceClassification", "gelu_new",
     {"problem_type": "regression", "id2label": {"0": "LABEL_0"},
      "label2id": {"LABEL_0": 0}}),
    ("AlbertForTokenClassification", "relu", {"num_labels": 5}),
    ("AlbertForQuestionAnswering", "gelu", {}),
    ("AlbertForMultipleChoice", "gelu_new", {}),
]


# Ours -> HF -> ours once more (the other heads: HF -> ours -> HF is equal
# above, and the import is deterministic).
ROUND_TRIPS = ("AlbertForPreTraining", "AlbertForTokenClassification")


@pytest.mark.parametrize("arch,act,kw", CASES,
                         ids=["AlbertForPreTraining"] + [
                             c[0] + ("_regression" if "problem_type" in c[2]
                                     else "") for c in CASES[1:]])
def test_hf_to_ours_matches_numpy_and_round_trips(tmp_path, spm_file,
                                                  vocab_size, arch, act, kw):
  config, tensors, out = _convert(tmp_path, spm_file, vocab_size, arch, act,
                                  **kw)
  task, model = converted.our_model(out)
  if arch == "AlbertForMultipleChoice":
    ids, mask, types = converted.inputs(vocab_size,
                                                shape=(BATCH, 4, SEQ))
    ref = hf_testlib.forward(tensors, config, ids.reshape(-1, SEQ),
                             mask.reshape(-1, SEQ), types.reshape(-1, SEQ))
    got = model(converted.feed(ids, mask, types))["logits"].numpy()
    np.testing.assert_allclose(got, ref["logits"].reshape(BATCH, 4),
                               atol=1e-5)
  else:
    ids, mask, types = converted.inputs(vocab_size)
    ref = hf_testlib.forward(tensors, config, ids, mask, types)
    feed = converted.feed(ids, mask, types)
    if task is None:
      feed["masked_lm_positions"] = np.tile(np.arange(SEQ, dtype=np.int32),
                                            (BATCH, 1))
    got = model(feed)
    if arch == "AlbertForPreTraining":
      np.testing.assert_allclose(got["mlm_logits"], ref["mlm"], atol=1e-5)
      np.testing.assert_allclose(got["sop_logits"], ref["sop"], atol=1e-5)
    elif arch == "AlbertForQuestionAnswering":
      np.testing.assert_allclose(got["start_logits"], ref["logits"][..., 0],
                                 atol=1e-5)
      np.testing.assert_allclose(got["end_logits"], ref["logits"][..., 1],
                                 atol=1e-5)
    else:
      np.testing.assert_allclose(got["logits"], ref["logits"], atol=1e-5)
  if task is not None:
    assert task.name == hf_models.FINETUNED[arch]
    params = task.serving_params({})
    if kw.get("num_labels"):
      assert params.label_names == [f"class_{i}" for i in
                                    range(kw["num_labels"])]
    if "problem_type" in kw:
      assert params.regression and params.label_names == []
    if arch == "AlbertForMultipleChoice":  # any number of choices at export
      assert serving_params.with_settings(
          params, {"num_choices": 5}, "an export",
          recorded_in=out).num_choices == 5

  # ours -> HF: the same tensors and config fields; -> ours again: the same
  # weights, bit for bit.
  back = str(tmp_path / "hf_back")
  hf_export.export_hf(out, back)
  written = safetensors_numpy.load_file(os.path.join(back,
                                                     "model.safetensors"))
  assert sorted(written) == sorted(tensors)
  for name, value in tensors.items():
    np.testing.assert_array_equal(written[name], value, err_msg=name)
  with open(os.path.join(back, "config.json")) as f:
    written_config = json.load(f)
  for field, value in config.items():
    assert written_config[field] == value, field
  if arch not in ROUND_TRIPS:
    return
  again = str(tmp_path / "ours_again")
  hf_models.import_hf(back, again)
  first, second = (converted.stored_tensors(d) for d in (out, again))
  assert sorted(first) == sorted(second)
  for name, value in first.items():
    np.testing.assert_array_equal(second[name], value, err_msg=name)


def test_finetuning_warm_starts_from_a_converted_dir(tmp_path, spm_file,
                                                    vocab_size):
  """trainer.init_checkpoint=OUT: the identity check (model, vocabulary)
  passes and the encoder is the HF one."""
  _, tensors, out = _convert(tmp_path, spm_file, vocab_size,
                             "AlbertForSequenceClassification", num_labels=2)
  task = registry.task_of_record(run_record.read(out))
  task.config.trainer.init_checkpoint = out
  model = task.build_model()
  finetuning.initialize_model(model, task.config)
  np.testing.assert_array_equal(
      model.encoder.embeddings.word_embeddings.numpy(),
      tensors["albert.embeddings.word_embeddings.weight"])


def test_masked_lm_and_bare_model(tmp_path, spm_file, vocab_size):
  """AlbertForMaskedLM (no pooler, no SOP head; decoder stored tied) and
  AlbertModel saved alone (no `albert.` prefix)."""
  config = hf_testlib.hf_config("AlbertForMaskedLM", vocab_size)
  tensors = hf_testlib.hf_weights(config)
  stored = dict(tensors)
  stored["predictions.decoder.weight"] = tensors[
      "albert.embeddings.word_embeddings.weight"]
  stored["predictions.decoder.bias"] = tensors["predictions.bias"]
  hf_dir = str(tmp_path / "mlm")
  hf_testlib.write_hf_dir(hf_dir, config, spm_file, tensors=stored)
  out = str(tmp_path / "mlm_ours")
  _, report = hf_models.import_hf(hf_dir, out)
  assert "tied" in report.skipped["predictions.decoder.weight"]
  _, model = converted.our_model(out)
  ids, mask, types = converted.inputs(vocab_size)
  ref = hf_testlib.forward(tensors, config, ids, mask, types)
  feed = dict(converted.feed(ids, mask, types), masked_lm_positions=np.tile(
      np.arange(SEQ, dtype=np.int32), (BATCH, 1)))
  np.testing.assert_allclose(model(feed)["mlm_logits"], ref["mlm"],
                             atol=1e-5)
  back = str(tmp_path / "mlm_back")
  assert hf_export.export_hf(out, back)[1] == "AlbertForMaskedLM"
  written = safetensors_numpy.load_file(os.path.join(back,
                                                     "model.safetensors"))
  assert sorted(written) == sorted(tensors)  # no pooler, no decoder copy
  for name, value in tensors.items():
    np.testing.assert_array_equal(written[name], value, err_msg=name)
  # Through the original's layout and back: a masked-LM model (no SOP head)
  # fits every layout but Model Garden's, refused before writing.
  tf1_dir, again = str(tmp_path / "mlm_tf1"), str(tmp_path / "mlm_again")
  hf_models.import_hf(hf_dir, tf1_dir, to_layout="tf1")
  conversion.convert(tf1_dir, again, "tf1", "albert_tf", log=None)
  with pytest.raises(CheckpointConversionError, match=(
      "^--to=model_garden: its pretraining layout holds the MLM and SOP "
      "heads together, and this model has no SOP head")):
    conversion.convert(tf1_dir, str(tmp_path / "mg"), "tf1", "model_garden")
  assert not os.path.exists(tmp_path / "mg")
  _, again_model = converted.our_model(again)
  np.testing.assert_allclose(again_model(feed)["mlm_logits"], ref["mlm"],
                             atol=1e-5)
  assert hf_export.export_hf(again, back + "_again")[1] == "AlbertForMaskedLM"
  assert safetensors_numpy.load_file(os.path.join(
      back + "_again", "model.safetensors")).keys() == tensors.keys()
  base = hf_testlib.hf_config("AlbertModel", vocab_size)
  base_dir = str(tmp_path / "base")
  base_tensors = hf_testlib.write_hf_dir(base_dir, base, spm_file)
  assert not any(k.startswith("albert.") for k in base_tensors)
  base_out = str(tmp_path / "base_ours")
  hf_models.import_hf(base_dir, base_out, to_layout="tf1")
  encoder = AlbertPretrainer(AlbertConfig.from_json_file(
      os.path.join(base_out, "albert_config.json"))).encoder
  restore_lib.restore(encoder, base_out)
  ref = hf_testlib.forward(base_tensors, base, ids, mask, types)
  got = encoder(converted.feed(ids, mask, types))
  np.testing.assert_allclose(got["sequence_output"], ref["sequence"],
                             atol=1e-5)
  np.testing.assert_allclose(got["pooled_output"], ref["pooled"], atol=1e-5)


def test_classifier_to_the_original_tf1_layout(tmp_path, spm_file,
                                               vocab_size):
  """--to=tf1: the run_classifier names (output_weights/output_bias), which
  restore() reads into our classifier."""
  config = hf_testlib.hf_config("AlbertForSequenceClassification",
                                vocab_size, num_labels=3)
  hf_dir, out = str(tmp_path / "hf"), str(tmp_path / "tf1")
  tensors = hf_testlib.write_hf_dir(hf_dir, config, spm_file)
  hf_models.import_hf(hf_dir, out, to_layout="tf1")
  ours = AlbertConfig.from_json_file(os.path.join(out, "albert_config.json"))
  model = downstream_models.AlbertClassifier(finetuning.encoder(ours),
                                             num_labels=3)
  report = restore_lib.restore(model, out)
  assert report.layout == "tf1" and "head" in report.restored
  ids, mask, types = converted.inputs(vocab_size)
  ref = hf_testlib.forward(tensors, config, ids, mask, types)
  np.testing.assert_allclose(model(converted.feed(ids, mask, types))["logits"],
                             ref["logits"], atol=1e-5)
  tagger = str(tmp_path / "tagger")
  hf_testlib.write_hf_dir(tagger, hf_testlib.hf_config(
      "AlbertForTokenClassification", vocab_size, num_labels=2), spm_file)
  with pytest.raises(ValueError, match="to=tf1: that layout has no"):
    hf_models.import_hf(tagger, str(tmp_path / "tagger_tf1"),
                        to_layout="tf1")
  # HF's "gelu" is the exact GELU, which the original's code does not have:
  # refused before anything is written (it refused to load such a config).
  exact = str(tmp_path / "exact")
  hf_testlib.write_hf_dir(exact, hf_testlib.hf_config(
      "AlbertForSequenceClassification", vocab_size, "gelu", num_labels=3),
      spm_file)
  with pytest.raises(CheckpointConversionError) as e:
    hf_models.import_hf(exact, str(tmp_path / "exact_tf1"), to_layout="tf1")
  assert str(e.value) == (
      "--to=tf1: hidden_act 'gelu_exact' is not in the original's code, which "
      "has gelu, linear, relu, tanh (its gelu is the tanh approximation); "
      "keep this model in albert_tf or hf")
  assert not os.path.exists(tmp_path / "exact_tf1")
  # Ours spelled gelu_new: the original's name for the same function.
  ours = str(tmp_path / "ours_new")
  conversion.convert(out, str(tmp_path / "ours"), "tf1", "albert_tf",
                     log=None)
  config_path = tmp_path / "ours" / "albert_config.json"
  written = json.loads(config_path.read_text())
  config_path.write_text(json.dumps(dict(written, hidden_act="gelu_new")))
  conversion.convert(str(tmp_path / "ours"), ours, "albert_tf", "tf1",
                     log=None)
  assert json.loads((tmp_path / "ours_new" / "albert_config.json").read_text(
      ))["hidden_act"] == "gelu"


def test_sharded_index_is_read(tmp_path, spm_file, vocab_size):
  config = hf_testlib.hf_config("AlbertModel", vocab_size)
  tensors = hf_testlib.hf_weights(config)
  hf_dir = tmp_path / "sharded"
  hf_testlib.write_hf_dir(str(hf_dir), config, spm_file, tensors={})
  os.remove(hf_dir / "model.safetensors")
  names = sorted(tensors)
  shards = {"model-00001-of-00002.safetensors": names[::2],
            "model-00002-of-00002.safetensors": names[1::2]}
  for shard, keys in shards.items():
    safetensors_numpy.save_file({k: tensors[k] for k in keys},
                                str(hf_dir / shard))
  (hf_dir / "model.safetensors.index.json").write_text(json.dumps(
      {"weight_map": {k: s for s, keys in shards.items() for k in keys}}))
  read = hf_files.read_tensors(str(hf_dir))
  assert sorted(read) == names
  index = hf_dir / "model.safetensors.index.json"
  for text, error in (('{"weight_map": [1]}', ": no weight_map object"),
                      ('{"metadata": {}}', ": no weight_map object"),
                      ('{"weight_map": ', ":1: not valid JSON")):
    index.write_text(text)
    with pytest.raises(hf_files.CheckpointConversionError,
                       match=f"^{re.escape(str(index))}{error}"):
      hf_files.read_tensors(str(hf_dir))


@pytest.mark.slow
def test_converted_classifier_exports_with_hf_label_names(tmp_path, spm_file,
                                                          vocab_size):
  _, _, out = _convert(tmp_path, spm_file, vocab_size,
                       "AlbertForSequenceClassification", num_labels=2)
  path = export_testlib.export(str(tmp_path / "export"), model_dir=out)
  import tensorflow_text  # noqa: F401 pylint: disable=g-import-not-at-top
  loaded = tf.saved_model.load(path)
  result = loaded.signatures["serving_default"](
      text=tf.constant(["the cat sat on the mat", "it was raining"]))
  labels = {x.decode() for x in result["label"].numpy()}
  assert labels <= {"class_0", "class_1"} and labels


def _hf_dir(tmp_path, spm_file, vocab, arch="AlbertForSequenceClassification",
            tensors_fn=None, **config_kw):
  vocab = config_kw.pop("vocab_size", vocab)
  config = hf_testlib.hf_config(arch, vocab, num_labels=2, **config_kw)
  tensors = hf_testlib.hf_weights(config)
  if tensors_fn:
    tensors_fn(tensors)
  hf_dir = str(tmp_path / "bad")
  hf_testlib.write_hf_dir(hf_dir, config, spm_file, tensors=tensors)
  return hf_dir


def _drop_pooler(t):
  del t["albert.pooler.bias"]


def _reshape_ffn(t):
  t["albert.encoder.albert_layer_groups.0.albert_layers.0.ffn.weight"] = (
      np.zeros((5, 16), np.float32))


def _untie(t):
  t["predictions.decoder.weight"] = np.zeros_like(
      t["albert.embeddings.word_embeddings.weight"])


BAD = [
    ({"model_type": "bert"}, None, "model_type='bert'"),
    ({"architectures": ["AlbertForCausalLM"]}, None, "architectures="),
    ({"hidden_act": "quick_gelu"}, None, "hidden_act='quick_gelu'"),
    ({"layer_norm_eps": 1e-5}, None, "layer_norm_eps=1e-05"),
    ({"position_embedding_type": "relative_key"}, None,
     "position_embedding_type='relative_key'"),
    ({"problem_type": "multi_label_classification"}, None, "problem_type="),
    ({"id2label": {"0": "a", "1": "a"}, "label2id": {"a": 1}}, None,
     "config.json: id2label names 'a' twice"),
    ({}, _drop_pooler, "missing: albert.pooler.bias"),
    ({"vocab_size": 600}, None,
     "spiece.model: 500 pieces but config.json vocab_size is 600"),
    ({}, _reshape_ffn, "shape mismatch"),
    ({"architectures": ["AlbertForMaskedLM"]}, _untie,
     "predictions.decoder.weight differs"),
]


@pytest.mark.parametrize("config_kw,tensors_fn,expected", BAD)
def test_bad_input_is_one_line(tmp_path, spm_file, vocab_size, config_kw,
                               tensors_fn, expected):
  if config_kw.get("architectures") == ["AlbertForMaskedLM"]:
    config_kw = dict(config_kw)
    arch = config_kw.pop("architectures")[0]
    config = hf_testlib.hf_config(arch, vocab_size)
    tensors = hf_testlib.hf_weights(config)
    tensors_fn(tensors)
    hf_dir = str(tmp_path / "bad")
    hf_testlib.write_hf_dir(hf_dir, config, spm_file, tensors=tensors)
  else:
    hf_dir = _hf_dir(tmp_path, spm_file, vocab_size, tensors_fn=tensors_fn,
                     **config_kw)
  with pytest.raises(ValueError) as e:
    hf_models.import_hf(hf_dir, str(tmp_path / "out"))
  assert expected in str(e.value) and "\n" not in str(e.value)


def test_output_dir_and_torch_refusals(tmp_path, spm_file, vocab_size):
  hf_dir = _hf_dir(tmp_path, spm_file, vocab_size)
  out = str(tmp_path / "out")
  hf_models.import_hf(hf_dir, out)
  with pytest.raises(ValueError, match="already holds a model"):
    hf_models.import_hf(hf_dir, out)
  hf_models.import_hf(hf_dir, out, overwrite=True)  # a converted run: replaced
  # A conversion that fails replaces nothing.
  bad = str(tmp_path / "bad_shape")
  config = hf_testlib.hf_config("AlbertForSequenceClassification",
                                vocab_size, num_labels=2)
  tensors = hf_testlib.hf_weights(config)
  _reshape_ffn(tensors)
  hf_testlib.write_hf_dir(bad, config, spm_file, tensors=tensors)
  with pytest.raises(ValueError, match="shape mismatch"):
    hf_models.import_hf(bad, out, overwrite=True)
  assert run_record.read(out).facts["converted_from"] == hf_dir
  with pytest.raises(ValueError, match="Hugging Face|run directory"):
    hf_models.import_hf(hf_dir, os.path.join(out, "checkpoints"))
  back = str(tmp_path / "back")
  hf_export.export_hf(out, back)
  with pytest.raises(ValueError, match="already holds a model"):
    hf_export.export_hf(out, back)
  # A directory holding only a file the conversion writes (a user's
  # vocabulary, tokenizer config): refused, the file kept.
  for name, convert in (("spiece.model", hf_models.import_hf),
                        ("tokenizer_config.json", hf_export.export_hf)):
    mine = tmp_path / f"mine_{name}"
    mine.mkdir()
    (mine / name).write_text("mine")
    source = hf_dir if convert is hf_models.import_hf else out
    with pytest.raises(ValueError, match=(
        f"already holds a model or files the conversion writes \\({name}\\); "
        "use another directory, or pass --overwrite to replace them")):
      convert(source, str(mine))
    assert os.listdir(mine) == [name] and (mine / name).read_text() == "mine"
  with pytest.raises(ValueError, match="to=model_garden: that layout has no"):
    hf_models.import_hf(hf_dir, str(tmp_path / "mg"),
                        to_layout="model_garden")
  torch_dir = tmp_path / "torch"
  torch_dir.mkdir()
  (torch_dir / "config.json").write_text(
      (tmp_path / "bad" / "config.json").read_text())
  (torch_dir / "pytorch_model.bin").write_bytes(b"PK\x03\x04")
  try:
    import torch  # noqa: F401 pylint: disable=g-import-not-at-top,unused-import
  except ImportError:
    with pytest.raises(ValueError, match="pytorch_model.bin.*safetensors"):
      hf_files.read_tensors(str(torch_dir))


def test_squad_v2_head_has_no_hf_class():
  class Params:
    squad_head, with_answerability = "xlnet", False

  class Task:
    name = "question_answering"
  with pytest.raises(ValueError, match="no Hugging Face class"):
    hf_export._head_config(Task(), Params())  # pylint: disable=protected-access


@pytest.mark.slow
def test_cli_error_is_one_line(tmp_path, spm_file, vocab_size):
  hf_dir = _hf_dir(tmp_path, spm_file, vocab_size, model_type="bert")
  proc = tool_server.run(
      [sys.executable, "-m", "albert_tf.convert_checkpoint", "--from=hf",
       "--to=albert_tf", f"--input_checkpoint={hf_dir}",
       f"--output_dir={tmp_path / 'out'}"], cwd=ROOT,
      env=tool_server.tool_env(), capture_output=True, text=True)
  assert proc.returncode != 0
  lines = proc.stderr.strip().splitlines()
  assert "model_type='bert'" in lines[-1], proc.stderr
  assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_a_pretraining_run_goes_out_as_albert_for_pretraining(
    tmp_path, tmp_path_factory):
  """A run of our pretraining task (2 steps) -> AlbertForPreTraining ->
  ours again: the run's weights, bit for bit, and its SentencePiece model."""
  _, spm = pretrain_testutil.worker_pretraining_data(tmp_path_factory)
  run = pretrain_testutil.worker_tiny_run(tmp_path_factory)
  back = str(tmp_path / "hf")
  assert hf_export.export_hf(run, back)[1] == "AlbertForPreTraining"
  with open(os.path.join(back, "spiece.model"), "rb") as f, open(spm,
                                                                "rb") as g:
    assert f.read() == g.read()
  again = str(tmp_path / "again")
  hf_models.import_hf(back, again)
  config = AlbertConfig.from_json_file(os.path.join(again,
                                                    "albert_config.json"))
  reference = AlbertPretrainer(config)
  restore_lib.restore(reference, run)
  converted = AlbertPretrainer(config)
  restore_lib.restore(converted, again)
  for a, b in zip(reference.variables, converted.variables):
    np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.name)


# The directories in HF_FIXTURES that transformers itself saved, each with
# transformers' outputs in expected.npz (tools/make_hf_fixtures.py).
FIXTURES = ("model", "pretraining", "masked_lm", "classifier", "regression",
            "token_classification", "question_answering", "multiple_choice")


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir(HF_FIXTURES),
                    reason="no transformers-made fixtures in tests/testdata/hf")
@pytest.mark.parametrize("name", FIXTURES)
def test_transformers_own_directories(tmp_path, name):
  """Our model on a converted transformers directory gives transformers'
  own outputs, and goes back to the same tensors."""
  source = os.path.join(HF_FIXTURES, name)
  out = str(tmp_path / "ours")
  hf_models.import_hf(source, out)
  expected = dict(np.load(os.path.join(source, "expected.npz")))
  feed = converted.feed(*(expected[k].astype(np.int32) for k in (
      "input_ids", "attention_mask", "token_type_ids")))
  task, model = converted.our_model(out)
  if task is None:
    feed["masked_lm_positions"] = np.tile(
        np.arange(feed["input_word_ids"].shape[1], dtype=np.int32),
        (feed["input_word_ids"].shape[0], 1))
    got = dict(model(feed), **model.encoder(feed))
    pairs = {"sequence_output": "hidden_states_last",
             "pooled_output": "pooler_output",
             "mlm_logits": ("prediction_logits" if name == "pretraining"
                            else "logits"), "sop_logits": "sop_logits"}
  else:
    got = model(feed)
    pairs = {"logits": "logits", "start_logits": "start_logits",
             "end_logits": "end_logits"}
  compared = [k for k, v in pairs.items() if v in expected and k in got]
  assert compared
  for ours, theirs in pairs.items():
    if ours in compared:
      np.testing.assert_allclose(got[ours], expected[theirs], atol=1e-5,
                                 err_msg=ours)
  back = str(tmp_path / "back")
  hf_export.export_hf(out, back)
  original = safetensors_numpy.load_file(os.path.join(source,
                                                      "model.safetensors"))
  written = safetensors_numpy.load_file(os.path.join(back,
                                                     "model.safetensors"))
  assert sorted(written) == sorted(original)
  for key, value in original.items():
    np.testing.assert_array_equal(written[key], value, err_msg=key)
