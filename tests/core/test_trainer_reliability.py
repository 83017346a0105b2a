"""The training loop under faults (docs/reliability.md, "Training loop"):
corrupt input, SIGINT, non-finite weights, unreadable checkpoints, a full
disk, a second run on one model_dir, and resuming without the data
position. In-process, on the tiny pretraining recipe."""

import json
import logging
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.core import actions
from albert_tf.core import best_checkpoint
from albert_tf.core import experiment_config
from albert_tf.core import run_lock
from albert_tf.core import trainer as trainer_lib
from albert_tf.tasks import pretraining
from tests.testing import pretrain_testutil as tu


@pytest.fixture(scope="module")
def train_file(tmp_path_factory):
  return tu.worker_pretraining_data(tmp_path_factory)[0]


def make_trainer(train_file, model_dir, task_class=None,
                 restore_data_position=True, **overrides):
  config = experiment_config.load_experiment_config(
      pretraining.PretrainingExperimentConfig, [tu.TINY_RECIPE],
      tu.tiny_overrides(train_file, **overrides))
  task = (task_class or pretraining.PretrainingTask)(config)
  return trainer_lib.Trainer(task, config, str(model_dir),
                             restore_data_position=restore_data_position)


def metric_steps(model_dir, mode="train"):
  with open(os.path.join(model_dir, actions.METRICS_FILE)) as f:
    return [r["step"] for r in map(json.loads, f) if r["mode"] == mode]


def checkpoint_step(trainer):
  latest = tf.train.latest_checkpoint(trainer.checkpoint_dir)
  return int(latest.rsplit("-", 1)[1]) if latest else None


def assert_finite_checkpoint(prefix):
  reader = tf.train.load_checkpoint(prefix)
  floats = [n for n, d in reader.get_variable_to_dtype_map().items()
            if d.is_floating]
  assert len(floats) > 20
  for name in floats:
    assert np.all(np.isfinite(reader.get_tensor(name))), name


def write_records(path, records):
  with tf.io.TFRecordWriter(path) as writer:
    for record in records:
      writer.write(record)


