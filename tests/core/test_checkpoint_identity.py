"""A checkpoint knows what it is (checkpoints/identity.py): its model
config, task and vocabulary travel inside it, and resume, export,
conversion and warm start check them first; a run directory whose record
is missing or edited is not trusted."""

import json
import os
import re
import shutil

import pytest
import tensorflow as tf

from albert_tf.checkpoints import conversion
from albert_tf.checkpoints import identity
from albert_tf.core import checkpoint_config
from albert_tf.core import run_record
from albert_tf.core import train_lib
from albert_tf.tasks import pretraining
from albert_tf.tasks import export as tasks_export
from albert_tf.tasks import sentence_prediction
from albert_toolkit import output_files
from tests.testing import export_testlib
from tests.testing import finetune_testlib
from tests.testing import pretrain_testutil as tu

# Ten seconds or more in all: handed out first (tests/conftest.py).
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def train_file(tmp_path_factory):
  return tu.worker_pretraining_data(tmp_path_factory)[0]


# The tiny recipe, 2 steps (tests/testing/pretrain_testutil.py).
config, run = tu.tiny_experiment, tu.run_tiny


@pytest.fixture(scope="module")
def runs(train_file, tmp_path_factory):
  """Run A (the worker's tiny run: gelu, 1 layer) and run B (relu, 3
  layers), 2 steps each; tests change copies of them only."""
  base = tmp_path_factory.mktemp("identity")
  a, b = tu.worker_tiny_run(tmp_path_factory), str(base / "b")
  run(config(train_file, **{"model.hidden_act": "relu",
                            "model.num_hidden_layers": 3}), b)
  return a, b, base


def ckpt(model_dir, step=2):
  return os.path.join(model_dir, "checkpoints", f"ckpt-{step}")


def test_every_checkpoint_carries_its_identity(runs, train_file):
  a, _, _ = runs
  saved = identity.read(ckpt(a))
  record = run_record.read(a)
  assert saved["model"] == record.model
  assert saved["updates"] == 2
  assert saved["facts"]["task"] == "pretraining"
  assert saved["facts"]["vocab_sha256"] == record.facts["vocab_sha256"]
  assert saved["facts"]["vocab_sha256"] == output_files.file_sha256(
      os.path.join(os.path.dirname(train_file), "spm.model"))


def test_the_best_checkpoint_carries_it_too(train_file, tmp_path):
  model_dir = str(tmp_path / "best_run")
  run(config(train_file, **{"trainer.eval_interval": 2}), model_dir,
      "train_and_eval")
  saved = identity.read(os.path.join(model_dir, "best", "ckpt"))
  assert saved["updates"] == 2
  assert saved["model"] == run_record.read(model_dir).model


def test_export_refuses_another_runs_checkpoint(runs):
  a, b, base = runs
  with pytest.raises(ValueError, match=(
      rf"model\.hidden_act is 'gelu' in the run record of {re.escape(a)} but "
      rf"checkpoint {re.escape(ckpt(b))} was trained with 'relu'")):
    export_testlib.export(str(base / "x"), model_dir=a, checkpoint=ckpt(b))
  assert not os.path.exists(base / "x")


def test_a_checkpoint_of_a_run_with_other_settings_is_refused(
    runs, train_file, tmp_path):
  """Two runs of one model, task and vocabulary: an export of run A with
  run B's checkpoint passed the identity check and served B's weights
  under A's settings (for fine-tuning: another run's labels or text
  inputs). A run's checkpoint evaluated in a directory of its own, with
  the run's settings, stays possible."""
  a, _, _ = runs
  other = str(tmp_path / "other")
  run(config(train_file, **{"optimizer.learning_rate": 0.5}), other)
  mine = run_record.read(a).config["optimizer"]["learning_rate"]
  error = _export_error(lambda: export_testlib.export(
      str(tmp_path / "x"), model_dir=a, checkpoint=ckpt(other)))
  assert error == (
      f"optimizer.learning_rate is {mine!r} but the run record of {other} "
      f"has 0.5; checkpoint {ckpt(other)} belongs to that run; use "
      f"--model_dir={other}")
  assert not os.path.exists(tmp_path / "x")
  c = config(train_file)
  result = train_lib.run_experiment(pretraining.PretrainingTask(c), c,
                                    str(tmp_path / "eval"), "eval",
                                    checkpoint=ckpt(a))
  assert result["checkpoint"] == ckpt(a)


