"""Sets of output shards (`PATH@N`): shards of another count left beside
them, and shards that would hold no record. Each test fails on the code
before its fix."""

import os

import pytest

from data_prep import create_pretraining_data as cpd
from data_prep import shard_sets
from albert_toolkit import tfrecord_io
from tests.testing.beam_testlib import instance_flags
from tests.testing.beam_testlib import run_cfg
from tests.testing.botchan_testlib import botchan_spm
from tests.testing.data_prep_tools import error_line, run_tool


@pytest.fixture(scope="module")
def spm_corpus(tmp_path_factory):
  return botchan_spm(tmp_path_factory)


def _files(directory):
  """name -> bytes of every file in `directory` (hidden ones too)."""
  return {name: (directory / name).read_bytes()
          for name in sorted(os.listdir(directory))}


def test_shards_of_another_count_are_refused_and_kept(spm_corpus, tmp_path):
  """Writing PATH@3 beside PATH@2's shards left both sets (and the old
  summary) without a word: `PATH-*` then read the corpus twice."""
  model, corpus = spm_corpus
  out = tmp_path / "rs"
  two = tfrecord_io.expand_output_files(f"{out}/train.tfrecord@2")
  cpd.run([corpus], two, run_cfg(model), progress_interval=0)
  (out / "train.tfrecord-notes.txt").write_text("not a shard\n")
  (out / "train.tfrecord2-00000-of-00005").write_text("another set\n")
  before = _files(out)
  three = tfrecord_io.expand_output_files(f"{out}/train.tfrecord@3")
  assert shard_sets.other_shard_counts(three) == sorted(
      two + [two[0] + ".summary.json"])
  base = f"{out}/train.tfrecord"
  with pytest.raises(ValueError) as e:
    cpd.run([corpus], three, run_cfg(model), progress_interval=0)
  assert str(e.value) == (
      f"--output_file {base}@3: 3 file(s) of another shard count are there "
      f"({two[0]}, {two[0]}.summary.json and 1 more); a glob such as "
      f"{base}-* would read both sets, every instance twice; delete them "
      f"(rm {base}-*-of-00002*) or choose another --output_file; nothing "
      "written")
  assert _files(out) == before  # nothing written, nothing deleted
  proc = run_tool("create_pretraining_data", f"--input_file={corpus}",
                  f"--output_file={base}@3", *instance_flags(model))
  assert error_line(proc) == f"create_pretraining_data: error: {e.value}"
  assert _files(out) == before
  # The same count replaces its own shards; other names are not shard sets.
  cpd.run([corpus], two, run_cfg(model), progress_interval=0)
  cpd.run([corpus], [base], run_cfg(model), progress_interval=0)
  assert shard_sets.other_shard_counts([base]) == []
  assert shard_sets.other_shard_counts([two[1], two[0]]) == []
  for path in two + [two[0] + ".summary.json"]:
    os.remove(path)
  cpd.run([corpus], three, run_cfg(model), progress_interval=0)


def test_a_shard_without_records_is_refused_before_writing(spm_corpus,
                                                           tmp_path):
  """With fewer instances than shards the tool wrote zero-record shards
  (exit 0), which the trainer then refused: `t-00042-of-00048: empty input
  file (no records)`."""
  model, corpus = spm_corpus
  with open(corpus, encoding="utf-8") as f:
    small = tmp_path / "pairs.txt"
    small.write_text("".join(f.readlines()[:8]), encoding="utf-8")
  out = tmp_path / "es"
  many = tfrecord_io.expand_output_files(f"{out}/t@48")
  with pytest.raises(ValueError) as e:
    cpd.run([str(small)], many, run_cfg(model), progress_interval=0)
  message = str(e.value)
  instances = int(message.split("the run made ")[1].split()[0])
  assert 0 < instances < 48
  assert message == (
      f"{48 - instances} of the 48 output files would hold no record "
      f"(first: {many[instances]}): the run made {instances} instances, and "
      f"the trainer refuses an empty file; give at most {instances} shards "
      f"(--output_file={out}/t@{instances}); nothing written")
  assert os.listdir(out) == []
  proc = run_tool("create_pretraining_data", f"--input_file={small}",
                  f"--output_file={out}/t@48", *instance_flags(model))
  assert error_line(proc) == f"create_pretraining_data: error: {message}"
  assert os.listdir(out) == []
  # The suggested count works: every shard holds a record.
  fit = tfrecord_io.expand_output_files(f"{out}/t@{instances}")
  summary = cpd.run([str(small)], fit, run_cfg(model), progress_interval=0)
  assert sorted(summary["records_per_file"].values()) == [1] * instances
  with pytest.raises(ValueError, match=(
      r"^2 of the 3 output files would hold no record \(first: b\): the run "
      r"made 1 instances, .*; give at most 1 output files; nothing written$")):
    shard_sets.check_no_empty_shards({"a": 1, "b": 0, "c": 0}, 1)
  with pytest.raises(ValueError, match=(
      r"records go to files by hash: give about one per 20 instances, 5 "
      r"shards \(--output_file=t@5\); nothing written$")):
    shard_sets.check_no_empty_shards(
        dict.fromkeys(tfrecord_io.expand_output_files("t@48"), 2) |
        {"t-00007-of-00048": 0}, 100, hashed=True)
