"""What the training loop does between steps: checkpoint saves that never
keep a bad file (restoring is run_restore.py's, the best checkpoint
best_checkpoint.py's), SIGTERM/SIGINT, the run lock on model_dir,
TensorBoard + metrics.jsonl, the progress line, finiteness of the weights,
and naming the input file behind a data error.

The promises these keep are listed in docs/reliability.md ("Training loop").
"""

import glob
import json
import math
import os
import shutil
import signal
import time
from typing import Callable, Dict, List, Optional, Sequence

from absl import logging
import tensorflow as tf

from albert_toolkit import output_files
from albert_toolkit import tfrecord_io

METRICS_FILE = "metrics.jsonl"


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


@tf.function(autograph=False)
def _global_norm(variables):
  # One fused reduction. Its square overflows float32 for any weight above
  # ~1e19, so a diverged (huge but finite) weight also fails the check.
  return tf.linalg.global_norm([tf.cast(v, tf.float32) for v in variables])


def weights_finite(variables: Sequence[tf.Variable]) -> bool:
  """True if every value is finite and the global norm does not overflow."""
  return bool(tf.math.is_finite(_global_norm(list(variables))))


def check_loop_finite(step: int, num_steps: int, bad_steps: int,
                      metrics: Dict[str, float], last_good: str) -> None:
  """Raises NonFiniteLossError if a loop of `num_steps` from `step` had a
  NaN/inf loss (`bad_steps`) or metric; the loop's weights are not saved."""
  if bad_steps or not all(math.isfinite(v) for v in metrics.values()):
    raise NonFiniteLossError(
        f"training loss became NaN or infinite between steps {step} and "
        f"{step + num_steps} ({bad_steps} bad step(s); metrics {metrics}). "
        f"Stopped without saving; the last good checkpoint is {last_good}. "
        "Try a lower learning rate, check the input data or the loss scale.")


# --- Checkpoints -------------------------------------------------------------


def save_checkpoint(manager: tf.train.CheckpointManager, step: int) -> str:
  """Saves `ckpt-<step>`; on failure removes the partial files and raises a
  one-line CheckpointError naming the path (disk full, unwritable dir)."""
  prefix = os.path.join(manager.directory, f"ckpt-{step}")
  try:
    path = manager.save(checkpoint_number=step)
  except (tf.errors.OpError, OSError) as e:
    for temp in glob.glob(glob.escape(prefix) + "_temp*"):
      shutil.rmtree(temp, ignore_errors=True)
    raise CheckpointError(
        f"could not write checkpoint {prefix} ({error_summary(e)}); the "
        f"previous checkpoint {manager.latest_checkpoint or '(none)'} is "
        "kept") from e
  logging.info("saved checkpoint %s", path)
  return path


# --- Signals -----------------------------------------------------------------


class StopSignals:
  """While entered, SIGTERM and SIGINT ask the loop to save and stop after
  its current host call (`received` names the signal). A second Ctrl-C
  interrupts at once, without saving."""

  def __init__(self):
    self.received = None
    self._previous = {}

  def _handle(self, signum, frame):  # pylint: disable=unused-argument
    name = signal.Signals(signum).name
    logging.warning("%s received: saving a checkpoint after this loop", name)
    self.received = name
    if signum == signal.SIGINT:
      signal.signal(signal.SIGINT, signal.default_int_handler)

  def __enter__(self):
    self.received = None
    for signum in (signal.SIGTERM, signal.SIGINT):
      try:
        self._previous[signum] = signal.signal(signum, self._handle)
      except ValueError:  # not the main thread: no handlers
        pass
    return self

  def __exit__(self, *exc):
    for signum, handler in self._previous.items():
      signal.signal(signum, handler)
    self._previous = {}


# --- Metrics -----------------------------------------------------------------