def test_eval_refuses_another_models_checkpoint(runs, train_file, tmp_path):
  _, b, _ = runs
  c = config(train_file)
  with pytest.raises(ValueError, match=r"model\.(hidden_act|num_hidden_"
                     r"layers) is .* but checkpoint .*b/checkpoints/ckpt-2"):
    train_lib.run_experiment(pretraining.PretrainingTask(c), c,
                             str(tmp_path / "eval"), "eval",
                             checkpoint=ckpt(b))


def _copied_out(model_dir, directory):
  """`model_dir`'s ckpt-2 copied into `directory` (outside any run)."""
  directory.mkdir()
  for name in os.listdir(os.path.join(model_dir, "checkpoints")):
    if name.startswith("ckpt-2."):
      shutil.copy(os.path.join(model_dir, "checkpoints", name),
                  directory / name)
  return str(directory / "ckpt-2")


def test_a_copied_checkpoint_keeps_its_model(runs, tmp_path):
  a, _, _ = runs
  prefix = _copied_out(a, tmp_path / "copied")
  with pytest.raises(ValueError, match=r"model\.num_hidden_layers is 3 but "
                     r"checkpoint .*ckpt-2's own record has "
                     f"{tu.TINY_LAYERS}"):
    checkpoint_config.model_config_for([], "model.num_hidden_layers=3",
                                checkpoint=prefix)
  model_config, _ = checkpoint_config.model_config_for([], "", checkpoint=prefix)
  assert model_config.as_dict() == run_record.read(a).model
  path, _ = conversion.convert(prefix, str(tmp_path / "tf1"), "albert_tf",
                               "tf1", config=model_config)
  with open(tmp_path / "tf1" / "albert_config.json") as f:
    assert json.load(f)["num_hidden_layers"] == tu.TINY_LAYERS
  assert path.startswith(str(tmp_path / "tf1"))


def test_resume_refuses_a_checkpoint_of_another_model(runs, tmp_path):
  """B's checkpoint copied into a copy of A as its newest: refused, naming
  the field, before anything is restored."""
  a, b, _ = runs
  copy = str(tmp_path / "a_copy")
  shutil.copytree(a, copy)
  for name in os.listdir(os.path.join(b, "checkpoints")):
    if name.startswith("ckpt-2."):
      shutil.copy(os.path.join(b, "checkpoints", name), os.path.join(
          copy, "checkpoints", name.replace("ckpt-2", "ckpt-3")))
  with open(os.path.join(copy, "checkpoints", "checkpoint"), "a") as f:
    f.write('all_model_checkpoint_paths: "ckpt-3"\n')
  train = run_record.read(a).config["data"]["input_path"]
  with pytest.raises(ValueError, match=r"model\.(hidden_act|num_hidden_layers)"
                     r" is .* but checkpoint .*ckpt-3 was trained with"):
    run(config(train, **{"trainer.train_steps": 4}), copy)


def _other_spm(directory):
  """A SentencePiece model of the same size (1000) and other pieces."""
  return export_testlib.train_spm(str(directory), vocab_size=tu.VOCAB)


def _data_with_spm(train, spm, path):
  """`train` under another name whose summary names SentencePiece `spm`."""
  shutil.copy(train, path)
  with open(train + output_files.SUMMARY_SUFFIX) as f:
    summary = json.load(f)
  count = summary["output_files"][train]
  summary["output_files"] = summary["records_per_file"] = {path: count}
  summary["spm_model_file"] = spm
  if "config" in summary:  # the path and the content hash data prep records
    summary["config"]["spm_model_file"] = spm
    summary["config"]["vocab_sha256"] = output_files.file_sha256(spm)
    summary["config"]["spm_model_sha256"] = output_files.file_sha256(spm)
  with open(path + output_files.SUMMARY_SUFFIX, "w") as f:
    json.dump(summary, f)
  return path


def test_resume_refuses_data_of_another_vocabulary(runs, train_file,
                                                   tmp_path):
  a, _, _ = runs
  copy = str(tmp_path / "a_copy")
  shutil.copytree(a, copy)
  other = _data_with_spm(train_file, _other_spm(tmp_path),
                         str(tmp_path / "other.tfrecord"))
  with pytest.raises(ValueError, match=r"SentencePiece model \(sha256\) is"):
    run(config(other, **{"trainer.train_steps": 4,
                         "trainer.save_data_position": False}), copy)


