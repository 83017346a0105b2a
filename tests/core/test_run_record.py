"""The run record: written once at the first start, checked on resume, read
by export_savedmodel and convert_checkpoint (which refuse a model config
that fits the weights' shapes but not the weights)."""

import json
import os
import shlex
import shutil
import sys

import pytest

from albert_tf.core import experiment_config as ec
from albert_tf.core import run_record
from albert_tf.tasks import pretraining
from albert_toolkit import output_files
from tests.testing import pretrain_testutil as tu
from tests.testing import tool_server
from tests.testing.repo_paths import ROOT


@pytest.fixture(scope="module")
def train_file(tmp_path_factory):
  return tu.worker_pretraining_data(tmp_path_factory)[0]


# The tiny recipe, 2 steps (tests/testing/pretrain_testutil.py).
config, run = tu.tiny_experiment, tu.run_tiny


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
  """A finished 2-step tiny pretraining run (read, or copied to change)."""
  return tu.worker_tiny_run(tmp_path_factory)


def copy_run(run_dir, tmp_path):
  path = str(tmp_path / "copy")
  shutil.copytree(run_dir, path)
  return path


def test_record_is_written_once_with_what_export_needs(run_dir):
  with open(os.path.join(run_dir, run_record.RECORD_NAME)) as f:
    facts = json.load(f)
  assert facts["task"] == "pretraining"
  assert facts["spm_model_file"].endswith("spm.model")
  assert facts["vocab_sha256"] == output_files.file_sha256(facts["spm_model_file"])
  assert facts["do_lower_case"] is True
  record = run_record.read(run_dir)
  assert record.model["num_hidden_layers"] == tu.TINY_LAYERS
  # What follows from the config is recorded once, in the config.
  assert record.config["data"]["seq_length"] == 64
  assert "max_seq_length" not in facts and "seq_length" not in facts
  assert not [n for n in os.listdir(run_dir) if ".tmp-" in n]


def test_a_record_of_an_older_version_names_the_vocabulary_today(run_dir,
                                                                   tmp_path):
  """Records written before WordPiece call the vocabulary's hash
  spm_sha256: it is read as vocab_sha256, so a resume still checks it."""
  old = str(tmp_path / "old")
  shutil.copytree(run_dir, old)
  path = os.path.join(old, run_record.RECORD_NAME)
  with open(path) as f:
    facts = json.load(f)
  facts["spm_sha256"] = facts.pop("vocab_sha256")
  with open(path, "w") as f:
    json.dump(facts, f)
  read = run_record.read(old).facts
  assert "spm_sha256" not in read
  assert read["vocab_sha256"] == output_files.file_sha256(
      facts["spm_model_file"])


def test_resume_with_safe_change_is_logged_not_rewritten(run_dir, train_file,
                                                         tmp_path):
  model_dir = copy_run(run_dir, tmp_path)
  before = open(os.path.join(model_dir, run_record.CONFIG_NAME)).read()
  result = run(config(train_file, **{"trainer.train_steps": 4}), model_dir)
  assert result["train"]["step"] == 4
  assert open(os.path.join(model_dir, run_record.CONFIG_NAME)).read() == before
  with open(os.path.join(model_dir, run_record.CHANGES_NAME)) as f:
    lines = [json.loads(line) for line in f]
  assert len(lines) == 1
  assert lines[0]["changes"] == {"trainer.train_steps": [2, 4]}


@pytest.mark.parametrize("field,value", [
    ("model.num_hidden_layers", 3), ("model.num_attention_heads", 2),
    ("model.hidden_act", "relu"), ("optimizer.learning_rate", 0.5)])
def test_resume_refuses_same_shape_model_changes(run_dir, train_file,
                                                 tmp_path, field, value):
  """Same variable shapes, a different model: refused, nothing logged."""
  model_dir = copy_run(run_dir, tmp_path)
  with pytest.raises(ValueError) as e:
    run(config(train_file, **{field: value, "trainer.train_steps": 4}),
        model_dir)
  assert str(e.value).startswith(f"{field} is {value!r} but the run record")
  assert not os.path.exists(os.path.join(model_dir, run_record.CHANGES_NAME))


def test_changed_batch_size_needs_data_position_reset(run_dir, train_file,
                                                      tmp_path):
  """Restoring the old iterator would fail with `Incompatible shapes`: the
  Trainer resumes with restore_data_position=False instead."""
  model_dir = copy_run(run_dir, tmp_path)
  changed = {"trainer.train_steps": 4, "data.global_batch_size": 8}
  assert run(config(train_file, **changed), model_dir)["train"]["step"] == 4
  with open(os.path.join(model_dir, run_record.CHANGES_NAME)) as f:
    assert json.loads(f.readline())["data_position_reset"]


