"""data_prep.beam_pretraining_data on the DirectRunner vs the local tool.

Small on purpose (a slice of botchan, seq 64, dupe 2): each pipeline run costs
a few seconds of Beam start-up on the 2-core machine.
"""

import collections
import gzip
import json
import os
import re
import socket
import struct
import subprocess
import sys
import zlib

import pytest

from data_prep import beam_options
from data_prep import beam_pipeline
from data_prep import beam_pretraining_data as bpd
from data_prep import create_pretraining_data as cpd
from albert_toolkit import output_files
from albert_toolkit import tfrecord_io
from tests.testing import tool_server
from tests.testing.data_prep_tools import ROOT, error_line, run_tool
from tests.testing.beam_testlib import instance_flags
from tests.testing.beam_testlib import read_records
from tests.testing.beam_testlib import run_cfg
from tests.testing.beam_testlib import small_corpus

# Ten seconds or more in all: handed out first (tests/conftest.py).
pytestmark = pytest.mark.slow

IN_MEMORY = ["--runner=DirectRunner", "--direct_num_workers=1"]
# The local tool's flag: beam_options makes it 2 SDK worker processes.
TWO_PROCESSES = ["--runner=DirectRunner", "--num_workers=2"]


@pytest.fixture(scope="module")
def spm_corpus(tmp_path_factory):
  return small_corpus(tmp_path_factory)