def test_warm_start_refuses_another_vocabulary(runs, tmp_path):
  a, _, _ = runs
  other = _other_spm(tmp_path)
  glue = finetune_testlib.tiny_finetune_config(
      sentence_prediction.GlueExperimentConfig,
      {"task_name": "rte", "data_dir": str(tmp_path), "spm_model_file": other,
       "max_seq_length": 16})
  glue.override({"model": run_record.read(a).model,
                 "trainer": {"init_checkpoint": ckpt(a)}})
  task = sentence_prediction.ClassifierTask(glue, str(tmp_path / "ft"))
  with pytest.raises(ValueError, match=r"the vocabulary \(sha256\) is "
                     r".* but checkpoint .*ckpt-2 has"):
    task.initialize(task.build_model())


def test_warm_start_refuses_other_lower_casing(runs, train_file, tmp_path):
  """Fine-tuning that lower-cases from a run pretrained with
  --nodo_lower_case (or the reverse) went ahead silently: the same text
  gives other pieces than the weights were trained on."""
  a, _, _ = runs
  spm = os.path.join(os.path.dirname(train_file), "spm.model")
  assert identity.read(ckpt(a))["facts"]["do_lower_case"] is True

  def task_with(lower):
    glue = finetune_testlib.tiny_finetune_config(
        sentence_prediction.GlueExperimentConfig,
        {"task_name": "rte", "data_dir": str(tmp_path), "spm_model_file": spm,
         "max_seq_length": 16, "do_lower_case": lower})
    glue.override({"model": run_record.read(a).model,
                   "trainer": {"init_checkpoint": ckpt(a)}})
    return sentence_prediction.ClassifierTask(glue, str(tmp_path / "ft"))

  cased = task_with(False)
  with pytest.raises(ValueError) as info:
    cased.initialize(cased.build_model())
  assert str(info.value) == (
      "do_lower_case is False in this run's config (trainer.init_checkpoint) "
      f"but checkpoint {ckpt(a)} has True (its own record); lower-casing is "
      "part of the tokenisation the weights were trained with; set "
      "data.do_lower_case (--do_lower_case) to the checkpoint's")
  lower = task_with(True)
  lower.initialize(lower.build_model())  # the checkpoint's own setting


def test_a_run_without_its_record_or_with_an_edited_one_is_refused(
    runs, train_file, tmp_path):
  a, _, _ = runs
  no_record = str(tmp_path / "no_record")
  shutil.copytree(a, no_record)
  os.remove(os.path.join(no_record, run_record.RECORD_NAME))
  with pytest.raises(ValueError, match="holds checkpoints but no "
                     "run_record.json"):
    run(config(train_file, **{"trainer.train_steps": 4}), no_record)
  edited = str(tmp_path / "edited")
  shutil.copytree(a, edited)
  path = os.path.join(edited, run_record.CONFIG_NAME)
  with open(path) as f:
    text = f.read()
  with open(path, "w") as f:
    f.write(text.replace("hidden_act: gelu", "hidden_act: relu"))
  with pytest.raises(ValueError, match="was edited after the run started"):
    run(config(train_file, **{"trainer.train_steps": 4}), edited)
  os.remove(path)
  with pytest.raises(ValueError, match="experiment_config.yaml is missing"):
    run(config(train_file, **{"trainer.train_steps": 4}), edited)


def test_conversion_into_a_run_is_refused(runs):
  a, _, _ = runs
  for target in (a, os.path.join(a, "checkpoints"), os.path.join(a, "best")):
    with pytest.raises(ValueError, match="would replace the run's checkpoint"):
      checkpoint_config.check_not_in_run(target)
  checkpoint_config.check_not_in_run(os.path.join(a, "converted"))
  state = tf.train.get_checkpoint_state(os.path.join(a, "checkpoints"))
  assert state.model_checkpoint_path.endswith("ckpt-2")


