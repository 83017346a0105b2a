"""The best checkpoint (core/best_checkpoint.py): which metric keeps it and
when that is checked, when a later evaluation may replace it (the same
metric, mode, batches and evaluation data), and `best/` and its best.json
replaced together. In-process, on the tiny pretraining recipe."""

import json
import logging
import os
import shutil

import pytest
import tensorflow as tf

from albert_tf.core import actions
from albert_tf.core import best_checkpoint
from albert_tf.tasks import pretraining
from tests.testing import pretrain_testutil as tu

# Ten seconds or more in all: handed out first (tests/conftest.py).
pytestmark = pytest.mark.slow

make_trainer, checkpoint_step = tu.tiny_trainer, tu.checkpoint_step


@pytest.fixture(scope="module")
def train_file(tmp_path_factory):
  return tu.worker_pretraining_data(tmp_path_factory)[0]


def best_info(model_dir):
  with open(os.path.join(model_dir, "best",
                         best_checkpoint.BEST_INFO_FILE)) as f:
    return json.load(f)


def best_checkpoint_step(model_dir):
  reader = tf.train.load_checkpoint(os.path.join(model_dir, "best", "ckpt"))
  return int(reader.get_tensor("step/.ATTRIBUTES/VARIABLE_VALUE"))


def test_an_unknown_best_metric_is_refused_when_the_trainer_is_built(
    train_file, tmp_path):
  with pytest.raises(ValueError, match=(
      r"^trainer.best_metric: 'masked_lm_acc' is not a metric of this "
      r"task's evaluation \(loss, masked_lm_loss, masked_lm_accuracy, "
      r"sentence_order_loss, sentence_order_accuracy\); set one of them, "
      r"or '' to keep no best checkpoint$")):
    make_trainer(train_file, tmp_path,
                 **{"trainer.best_metric": "masked_lm_acc"})
  # The run tools' path refuses it before writing the run record.
  with pytest.raises(ValueError, match=r"^trainer.best_metric: "):
    tu.run_tiny(tu.tiny_experiment(
        train_file, **{"trainer.best_metric": "masked_lm_acc"}),
                tmp_path / "run")
  assert not os.listdir(tmp_path)
  # "" keeps no best checkpoint.
  trainer = make_trainer(train_file, tmp_path, **{
      "trainer.best_metric": "''", "trainer.train_steps": 2,
      "trainer.steps_per_loop": 2, "trainer.eval_steps": 1})
  trainer.train_and_evaluate()
  assert not os.path.exists(tmp_path / "best")


class _UndeclaredMetricsTask(pretraining.PretrainingTask):
  """A task that does not declare its metric names."""

  def eval_metric_names(self):
    return None


def test_an_unknown_best_metric_of_an_undeclaring_task_stops_at_the_first_eval(
    train_file, tmp_path):
  """Checked at the first evaluation instead; the step trained is saved
  first (step 1 is no checkpoint step)."""
  trainer = make_trainer(train_file, tmp_path, _UndeclaredMetricsTask, **{
      "trainer.best_metric": "masked_lm_acc", "trainer.train_steps": 4,
      "trainer.steps_per_loop": 1, "trainer.eval_interval": 1,
      "trainer.checkpoint_interval": 2, "trainer.eval_steps": 1})
  with pytest.raises(ValueError, match=(
      r"^trainer.best_metric: 'masked_lm_acc' is not a metric of this "
      r"task's evaluation \(loss, masked_lm_loss, masked_lm_accuracy, "
      r"sentence_order_loss, sentence_order_accuracy\)")):
    trainer.train_and_evaluate()
  assert checkpoint_step(trainer) == 1
  assert not os.path.exists(tmp_path / "best")


