"""End-to-end tests of the run_pretraining CLI in subprocesses: kill -9 and
resume, SIGTERM save, MirroredStrategy / gradient accumulation equivalence,
MultiWorkerMirroredStrategy on localhost."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from tests.testing import pretrain_testutil as tu
from tests.testing import tool_server
from tests.testing.repo_paths import ROOT


@pytest.fixture(scope="module")
def train_file(tmp_path_factory):
  return tu.worker_pretraining_data(tmp_path_factory)[0]


def cli(model_dir, overrides, *extra, env=None):
  args = [sys.executable, "-m", "albert_tf.run_pretraining",
          f"--config_file={tu.TINY_RECIPE}", f"--params_override={overrides}",
          f"--model_dir={model_dir}"] + list(extra)
  # The started tool holds its own copy of the log's descriptor.
  with open(model_dir + ".log", "a") as log:
    return tool_server.start(args, cwd=ROOT,
                             env=env or tool_server.tool_env(), stdout=log,
                             stderr=subprocess.STDOUT)


def log_text(model_dir):
  with open(model_dir + ".log") as f:
    return f.read()


def wait(proc, model_dir, timeout=240):
  try:
    return proc.wait(timeout=timeout)
  except subprocess.TimeoutExpired:
    proc.kill()
    raise AssertionError(f"timed out:\n{log_text(model_dir)[-3000:]}")


def last_step(model_dir):
  path = os.path.join(model_dir, "metrics.jsonl")
  if not os.path.exists(path):
    return 0
  with open(path) as f:
    rows = [json.loads(l) for l in f if l.strip()]
  return max([r["step"] for r in rows if r["mode"] == "train"], default=0)


def wait_for_step(proc, model_dir, step, timeout=240):
  deadline = time.time() + timeout
  while last_step(model_dir) < step:
    if proc.poll() is not None:
      raise AssertionError(f"exited early:\n{log_text(model_dir)[-3000:]}")
    if time.time() > deadline:
      proc.kill()
      raise AssertionError(f"no progress:\n{log_text(model_dir)[-3000:]}")
    time.sleep(0.1)


def model_weights(checkpoint_prefix):
  reader = tf.train.load_checkpoint(checkpoint_prefix)
  return {k: reader.get_tensor(k) for k in reader.get_variable_to_shape_map()
          if k.startswith("model/") or k.startswith("encoder/")}


@pytest.mark.slow
def test_kill9_resume_matches_uninterrupted_and_sigterm_saves(train_file,
                                                              tmp_path):
  """kill -9 mid-run, restart: resumes at the last checkpoint's step and, with
  deterministic ops, ends with exactly the uninterrupted run's weights.
  Also: SIGTERM makes a run save a checkpoint at its current step and exit
  with code 143."""
  det = tu.tiny_overrides(train_file, **{
      "trainer.train_steps": 60, "trainer.steps_per_loop": 5,
      "trainer.checkpoint_interval": 20, "runtime.deterministic": True,
      "runtime.seed": 7})
  ref_dir, run_dir, term_dir = (str(tmp_path / n) for n in
                                ("ref", "run", "term"))
  ref = cli(ref_dir, det)
  run = cli(run_dir, det)
  term = cli(term_dir, tu.tiny_overrides(train_file, **{
      "trainer.train_steps": 100000, "trainer.steps_per_loop": 5,
      "trainer.checkpoint_interval": 50000}))

  wait_for_step(run, run_dir, 25)  # past ckpt-20
  run.send_signal(signal.SIGKILL)
  run.wait()
  latest = tf.train.latest_checkpoint(os.path.join(run_dir, "checkpoints"))
  resume_step = int(latest.rsplit("-", 1)[1])
  assert 20 <= resume_step < 60 and last_step(run_dir) > resume_step

  wait_for_step(term, term_dir, 10)
  term.send_signal(signal.SIGTERM)
  assert wait(term, term_dir) == 143, log_text(term_dir)[-3000:]
  term_ckpt = tf.train.latest_checkpoint(os.path.join(term_dir, "checkpoints"))
  assert term_ckpt and int(term_ckpt.rsplit("-", 1)[1]) == last_step(term_dir)
  assert "SIGTERM received" in log_text(term_dir)

  rerun = cli(run_dir, det)
  assert wait(rerun, run_dir) == 0, log_text(run_dir)[-3000:]
  assert wait(ref, ref_dir) == 0, log_text(ref_dir)[-3000:]
  assert f"resumed from {latest} at step {resume_step}" in log_text(run_dir)
  final = os.path.join(run_dir, "checkpoints", "ckpt-60")
  a, b = model_weights(final), model_weights(
      os.path.join(ref_dir, "checkpoints", "ckpt-60"))
  assert a.keys() == b.keys() and len(a) > 10
  for k in a:
    np.testing.assert_array_equal(a[k], b[k], err_msg=k)
  assert os.path.exists(os.path.join(run_dir, "experiment_config.yaml"))


_EQUIVALENCE_SCRIPT = r"""
import json, sys
from albert_tf.core import distribute_utils
from albert_tf.core import experiment_config
from albert_tf.tasks import pretraining as pretraining_task
from albert_tf.core import trainer as trainer_lib
from albert_tf.tasks import pretraining
distribute_utils.configure_cpu_devices(2)
train_file, out_dir, recipe = sys.argv[1:4]
curves = {}
for name, strategy, accum in (("one", "default", 1), ("mirrored", "mirrored", 1),
                              ("mirrored_accum2", "mirrored", 2)):
  config = experiment_config.load_experiment_config(
      pretraining.PretrainingExperimentConfig, [recipe], ",".join([
      f"data.input_path={train_file}", f"data.eval_input_path={train_file}",
      "trainer.train_steps=12", "trainer.steps_per_loop=3",
      "trainer.checkpoint_interval=100", "runtime.seed=3",
      f"trainer.gradient_accumulation_steps={accum}",
      "trainer.save_data_position=false"]))
  s = distribute_utils.get_strategy(strategy)
  t = trainer_lib.Trainer(pretraining_task.PretrainingTask(config), config,
                          f"{out_dir}/{name}", s)
  t.train()
  rows = [json.loads(l) for l in open(f"{out_dir}/{name}/metrics.jsonl")]
  curves[name] = {"replicas": s.num_replicas_in_sync,
                  "loss": [r["loss"] for r in rows],
                  "mlm_acc": [r["masked_lm_accuracy"] for r in rows]}