class MetricsLogger:
  """TensorBoard summaries (`<model_dir>/<mode>/`) and
  `<model_dir>/metrics.jsonl`; writes nothing unless `enabled` (the chief)."""

  def __init__(self, model_dir: str, enabled: bool):
    self.model_dir = model_dir
    self.enabled = enabled
    self.metrics_path = os.path.join(model_dir, METRICS_FILE)
    self._writers = {}

  def _writer(self, mode):
    if mode not in self._writers:
      self._writers[mode] = tf.summary.create_file_writer(
          os.path.join(self.model_dir, mode))
    return self._writers[mode]

  def log(self, mode: str, step: int, values: Dict[str, float]) -> None:
    if not self.enabled:
      return
    with self._writer(mode).as_default(step=step):
      for k, v in values.items():
        tf.summary.scalar(k, v)
    self._writer(mode).flush()
    append_metrics(self.metrics_path, mode, step, values)

  def drop_after(self, step: int) -> None:
    if self.enabled:
      drop_metrics_after(self.metrics_path, step)


_PROGRESS_EXTRAS = ("steps_per_sec", "examples_per_sec", "learning_rate",
                    "grad_norm", "loss_scale")


def progress_line(step: int, total: int, start_step: int, start_time: float,
                  metrics: Dict[str, float]) -> str:
  """"step 40/100 | loss ... | lr | grad_norm | steps/s examples/s | ETA"."""
  rate = (step - start_step) / max(time.time() - start_time, 1e-9)
  eta = (total - step) / rate if rate > 0 else float("inf")
  eta_text = (time.strftime("%H:%M:%S", time.gmtime(eta))
              if math.isfinite(eta) else "?")
  shown = " ".join(f"{k} {v:.4f}" for k, v in metrics.items()
                   if k not in _PROGRESS_EXTRAS)
  return (f"step {step}/{total} | {shown} | lr {metrics['learning_rate']:.3g}"
          f" | grad_norm {metrics['grad_norm']:.3f} | "
          f"{metrics['steps_per_sec']:.2f} steps/s "
          f"{metrics['examples_per_sec']:.1f} examples/s | ETA {eta_text}")


# --- Metrics file ------------------------------------------------------------


def append_metrics(path: str, mode: str, step: int,
                   values: Dict[str, float]) -> None:
  record = {"mode": mode, "step": step, "time": round(time.time(), 3)}
  record.update({k: float(v) for k, v in values.items()})
  drop_cut_line(path)
  with open(path, "a", encoding="utf-8") as f:
    f.write(json.dumps(record) + "\n")


def drop_cut_line(path: str) -> None:
  """Removes a last line without its newline (a write cut by kill -9), which
  the next record would otherwise be glued to."""
  if not os.path.exists(path):
    return
  with open(path, "rb+") as f:
    end = f.seek(0, os.SEEK_END)
    f.seek(max(end - 1, 0))
    if f.read(1) in (b"", b"\n"):  # empty, or whole lines
      return
    f.seek(0)
    keep = f.read().rfind(b"\n") + 1
    f.truncate(keep)
  logging.warning("%s: dropped a last line cut short by an interrupted write "
                  "(%d bytes)", path, end - keep)


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
    output_files.atomic_write(path, "".join(kept))
    logging.info("%s: dropped %d record(s) past the restored step %d", path,
                 dropped, step)
  return dropped


# --- Input data --------------------------------------------------------------


def find_corrupt_file(files: Sequence[str]) -> Optional[str]:
  """Reads every record of `files` with the checked reader; returns the
  first error (naming the file), or None if all files read."""
  for path in files:
    try:
      for _ in tfrecord_io.read_records(path):
        pass
    except IOError as e:
      return str(e)
  return None


def input_data_error(error: tf.errors.OpError, input_files: Callable[[], List[str]],
                     step: int, saved: str, found: Optional[str] = None
                     ) -> Optional[InputDataError]:
  """The InputDataError for a failed training loop, naming the bad file
  (`found` by the task's reader, `Task.bad_input`; else from the checked
  reader's message, else by scanning `input_files()`), or None if `error`
  is not a data error."""
  message = error.message
  if found is None and tfrecord_io.CORRUPT_RECORD_ERROR in message:
    found = message[message.index(
        tfrecord_io.CORRUPT_RECORD_ERROR):].splitlines()[0]
  elif found is None:
    if not isinstance(error, tf.errors.DataLossError):
      return None
    logging.info("data error from the native reader; scanning the input "
                 "files to name the bad one")
    found = find_corrupt_file(input_files()) or (
        "corrupt input (no bad file found among the inputs: "
        f"{error_summary(error)})")
  return InputDataError(
      f"{found}. At step {step}: {saved}. Fix or remove the file and rerun "
      "(a changed file list needs restore_data_position=False).")
