"""A run started with a relative --model_dir resumes (issue: the checkpoint
state file named `runs/a/checkpoints/ckpt-2`, which TF joined to the
directory again), from the same and from another working directory, through
the command-line tools as a user types them."""

import os
import shutil
import sys

import pytest
import tensorflow as tf

from albert_tf.checkpoints import paths
from albert_tf.core import run_restore
from tests.testing import pretrain_testutil as tu
from tests.testing import tool_server


def _cli(module, cwd, *args):
  proc = tool_server.run([sys.executable, "-m", module, *args], cwd=cwd,
                         env=tool_server.tool_env(), capture_output=True,
                         text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return proc


def _pretrain(cwd, model_dir, train_file, steps):
  return _cli("albert_tf.run_pretraining", cwd,
              f"--config_file={tu.TINY_RECIPE}",
              "--params_override=" + tu.tiny_overrides(
                  train_file, **{"trainer.steps_per_loop": 2,
                                 "trainer.checkpoint_interval": 2}),
              f"--model_dir={model_dir}", f"--train_steps={steps}")


@pytest.mark.slow
def test_pretraining_resumes_with_a_relative_model_dir(tmp_path,
                                                      tmp_path_factory):
  train_file, _ = tu.worker_pretraining_data(tmp_path_factory)
  work = tmp_path / "work"
  work.mkdir()
  _pretrain(str(work), "runs/a", train_file, 2)
  checkpoints = work / "runs" / "a" / "checkpoints"
  assert tf.train.latest_checkpoint(str(checkpoints)).endswith("ckpt-2")
  # The same command with more steps resumes (it failed with
  # "no readable checkpoint in runs/a/checkpoints").
  proc = _pretrain(str(work), "runs/a", train_file, 4)
  assert "resumed from" in proc.stderr
  assert tf.train.latest_checkpoint(str(checkpoints)).endswith("ckpt-4")
  # From another working directory, by another relative path to the run.
  _pretrain(str(work / "runs"), "a", train_file, 6)
  assert tf.train.latest_checkpoint(str(checkpoints)).endswith("ckpt-6")
  # export_savedmodel reads the run by a relative path too.
  _cli("albert_tf.export_savedmodel", str(work), "--model_dir=runs/a",
       "--export_dir=exports/enc")
  assert os.path.isfile(work / "exports" / "enc" / "1" / "saved_model.pb")


def test_state_file_of_an_older_version_still_resumes(tmp_path):
  """Runs written before the fix hold `runs/a/checkpoints/ckpt-N` entries:
  the candidates are the files of that name in the directory."""
  directory = tmp_path / "runs" / "a" / "checkpoints"
  directory.mkdir(parents=True)
  checkpoint = tf.train.Checkpoint(v=tf.Variable(1.0))
  for step in (2, 4):
    checkpoint.save_counter.assign(step)
    checkpoint.write(str(directory / f"ckpt-{step}"))
  (directory / "checkpoint").write_text(
      'model_checkpoint_path: "runs/a/checkpoints/ckpt-4"\n'
      'all_model_checkpoint_paths: "runs/a/checkpoints/ckpt-2"\n'
      'all_model_checkpoint_paths: "runs/a/checkpoints/ckpt-4"\n')
  assert paths.checkpoint_candidates(str(directory)) == [
      str(directory / "ckpt-4"), str(directory / "ckpt-2")]
  assert run_restore.resume(
      tf.train.Checkpoint(v=tf.Variable(0.0)), str(directory)) == str(
          directory / "ckpt-4")


def test_a_copied_run_resumes_from_its_own_checkpoints(tmp_path):
  """A state file with absolute paths (TF1's Saver writes them), copied with
  its run directory: the copy resumed from the original's checkpoint while
  that still existed, and wrote its own beside it."""
  original = tmp_path / "original"
  original.mkdir()
  checkpoint = tf.train.Checkpoint(v=tf.Variable(1.0))
  for step in (2, 4):
    checkpoint.save_counter.assign(step)
    checkpoint.v.assign(float(step))
    checkpoint.write(str(original / f"ckpt-{step}"))
  (original / "checkpoint").write_text(
      f'model_checkpoint_path: "{original}/ckpt-4"\n'
      f'all_model_checkpoint_paths: "{original}/ckpt-2"\n'
      f'all_model_checkpoint_paths: "{original}/ckpt-4"\n')
  copy = tmp_path / "copy"
  shutil.copytree(original, copy)
  checkpoint.v.assign(99.0)  # the original run goes on in its directory
  checkpoint.write(str(original / "ckpt-4"))
  assert paths.checkpoint_candidates(str(copy)) == [
      str(copy / "ckpt-4"), str(copy / "ckpt-2")]
  restored = tf.train.Checkpoint(v=tf.Variable(0.0))
  assert run_restore.resume(restored, str(copy)) == str(copy / "ckpt-4")
  assert restored.v.numpy() == 4.0
