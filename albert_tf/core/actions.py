"""What the training loop does between steps: checkpoint saves that never
keep a bad file (restoring is run_restore.py's), the best checkpoint,
SIGTERM/SIGINT, the run lock on model_dir, TensorBoard + metrics.jsonl, the
progress line, finiteness of the weights, and naming the input file behind
a data error.

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

from albert_tf.checkpoints import object_layout
from albert_toolkit import output_files
from albert_toolkit import tfrecord_io

METRICS_FILE = "metrics.jsonl"
BEST_INFO_FILE = "best.json"


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


def check_best_metric(metric: str, names: Sequence[str]) -> None:
  """ValueError (one line) unless `metric` ("": no best checkpoint) is one
  of the evaluation's metric `names`."""
  if metric and metric not in names:
    raise ValueError(
        f"trainer.best_metric: {metric!r} is not a metric of this task's "
        f"evaluation ({', '.join(names)}); set one of them, or '' to keep "
        "no best checkpoint")


def check_task_best_metric(task, config) -> None:
  """check_best_metric of config.trainer.best_metric against the metric
  names `task` declares for its in-loop evaluation (a task declaring none
  is checked at its first evaluation, by keep_if_best); a task without
  in-loop evaluation keeps no best checkpoint, which a warning says."""
  if not task.in_loop_eval:
    if config.trainer.best_metric:
      logging.warning("trainer.best_metric=%s is not used: the task "
                      "evaluates after training only, so no best checkpoint "
                      "is kept", config.trainer.best_metric)
    return
  names = task.eval_metric_names()
  if names is not None:
    check_best_metric(config.trainer.best_metric, names)


def _best_staging(best_dir: str, kind: str) -> str:
  return os.path.join(os.path.dirname(best_dir),
                      f".{os.path.basename(best_dir)}.{kind}")


def read_best(best_dir: str) -> Optional[dict]:
  """best.json of `best_dir` (None: no best yet). A best directory moved
  aside by a replacement that was killed half-way is put back first."""
  old = _best_staging(best_dir, "old")
  if not os.path.exists(best_dir) and os.path.isdir(old):
    os.rename(old, best_dir)
    logging.warning("%s: put back the best checkpoint of an interrupted "
                    "replacement", best_dir)
  path = os.path.join(best_dir, BEST_INFO_FILE)
  if not os.path.exists(path):
    return None
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def keep_if_best(best_dir: str, model, global_step: tf.Variable,
                 metrics: Dict[str, float], metric: str,
                 mode: str, run_identity=None) -> Optional[str]:
  """Writes the model to `<best_dir>/ckpt` (+ best.json) if `metrics[metric]`
  beats the kept one (`mode` "max" or "min") and the weights are finite;
  `run_identity` (checkpoints.identity.RunIdentity) is saved with it.
  A kept best of another metric or mode (changed on resume) is replaced by
  the first evaluation of the new one. Returns the new checkpoint path, or
  None. ValueError when `metric` is not in `metrics` ("": keeps none).

  The checkpoint and best.json are written to a hidden directory beside
  `best_dir`, then swapped in by renames, so a kill never leaves the pair
  out of step (`read_best` puts a directory moved aside back).
  """
  if not metric:
    return None
  check_best_metric(metric, [k for k in metrics if k != "eval_batches"])
  step = int(global_step.numpy())
  if not weights_finite(model.trainable_variables):
    logging.warning("not keeping step %d as best: non-finite weights", step)
    return None
  value = metrics[metric]
  best = read_best(best_dir)
  if best is not None:
    # best.json of older versions holds no "metric"/"mode": its value is
    # under the metric's name.
    kept = best.get("metric") or next(
        (k for k in best if k not in ("step", "checkpoint", "metrics")), None)
    kept_mode = best.get("mode", mode)
    if (kept, kept_mode) != (metric, mode):
      logging.info("trainer.best_metric is %s (%s) but %s holds the best by "
                   "%s%s: a new best by %s starts at step %d", metric, mode,
                   best_dir, kept, f" ({best['mode']})" if "mode" in best
                   else "", metric, step)
    elif not (value > best[metric] if mode == "max"
              else value < best[metric]):
      return None
  partial = _best_staging(best_dir, "partial")
  shutil.rmtree(partial, ignore_errors=True)
  os.makedirs(partial)
  extra = {}
  if run_identity is not None:
    run_identity.stamp(step)
    extra["identity"] = run_identity.variable
  object_layout.checkpoint_for(model, step=global_step, **extra).write(
      os.path.join(partial, "ckpt"))
  path = os.path.join(best_dir, "ckpt")
  output_files.write_json(os.path.join(partial, BEST_INFO_FILE),
                          {"metric": metric, "mode": mode, metric: value,
                           "step": step, "checkpoint": path,
                           "metrics": metrics}, sort_keys=False)
  old = _best_staging(best_dir, "old")
  shutil.rmtree(old, ignore_errors=True)
  if os.path.exists(best_dir):
    os.rename(best_dir, old)
  os.rename(partial, best_dir)
  shutil.rmtree(old, ignore_errors=True)
  logging.info("new best %s %.4f at step %d -> %s", metric, value, step, path)
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