def copy_data(train, path):
  """`train` and its summary under another name."""
  shutil.copy(train, path)
  with open(train + output_files.SUMMARY_SUFFIX) as f:
    summary = json.load(f)
  count = summary["output_files"][train]
  summary["output_files"] = summary["records_per_file"] = {path: count}
  with open(path + output_files.SUMMARY_SUFFIX, "w") as f:
    json.dump(summary, f)
  return path


def test_changed_input_path_reads_the_new_files(train_file, tmp_path):
  """Today the restored iterator silently keeps reading the old files. Here
  the old file is gone: the resumed run works only on the new one."""
  old = copy_data(train_file, str(tmp_path / "old.tfrecord"))
  model_dir = str(tmp_path / "run")
  run(config(old, **{"data.eval_input_path": old}), model_dir)
  os.remove(old)
  new = copy_data(train_file, str(tmp_path / "new.tfrecord"))
  changed = {"trainer.train_steps": 4, "data.eval_input_path": new}
  assert run(config(new, **changed), model_dir)["train"]["step"] == 4
  with open(os.path.join(model_dir, run_record.CHANGES_NAME)) as f:
    assert json.loads(f.readline())["data_position_reset"]


def test_other_task_in_same_dir_is_refused(run_dir):
  with pytest.raises(ValueError, match="task is 'sentence_prediction' but"):
    run_record.prepare(run_dir, ec.load_experiment_config(
        pretraining.PretrainingExperimentConfig, [tu.TINY_RECIPE]),
                       {"task": "sentence_prediction"})


def tool(*args):
  return tool_server.run([sys.executable, "-m"] + list(args), cwd=ROOT,
                         env=tool_server.tool_env(), capture_output=True,
                         text=True, timeout=300)


@pytest.mark.slow
def test_export_from_run_dir_needs_no_retyping_and_refuses_other_model(
    run_dir, tmp_path):
  ok = tool("albert_tf.export_savedmodel", f"--model_dir={run_dir}",
            f"--export_dir={tmp_path / 'o k'}")
  assert ok.returncode == 0, ok.stderr
  assert "out pooled_output: float32 (None, 64)" in ok.stdout
  # The hint's command works when pasted (the path has a space).
  (hint,) = [l for l in ok.stdout.splitlines() if "saved_model_cli" in l]
  assert shlex.split(hint.split(": ", 1)[1])[-1] == str(tmp_path / "o k" / "1")
  for flag, error in (("--params_override=model.num_hidden_layers=3",
                       f"model.num_hidden_layers is 3 but the run record of "
                       f"{run_dir}"),
                      # The run's export is an encoder's: ids of any length.
                      ("--max_seq_length=32", "--max_seq_length does not "
                       "apply to the encoder export")):
    bad = tool("albert_tf.export_savedmodel", f"--model_dir={run_dir}",
               f"--export_dir={tmp_path / 'bad'}", flag)
    assert bad.returncode == 1
    assert f"ERROR: {error}" in bad.stderr
  assert not os.path.exists(tmp_path / "bad")


@pytest.mark.slow
def test_convert_reads_the_record_and_refuses_other_model(run_dir, tmp_path):
  ckpt = os.path.join(run_dir, "checkpoints", "ckpt-2")
  bad = tool("albert_tf.convert_checkpoint", "--from=albert_tf", "--to=tf1",
             f"--input_checkpoint={ckpt}", f"--output_dir={tmp_path / 'b'}",
             "--config_file=pretraining/albert_tiny_cpu.yaml",
             "--params_override=model.hidden_act=relu")
  assert bad.returncode == 1
  assert "ERROR: model.hidden_act is 'relu' but the run record" in bad.stderr
  ok = tool("albert_tf.convert_checkpoint", "--from=albert_tf", "--to=tf1",
            f"--input_checkpoint={ckpt}", f"--output_dir={tmp_path / 'tf1'}")
  assert ok.returncode == 0, ok.stderr
  with open(tmp_path / "tf1" / "albert_config.json") as f:
    assert json.load(f)["num_hidden_layers"] == tu.TINY_LAYERS
  # The run's SentencePiece model travels with it, as the help says.
  spm = run_record.read(run_dir).facts["spm_model_file"]
  with open(spm, "rb") as f, open(
      tmp_path / "tf1" / os.path.basename(spm), "rb") as g:
    assert f.read() == g.read()
  # The converted checkpoint's albert_config.json guards it in turn.
  bad = tool("albert_tf.export_savedmodel", "--export_kind=encoder",
             f"--checkpoint={tmp_path / 'tf1' / 'model.ckpt'}",
             f"--export_dir={tmp_path / 'e'}",
             "--config_file=pretraining/albert_tiny_cpu.yaml",
             "--params_override=model.num_attention_heads=2")
  assert bad.returncode == 1
  assert "model.num_attention_heads is 2 but " in bad.stderr
  assert "albert_config.json has 4" in bad.stderr
