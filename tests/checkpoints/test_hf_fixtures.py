"""Hugging Face models made by transformers itself, converted: same outputs.

tests/testdata/hf/ holds tiny random ALBERT models of every transformers
head class, saved by transformers 5.24 (`save_pretrained`, safetensors),
with transformers' (torch's) outputs on fixed inputs in `expected.npz`
(tools/make_hf_fixtures.py). `convert_checkpoint --from=hf --to=albert_tf`
of each, restored into our model, must give those outputs: the encoder's
last hidden state (and pooled output) and every head's logits. The
conversion runs in this process (`hf_models.import_hf`, what the command
calls); one fixture goes through the command itself. The classifier saved
in float16 and bfloat16 converts as its float32 values.
"""

import json
import os
import shutil
import struct
import sys

import numpy as np
import pytest
import tensorflow as tf
from safetensors import numpy as safetensors_numpy

pytest.importorskip(
    "albert_tf.checkpoints.hf_checkpoint",
    reason="the Hugging Face weight converter (convert_checkpoint --from=hf) "
    "is not in this tree")

# pylint: disable=g-import-not-at-top,wrong-import-position
from albert_tf.checkpoints import hf_files
from albert_tf.checkpoints import restore as restore_lib
from albert_tf.core import run_record
from albert_tf.modeling.albert_config import AlbertConfig
from albert_tf.modeling.models.albert_pretrainer import AlbertPretrainer
from albert_tf.modeling.networks.albert_encoder import AlbertEncoder
from albert_tf.tasks import all_tasks  # noqa: F401 (registers the tasks)
from albert_tf.tasks import hf_models
from albert_tf.tasks import registry
from tests.testing import tool_server
from tests.testing.repo_paths import HF_FIXTURES

ATOL = 1e-5

# fixture -> {our output: transformers' output} (besides the encoder's).
HEADS = {
    "model": {},
    "pretraining": {"mlm_logits": "prediction_logits",
                    "sop_logits": "sop_logits"},
    "masked_lm": {"mlm_logits": "logits"},
    "classifier": {"logits": "logits"},
    "regression": {"logits": "logits"},
    "question_answering": {"start_logits": "start_logits",
                           "end_logits": "end_logits"},
    "token_classification": {"logits": "logits"},
    "multiple_choice": {"logits": "logits"},
}


def _convert(name, tmp_path, command=False):
  out = str(tmp_path / name)
  if not command:
    hf_models.import_hf(os.path.join(HF_FIXTURES, name), out)
    return out
  result = tool_server.run(
      [sys.executable, "-m", "albert_tf.convert_checkpoint", "--from=hf",
       "--to=albert_tf",
       f"--input_checkpoint={os.path.join(HF_FIXTURES, name)}",
       f"--output_dir={out}"], capture_output=True, text=True,
      env=tool_server.tool_env())
  assert result.returncode == 0, result.stderr[-2000:]
  return out


def _config(out):
  record = run_record.read(out)
  if record is None:
    return AlbertConfig.from_json_file(os.path.join(out, "albert_config.json"))
  return registry.task_of_record(record).build_model().encoder.config


def _head_model(out):
  """The converted directory's whole model (a task's, or the pretrainer)."""
  record = run_record.read(out)
  if record is None:
    model = AlbertPretrainer(_config(out))
    restore_lib.restore(model, out, allow_missing_heads=True)
    return model
  model = registry.task_of_record(record).build_model()
  restore_lib.restore(model, out)
  return model


def _feed(expected):
  return {"input_word_ids": expected["input_ids"],
          "input_mask": expected["attention_mask"],
          "input_type_ids": expected["token_type_ids"]}


def _flat(feed):
  """[batch, choices, seq] -> [batch * choices, seq]."""
  return {k: v.reshape(-1, v.shape[-1]) for k, v in feed.items()}


