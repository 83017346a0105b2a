"""What --from=hf takes from a config.json and the weight files when they
leave something out or say it twice: transformers' defaults for missing
fields, the class from the stored heads when `architectures` is missing,
and sharded safetensors holding each tensor once, where the index says.
"""

import json
import os
import re

import numpy as np
import pytest
from safetensors import numpy as safetensors_numpy

from albert_tf.checkpoints import hf_files
from albert_tf.checkpoints import restore as restore_lib
from albert_tf.checkpoints.canonical_weights import CheckpointConversionError
from albert_tf.modeling.albert_config import AlbertConfig
from albert_tf.modeling.models.albert_pretrainer import AlbertPretrainer
from albert_tf.tasks import all_tasks  # noqa: F401 (registers the tasks)
from albert_tf.tasks import hf_models
from tests.testing import converted_testlib as converted
from tests.testing import hf_testlib
from tests.testing.repo_paths import HF_FIXTURES

# The 600-piece SentencePiece model of the transformers-made fixtures.
SPM = os.path.join(HF_FIXTURES, "model", "spiece.model")
VOCAB = 600


def _write(directory, config, drop=(), tensors=None):
  """An HF directory of `config` with the fields `drop` left out of its
  config.json; returns the tensors."""
  tensors = hf_testlib.write_hf_dir(str(directory), config, SPM,
                                    tensors=tensors)
  stored = {k: v for k, v in config.items() if k not in drop}
  (directory / "config.json").write_text(json.dumps(stored))
  return tensors


def _encoder_output(out, ids, mask, types):
  config = AlbertConfig.from_json_file(os.path.join(out, "albert_config.json"))
  encoder = AlbertPretrainer(config).encoder
  restore_lib.restore(encoder, out)
  return config, encoder(converted.feed(ids, mask, types))


# --- Missing config.json fields: transformers' defaults -----------------------


def test_missing_head_count_is_transformers_default(tmp_path):
  """No weight shape shows num_attention_heads: a config.json without it
  runs with transformers' 64 heads, and so must the converted model."""
  config = hf_testlib.hf_config("AlbertModel", VOCAB, hidden_size=64,
                                num_attention_heads=4)
  tensors = _write(tmp_path / "hf", config, drop=["num_attention_heads"])
  out = str(tmp_path / "ours")
  hf_models.import_hf(str(tmp_path / "hf"), out)
  ids, mask, types = converted.inputs(VOCAB)
  ours, got = _encoder_output(out, ids, mask, types)
  assert ours.num_attention_heads == 64
  want = hf_testlib.forward(tensors, dict(config, num_attention_heads=64),
                            ids, mask, types)["sequence"]
  np.testing.assert_allclose(got["sequence_output"], want, atol=1e-5)
  # The head count matters: 4 heads give other outputs.
  other = hf_testlib.forward(tensors, config, ids, mask, types)["sequence"]
  assert not np.allclose(other, want, atol=1e-3)


@pytest.mark.parametrize("field,expected", [
    # hidden 16 does not divide into transformers' 64 heads.
    ("num_attention_heads", "must be divisible by num_attention_heads (64)"),
    # 30000 rows expected; the tokenizer and weights have 600.
    ("vocab_size", "600 pieces"),
])
def test_an_error_a_default_caused_names_the_missing_field(tmp_path, field,
                                                           expected):
  config = hf_testlib.hf_config("AlbertForSequenceClassification", VOCAB,
                                num_labels=2)
  _write(tmp_path / "hf", config, drop=[field])
  with pytest.raises(ValueError) as e:
    hf_models.import_hf(str(tmp_path / "hf"), str(tmp_path / "out"))
  message = str(e.value)
  assert expected in message and "\n" not in message
  default = {"num_attention_heads": 64, "vocab_size": 30000}[field]
  assert (f"config.json leaves out {field}: transformers' default(s) "
          f"{field}={default} taken") in message


@pytest.mark.parametrize("value", [2.0, "2", True])
def test_a_size_that_is_not_an_integer_is_refused(tmp_path, value):
  config = hf_testlib.hf_config("AlbertModel", VOCAB,
                                num_hidden_layers=value)
  hf_testlib.write_hf_dir(str(tmp_path / "hf"), config, SPM,
                          tensors=hf_testlib.hf_weights(dict(
                              config, num_hidden_layers=2)))
  with pytest.raises(ValueError, match=re.escape(
      f"config.json: num_hidden_layers={value!r}: must be an integer")):
    hf_models.import_hf(str(tmp_path / "hf"), str(tmp_path / "out"))


# --- No `architectures`: the class of the stored heads ------------------------


def test_no_architectures_with_a_classifier_is_refused(tmp_path):
  """classifier.* with the pooler is sequence classification or multiple
  choice: refused naming the head, never dropped."""
  config = hf_testlib.hf_config("AlbertForSequenceClassification", VOCAB,
                                num_labels=2)
  _write(tmp_path / "hf", config, drop=["architectures"])
  with pytest.raises(ValueError) as e:
    hf_models.import_hf(str(tmp_path / "hf"), str(tmp_path / "out"))
  message = str(e.value)
  assert message.startswith(str(tmp_path / "hf" / "config.json"))
  assert ("no architectures field, and the stored head classifier.bias, "
          "classifier.weight fits AlbertForSequenceClassification or "
          "AlbertForMultipleChoice") in message
  assert not os.path.exists(tmp_path / "out")


# --- An untied MLM decoder ----------------------------------------------------


