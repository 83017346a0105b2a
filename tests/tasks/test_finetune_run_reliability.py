"""Fine-tuning runs (docs/reliability.md, "Runs"): a resume after the
training file was edited in place, a preempted train_and_eval, a batch the
replicas cannot split (pretraining's too)."""

import json
import logging
import os
import random

import pytest
import tensorflow as tf

from albert_tf.core import actions
from albert_tf.core import data_position
from albert_tf.core import run_record
from albert_tf.core import train_lib
from albert_tf.core import trainer as trainer_lib
from albert_tf.tasks import multiple_choice
from albert_tf.tasks import pretraining
from albert_tf.tasks import sentence_prediction
from tests.testing import finetune_testlib
from tests.testing import pretrain_testutil as tu

HEADER = "sentence\tlabel\n"


def _sst2(tmp_path, tmp_path_factory, label="1", steps=2, **overrides):
  """A tiny SST-2 config over `tmp_path` (train.tsv all `label`)."""
  words = finetune_testlib.botchan_sentences(64)
  (tmp_path / "train.tsv").write_text(
      HEADER + "".join(f"{s}\t{label}\n" for s in words))
  (tmp_path / "dev.tsv").write_text(
      HEADER + "".join(f"{s}\t{i % 2}\n" for i, s in enumerate(words[:6])))
  config = finetune_testlib.tiny_finetune_config(
      sentence_prediction.GlueExperimentConfig,
      {"task_name": "sst-2", "data_dir": str(tmp_path), "max_seq_length": 16,
       "spm_model_file": finetune_testlib.spm_model(tmp_path_factory)},
      steps=steps, batch=4)
  config.trainer.steps_per_loop = 1
  config.trainer.checkpoint_interval = 1
  for key, value in overrides.items():
    section, name = key.split(".")
    setattr(getattr(config, section), name, value)
  return config


def _run(config, model_dir, mode="train"):
  return train_lib.run_experiment(
      sentence_prediction.ClassifierTask(config, model_dir), config,
      model_dir, mode)


def test_a_resume_after_the_training_file_was_edited_starts_the_input_over(
      tmp_path, tmp_path_factory, caplog):
  """A resume after train.tsv was edited in place (same size) restored the
  saved data position (its shuffle buffer held the old examples) and went
  on training on the old data without a word: no fine-tuning task named
  its training files."""
  config = _sst2(tmp_path, tmp_path_factory)
  model_dir = str(tmp_path / "run")
  _run(config, model_dir)
  train = tmp_path / "train.tsv"
  before = os.stat(train).st_mtime_ns
  train.write_text(train.read_text().replace("\t1\n", "\t0\n"))
  os.utime(train, ns=(before + 10**9, before + 10**9))
  config.trainer.train_steps = 3
  caplog.set_level(logging.WARNING)
  assert _run(config, model_dir)["train"]["step"] == 3
  changed = f"{train} was rewritten (same size, modified later)"
  assert (f"the training input changed since the checkpoint it resumes from "
          f"was saved ({changed}): its saved data position belongs to the "
          "old files; the input pipeline starts over") in caplog.text
  assert "saved data position not restored" in caplog.text
  with open(os.path.join(model_dir, run_record.CHANGES_NAME)) as f:
    last = [json.loads(line) for line in f][-1]
  assert (last["data_position_reset"], last["input_files_changed"]) == (
      True, changed)
  with open(os.path.join(model_dir, data_position.INPUTS_FILE)) as f:
    assert all(str(train) in json.loads(line)["inputs"] for line in f)
  # The new examples are read: a cache of the edited file was built.
  caches = [n for n in os.listdir(os.path.join(model_dir, "features"))
            if n.startswith("sst-2_train_") and n.endswith(".tf_record")]
  assert len(caches) == 2


def test_a_race_run_names_the_files_it_reads(tmp_path):
  """RACE reads directories: its training files are the ones it reads."""
  finetune_testlib.write_race_split(
      str(tmp_path), "train", random.Random(0),
      finetune_testlib.botchan_sentences(20), 3)
  (tmp_path / "train" / "high" / "notes.md").write_text("not read")
  config = finetune_testlib.tiny_finetune_config(
      multiple_choice.RaceTask.config_cls,
      {"data_dir": str(tmp_path), "max_seq_length": 32})
  task = multiple_choice.RaceTask(config, str(tmp_path / "run"))
  assert task.input_files(training=True) == [
      str(tmp_path / "train" / level / name)
      for level, name in (("middle", "1.txt"), ("high", "0.txt"),
                          ("high", "2.txt"))]


class _SignalledAtOnce(actions.StopSignals):
  """SIGTERM as if received during the first loop."""

  def __enter__(self):
    super().__enter__()
    self.received = "SIGTERM"
    return self


def test_a_preempted_train_and_eval_skips_the_final_evaluation(
    tmp_path, tmp_path_factory, monkeypatch, caplog):
  """A train_and_eval stopped by SIGTERM ran the whole final evaluation of
  the unfinished model (spending the grace period) and wrote its
  eval_results.json."""
  config = _sst2(tmp_path, tmp_path_factory, steps=3)
  model_dir = str(tmp_path / "run")
  monkeypatch.setattr(actions, "StopSignals", _SignalledAtOnce)
  caplog.set_level(logging.WARNING)
  result = _run(config, model_dir, "train_and_eval")
  assert (result["train"]["stopped"], result["train"]["step"]) == (
      "preempted", 1)
  assert "eval" not in result
  assert not os.path.exists(os.path.join(model_dir,
                                         train_lib.EVAL_RESULTS_FILE))
  assert ("evaluation after training skipped: the run stopped at step 1 "
          "(SIGTERM); it runs when the run completes") in caplog.text
  # The rerun completes the training, then evaluates.
  monkeypatch.undo()
  assert "eval" in _run(config, model_dir, "train_and_eval")
  assert os.path.exists(os.path.join(model_dir, train_lib.EVAL_RESULTS_FILE))


@pytest.mark.parametrize("field", ["data.eval_batch_size",
                                   "data.global_batch_size"])
def test_a_batch_the_replicas_cannot_split_is_refused_before_training(
    tmp_path, tmp_path_factory, monkeypatch, field):
  """An evaluation batch of 3 on 2 replicas failed only after the whole
  training, with TensorFlow's message naming no field."""
  config = _sst2(tmp_path, tmp_path_factory, **{field: 3})
  model_dir = tmp_path / "run"
  # Two replicas in this process (logical devices need a fresh one).
  monkeypatch.setattr(type(tf.distribute.get_strategy()),
                      "num_replicas_in_sync", property(lambda self: 2))
  with pytest.raises(ValueError, match=rf"^{field} \(3\) is not divisible "
                     r"by 2 replica\(s\)"):
    _run(config, str(model_dir), "train_and_eval")
  assert not (model_dir / "checkpoints").exists()


def test_pretraining_checks_its_evaluation_batch_too(tmp_path, monkeypatch):
  config = tu.tiny_experiment("unused.tfrecord", **{
      "data.eval_batch_size": 3})
  monkeypatch.setattr(type(tf.distribute.get_strategy()),
                      "num_replicas_in_sync", property(lambda self: 2))
  with pytest.raises(ValueError, match=r"^data\.eval_batch_size \(3\) is "
                     r"not divisible by 2 replica\(s\)"):
    trainer_lib.Trainer(pretraining.PretrainingTask(config), config,
                        str(tmp_path))
