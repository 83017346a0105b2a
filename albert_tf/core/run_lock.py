"""`<model_dir>/train.lock`: one training run at a time on a model_dir.

Two runs on one model_dir would interleave checkpoints and metrics.jsonl
silently; the chief holds this lock for the duration of `Trainer.train()`.
"""

import json
import os
import socket
import time
from typing import Dict

from absl import logging

from albert_tf.core import actions

LOCK_FILE = "train.lock"


def _pid_alive(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True  # alive, owned by another user
  return True


def process_record() -> Dict:
  """This process as a lock or a run record names it: pid and host."""
  return {"pid": os.getpid(), "host": socket.gethostname()}


def may_be_running(owner: Dict) -> bool:
  """Whether the process `owner` names ({"pid", "host"}) may still run: a
  dead pid on this host, or this very process, does not; one on another
  host cannot be checked, so it may."""
  pid, host = owner.get("pid"), owner.get("host")
  if host != socket.gethostname():
    return True
  return isinstance(pid, int) and pid != os.getpid() and _pid_alive(pid)


class RunLock:
  """`<model_dir>/train.lock` (pid + host) held for a training run.

  A lock of a dead process on this host (or of this process) is taken over
  with a warning; a live one, or one from another host, is refused.
  """

  def __init__(self, model_dir: str):
    self.path = os.path.join(model_dir, LOCK_FILE)
    self._held = False

  def _read_owner(self) -> Dict:
    try:
      with open(self.path, encoding="utf-8") as f:
        return json.load(f)
    except (OSError, ValueError):
      return {}  # vanished or half-written: treated as stale

  def acquire(self) -> None:
    me = dict(process_record(), time=time.time())
    for _ in range(3):
      try:
        fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
      except FileExistsError:
        owner = self._read_owner()
        pid, host = owner.get("pid"), owner.get("host")
        if owner and may_be_running(owner):
          raise actions.RunLockedError(
              f"{self.path}: model_dir is in use by pid {pid} on host {host}"
              "; stop that run, or delete the lock file if it is stale")
        logging.warning("%s: taking over the stale lock of pid %s on %s",
                        self.path, pid, host)
        try:
          os.remove(self.path)
        except FileNotFoundError:
          pass
        continue
      with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(me, f)
      self._held = True
      return
    raise actions.RunLockedError(f"{self.path}: could not take the run lock")

  def release(self) -> None:
    if self._held:
      self._held = False
      try:
        os.remove(self.path)
      except FileNotFoundError:
        pass

  def __enter__(self):
    self.acquire()
    return self

  def __exit__(self, *exc):
    self.release()