def test_an_untied_decoder_that_is_not_stored_is_refused(tmp_path):
  """`tie_word_embeddings: false` with no stored decoder: transformers starts
  the decoder from random weights, so our tied head would be another model.
  Stored and equal to the embeddings it converts; without an MLM head the
  field does not matter."""
  config = hf_testlib.hf_config("AlbertForMaskedLM", VOCAB,
                                tie_word_embeddings=False)
  tensors = _write(tmp_path / "hf", config)
  with pytest.raises(CheckpointConversionError) as e:
    hf_models.import_hf(str(tmp_path / "hf"), str(tmp_path / "ours"))
  assert str(e.value) == (
      f"{tmp_path / 'hf' / 'config.json'}: tie_word_embeddings=False: "
      "model.safetensors holds no predictions.decoder.weight, so transformers "
      "would start the MLM decoder from random weights (albert_tf ties it to "
      "the word embeddings)")
  tensors["predictions.decoder.weight"] = tensors[
      "albert.embeddings.word_embeddings.weight"]
  _write(tmp_path / "stored", config, tensors=tensors)
  hf_models.import_hf(str(tmp_path / "stored"), str(tmp_path / "ours"))
  assert any(k.startswith("mlm_head/")
             for k in converted.stored_tensors(str(tmp_path / "ours")))
  encoder_only = hf_testlib.hf_config("AlbertModel", VOCAB,
                                      tie_word_embeddings=False)
  _write(tmp_path / "encoder", encoder_only)
  hf_models.import_hf(str(tmp_path / "encoder"), str(tmp_path / "enc_ours"))


@pytest.mark.parametrize("arch", ["AlbertForTokenClassification",
                                  "AlbertForMaskedLM", "AlbertModel"])
def test_no_architectures_converts_the_one_class_its_heads_fit(tmp_path,
                                                               arch):
  config = hf_testlib.hf_config(arch, VOCAB, num_labels=3)
  tensors = _write(tmp_path / "hf", config, drop=["architectures"])
  out = str(tmp_path / "ours")
  _, report = hf_models.import_hf(str(tmp_path / "hf"), out)
  assert not report.skipped
  stored = converted.stored_tensors(out)
  ids, mask, types = converted.inputs(VOCAB)
  ref = hf_testlib.forward(tensors, config, ids, mask, types)
  if arch == "AlbertForTokenClassification":
    task, model = converted.our_model(out)
    assert task.name == "tagging"
    np.testing.assert_allclose(
        model(converted.feed(ids, mask, types))["logits"], ref["logits"],
        atol=1e-5)
  elif arch == "AlbertForMaskedLM":
    assert any(k.startswith("mlm_head/") for k in stored)
    _, model = converted.our_model(out)
    feed = dict(converted.feed(ids, mask, types),
                masked_lm_positions=np.tile(
                    np.arange(converted.SEQ, dtype=np.int32),
                    (converted.BATCH, 1)))
    np.testing.assert_allclose(model(feed)["mlm_logits"], ref["mlm"],
                               atol=1e-5)
  else:
    _, got = _encoder_output(out, ids, mask, types)
    np.testing.assert_allclose(got["pooled_output"], ref["pooled"],
                               atol=1e-5)


# --- Sharded safetensors ------------------------------------------------------


SHARDS = ("model-00001-of-00002.safetensors",
          "model-00002-of-00002.safetensors")


def _sharded(tmp_path, edit):
  """A sharded classifier directory: tensors alternately in two shards;
  `edit(shards, weight_map)` changes them before they are written."""
  config = hf_testlib.hf_config("AlbertForSequenceClassification", VOCAB,
                                num_labels=2)
  tensors = hf_testlib.hf_weights(config)
  hf_dir = tmp_path / "sharded"
  hf_testlib.write_hf_dir(str(hf_dir), config, SPM, tensors={})
  os.remove(hf_dir / "model.safetensors")
  names = sorted(tensors)
  shards = {SHARDS[0]: {k: tensors[k] for k in names[::2]},
            SHARDS[1]: {k: tensors[k] for k in names[1::2]}}
  weight_map = {k: s for s, held in shards.items() for k in held}
  edit(shards, weight_map)
  for shard, held in shards.items():
    safetensors_numpy.save_file(held, str(hf_dir / shard))
  (hf_dir / "model.safetensors.index.json").write_text(json.dumps(
      {"metadata": {}, "weight_map": weight_map}))
  return str(hf_dir), tensors


def _copy_in_second(shards, weight_map):
  del weight_map
  name = next(iter(shards[SHARDS[0]]))
  shards[SHARDS[1]][name] = shards[SHARDS[0]][name] + 1.0


def _misfiled(shards, weight_map):
  del shards
  name = sorted(weight_map)[0]
  weight_map[name] = SHARDS[1]


def _unlisted(shards, weight_map):
  del weight_map
  shards[SHARDS[1]]["extra.weight"] = np.zeros(3, np.float32)


@pytest.mark.parametrize("edit,expected", [
    (_copy_in_second, "tensor {name} is stored twice, in {0} and {1}$"),
    (_misfiled, "tensor {name} is stored in {0} but the weight_map "
                "assigns it to {1}$"),
    (_unlisted, "tensor extra.weight is stored in {1} but the weight_map "
                "assigns it to no shard$"),
])
def test_shards_hold_each_tensor_once_where_the_index_says(tmp_path, edit,
                                                           expected):
  hf_dir, tensors = _sharded(tmp_path, edit)
  name = sorted(tensors)[0]
  index = os.path.join(hf_dir, "model.safetensors.index.json")
  want = re.escape(f"{index}: ") + re.escape(
      expected.format(*SHARDS, name=name).rstrip("$")) + "$"
  with pytest.raises(ValueError, match=want):
    hf_files.read_tensors(hf_dir)
  with pytest.raises(ValueError, match=want):
    hf_models.import_hf(hf_dir, str(tmp_path / "out"))

