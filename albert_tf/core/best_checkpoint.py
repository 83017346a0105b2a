"""The best checkpoint, `<model_dir>/best/`: `ckpt` + `best.json`, replaced
only by a better value of `trainer.best_metric` measured the same way (the
same evaluation data and number of batches).

The promises these keep are listed in docs/reliability.md ("Training loop",
"The best checkpoint").
"""

import json
import os
import shutil
from typing import Dict, Optional, Sequence

from absl import logging
import tensorflow as tf

from albert_tf.checkpoints import object_layout
from albert_tf.core import actions
from albert_toolkit import output_files

BEST_INFO_FILE = "best.json"


def check_best_metric(metric: str, names: Sequence[str]) -> None:
  """ValueError (one line) unless `metric` ("": no best checkpoint) is one
  of the evaluation's metric `names`.

  Args:
    metric: trainer.best_metric.
    names: the evaluation's metric names.
  """
  if metric and metric not in names:
    raise ValueError(
        f"trainer.best_metric: {metric!r} is not a metric of this task's "
        f"evaluation ({', '.join(names)}); set one of them, or '' to keep "
        "no best checkpoint")


def check_task_best_metric(task, config) -> None:
  """check_best_metric of config.trainer.best_metric against the metric
  names `task` declares for its in-loop evaluation (a task declaring none
  is checked at its first evaluation, by keep_if_best); a task without
  in-loop evaluation keeps no best checkpoint, which a warning says.

  Args:
    task: the run's base_task.Task.
    config: its experiment config.
  """
  if not task.in_loop_eval:
    if config.trainer.best_metric:
      logging.warning("trainer.best_metric=%s is not used: the task "
                      "evaluates after training only, so no best checkpoint "
                      "is kept", config.trainer.best_metric)
    return
  names = task.eval_metric_names()
  if names is not None:
    check_best_metric(config.trainer.best_metric, names)


def _staging(best_dir: str, kind: str) -> str:
  return os.path.join(os.path.dirname(best_dir),
                      f".{os.path.basename(best_dir)}.{kind}")


def read_best(best_dir: str) -> Optional[dict]:
  """best.json of `best_dir` (None: no best yet). A best directory moved
  aside by a replacement that was killed half-way is put back first.

  Args:
    best_dir: `<model_dir>/best`.
  """
  old = _staging(best_dir, "old")
  if not os.path.exists(best_dir) and os.path.isdir(old):
    os.rename(old, best_dir)
    logging.warning("%s: put back the best checkpoint of an interrupted "
                    "replacement", best_dir)
  path = os.path.join(best_dir, BEST_INFO_FILE)
  if not os.path.exists(path):
    return None
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def measured_differently(best: dict, batches: int,
                         eval_data: Optional[Sequence[str]]) -> Optional[str]:
  """What differs between the evaluation that kept `best` (its best.json)
  and one of `batches` batches over `eval_data`, as words for a log line;
  None when they are comparable. What a best.json of an older version does
  not record is not compared.

  Args:
    best: the kept best.json.
    batches: the new evaluation's number of batches.
    eval_data: the new evaluation's data (None: not known).
  """
  differences = []
  kept_batches = best.get("metrics", {}).get("eval_batches")
  if kept_batches is not None and int(kept_batches) != batches:
    differences.append(f"{batches} eval batches, not {int(kept_batches)}")
  kept_data = best.get("eval_data")
  if (kept_data is not None and eval_data is not None and
      list(kept_data) != list(eval_data)):
    differences.append(f"eval data {', '.join(eval_data) or '(none)'}, not "
                       f"{', '.join(kept_data) or '(none)'}")
  return "; ".join(differences) or None


def keep_if_best(best_dir: str, model, global_step: tf.Variable,
                 metrics: Dict[str, float], metric: str, mode: str,
                 run_identity=None,
                 eval_data: Optional[Sequence[str]] = None) -> Optional[str]:
  """Writes the model to `<best_dir>/ckpt` (+ best.json) if `metrics[metric]`
  beats the kept one (`mode` "max" or "min") and the weights are finite.

  A value measured differently from the kept best (another number of
  batches, `metrics["eval_batches"]`, or other `eval_data`) cannot beat it:
  the kept best stays, and a warning says what differs. A kept best of
  another metric or mode (changed on resume) is replaced by the first
  evaluation of the new one. The checkpoint and best.json are written to a
  hidden directory beside `best_dir`, then swapped in by renames, so a kill
  never leaves the pair out of step (`read_best` puts a directory moved
  aside back).

  Args:
    best_dir: `<model_dir>/best`.
    model: the model whose weights are kept.
    global_step: the step variable, saved with them.
    metrics: the evaluation's metrics, with "eval_batches".
    metric: trainer.best_metric ("": keeps none).
    mode: trainer.best_metric_mode.
    run_identity: a checkpoints.identity.RunIdentity saved with the weights.
    eval_data: what the evaluation read (files, or a split's file), recorded
      in best.json; None: not known.

  Returns:
    The new checkpoint path, or None.

  Raises:
    ValueError: `metric` is not in `metrics`.
  """
  if not metric:
    return None
  check_best_metric(metric, [k for k in metrics if k != "eval_batches"])
  step = int(global_step.numpy())
  if not actions.weights_finite(model.trainable_variables):
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
      logging.warning("trainer.best_metric is %s (%s) but %s holds the best "
                      "by %s%s: a new best by %s starts at step %d", metric,
                      mode, best_dir, kept, f" ({best['mode']})" if "mode"
                      in best else "", metric, step)
    else:
      differs = measured_differently(best, int(metrics["eval_batches"]),
                                     eval_data)
      if differs:
        logging.warning(
            "not comparing step %d with the best (step %s) of %s: it was "
            "evaluated on %s; the best is kept (move %s aside to start a "
            "new one)", step, best.get("step"), best_dir, differs, best_dir)
        return None
      if not (value > best[metric] if mode == "max"
              else value < best[metric]):
        return None
  partial = _staging(best_dir, "partial")
  shutil.rmtree(partial, ignore_errors=True)
  os.makedirs(partial)
  extra = {}
  if run_identity is not None:
    run_identity.stamp(step)
    extra["identity"] = run_identity.variable
  object_layout.checkpoint_for(model, step=global_step, **extra).write(
      os.path.join(partial, "ckpt"))
  path = os.path.join(best_dir, "ckpt")
  info = {"metric": metric, "mode": mode, metric: value, "step": step,
          "checkpoint": path, "metrics": metrics}
  if eval_data is not None:
    info["eval_data"] = list(eval_data)
  output_files.write_json(os.path.join(partial, BEST_INFO_FILE), info,
                          sort_keys=False)
  old = _staging(best_dir, "old")
  shutil.rmtree(old, ignore_errors=True)
  if os.path.exists(best_dir):
    os.rename(best_dir, old)
  os.rename(partial, best_dir)
  shutil.rmtree(old, ignore_errors=True)
  logging.info("new best %s %.4f at step %d -> %s", metric, value, step, path)
  return path
