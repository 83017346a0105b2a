"""A lock file naming its owner (pid + host), taken with O_EXCL.

One writer at a time: the data tools hold one per output file while they
write it (output_files.StagedOutputs), the trainer one per run directory
(albert_tf/core/run_lock.py). A lock whose process is dead on this host (or
is this process) is stale and taken over with a warning; a live one, or one
from another host (which cannot be checked), is refused.
"""

import contextlib
import json
import os
import socket
import sys
import time


def _warn(fmt, *args):
  sys.stderr.write("warning: " + fmt % args + "\n")


def _pid_alive(pid):
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True  # alive, owned by another user
  return True


def process_record():
  """This process as a lock or a run record names it: pid and host."""
  return {"pid": os.getpid(), "host": socket.gethostname()}


def may_be_running(owner):
  """Whether the process `owner` names ({"pid", "host"}) may still run: a
  dead pid on this host, or this very process, does not; one on another
  host cannot be checked, so it may."""
  pid, host = owner.get("pid"), owner.get("host")
  if host != socket.gethostname():
    return True
  return isinstance(pid, int) and pid != os.getpid() and _pid_alive(pid)


class OwnerLock:
  """`path` holding {"pid", "host", "time"} while held.

  acquire() raises `error_cls(refused(path, owner))` when a live owner
  holds it; `refused` makes the one-line message.
  """

  def __init__(self, path, error_cls, refused, log=None):
    self.path = path
    self._error_cls = error_cls
    self._refused = refused
    self._log = log or _warn
    self._held = False

  def _read_owner(self):
    try:
      with open(self.path, encoding="utf-8") as f:
        return json.load(f)
    except (OSError, ValueError):
      return {}  # vanished or half-written: treated as stale

  def acquire(self):
    me = dict(process_record(), time=time.time())
    for _ in range(3):
      try:
        fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
      except FileExistsError:
        owner = self._read_owner()
        if owner and may_be_running(owner):
          raise self._error_cls(self._refused(self.path, owner)) from None
        self._log("%s: taking over the stale lock of pid %s on %s",
                  self.path, owner.get("pid"), owner.get("host"))
        with contextlib.suppress(FileNotFoundError):
          os.remove(self.path)
        continue
      with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(me, f)
      self._held = True
      return
    raise self._error_cls(f"{self.path}: could not take the lock")

  def release(self):
    if self._held:
      self._held = False
      with contextlib.suppress(FileNotFoundError):
        os.remove(self.path)

  def __enter__(self):
    self.acquire()
    return self

  def __exit__(self, *exc):
    self.release()
