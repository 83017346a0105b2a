"""Which model config a checkpoint is used with (export, convert:
`model_config_for`), the one restore of a model for evaluation, prediction
and export (`restore_run`), and where conversion outputs may not go.
"""

import os
from typing import Any, Callable, Optional, Tuple

import tensorflow as tf

from albert_tf.checkpoints import canonical_weights
from albert_tf.checkpoints import conversion
from albert_tf.checkpoints import identity
from albert_tf.checkpoints import paths
from albert_tf.core import actions
from albert_tf.core import run_record
from albert_tf.modeling import albert_config


def _beside_checkpoint(checkpoint: str) -> Optional[str]:
  """albert_config.json beside a checkpoint (release / conversion output)."""
  try:
    prefix = paths.resolve_checkpoint(checkpoint)
  except canonical_weights.CheckpointConversionError:
    return None
  return conversion.find_config_file(prefix)


def model_config_for(sources, params_override: str = "",
                     checkpoint: Optional[str] = None,
                     record: Any = run_record.UNREAD):
  """(AlbertConfig or None, RunRecord or None) of export / convert.

  The base is the model of the run `record` (default: of the run
  `checkpoint` belongs to), else of the checkpoint's own identity, else of
  the albert_config.json beside `checkpoint`; `sources` and
  `params_override` apply on top, and any difference that changes the model
  is refused naming the field. A checkpoint whose identity disagrees with
  the run record it is paired with is refused. With no base, the config is
  `sources` + `params_override` alone (None if nothing given).
  """
  if record is run_record.UNREAD:
    record = (run_record.find_for_checkpoint(checkpoint) if checkpoint
              else None)
  saved = None
  if checkpoint:
    saved = identity.check(
        checkpoint, model=record.model if record else None,
        facts=record.facts if record else None,
        what=f"the run record of {record.model_dir}" if record else "")
  sources = list(sources or ())
  if record is None and saved is not None and "model" in saved:
    where = f"checkpoint {checkpoint}'s own record"
    config = albert_config.load_model_config(sources, params_override,
                                             base=saved["model"])
    run_record.check_model(saved["model"], config, where)
    return config, None
  base = record.model_dir if record else (
      _beside_checkpoint(checkpoint) if checkpoint else None)
  if base is None:
    if not sources and not params_override:
      return None, None
    return albert_config.load_model_config(sources, params_override), None
  recorded = albert_config.load_model_config([base])
  config = albert_config.load_model_config([base] + sources, params_override)
  run_record.check_model(recorded.as_dict(), config, base)
  return config, record


def check_not_in_run(output_dir: str, what: str = "--output_dir") -> None:
  """Refuses an output directory that is a run directory or one of its
  checkpoint directories: writing there replaces the run's `checkpoint`
  state file (its next resume would find no checkpoint it knows)."""
  record = run_record.find_for_checkpoint(output_dir)
  if record is None:
    return
  run = os.path.abspath(record.model_dir)
  owned = {run, os.path.join(run, paths.RUN_CHECKPOINT_SUBDIR),
           os.path.join(run, run_record.BEST_SUBDIR)}
  if os.path.abspath(output_dir) in owned:
    raise ValueError(f"{what} {output_dir} is the run directory {run} or its "
                     "checkpoint directory: writing there would replace the "
                     "run's checkpoint state; use another directory")


def _unreadable(path: str, error: Exception) -> Optional[str]:
  """Why checkpoint `path` could not be read, or None when `error` is
  about the model (a wrong config), not the files."""
  if not tf.io.gfile.exists(path + ".index"):
    return ("deleted while it was read: a training run keeps only its "
            "newest trainer.max_to_keep checkpoints")
  if isinstance(error, (tf.errors.OpError, IndexError, OSError)):
    return f"truncated or unreadable: {actions.error_summary(error)}"
  return None


def restore_newest_readable(restore: Callable[[str], Any], model_dir: str,
                            checkpoint: Optional[str] = None
                            ) -> Tuple[str, Any]:
  """`restore(path)` of `checkpoint`, or (none given) of the newest
  checkpoint of the run `model_dir` that reads, falling back as a resume
  does (`actions.restore_first_readable`). Returns (path, result).

  A given checkpoint that cannot be read, or a run none of whose
  checkpoints reads, is a one-line CheckpointError naming them.
  """
  if checkpoint:
    candidates = [paths.resolve_checkpoint(checkpoint)]
  else:
    candidates = actions.checkpoint_candidates(
        os.path.join(model_dir, paths.RUN_CHECKPOINT_SUBDIR)) or [
            paths.resolve_checkpoint(model_dir)]
  return actions.restore_first_readable(
      candidates, restore, _unreadable,
      lambda failed: "no readable checkpoint: " + "; ".join(
          f"{path} ({why})" for path, why in failed) + (
              "" if checkpoint else f" (all of {model_dir})"))


def restore_run(task, model, check: Callable[[str], Any], model_dir: str = "",
                checkpoint: Optional[str] = None,
                step: Optional[tf.Variable] = None,
                allow_missing_heads: bool = False) -> Tuple[str, Any]:
  """The one restore of a model for evaluation, prediction and every export
  (`run_* --mode=eval/predict/export`, `export_savedmodel`): `checkpoint`,
  else the newest readable checkpoint of the run `model_dir`, refused by
  `check(path)` unless it is the run's (`identity.check` against the run
  record: its model config, task and vocabulary), loaded through the task
  (`Task.restore_for_inference`: a task may read layouts of its own).
  Returns (path, RestoreReport)."""
  def restore(path):
    check(path)
    return task.restore_for_inference(
        model, path, step=step, allow_missing_heads=allow_missing_heads)
  return restore_newest_readable(restore, model_dir, checkpoint)
