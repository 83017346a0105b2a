"""The training loop under faults (docs/reliability.md, "Training loop"):
corrupt input, SIGINT, non-finite weights, unreadable checkpoints, a full
disk, a second run on one model_dir, and resuming without the data
position. In-process, on the tiny pretraining recipe."""

import json
import logging
import os
import resource
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
from albert_tf.core import run_lock
from albert_tf.tasks import pretraining
from tests.testing import pretrain_testutil as tu


@pytest.fixture(scope="module")
def train_file(tmp_path_factory):
  return tu.worker_pretraining_data(tmp_path_factory)[0]


make_trainer, checkpoint_step = tu.tiny_trainer, tu.checkpoint_step


def metric_steps(model_dir, mode="train"):
  with open(os.path.join(model_dir, actions.METRICS_FILE)) as f:
    return [r["step"] for r in map(json.loads, f) if r["mode"] == mode]


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
