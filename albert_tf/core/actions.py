"""What the training loop does between steps, each as a small function:
checkpoint save / restore that never trusts a bad file, the run lock on
model_dir, the metrics file, finiteness of the weights, and naming the input
file behind a data error.

The promises these keep are listed in docs/reliability.md ("Training loop").
"""

import glob
import json
import os
import shutil
import socket
import time
from typing import Dict, List, Optional, Sequence

from absl import logging
import tensorflow as tf

from albert_tf.data import pretraining_dataloader

LOCK_FILE = "train.lock"


class TrainingError(RuntimeError):
  """A training run stopped for a reason its message names (one line)."""


class NonFiniteLossError(TrainingError):
  """The training loss (or the weights) became NaN or infinite."""


class InputDataError(TrainingError, ValueError):
  """An input file is corrupt or truncated (the message names it)."""


class CheckpointError(TrainingError):
  """A checkpoint could not be written or read (the message names it)."""


class RunLockedError(TrainingError):
  """Another live run holds model_dir's lock file."""


def error_summary(error: Exception) -> str:
  """One line of an (op) error: the last line that says what failed
  (a graph error starts with "Graph execution error:" and a traceback)."""
  text = getattr(error, "message", None) or str(error)
  lines = [l.strip() for l in text.strip().splitlines()
           if l.strip() and not l.startswith((" ", "\t"))
           and not l.strip().startswith(("[[", "Detected at node",
                                         "Graph execution error"))]
  if not lines:
    return type(error).__name__
  return lines[-1] if text.startswith("Graph execution error") else lines[0]


# --- Weights -----------------------------------------------------------------


@tf.function
def _global_norm(variables):
  # One fused reduction. Its square overflows float32 for any weight above
  # ~1e19, so a diverged (huge but finite) weight also fails the check.
  return tf.linalg.global_norm([tf.cast(v, tf.float32) for v in variables])


def weights_finite(variables: Sequence[tf.Variable]) -> bool:
  """True if every value is finite and the global norm does not overflow."""
  return bool(tf.math.is_finite(_global_norm(list(variables))))


# --- Checkpoints -------------------------------------------------------------


def _remove_temp_dirs(prefix: str) -> None:
  for temp in glob.glob(glob.escape(prefix) + "_temp*"):
    shutil.rmtree(temp, ignore_errors=True)


def save_checkpoint(manager: tf.train.CheckpointManager, step: int) -> str:
  """Saves `ckpt-<step>`; on failure removes the partial files and raises a
  one-line CheckpointError naming the path (disk full, unwritable dir)."""
  prefix = os.path.join(manager.directory, f"ckpt-{step}")
  try:
    path = manager.save(checkpoint_number=step)
  except (tf.errors.OpError, OSError) as e:
    _remove_temp_dirs(prefix)
    raise CheckpointError(
        f"could not write checkpoint {prefix} ({error_summary(e)}); the "
        f"previous checkpoint {manager.latest_checkpoint or '(none)'} is "
        "kept") from e
  logging.info("saved checkpoint %s", path)
  return path


def checkpoint_candidates(directory: str) -> List[str]:
  """Checkpoint prefixes in `directory`, newest first."""
  state = tf.train.get_checkpoint_state(directory)
  if state is None:
    return []
  paths = list(state.all_model_checkpoint_paths) or [
      state.model_checkpoint_path]
  paths = [p if os.path.isabs(p) else os.path.join(directory, p)
           for p in paths]
  return sorted(set(paths), key=_checkpoint_number, reverse=True)


def _checkpoint_number(path: str) -> int:
  tail = path.rsplit("-", 1)[-1]
  return int(tail) if tail.isdigit() else -1


def restore_newest_readable(checkpoint: tf.train.Checkpoint, directory: str,
                            expect_partial: bool = False) -> Optional[str]:
  """Restores the newest checkpoint that reads; warns about each one that
  does not (truncated .data, missing .index) and falls back to the one
  before. `expect_partial`: `checkpoint` leaves out some saved objects.
  Returns the restored path, or None when there is no checkpoint.
  Raises CheckpointError if checkpoints exist but none reads."""
  candidates = checkpoint_candidates(directory)
  failures = []
  for path in candidates:
    try:
      status = checkpoint.restore(path)
      if expect_partial:
        status.expect_partial()
      status.assert_existing_objects_matched()
      return path
    except (tf.errors.OpError, ValueError, AssertionError, IndexError,
            OSError) as e:  # IndexError: a truncated .data file
      logging.warning("checkpoint %s is unreadable (%s); trying the one "
                      "before it", path, error_summary(e))
      failures.append(path)
  if failures:
    raise CheckpointError(
        f"no readable checkpoint in {directory}: {', '.join(failures)} "
        "failed to load; delete them or restore the files")
  return None


# --- Metrics file ------------------------------------------------------------


def append_metrics(path: str, mode: str, step: int,
                   values: Dict[str, float]) -> None:
  record = {"mode": mode, "step": step, "time": round(time.time(), 3)}
  record.update({k: float(v) for k, v in values.items()})
  with open(path, "a", encoding="utf-8") as f:
    f.write(json.dumps(record) + "\n")


def drop_metrics_after(path: str, step: int) -> int:
  """Removes records past `step` (written after the checkpoint a run resumes
  from), atomically. Returns how many were dropped."""
  if not os.path.exists(path):
    return 0
  with open(path, encoding="utf-8") as f:
    lines = f.readlines()
  kept = []
  for line in lines:
    try:
      keep = json.loads(line)["step"] <= step
    except (ValueError, KeyError, TypeError):
      keep = False  # a line cut by kill -9
    if keep:
      kept.append(line if line.endswith("\n") else line + "\n")
  dropped = len(lines) - len(kept)
  if dropped:
    temp = path + ".tmp"
    with open(temp, "w", encoding="utf-8") as f:
      f.writelines(kept)
    os.replace(temp, path)
    logging.info("%s: dropped %d record(s) past the restored step %d", path,
                 dropped, step)
  return dropped


# --- Run lock ----------------------------------------------------------------


def _pid_alive(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True  # alive, owned by another user
  return True


class RunLock:
  """`<model_dir>/train.lock` (pid + host) held for a training run.

  A lock of a dead process on this host (or of this process) is taken over
  with a warning; a live one, or one from another host, is refused.
  """

  def __init__(self, model_dir: str):
    self.path = os.path.join(model_dir, LOCK_FILE)
    self.host = socket.gethostname()
    self._held = False

  def _read_owner(self) -> Dict:
    try:
      with open(self.path, encoding="utf-8") as f:
        return json.load(f)
    except (OSError, ValueError):
      return {}  # vanished or half-written: treated as stale

  def acquire(self) -> None:
    me = {"pid": os.getpid(), "host": self.host, "time": time.time()}
    for _ in range(3):
      try:
        fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
      except FileExistsError:
        owner = self._read_owner()
        pid, host = owner.get("pid"), owner.get("host")
        live = (host != self.host or
                (isinstance(pid, int) and pid != me["pid"] and
                 _pid_alive(pid)))
        if owner and live:
          raise RunLockedError(
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
    raise RunLockedError(f"{self.path}: could not take the run lock")

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


# --- Input data --------------------------------------------------------------


def find_corrupt_file(files: Sequence[str]) -> Optional[str]:
  """Reads every record of `files` with the checked reader; returns the
  first error (naming the file), or None if all files read."""
  for path in files:
    try:
      pretraining_dataloader.check_record_file(path)
    except IOError as e:
      return str(e)
  return None
