"""data_prep.beam_pretraining_data on Beam's DaskRunner, on a real
dask.distributed cluster: a scheduler and 2 worker processes on 127.0.0.1
(tests/testing/dask_testlib.py), against the local tool and the
DirectRunner on the same corpus and flags. A worker killed mid-run is
retried by Dask, or (retries off) fails the run with one line and no files.
"""

import collections
import gzip
import json
import os
import signal
import subprocess
import sys

import pytest

from data_prep import beam_options
from data_prep import beam_pretraining_data as bpd
from data_prep import create_pretraining_data as cpd
from albert_toolkit import tfrecord_io
from tests.testing import dask_testlib
from tests.testing import tool_server
from tests.testing.data_prep_tools import ROOT
from tests.testing.beam_testlib import instance_flags
from tests.testing.beam_testlib import read_records
from tests.testing.beam_testlib import run_cfg
from tests.testing.beam_testlib import small_corpus

pytestmark = pytest.mark.slow  # a cluster, 3 command-line runs: 20-55 s

# The tools' environment as the file starts: Dask's nannies later copy their
# workers' variables into os.environ (undone when the file ends).
ENV = tool_server.tool_env()
SHARDS = 3
# One document a block: 6 blocks, dealt into 4 Dask partitions.
BLOCKS = ["--docs_per_block=1"]
PARTITIONS = ["--dask_npartitions=4"]


@pytest.fixture(scope="module")
def spm_corpus(tmp_path_factory):
  return small_corpus(tmp_path_factory)


@pytest.fixture(scope="module")
def reference(spm_corpus, tmp_path_factory):
  """The local tool's file and the DirectRunner's shards, with summaries."""
  model, corpus = spm_corpus
  out = tmp_path_factory.mktemp("reference")
  local = str(out / "local.tfrecord")
  cpd.run([corpus], [local], run_cfg(model), docs_per_block=1,
          progress_interval=0)
  direct = tfrecord_io.expand_output_files(f"{out}/direct.tfrecord@{SHARDS}")
  summary = bpd.run([corpus], direct, run_cfg(model),
                    ["--runner=DirectRunner", "--direct_num_workers=1"],
                    docs_per_block=1, progress_interval=0)
  return local, direct, summary


@pytest.fixture(scope="module")
def cluster():
  with dask_testlib.local_cluster(ROOT, workers=2) as (cluster, client):
    yield cluster, client


def dask_cli(spm_corpus, out_dir, address, popen=False):
  """The tool on the cluster, as a user runs it."""
  model, corpus = spm_corpus
  cmd = ([sys.executable, "-m", "data_prep.beam_pretraining_data",
          f"--input_file={corpus}",
          f"--output_file={out_dir}/dask.tfrecord@{SHARDS}"] +
         instance_flags(model) + BLOCKS + PARTITIONS +
         ["--runner=DaskRunner", f"--dask_client_address={address}"])
  if popen:
    return tool_server.start(cmd, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=ENV,
                             cwd=ROOT)
  return tool_server.run(cmd, capture_output=True, text=True, env=ENV,
                         cwd=ROOT, timeout=300)


def shard_bytes(paths):
  result = []
  for path in paths:
    with open(path, "rb") as f:
      result.append(f.read())
  return result


def comparable(summary):
  """A summary without what differs between runners: timing, paths, the
  runner's name and options."""
  drop = {"elapsed_seconds", "instances_per_second", "summary_file",
          "records_per_file", "output_files", "bytes_per_file"}
  out = {k: v for k, v in summary.items() if k not in drop}
  out["config"] = {k: v for k, v in summary["config"].items()
                   if k not in ("runner", "pipeline_args")}
  out["shard_counts"] = list(summary["records_per_file"].values())
  out["shard_bytes"] = list(summary["bytes_per_file"].values())
  return out


def kill_a_worker_mid_run(spm_corpus, out_dir, cluster, tmp_path):
  """Runs the tool; SIGKILLs the first worker process that makes instances
  (slowed down so the run is still going). Returns (process, killed PID)."""
  _, client = cluster
  markers = tmp_path / "markers"
  markers.mkdir()
  client.register_plugin(dask_testlib.BlockProbe(delay=0.5,
                                                 marker_dir=str(markers)))
  pids = set(client.run(os.getpid).values())
  proc = dask_cli(spm_corpus, out_dir, cluster[0].scheduler_address,
                  popen=True)
  pid = dask_testlib.wait_for_marker(str(markers), proc)
  assert pid in pids and proc.poll() is None
  os.kill(pid, signal.SIGKILL)
  proc.wait(timeout=300)
  client.wait_for_workers(2, timeout=120)  # the nanny restarted it
  assert pid not in client.run(os.getpid).values()
  return proc, pid