@pytest.fixture(scope="module")
def local_and_beam(spm_corpus, tmp_path_factory):
  """The local tool (1 file) and the CLI on 2 processes (3 shards)."""
  model, corpus = spm_corpus
  out = tmp_path_factory.mktemp("beam_out")
  local = str(out / "local.tfrecord")
  cpd.run([corpus], [local], run_cfg(model), docs_per_block=2,
          progress_interval=0)
  proc = run_tool(
      "beam_pretraining_data", f"--input_file={corpus}",
      f"--output_file={out}/beam.tfrecord@3", "--docs_per_block=2",
      *instance_flags(model), *TWO_PROCESSES, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  shards = tfrecord_io.expand_output_files(f"{out}/beam.tfrecord@3")
  return local, shards


def test_same_instances_as_the_local_tool(local_and_beam):
  local, shards = local_and_beam
  from_local = collections.Counter(read_records(local))
  from_beam = collections.Counter(r for s in shards for r in read_records(s))
  assert sum(from_local.values()) > 150
  assert from_beam == from_local
  assert all(read_records(s) for s in shards)  # hashing spreads records


def test_shuffle_elements_round_trip_and_shrink_the_shuffle(local_and_beam):
  local, _ = local_and_beam
  framed = [tfrecord_io.frame_record(p) for p in read_records(local)]
  keyed = [(beam_pipeline.record_key(7, 0, i), r) for i, r in enumerate(framed)]
  sizes = {}
  for batch in (keyed[:1], keyed[:4], keyed):
    packed = beam_pipeline.pack_records(batch)
    assert beam_pipeline.unpack_records(packed) == batch
    sizes[len(batch)] = (len(packed), sum(len(r) for _, r in batch))
  # Padded tf.Examples: one record (key included) crosses the shuffle
  # smaller, a block's worth in under a third (seq 64 here).
  assert sizes[1][0] < sizes[1][1]
  assert 3 * sizes[len(keyed)][0] < sizes[len(keyed)][1]
  assert beam_pipeline.unpack_records(beam_pipeline.pack_records([])) == []
  with pytest.raises(ValueError, match="2 records for 3 keys"):
    beam_pipeline.unpack_records(zlib.compress(
        struct.pack("<I3Q", 3, 1, 2, 3) + framed[0] + framed[1]))


def test_summary_matches_files_and_local_counts(local_and_beam, spm_corpus):
  local, shards = local_and_beam
  with open(local + ".summary.json") as f:
    ref = json.load(f)
  with open(shards[0] + ".summary.json") as f:
    got = json.load(f)
  assert got["records_per_file"] == {s: len(read_records(s)) for s in shards}
  assert got["bytes_per_file"] == {s: os.path.getsize(s) for s in shards}
  for key in ("instances", "documents_read", "documents_used", "tokens",
              "masked_tokens", "skipped_or_repaired", "pair_labels",
              "vocab_size", "max_seq_length", "max_predictions_per_seq",
              "feature_names"):
    assert got[key] == ref[key], key
  assert got["config"]["runner"] == "DirectRunner"
  assert got["config"]["pipeline_args"] == [
      "--runner=DirectRunner", "--direct_num_workers=2",
      "--direct_running_mode=multi_processing"]


def test_reruns_are_byte_identical_for_any_worker_count(local_and_beam,
                                                        spm_corpus, tmp_path):
  _, shards = local_and_beam
  model, corpus = spm_corpus
  again = tfrecord_io.expand_output_files(str(tmp_path / "again.tfrecord@3"))
  bpd.run([corpus], again, run_cfg(model), IN_MEMORY, docs_per_block=2,
          progress_interval=0)
  for a, b in zip(shards, again):
    with open(a, "rb") as fa, open(b, "rb") as fb:
      assert fa.read() == fb.read()
  assert sorted(os.listdir(tmp_path)) == sorted(
      [os.path.basename(p) for p in again] + ["again.tfrecord-00000-of-00003"
                                              ".summary.json"])


def test_bad_input_counted_as_in_the_local_tool(spm_corpus, tmp_path):
  model, corpus = spm_corpus
  with open(corpus, "rb") as f:
    text = f.read()
  bad = tmp_path / "bad.txt"
  giant = b" ".join(text[:60000].split())  # one line, no newline
  bad.write_bytes(b"ok line \xff\xfe broken utf-8.\nsecond line.\n\n\n\n" +
                  text[:20000] + b"\n\n" + giant)
  local = cpd.run([str(bad)], [str(tmp_path / "l.tfrecord")], run_cfg(model),
                  max_line_chars=20000, progress_interval=0)
  beam = bpd.run([str(bad)], [str(tmp_path / "b.tfrecord")], run_cfg(model),
                 IN_MEMORY, max_line_chars=20000, progress_interval=0)
  skipped = local["skipped_or_repaired"]
  assert skipped["invalid_utf8_lines"] == 1
  assert skipped["empty_documents"] >= 1
  assert skipped["huge_lines_split"] == 1
  assert skipped["long_lines_split_into_sentences"] >= 1
  assert beam["skipped_or_repaired"] == skipped
  assert beam["instances"] == local["instances"]
  assert collections.Counter(read_records(str(tmp_path / "b.tfrecord"))) == \
      collections.Counter(read_records(str(tmp_path / "l.tfrecord")))


def test_failed_run_leaves_nothing_complete_looking(spm_corpus, tmp_path):
  model, corpus = spm_corpus
  out = tfrecord_io.expand_output_files(str(tmp_path / "f.tfrecord@2"))
  bpd.run([corpus], out, run_cfg(model), IN_MEMORY, progress_interval=0)
  summary = out[0] + ".summary.json"
  assert os.path.exists(summary)
  for p in out:
    os.remove(p)
  corrupt = tmp_path / "corrupt.txt.gz"
  with open(corpus, "rb") as f:
    corrupt.write_bytes(gzip.compress(f.read())[:3000])  # truncated stream
  with pytest.raises(Exception, match="corrupt.txt.gz"):
    bpd.run([corpus, str(corrupt)], out, run_cfg(model), IN_MEMORY,
            progress_interval=0)
  assert sorted(os.listdir(tmp_path)) == ["corrupt.txt.gz"]


def test_instance_stage_reports_progress_and_eta(spm_corpus, tmp_path, capfd):
  model, corpus = spm_corpus
  bpd.run([corpus], [str(tmp_path / "p.tfrecord")], run_cfg(model), IN_MEMORY,
          docs_per_block=1, progress_interval=1e-9)
  lines = [l for l in capfd.readouterr().err.splitlines()
           if l.startswith("[beam_pretraining_data instances, worker ")]
  assert len(lines) == 7, lines  # one per block (6 documents), then final
  done = [float(re.search(r"\] *([\d.]+)% of input", l).group(1))
          for l in lines]
  assert done == sorted(done) and done[-1] == 100.0
  assert "ETA 0s" in lines[-1] and "instances (" in lines[-1]


def test_output_equal_to_input_is_refused(spm_corpus, tmp_path):
  model, corpus = spm_corpus
  copy = tmp_path / "c.txt"
  copy.write_bytes(open(corpus, "rb").read())
  with pytest.raises(ValueError, match="c.txt"):
    bpd.run([str(copy)], [str(copy)], run_cfg(model), IN_MEMORY)
  assert copy.read_bytes() == open(corpus, "rb").read()


def test_options_refuse_settings_a_run_would_not_use():
  _, runner, args = beam_options.pipeline_options(["--direct_num_workers=2"])
  assert runner == "DirectRunner"  # Beam's default: threads on one core
  assert args[-1] == "--direct_running_mode=multi_processing"
  options, runner, args = beam_options.pipeline_options(
      ["--runner=DataflowRunner"], 8)
  assert args == ["--runner=DataflowRunner", "--num_workers=8"]
  assert beam_options.direct_workers(options, runner) is None  # its own UI
  options, runner, _ = beam_options.pipeline_options(["--direct_num_workers=0"])
  assert beam_options.direct_workers(options, runner) == os.cpu_count()
  _, _, args = beam_options.pipeline_options(
      ["--direct_num_workers=2", "--direct_running_mode=multi_threading"])
  assert args == ["--direct_num_workers=2",
                  "--direct_running_mode=multi_threading"]  # as asked
  refused = [
      (["--dupe_facter=5"], None, "unknown flag --dupe_facter"),
      (["--direct_num_workers=2", "--direct_running_mode=in_memory"], None,
       "in_memory runs one worker"),
      (["--runner=FlinkRunner"], 2, "not used by FlinkRunner"),
      (["--direct_num_workers=3"], 2,
       "--num_workers=2 and --direct_num_workers=3 disagree"),
  ]
  for beam_args, num_workers, message in refused:
    with pytest.raises(ValueError, match=message):
      beam_options.pipeline_options(beam_args, num_workers)


@pytest.mark.parametrize("bad_flag,named", [
    ("--dupe_factor=0", "--dupe_factor=0"),
    ("--dupe_facter=5", "--dupe_facter"),  # Beam alone would drop it
    ("--shuffle_buffer_size=10", "--shuffle_buffer_size")])
def test_cli_bad_flag_is_one_line_error(spm_corpus, tmp_path, bad_flag, named):
  model, corpus = spm_corpus
  proc = run_tool(
      "beam_pretraining_data", f"--input_file={corpus}",
      f"--output_file={tmp_path}/o.tfrecord", f"--spm_model_file={model}",
      bad_flag, *IN_MEMORY, timeout=120)
  assert named in error_line(proc), proc.stderr
  assert os.listdir(tmp_path) == []


_CHECK_DOCUMENTED_COMMANDS = r"""
import re, shlex, sys
from absl import flags
from data_prep import beam_options, pretraining_config
pretraining_config.define_flags()
text = open(sys.argv[1], encoding="utf-8").read()
runners = []
for block in re.findall(r"```sh\n(.*?)```", text, re.S):
  for line in block.replace("\\\n", " ").splitlines():
    if "data_prep.beam_pretraining_data" in line:
      words = [w for w in shlex.split(line, comments=True) if w.startswith("--")]
      rest = flags.FLAGS(["tool"] + words, known_only=True)[1:]
      workers = flags.FLAGS["num_workers"]
      runners.append(beam_options.pipeline_options(
          rest, workers.value if workers.present else None)[1])
      flags.FLAGS.unparse_flags()
print(" ".join(runners))
"""


def test_documented_commands_pass_the_option_checks():
  """Each runner's command in docs/data_prep.md runs past beam_options."""
  proc = subprocess.run(
      [sys.executable, "-c", _CHECK_DOCUMENTED_COMMANDS,
       os.path.join(ROOT, "docs", "data_prep.md")],
      capture_output=True, text=True, env=tool_server.tool_env(), cwd=ROOT,
      timeout=120)
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert proc.stdout.split() == ["DirectRunner", "DaskRunner",
                                 "DataflowRunner", "FlinkRunner",
                                 "SparkRunner"]


def _claim_of(pid, output):
  """A claim on `output` as another run writing it leaves (its lock file)."""
  with open(output_files.lock_path(output), "w", encoding="utf-8") as f:
    json.dump({"pid": pid, "host": socket.gethostname(), "time": 0.0}, f)


def test_a_second_run_onto_claimed_outputs_stops_first(spm_corpus, tmp_path):
  """A run onto outputs another live run writes stops before it deletes
  anything: the first run's temporary shards and summary stay (they were
  deleted, and the first run failed after all its work)."""
  model, corpus = spm_corpus
  out = tfrecord_io.expand_output_files(str(tmp_path / "t.tfrecord@2"))
  temp_dir = output_files.temp_path(out[0] + ".beam")
  os.makedirs(temp_dir)
  with open(os.path.join(temp_dir, "shard-00000"), "wb") as f:
    f.write(b"the first run's shard")
  summary = out[0] + output_files.SUMMARY_SUFFIX
  with open(summary, "w", encoding="utf-8") as f:
    f.write("{}")
  first = subprocess.Popen([sys.executable, "-c",
                            "import time; time.sleep(60)"])
  try:
    _claim_of(first.pid, out[1])
    with pytest.raises(output_files.OutputInUseError) as info:
      bpd.run([corpus], out, run_cfg(model), IN_MEMORY, progress_interval=0)
    assert str(info.value) == (
        f"output {out[1]} is being written by another run (pid {first.pid} "
        f"on host {socket.gethostname()}, lock file "
        f"{output_files.lock_path(out[1])}); wait for it or choose another "
        "output name (delete the lock file if that run is gone)")
    proc = run_tool(
        "beam_pretraining_data", f"--input_file={corpus}",
        f"--output_file={tmp_path}/t.tfrecord@2", *instance_flags(model),
        *IN_MEMORY, timeout=300)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        f"beam_pretraining_data: error: {info.value}")
  finally:
    first.kill()
    first.wait()
  with open(os.path.join(temp_dir, "shard-00000"), "rb") as f:
    assert f.read() == b"the first run's shard"
  assert os.path.exists(summary)
  assert not os.path.exists(output_files.lock_path(out[0]))  # its own: let go