print("CURVES " + json.dumps(curves))
"""


@pytest.mark.slow
def test_mirrored_two_cpus_and_accumulation_match_one_device(train_file,
                                                             tmp_path):
  """Same global batch (32): 1 device, MirroredStrategy over 2 logical CPUs,
  and 2 CPUs x 2 accumulation micro-batches give the same loss curve."""
  proc = tool_server.run(
      [sys.executable, "-c", _EQUIVALENCE_SCRIPT, train_file, str(tmp_path),
       tu.TINY_RECIPE], cwd=ROOT, env=tool_server.tool_env(),
      capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  line = [l for l in proc.stdout.splitlines() if l.startswith("CURVES ")][0]
  curves = json.loads(line[len("CURVES "):])
  assert curves["one"]["replicas"] == 1
  assert curves["mirrored"]["replicas"] == 2
  one = np.array(curves["one"]["loss"])
  assert len(one) == 4 and one[-1] < one[0]
  for name in ("mirrored", "mirrored_accum2"):
    np.testing.assert_allclose(curves[name]["loss"], one, rtol=1e-4,
                               err_msg=name)
    np.testing.assert_allclose(curves[name]["mlm_acc"],
                               curves["one"]["mlm_acc"], atol=1e-3)


def _free_ports(n):
  socks = [socket.socket() for _ in range(n)]
  for s in socks:
    s.bind(("127.0.0.1", 0))
  ports = [s.getsockname()[1] for s in socks]
  for s in socks:
    s.close()
  return ports


@pytest.mark.slow
def test_multi_worker_mirrored_two_workers_agree(train_file, tmp_path):
  ports = _free_ports(2)
  cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
  model_dir = str(tmp_path / "mwms")
  overrides = tu.tiny_overrides(train_file, **{
      "trainer.train_steps": 6, "trainer.steps_per_loop": 3,
      "trainer.checkpoint_interval": 6, "trainer.save_data_position": False})
  procs = []
  for i in range(2):
    env = tool_server.tool_env(TF_CONFIG=json.dumps(
        {"cluster": cluster, "task": {"type": "worker", "index": i}}))
    args = [sys.executable, "-m", "albert_tf.run_pretraining",
            f"--config_file={tu.TINY_RECIPE}",
            f"--params_override={overrides}", f"--model_dir={model_dir}",
            "--strategy=multi_worker_mirrored"]
    procs.append(tool_server.start(
        args, cwd=ROOT, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True))
  outs = []
  for p in procs:
    try:
      outs.append(p.communicate(timeout=240)[0])
    except subprocess.TimeoutExpired:
      for q in procs:
        q.kill()
      raise
  for p, out in zip(procs, outs):
    assert p.returncode == 0, out[-3000:]
  assert "with 2 replica(s)" in outs[0]
  chief = model_weights(os.path.join(model_dir, "checkpoints", "ckpt-6"))
  worker = model_weights(os.path.join(model_dir, "tmp_worker_1", "ckpt-6"))
  assert chief.keys() == worker.keys() and len(chief) > 10
  for k in chief:
    np.testing.assert_array_equal(chief[k], worker[k], err_msg=k)


def test_locked_model_dir_is_a_one_line_error(train_file, tmp_path):
  """A model_dir another live run holds: exit 1 with one line naming the
  lock file, no traceback, nothing written."""
  model_dir = str(tmp_path / "locked")
  os.makedirs(model_dir)
  lock = os.path.join(model_dir, "train.lock")
  with open(lock, "w", encoding="utf-8") as f:
    json.dump({"pid": 1, "host": "another-host", "time": 0}, f)
  proc = cli(model_dir, tu.tiny_overrides(train_file,
                                          **{"trainer.train_steps": 2}))
  assert wait(proc, model_dir) == 1
  text = log_text(model_dir)
  assert "Traceback" not in text, text[-3000:]
  errors = [l for l in text.splitlines() if l.startswith("ERROR:")]
  assert len(errors) == 1 and lock in errors[0], text[-3000:]
  assert not os.path.exists(os.path.join(model_dir, "checkpoints"))