def test_same_examples_as_local_and_direct_made_by_both_workers(
    spm_corpus, reference, cluster, tmp_path):
  local, direct, direct_summary = reference
  _, client = cluster
  client.register_plugin(dask_testlib.BlockProbe(delay=0.2))
  proc = dask_cli(spm_corpus, tmp_path, cluster[0].scheduler_address)
  assert proc.returncode == 0, proc.stderr[-3000:]
  shards = tfrecord_io.expand_output_files(f"{tmp_path}/dask.tfrecord@{SHARDS}")
  # Every block made once, in both worker processes.
  blocks = dask_testlib.blocks_per_worker(client)
  assert len(blocks) == 2 and min(blocks.values()) > 0, blocks
  assert sum(blocks.values()) == 6
  from_local = collections.Counter(read_records(local))
  assert sum(from_local.values()) > 150
  assert collections.Counter(
      r for s in shards for r in read_records(s)) == from_local
  assert shard_bytes(shards) == shard_bytes(direct)
  with open(shards[0] + ".summary.json") as f:
    summary = json.load(f)
  assert comparable(summary) == comparable(direct_summary)
  assert summary["config"]["runner"] == "DaskRunner"
  assert summary["skipped_or_repaired"]["long_sentences_cut"] > 0


def test_killed_worker_is_retried_and_the_output_is_the_same(
    spm_corpus, reference, cluster, tmp_path):
  _, direct, _ = reference
  out = tmp_path / "out"
  out.mkdir()
  proc, _ = kill_a_worker_mid_run(spm_corpus, out, cluster, tmp_path)
  assert proc.returncode == 0, proc.communicate()[1][-3000:]
  shards = tfrecord_io.expand_output_files(f"{out}/dask.tfrecord@{SHARDS}")
  assert shard_bytes(shards) == shard_bytes(direct)


def test_killed_worker_without_retries_fails_in_one_line_leaving_nothing(
    spm_corpus, cluster, tmp_path):
  scheduler = cluster[0].scheduler
  allowed = scheduler.allowed_failures
  scheduler.allowed_failures = 0  # the first lost task fails the run
  out = tmp_path / "out"
  out.mkdir()
  try:
    proc, _ = kill_a_worker_mid_run(spm_corpus, out, cluster, tmp_path)
  finally:
    scheduler.allowed_failures = allowed
  _, stderr = proc.communicate()
  assert proc.returncode == 1
  errors = [l for l in stderr.splitlines() if ": error:" in l]
  assert len(errors) == 1 and "KilledWorker" in errors[0], stderr[-3000:]
  assert "Traceback" not in stderr
  assert os.listdir(out) == []


def test_bad_input_as_on_the_direct_runner(spm_corpus, cluster, tmp_path):
  """Counted as by the local tool (test_data_beam.py: the DirectRunner's
  counts are the local tool's)."""
  model, corpus = spm_corpus
  with open(corpus, "rb") as f:
    text = f.read()
  bad = tmp_path / "bad.txt"
  bad.write_bytes(b"ok line \xff\xfe broken utf-8.\n\n\n\n" + text[:20000] +
                  b"\n\n" + b" ".join(text[:60000].split()))
  args = ["--runner=DaskRunner",
          f"--dask_client_address={cluster[0].scheduler_address}"]
  local = cpd.run([str(bad)], [str(tmp_path / "l.tfrecord")], run_cfg(model),
                  max_line_chars=20000, progress_interval=0)
  dask = bpd.run([str(bad)], [str(tmp_path / "k.tfrecord")], run_cfg(model),
                 args, max_line_chars=20000, progress_interval=0)
  assert dask["skipped_or_repaired"] == local["skipped_or_repaired"]
  assert local["skipped_or_repaired"]["invalid_utf8_lines"] == 1
  assert local["skipped_or_repaired"]["huge_lines_split"] == 1
  assert collections.Counter(read_records(str(tmp_path / "k.tfrecord"))) == \
      collections.Counter(read_records(str(tmp_path / "l.tfrecord")))
  # A truncated gzip input: the worker's error, naming the file; no files.
  out_dir = tmp_path / "failed"
  out_dir.mkdir()
  corrupt = tmp_path / "corrupt.txt.gz"
  corrupt.write_bytes(gzip.compress(text)[:3000])
  with pytest.raises(Exception, match="corrupt.txt.gz"):
    bpd.run([corpus, str(corrupt)], [str(out_dir / "f.tfrecord")],
            run_cfg(model), args, progress_interval=0)
  assert os.listdir(out_dir) == []


def test_dask_options_are_checked(monkeypatch):
  options, runner, _ = beam_options.pipeline_options(
      ["--runner=DaskRunner", "--dask_client_address=tcp://127.0.0.1:1"])
  assert beam_options.partitions(options, runner) == \
      beam_options.DASK_PARTITIONS
  assert beam_options.direct_workers(options, runner) is None
  options, runner, _ = beam_options.pipeline_options(
      ["--runner=DaskRunner", "--dask_npartitions=7"])
  assert beam_options.partitions(options, runner) == 7
  refused = [
      (["--runner=DaskRunner"], 2, "--num_workers is not used by DaskRunner"),
      (["--runner=DaskRunner", "--dask_partition_size=5"], None,
       "--dask_partition_size is not used"),
      (["--runner=DaskRunner", "--dask_npartitions=0"], None,
       "--dask_npartitions=0: must be at least 1"),
      (["--runner=DaskRunner", "--dask_adress=x"], None,
       "unknown flag --dask_adress")]
  for beam_args, num_workers, message in refused:
    with pytest.raises(ValueError, match=message):
      beam_options.pipeline_options(beam_args, num_workers)
  monkeypatch.setattr(beam_options, "dask_runner", None)  # no dask extra
  with pytest.raises(ValueError, match=r"needs the dask extra: pip install "
                     r"-e '\.\[dask\]'"):
    beam_options.pipeline_options(["--runner=DaskRunner"])