def test_a_best_metric_changed_on_resume_starts_a_new_best(train_file,
                                                           tmp_path, caplog):
  """trainer.best_metric(_mode) may change on resume: the first evaluation
  of the new metric replaces the kept best (a best.json written before it
  recorded its metric and mode, too), with a note."""
  settings = {"trainer.steps_per_loop": 2, "trainer.eval_interval": 2,
              "trainer.eval_steps": 1}
  make_trainer(train_file, tmp_path, **settings,
               **{"trainer.train_steps": 2}).train_and_evaluate()
  first = best_info(str(tmp_path))
  assert (first["metric"], first["mode"], first["step"]) == (
      "masked_lm_accuracy", "max", 2)
  assert first["masked_lm_accuracy"] == first["metrics"]["masked_lm_accuracy"]
  # The names the task declares are its evaluation's.
  assert sorted(first["metrics"]) == sorted(
      pretraining.PretrainingTask.eval_metric_names(None) + ("eval_batches",))
  # The layout of earlier versions: the value under the metric's name only.
  old = {k: first[k] for k in ("masked_lm_accuracy", "step", "checkpoint",
                               "metrics")}
  with open(tmp_path / "best" / best_checkpoint.BEST_INFO_FILE, "w") as f:
    json.dump(old, f)
  trainer = make_trainer(train_file, tmp_path, **settings, **{
      "trainer.train_steps": 4, "trainer.best_metric": "sentence_order_loss",
      "trainer.best_metric_mode": "min"})
  with caplog.at_level(logging.INFO, logger="absl"):
    result = trainer.train_and_evaluate()
  assert result["step"] == 4
  assert ("trainer.best_metric is sentence_order_loss (min) but "
          f"{tmp_path / 'best'} holds the best by masked_lm_accuracy: a new "
          "best by sentence_order_loss starts at step 4") in caplog.text
  best = best_info(str(tmp_path))
  assert (best["metric"], best["mode"], best["step"]) == (
      "sentence_order_loss", "min", 4)
  assert best_checkpoint_step(str(tmp_path)) == 4
  with open(tmp_path / actions.METRICS_FILE) as f:
    last_eval = [r for r in map(json.loads, f) if r["mode"] == "eval"][-1]
  assert best["sentence_order_loss"] == last_eval["sentence_order_loss"]


def test_best_checkpoint_and_best_json_are_replaced_together(
    train_file, tmp_path, monkeypatch, caplog):
  """The pair is written beside best/ and swapped in by renames: a kill at
  any point leaves best.json describing the checkpoint next to it."""
  trainer = make_trainer(train_file, tmp_path, **{
      "trainer.train_steps": 2, "trainer.steps_per_loop": 2,
      "trainer.eval_steps": 1})
  trainer.train_and_evaluate()
  model_dir = str(tmp_path)
  assert best_info(model_dir)["step"] == best_checkpoint_step(model_dir) == 2
  trainer.global_step.assign(5)
  better = dict(best_info(model_dir)["metrics"], masked_lm_accuracy=2.0)
  keep = lambda: best_checkpoint.keep_if_best(  # pylint: disable=g-long-lambda
      trainer.best_dir, trainer.model, trainer.global_step, better,
      "masked_lm_accuracy", "max")

  # Killed after moving the old pair aside, before the new one is in.
  real_rename = os.rename
  def rename(src, dst):
    if src.endswith(".best.partial"):
      raise KeyboardInterrupt
    real_rename(src, dst)
  monkeypatch.setattr(os, "rename", rename)
  with pytest.raises(KeyboardInterrupt):
    keep()
  monkeypatch.setattr(os, "rename", real_rename)
  assert not os.path.exists(trainer.best_dir)
  # The next reader puts the old pair back, in step.
  assert best_checkpoint.read_best(trainer.best_dir)["step"] == 2
  assert best_checkpoint_step(model_dir) == 2
  # A partial pair left behind is not read, and is replaced.
  assert keep() == os.path.join(trainer.best_dir, "ckpt")
  assert best_info(model_dir)["step"] == best_checkpoint_step(model_dir) == 5
  assert best_info(model_dir)["masked_lm_accuracy"] == 2.0
  assert sorted(os.listdir(model_dir + "/best")) == [
      "best.json", "ckpt.data-00000-of-00001", "ckpt.index"]
  assert not [n for n in os.listdir(model_dir) if n.startswith(".best")]
  # The same value is no new best; under another mode it starts one.
  assert keep() is None
  with caplog.at_level(logging.INFO, logger="absl"):
    assert best_checkpoint.keep_if_best(
        trainer.best_dir, trainer.model, trainer.global_step, better,
        "masked_lm_accuracy", "min")
  assert "holds the best by masked_lm_accuracy (max): a new best by " \
      "masked_lm_accuracy starts at step 5" in caplog.text
  assert best_info(model_dir)["mode"] == "min"