@pytest.mark.slow
@pytest.mark.parametrize("save_data_position", [True, False])
def test_corrupt_input_file_is_named_and_progress_saved(
    train_file, tmp_path, save_data_position):
  """A truncated TFRecord among the inputs: the native reader (data position
  saved) and the checked reader both end in an InputDataError naming the
  file, after saving the last finished step."""
  records = [r.numpy() for r in tf.data.TFRecordDataset(train_file).take(500)]
  inputs = tmp_path / "in"
  inputs.mkdir()
  write_records(str(inputs / "a.tfrecord"), records[:100])
  # ~300 good records (more than the checked reader's chunk of 256), then a
  # record cut short.
  write_records(str(inputs / "b.tfrecord"), records[100:])
  data = (inputs / "b.tfrecord").read_bytes()
  (inputs / "b.tfrecord").write_bytes(data[:len(data) * 3 // 4 - 7])
  trainer = make_trainer(
      str(inputs / "*.tfrecord"), tmp_path / "m", **{
          "data.eval_input_path": train_file,
          "data.allow_unverified_input": True,  # no data_prep summaries
          "trainer.train_steps": 1000, "trainer.steps_per_loop": 5,
          "trainer.checkpoint_interval": 1000, "data.shuffle_buffer_size": 8,
          "trainer.save_data_position": save_data_position})
  with pytest.raises(actions.InputDataError,
                     match=r"b\.tfrecord.*At step \d+: saved .*ckpt-\d+"):
    trainer.train()
  step = int(trainer.global_step.numpy())
  assert step >= 5 and checkpoint_step(trainer) == step
  # The saved step counts the updates made (it was one ahead).
  optimizer = getattr(trainer.optimizer, "inner_optimizer", trainer.optimizer)
  assert int(optimizer.iterations.numpy()) == step
  assert_finite_checkpoint(tf.train.latest_checkpoint(trainer.checkpoint_dir))
  assert not os.path.exists(os.path.join(str(tmp_path / "m"),
                                         run_lock.LOCK_FILE))


def test_sigint_saves_and_stops_like_sigterm(train_file, tmp_path):
  trainer = make_trainer(train_file, tmp_path, **{
      "trainer.train_steps": 100000, "trainer.steps_per_loop": 5,
      "trainer.checkpoint_interval": 50000})
  metrics = os.path.join(str(tmp_path), actions.METRICS_FILE)
  # Python's default, or SIG_IGN when the suite was started in the
  # background: whichever it was comes back.
  handler_before = signal.getsignal(signal.SIGINT)

  def interrupt():
    deadline = time.time() + 120
    while not os.path.exists(metrics) and time.time() < deadline:
      time.sleep(0.05)
    os.kill(os.getpid(), signal.SIGINT)

  threading.Thread(target=interrupt, daemon=True).start()
  result = trainer.train()
  assert result["stopped"] == "preempted" and result["signal"] == "SIGINT"
  assert checkpoint_step(trainer) == result["step"] == metric_steps(
      str(tmp_path))[-1]
  assert signal.getsignal(signal.SIGINT) is handler_before


class _NanGradientTask(pretraining.PretrainingTask):
  """Global batch `poison_at` has a finite loss but NaN gradients, so the
  update makes the weights NaN while the step's loss looks fine."""
  poison_at = 14  # step 15, the last of the loop 10 -> 15

  def build_inputs(self, input_context, training):
    ds = super().build_inputs(input_context, training)
    return ds.enumerate().map(lambda i, f: dict(
        f, poison=tf.equal(i, self.poison_at)))

  def compute_sums(self, model, features, training):
    sums = dict(super().compute_sums(model, features, training))
    if "poison" in features:
      v = model.trainable_variables[0]
      # Value 0; gradient 0 * d sqrt(x)/dx at 0 = 0 * inf = NaN.
      sums["mlm_loss_sum"] += tf.cond(
          features["poison"], lambda: tf.sqrt(tf.reduce_sum(v * 0.0)),
          lambda: tf.constant(0.0))
    return sums


def test_non_finite_weights_are_never_saved(train_file, tmp_path):
  trainer = make_trainer(train_file, tmp_path, _NanGradientTask, **{
      "trainer.train_steps": 30, "trainer.steps_per_loop": 5,
      "trainer.checkpoint_interval": 5})
  with pytest.raises(actions.NonFiniteLossError,
                     match=r"weights became NaN or infinite by step 15.*"
                     r"last good checkpoint is .*ckpt-10"):
    trainer.train()
  assert checkpoint_step(trainer) == 10
  assert_finite_checkpoint(tf.train.latest_checkpoint(trainer.checkpoint_dir))


def test_weights_finite_catches_nan_inf_and_overflow():
  ok = [tf.Variable(np.full([3, 4], 2.0, np.float32)), tf.Variable([1.0])]
  assert actions.weights_finite(ok)
  for bad in (np.nan, np.inf, 1e30):
    assert not actions.weights_finite(ok + [tf.Variable([0.0, bad])]), bad


def test_unreadable_checkpoints_fall_back_and_metrics_have_no_duplicates(
    train_file, tmp_path, caplog):
  settings = {"trainer.train_steps": 15, "trainer.steps_per_loop": 5,
              "trainer.checkpoint_interval": 5}
  make_trainer(train_file, tmp_path, **settings).train()
  ckpts = os.path.join(str(tmp_path), "checkpoints")
  os.remove(os.path.join(ckpts, "ckpt-15.index"))  # missing .index
  data = os.path.join(ckpts, "ckpt-10.data-00000-of-00001")
  with open(data, "r+b") as f:  # truncated .data
    f.truncate(os.path.getsize(data) // 2)
  trainer = make_trainer(train_file, tmp_path, **settings)
  # The absl logger's own level (set_verbosity elsewhere in the suite)
  # must not hide the INFO lines.
  with caplog.at_level(logging.INFO, logger="absl"):
    assert trainer.train()["step"] == 15
  assert f"{ckpts}/ckpt-15 is unreadable" in caplog.text
  assert f"{ckpts}/ckpt-10 is unreadable" in caplog.text
  assert f"resumed from {ckpts}/ckpt-5 at step 5" in caplog.text
  assert metric_steps(str(tmp_path)) == [5, 10, 15]
  assert checkpoint_step(trainer) == 15


def test_resume_drops_metrics_past_the_checkpoint(tmp_path):
  path = str(tmp_path / "metrics.jsonl")
  rows = [{"mode": m, "step": s} for s in (5, 10, 15) for m in ("train",
                                                                "eval")]
  with open(path, "w") as f:
    f.write("".join(json.dumps(r) + "\n" for r in rows) + '{"mode": "tr')
  assert actions.drop_metrics_after(path, 10) == 3  # 2 records + torn line
  with open(path) as f:
    assert [json.loads(l) for l in f] == rows[:4]


def test_disk_full_at_save_names_the_path_and_leaves_no_temp(train_file,
                                                             tmp_path):
  trainer = make_trainer(train_file, tmp_path, **{
      "trainer.train_steps": 5, "trainer.steps_per_loop": 5,
      "trainer.checkpoint_interval": 5})
  previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
  soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
  resource.setrlimit(resource.RLIMIT_FSIZE, (500_000, hard))  # "disk full"
  try:
    with pytest.raises(actions.CheckpointError) as info:
      trainer.train()
  finally:
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    signal.signal(signal.SIGXFSZ, previous)
  message = str(info.value)
  assert "\n" not in message
  assert f"could not write checkpoint {trainer.checkpoint_dir}/ckpt-5 (" in (
      message)
  assert "File too large" in message
  assert os.listdir(trainer.checkpoint_dir) == []  # no ckpt-5_temp/


def test_second_live_run_is_refused_and_a_stale_lock_taken_over(
    train_file, tmp_path):
  lock = tmp_path / run_lock.LOCK_FILE
  host = socket.gethostname()
  other = subprocess.Popen([sys.executable, "-c",
                            "import time; time.sleep(120)"])
  try:
    lock.write_text(json.dumps({"pid": other.pid, "host": host}))
    trainer = make_trainer(train_file, tmp_path, **{
        "trainer.train_steps": 2, "trainer.steps_per_loop": 2})
    with pytest.raises(actions.RunLockedError,
                       match=rf"{lock}: .*in use by pid {other.pid} on host"):
      trainer.train()
    assert not (tmp_path / "checkpoints").exists()
  finally:
    other.kill()
    other.wait()
  # The lock's process is gone now: taken over, then released.
  assert trainer.train()["step"] == 2
  assert not lock.exists()


def test_resume_without_data_position_allows_a_new_batch_size(train_file,
                                                              tmp_path,
                                                              caplog):
  settings = {"trainer.steps_per_loop": 5, "trainer.checkpoint_interval": 5}
  make_trainer(train_file, tmp_path, **settings,
               **{"trainer.train_steps": 5}).train()
  trainer = make_trainer(train_file, tmp_path, restore_data_position=False,
                         **settings, **{"trainer.train_steps": 10,
                                        "data.global_batch_size": 8})
  # The absl logger's own level (set_verbosity elsewhere in the suite)
  # must not hide the INFO lines.
  with caplog.at_level(logging.INFO, logger="absl"):
    assert trainer.train()["step"] == 10
  assert "resumed from" in caplog.text and "at step 5" in caplog.text
  assert "saved data position not restored" in caplog.text
  reader = tf.train.load_checkpoint(
      os.path.join(trainer.checkpoint_dir, "ckpt-10"))
  assert any(n.startswith("data_iterator")
             for n in reader.get_variable_to_shape_map())


@pytest.mark.parametrize("strategy", ["one_device", "mirrored"])
def test_one_replica_strategies_train_and_resume(train_file, tmp_path,
                                                 caplog, strategy):
  """OneDevice and a 1-device Mirrored strategy hand out a DistributedIterator,
  which a checkpoint cannot hold: the run saves without the data position
  (a warning says so) and resumes from its checkpoint."""
  # The test process has one logical CPU: "mirrored" gets one replica.
  config = tu.tiny_experiment(train_file,
                              **{"trainer.steps_per_loop": 1,
                                 "runtime.distribution_strategy": strategy})
  with caplog.at_level(logging.INFO, logger="absl"):
    first = tu.run_tiny(config, tmp_path)["train"]
    assert first["step"] == 2
    resumed = tu.run_tiny(
        tu.tiny_experiment(train_file, **{
            "trainer.steps_per_loop": 1, "trainer.train_steps": 3,
            "runtime.distribution_strategy": strategy}), tmp_path)["train"]
  assert "with 1 replica(s)" in caplog.text
  assert "cannot be saved; a resumed run restarts its input pipeline" in (
      caplog.text)
  assert "at step 2" in caplog.text  # resumed from ckpt-2
  assert resumed["step"] == 3 and np.isfinite(resumed["loss"])
  assert metric_steps(str(tmp_path)) == [1, 2, 3]
  reader = tf.train.load_checkpoint(str(tmp_path / "checkpoints" / "ckpt-3"))
  names = reader.get_variable_to_shape_map()
  assert int(reader.get_tensor("step/.ATTRIBUTES/VARIABLE_VALUE")) == 3
  assert not any(n.startswith("data_iterator") for n in names)


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


def test_progress_line_shows_rates_and_eta():
  metrics = {"loss": 2.5, "learning_rate": 1e-3, "grad_norm": 0.5,
             "steps_per_sec": 2.0, "examples_per_sec": 128.0}
  line = actions.progress_line(40, 100, 20, time.time() - 10.0, metrics)
  assert line.startswith("step 40/100 | loss 2.5000 | lr 0.001 | ")
  assert "2.00 steps/s 128.0 examples/s" in line
  assert line.endswith("ETA 00:00:30")  # 60 steps left at 2 steps/s


@pytest.mark.parametrize("warmup,warned", [(20, True), (2, False)])
def test_training_warns_of_a_warmup_longer_than_the_run(
    train_file, tmp_path, caplog, warmup, warned):
  """A run shortened below its recipe's warm-up trains at a fraction of the
  rate: training says so at its start (absl warning), and only then."""
  config = tu.tiny_experiment(train_file,
                              **{"optimizer.num_warmup_steps": warmup})
  with caplog.at_level(logging.WARNING, logger="absl"):
    tu.run_tiny(config, tmp_path / "run")
  lines = [r.getMessage() for r in caplog.records
           if "outlasts trainer.train_steps" in r.getMessage()]
  assert lines == ([
      f"optimizer.num_warmup_steps=20 outlasts trainer.train_steps=2: the "
      f"learning rate peaks at 5.0% of optimizer.learning_rate="
      f"{config.optimizer.learning_rate:g} (its last step); set "
      "optimizer.num_warmup_steps below trainer.train_steps (e.g. a tenth "
      "of it)"] if warned else [])


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
