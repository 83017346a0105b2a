"""Writers of one output: two runs at once, a stale claim, interrupted runs,
replaced datasets. Each test fails on the code before its fix."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from data_prep import create_pretraining_data as cpd
from data_prep import output_files
from data_prep import pretraining_config
from data_prep import pretraining_instances as pi
from data_prep import tfrecord_io
from tests.testing.botchan_testlib import botchan_spm

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = {**os.environ, "PYTHONPATH": ROOT, "TF_CPP_MIN_LOG_LEVEL": "2"}


def small_cfg(model, dupe=1, **instance):
  instance.setdefault("max_predictions_per_seq", 10)
  return pretraining_config.RunConfig(
      spm_model_file=model, do_lower_case=True,
      instance=pi.InstanceConfig(max_seq_length=64, **instance),
      dupe_factor=dupe)


@pytest.fixture(scope="module")
def spm_corpus(tmp_path_factory):
  return botchan_spm(tmp_path_factory)


def count_records(path):
  with open(path, "rb") as f:
    return len(tfrecord_io.split_framed(f.read()))


def start_writer(corpus, model, out, dupe):
  """create_pretraining_data in a process of its own, writing `out`."""
  return subprocess.Popen(
      [sys.executable, "-m", "data_prep.create_pretraining_data",
       f"--input_file={corpus}", f"--output_file={out}",
       f"--spm_model_file={model}", "--max_seq_length=64",
       f"--dupe_factor={dupe}", "--shuffle_buffer_size=0",
       "--docs_per_block=1", "--progress_interval=0"],
      env=ENV, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
      text=True)


def wait_for(path, proc, timeout=60):
  deadline = time.time() + timeout
  while time.time() < deadline and proc.poll() is None:
    if os.path.exists(path):
      return
    time.sleep(0.02)
  raise AssertionError(f"{path} never appeared: {proc.communicate()}")


def test_second_writer_of_one_output_is_refused(spm_corpus, tmp_path):
  """Two runs on one --output_file shared a temporary name: the file on disk
  was one run's data under the other run's summary."""
  model, corpus = spm_corpus
  out = tmp_path / "train.tfrecord"
  first = start_writer(corpus, model, out, dupe=8)
  wait_for(output_files.temp_path(str(out)), first)
  first.send_signal(signal.SIGSTOP)  # still writing while the second starts
  try:
    with pytest.raises(OSError, match="being written by another run") as info:
      cpd.run([corpus], [str(out)], small_cfg(model, dupe=1),
              progress_interval=0)
  finally:
    first.send_signal(signal.SIGCONT)
  message = str(info.value)
  assert "\n" not in message
  assert (f"output {out} is being written by another run (pid {first.pid} "
          f"on host") in message
  assert output_files.lock_path(str(out)) in message
  _, err = first.communicate(timeout=300)
  assert first.returncode == 0, err
  # The summary describes the file beside it: the first run's, whole.
  summary = json.load(open(str(out) + ".summary.json", encoding="utf-8"))
  assert summary["records_per_file"] == {str(out): count_records(out)}
  assert summary["config"]["dupe_factor"] == 8
  assert sorted(os.listdir(tmp_path)) == ["train.tfrecord",
                                          "train.tfrecord.summary.json"]


def test_claim_of_a_dead_run_is_taken_over(spm_corpus, tmp_path, capsys):
  model, corpus = spm_corpus
  out = str(tmp_path / "t.tfrecord")
  dead = subprocess.Popen([sys.executable, "-c", "pass"])
  dead.wait()
  lock = output_files.lock_path(out)
  with open(lock, "w", encoding="utf-8") as f:
    json.dump(dict(output_files.owner_lock.process_record(), pid=dead.pid), f)
  summary = cpd.run([corpus], [out], small_cfg(model), progress_interval=0)
  assert count_records(out) == summary["instances"] > 0
  assert f"{lock}: taking over the stale lock of pid {dead.pid}" in (
      capsys.readouterr().err)
  assert not os.path.exists(lock)
