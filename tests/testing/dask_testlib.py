"""A dask.distributed cluster of worker processes on 127.0.0.1 for the
DaskRunner tests, and a probe that shows which worker made instances."""

import contextlib
import os
import time

from distributed import Client
from distributed import LocalCluster
from distributed import WorkerPlugin

from data_prep import create_pretraining_data as cpd


@contextlib.contextmanager
def local_cluster(root, workers=2, close_timeout=30):
  """(cluster, client): a scheduler and `workers` worker processes (one
  thread each, under a nanny that restarts a killed one), all bound to
  127.0.0.1, with `root` on the workers' PYTHONPATH. Shut down at the end,
  within close_timeout seconds."""
  cluster = LocalCluster(n_workers=workers, processes=True,
                         threads_per_worker=1, host="127.0.0.1",
                         dashboard_address="127.0.0.1:0",
                         env={"PYTHONPATH": root})
  client = Client(cluster)
  try:
    client.wait_for_workers(workers, timeout=120)
    yield cluster, client
  finally:
    client.close(timeout=close_timeout)
    cluster.close(timeout=close_timeout)


class BlockProbe(WorkerPlugin):
  """In each worker process: counts the blocks MakeInstances gives to
  create_pretraining_data.process_block; optionally sleeps `delay` seconds
  per block and, at the first, creates `marker_dir`/PID (a test kills that
  process while it is making instances)."""

  name = "block_probe"

  def __init__(self, delay=0.0, marker_dir=None):
    self.delay = delay
    self.marker_dir = marker_dir
    self.blocks = 0
    self._original = None

  def setup(self, worker):
    self._original = cpd.process_block

    def probed(block):
      self.blocks += 1
      if self.marker_dir and self.blocks == 1:
        with open(os.path.join(self.marker_dir, str(os.getpid())), "w"):
          pass
      time.sleep(self.delay)
      return self._original(block)

    cpd.process_block = probed

  def teardown(self, worker):
    cpd.process_block = self._original


def blocks_per_worker(client):
  """{worker address: blocks BlockProbe counted there}."""
  return client.run(lambda dask_worker: dask_worker.plugins[
      BlockProbe.name].blocks)


def wait_for_marker(marker_dir, proc, timeout=120):
  """PID of the first worker that created a BlockProbe marker (fails if
  the run `proc` ended first)."""
  deadline = time.time() + timeout
  while time.time() < deadline:
    found = os.listdir(marker_dir)
    if found:
      return int(found[0])
    if proc.poll() is not None:
      raise AssertionError(f"the run ended before any worker made "
                           f"instances: {proc.communicate()[1][-2000:]}")
    time.sleep(0.05)
  raise AssertionError(f"no worker made instances within {timeout} s")