def test_a_dead_runs_claim_is_taken_over(spm_corpus, tmp_path, capfd):
  model, corpus = spm_corpus
  out = [str(tmp_path / "d.tfrecord")]
  gone = subprocess.Popen([sys.executable, "-c", "pass"])
  gone.wait()
  _claim_of(gone.pid, out[0])
  result = bpd.run([corpus], out, run_cfg(model), IN_MEMORY,
                   progress_interval=0)
  assert f"taking over the stale lock of pid {gone.pid}" in (
      capfd.readouterr().err)
  assert result["instances"] == len(read_records(out[0])) > 0
  assert sorted(os.listdir(tmp_path)) == [
      "d.tfrecord", "d.tfrecord" + output_files.SUMMARY_SUFFIX]


def test_shards_of_another_count_are_refused_as_in_the_local_tool(
    spm_corpus, tmp_path):
  """The pipeline wrote beside shards of another count without a word
  (tests/data_prep/test_data_shard_sets.py: the local tool)."""
  model, corpus = spm_corpus
  out = tmp_path / "es"
  out.mkdir()
  (out / "t-00000-of-00002").write_bytes(b"an earlier run's shard")
  with pytest.raises(ValueError, match=(
      rf"^--output_file {out}/t@48: 1 file\(s\) of another shard count are "
      rf"there \({out}/t-00000-of-00002\); .* \(rm {out}/t-\*-of-00002\*\)")):
    bpd.run([corpus], tfrecord_io.expand_output_files(f"{out}/t@48"),
            run_cfg(model), IN_MEMORY)
  assert os.listdir(out) == ["t-00000-of-00002"]