def _check(name, out):
  """Our outputs on the converted `out` are transformers' (expected.npz)."""
  expected = dict(np.load(os.path.join(HF_FIXTURES, name, "expected.npz")))
  feed = _feed(expected)
  encoder = AlbertEncoder(_config(out))
  restore_lib.restore(encoder, out, parts="encoder")
  encoded = encoder(_flat(feed))
  seq = expected["input_ids"].shape[-1]
  np.testing.assert_allclose(
      encoded["sequence_output"].numpy(),
      expected["hidden_states_last"].reshape(-1, seq,
                                             encoded["sequence_output"].shape[-1]),
      atol=ATOL)
  if "pooler_output" in expected:
    np.testing.assert_allclose(encoded["pooled_output"].numpy(),
                               expected["pooler_output"], atol=ATOL)
  heads = HEADS[name]
  if not heads:
    return
  if "mlm_logits" in heads:
    batch = expected["input_ids"].shape[0]
    feed["masked_lm_positions"] = np.tile(np.arange(seq, dtype=np.int32),
                                          (batch, 1))
  got = _head_model(out)(feed)
  for ours, theirs in heads.items():
    want = expected[theirs]
    np.testing.assert_allclose(np.asarray(got[ours]).reshape(want.shape),
                               want, atol=ATOL, err_msg=f"{name}: {ours}")


@pytest.mark.parametrize("name", sorted(HEADS))
def test_converted_fixture_gives_transformers_outputs(tmp_path, name):
  _check(name, _convert(name, tmp_path))


@pytest.mark.slow  # ~20 s on 2 busy cores: the command's own process
def test_the_command_converts_a_transformers_5_directory(tmp_path):
  """convert_checkpoint --from=hf on the fixture saved with tokenizer.json
  only (no spiece.model), as transformers 5 saves."""
  name = "token_classification"
  assert not os.path.exists(os.path.join(HF_FIXTURES, name, "spiece.model"))
  out = _convert(name, tmp_path, command=True)
  _check(name, out)


HALF = {"F16": np.float16, "BF16": tf.bfloat16.as_numpy_dtype}


def _write_half(path, tensors, dtype):
  """`tensors` stored as `dtype` (F16 or BF16) in a safetensors file written
  from the format itself (little-endian u64 header size, JSON header, data),
  not by the library that reads it."""
  header, chunks, offset = {"__metadata__": {"format": "pt"}}, [], 0
  for name in sorted(tensors):
    data = tensors[name].astype(HALF[dtype]).tobytes()
    header[name] = {"dtype": dtype, "shape": list(tensors[name].shape),
                    "data_offsets": [offset, offset + len(data)]}
    chunks.append(data)
    offset += len(data)
  raw = json.dumps(header).encode()
  raw += b" " * (-len(raw) % 8)
  with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(raw)) + raw + b"".join(chunks))


@pytest.mark.parametrize("dtype", sorted(HALF))
def test_half_precision_weights_convert_as_their_float32_values(tmp_path,
                                                                dtype):
  """A directory saved in float16 or bfloat16 (transformers' `torch_dtype`)
  reads as exactly the stored values and converts to the checkpoint a
  float32 directory of those values gives."""
  source = os.path.join(HF_FIXTURES, "classifier")
  tensors = hf_files.read_tensors(source)
  values = {k: v.astype(HALF[dtype]).astype(np.float32)
            for k, v in tensors.items()}
  assert any(not np.array_equal(values[k], tensors[k]) for k in tensors)
  dirs = {}
  for kind in ("half", "float32"):
    dirs[kind] = str(tmp_path / kind)
    shutil.copytree(source, dirs[kind])
  _write_half(os.path.join(dirs["half"], hf_files.WEIGHTS_NAME), tensors,
              dtype)
  safetensors_numpy.save_file(
      values, os.path.join(dirs["float32"], hf_files.WEIGHTS_NAME),
      metadata={"format": "pt"})
  read = hf_files.read_tensors(dirs["half"])
  assert sorted(read) == sorted(values)
  for name, value in values.items():
    np.testing.assert_array_equal(np.asarray(read[name], np.float32), value,
                                  err_msg=name)
  converted = {}
  for kind, directory in dirs.items():
    out = str(tmp_path / f"{kind}_converted")
    hf_models.import_hf(directory, out)
    reader = tf.train.load_checkpoint(os.path.join(out, "checkpoints"))
    converted[kind] = {  # the weights (the identity names the source)
        name: reader.get_tensor(name) for name, stored in
        reader.get_variable_to_dtype_map().items() if stored == tf.float32}
  assert sorted(converted["half"]) == sorted(converted["float32"])
  assert len(converted["half"]) == len(tensors)
  for name, value in converted["float32"].items():
    np.testing.assert_array_equal(converted["half"][name], value,
                                  err_msg=name)