def _copy_with_newest(run_dir, foreign_run, dest):
  """A copy of `run_dir` whose newest checkpoint (ckpt-3) is
  `foreign_run`'s ckpt-2."""
  shutil.copytree(run_dir, dest)
  for name in os.listdir(os.path.join(foreign_run, "checkpoints")):
    if name.startswith("ckpt-2."):
      shutil.copy(os.path.join(foreign_run, "checkpoints", name),
                  os.path.join(dest, "checkpoints",
                               name.replace("ckpt-2", "ckpt-3")))
  with open(os.path.join(dest, "checkpoints", "checkpoint"), "w") as f:
    f.write('model_checkpoint_path: "ckpt-3"\n'
            'all_model_checkpoint_paths: "ckpt-2"\n'
            'all_model_checkpoint_paths: "ckpt-3"\n')
  return dest


def _export_error(export):
  with pytest.raises(ValueError) as info:
    export()
  return str(info.value)


def test_every_export_route_refuses_another_models_checkpoint(runs,
                                                              tmp_path):
  """B's checkpoint as the newest of a copy of A: `run_* --mode=export`
  and `export_savedmodel --model_dir` (it restored the same-shaped weights
  of another model silently) refuse it with the same one-line error."""
  a, b, _ = runs
  copy = _copy_with_newest(a, b, str(tmp_path / "a_copy"))
  c = tu.tiny_experiment(run_record.read(a).config["data"]["input_path"])
  by_mode = _export_error(lambda: train_lib.run_experiment(
      pretraining.PretrainingTask(c, copy), c, copy, "export",
      export_dir=str(tmp_path / "m"), export_fn=tasks_export.run_exporter()))
  by_tool = _export_error(lambda: export_testlib.export(
      str(tmp_path / "t"), model_dir=copy))
  assert by_mode == by_tool
  assert "\n" not in by_tool
  assert re.fullmatch(
      r"model\.hidden_act is 'gelu' in the run record of .*a_copy but "
      r"checkpoint .*a_copy/checkpoints/ckpt-3 was trained with 'relu' .*",
      by_tool), by_tool
  assert not os.path.exists(tmp_path / "m")
  assert not os.path.exists(tmp_path / "t")


def test_an_export_without_a_run_refuses_another_vocabulary(runs, tmp_path):
  """A checkpoint copied out of its run, exported with another
  SentencePiece model: the weights' vocabulary is not the given one (it was
  exported without a word)."""
  a, _, _ = runs
  prefix = _copied_out(a, tmp_path / "copied")
  other = _other_spm(tmp_path)
  error = _export_error(lambda: export_testlib.export(
      str(tmp_path / "t"), checkpoint=prefix,
      settings={"spm_model_file": other}))
  assert error == (
      f"the vocabulary (sha256) is {output_files.file_sha256(other)!r}"
      f" in the given config but checkpoint {prefix} has "
      f"{identity.read(ckpt(a))['facts']['vocab_sha256']!r} (its own record); "
      "the weights belong to another vocabulary")
  assert not os.path.exists(tmp_path / "t")


def test_each_export_command_reads_the_run_record_once(runs, tmp_path,
                                                       monkeypatch):
  """`run_* --mode=export`, `export_savedmodel --model_dir` and
  `export_savedmodel --checkpoint` (of a run) read run_record.json once
  (one export read it three times). The SavedModel writer is stubbed out:
  it reads no record, and the count is what this test is about."""
  a, _, _ = runs
  reads = []
  real_read = run_record.read

  def counting_read(model_dir):
    reads.append(model_dir)
    return real_read(model_dir)

  monkeypatch.setattr(run_record, "read", counting_read)
  monkeypatch.setattr(tasks_export, "export_model",
                      lambda *args, **kwargs: "written")
  c = tu.tiny_experiment(real_read(a).config["data"]["input_path"])
  commands = {
      "run_* --mode=export": lambda: train_lib.run_experiment(
          pretraining.PretrainingTask(c, a), c, a, "export",
          export_dir=str(tmp_path / "m"),
          export_fn=tasks_export.run_exporter())["export"],
      "export_savedmodel --model_dir": lambda: export_testlib.export(
          str(tmp_path / "t"), model_dir=a),
      "export_savedmodel --checkpoint": lambda: export_testlib.export(
          str(tmp_path / "c"), checkpoint=ckpt(a)),
  }
  counts = {}
  for name, command in commands.items():
    reads.clear()
    assert command() == "written"
    counts[name] = len(reads)
  assert counts == {name: 1 for name in commands}
