"""Writers of one output: two runs at once, a stale claim, interrupted runs,
replaced datasets. Each test fails on the code before its fix."""

import collections
import io
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from data_prep import create_pretraining_data as cpd
from albert_toolkit import output_files
from data_prep import pretraining_config
from data_prep import pretraining_instances as pi
from data_prep import text_reader
from albert_toolkit import tfrecord_io
from tests.testing import tool_server
from tests.testing.botchan_testlib import botchan_spm
from tests.testing.repo_paths import ROOT

ENV = tool_server.tool_env()


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
  return tool_server.start(
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


def test_empty_input_writes_nothing_and_says_why(spm_corpus, tmp_path):
  """It wrote an empty dataset (and a summary) with 'ETA nans'."""
  model, _ = spm_corpus
  empty = tmp_path / "empty.txt"
  empty.write_text("\n\n")
  out = tmp_path / "out" / "t.tfrecord"
  proc = tool_server.run(
      [sys.executable, "-m", "data_prep.create_pretraining_data",
       f"--input_file={empty}", f"--output_file={out}",
       f"--spm_model_file={model}", "--max_seq_length=64",
       "--progress_interval=0.000001"],
      env=ENV, cwd=ROOT, capture_output=True, text=True, timeout=120)
  assert proc.returncode == 1
  assert "nan" not in proc.stderr
  assert proc.stderr.splitlines()[-1] == (
      f"create_pretraining_data: error: no instances: the input ({empty}) "
      "holds no text; nothing written")
  assert os.listdir(out.parent) == []
  progress = cpd.Progress(0, 1, stream=io.StringIO())
  progress.maybe_report(collections.Counter(), final=True)
  assert progress.stream.getvalue().endswith("ETA unknown\n")


def test_masked_lm_prob_zero_is_refused():
  """0 wrote instances without a mask (the budget is documented as >= 1);
  training on them reported 'new best masked_lm_accuracy 0.0000'."""
  with pytest.raises(ValueError, match=r"masked_lm_prob must be > 0 and <= "
                     r"1, got 0: every instance masks max\(1, round"):
    pi.InstanceConfig(masked_lm_prob=0)


def test_replacing_an_existing_dataset_is_said(spm_corpus, tmp_path, capsys):
  model, corpus = spm_corpus
  spec = tfrecord_io.expand_output_files(f"{tmp_path}/t.tfrecord@2")
  cpd.run([corpus], spec, small_cfg(model), progress_interval=0)
  assert "replacing" not in capsys.readouterr().err
  cpd.run([corpus], spec, small_cfg(model), progress_interval=0)
  assert (f"note: replacing the existing {spec[0]} and 1 more" in
          capsys.readouterr().err)


def test_sigterm_removes_temporary_files_and_the_claim(spm_corpus, tmp_path):
  """SIGTERM left empty `.incomplete` files (its default action skips the
  cleanup)."""
  model, corpus = spm_corpus
  out = tmp_path / "t.tfrecord"
  proc = start_writer(corpus, model, out, dupe=200)
  wait_for(output_files.temp_path(str(out)), proc)
  proc.send_signal(signal.SIGTERM)
  proc.communicate(timeout=60)
  assert proc.returncode == 143
  assert os.listdir(tmp_path) == []


def test_latin1_file_is_named(tmp_path, capsys):
  latin1 = tmp_path / "latin1.txt"
  latin1.write_bytes("ok\nCaf\u00e9\nna\u00efve\n".encode("latin-1"))
  stats = collections.Counter()
  assert list(text_reader.iter_clean_lines(str(latin1), stats)) == [
      "ok", "Caf", "nave"]
  assert stats["invalid_utf8_lines"] == 2
  assert capsys.readouterr().err == (
      f"warning: input file {latin1} is not UTF-8: 2 line(s) had bytes that "
      "are not (first: line 2; Latin-1 or Windows-1252 text?), dropped; "
      "convert it first (iconv -f LATIN1 -t UTF-8)\n")