def _lowered_best(model_dir):
  """Makes the kept best the worst possible, so any later evaluation allowed
  to compete replaces it."""
  info = best_info(model_dir)
  info["masked_lm_accuracy"] = info["metrics"]["masked_lm_accuracy"] = -1.0
  with open(os.path.join(model_dir, "best", best_checkpoint.BEST_INFO_FILE),
            "w") as f:
    json.dump(info, f)
  return info


def test_a_best_is_replaced_only_by_an_evaluation_measured_the_same_way(
    train_file, tmp_path, caplog):
  """An in-loop evaluation over fewer batches (trainer.eval_steps changed on
  resume) or other files (data.eval_input_path) replaced the best measured
  on the whole set, and the old best checkpoint was lost."""
  settings = {"trainer.steps_per_loop": 2, "trainer.eval_interval": 2,
              "trainer.eval_steps": 2}
  make_trainer(train_file, tmp_path, **settings,
               **{"trainer.train_steps": 2}).train_and_evaluate()
  first = best_info(str(tmp_path))
  assert first["eval_data"] == [os.path.abspath(train_file)]
  assert (first["step"], first["metrics"]["eval_batches"]) == (2, 2)
  _lowered_best(str(tmp_path))
  other = tmp_path.parent / "other_eval.tfrecord"
  for suffix in ("", ".summary.json"):
    shutil.copy(train_file + suffix, str(other) + suffix)
  steps = 2
  for changed, differs in (
      ({"trainer.eval_steps": 1}, "1 eval batches, not 2"),
      ({"data.eval_input_path": str(other),
        "data.allow_unverified_input": "true"},
       f"eval data {other}, not {os.path.abspath(train_file)}")):
    steps += 2
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="absl"):
      make_trainer(train_file, tmp_path, **dict(settings, **changed), **{
          "trainer.train_steps": steps}).train_and_evaluate()
    assert (f"not comparing step {steps} with the best (step 2) of "
            f"{tmp_path / 'best'}: it was evaluated on {differs}; the best "
            "is kept") in caplog.text, changed
    assert best_info(str(tmp_path))["step"] == 2
    assert best_checkpoint_step(str(tmp_path)) == 2
  # Measured as before, it competes again.
  make_trainer(train_file, tmp_path, **settings,
               **{"trainer.train_steps": steps + 2}).train_and_evaluate()
  assert best_info(str(tmp_path))["step"] == steps + 2


def test_a_standalone_evaluation_leaves_the_best_checkpoint_alone(
    train_file, tmp_path):
  """run_pretraining --mode=eval (here with eval_steps=1) replaced the best
  of the in-loop evaluations by a value of one batch."""
  tu.run_tiny(tu.tiny_experiment(train_file, **{"trainer.eval_steps": 2}),
              tmp_path, mode="train_and_eval")
  kept = _lowered_best(str(tmp_path))
  assert kept["metrics"]["eval_batches"] == 2
  result = tu.run_tiny(tu.tiny_experiment(train_file), tmp_path, mode="eval")
  assert result["eval"]["eval_batches"] == 1
  assert best_info(str(tmp_path)) == kept