def test_a_shard_without_records_is_refused_as_in_the_local_tool(
    spm_corpus, tmp_path):
  """The pipeline created the shards no record hashed to, and wrote a run
  without instances: empty files the trainer refuses
  (tests/data_prep/test_data_shard_sets.py: the local tool)."""
  model, corpus = spm_corpus
  with open(corpus, encoding="utf-8") as f:
    small = tmp_path / "pairs.txt"
    small.write_text("".join(f.readlines()[:8]), encoding="utf-8")
  out = tmp_path / "es"
  with pytest.raises(ValueError, match=(
      r"^\d+ of the 48 output files would hold no record \(first: .*\): the "
      r"run made \d+ instances, and the trainer refuses an empty file; "
      r"records go to files by hash: give about one per 20 instances, 1 "
      rf"shards \(--output_file={out}/t@1\); nothing written$")):
    bpd.run([str(small)], tfrecord_io.expand_output_files(f"{out}/t@48"),
            run_cfg(model), IN_MEMORY, progress_interval=0)
  assert os.listdir(out) == []
  blank = tmp_path / "blank.txt"
  blank.write_text("\n\n")
  with pytest.raises(ValueError, match=(
      rf"^no instances: the input \({blank}\) holds no text; nothing "
      "written$")):
    bpd.run([str(blank)], [str(out / "t")], run_cfg(model), IN_MEMORY,
            progress_interval=0)
  assert os.listdir(out) == []


def test_a_run_replacing_an_output_removes_the_summary_describing_it(
    spm_corpus, tmp_path, capfd):
  """As the local tool: b.tfrecord.summary.json of an earlier run stayed
  beside the b.tfrecord this run wrote, and readers took it for its."""
  model, corpus = spm_corpus
  a, b = str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord")
  cpd.run([corpus], [b], run_cfg(model), progress_interval=0)
  capfd.readouterr()
  bpd.run([corpus], [a, b], run_cfg(model), IN_MEMORY, progress_interval=0)
  assert (f"note: removing {b}.summary.json: it describes {b}, which this "
          "run replaces\n") in capfd.readouterr().err
  assert sorted(os.listdir(tmp_path)) == [
      "a.tfrecord", "a.tfrecord.summary.json", "b.tfrecord"]
