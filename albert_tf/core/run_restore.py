"""Restoring a run's checkpoints, in one place: which checkpoint a resume,
an evaluation, a prediction or an export loads, newest first, skipping the
unreadable ones with a warning (`restore_first_readable`, the one walk).

- `resume`: the trainer's resume (every object of its checkpoint).
- `restore_run`: evaluation, prediction and every export: the given
  checkpoint, else the run's newest readable one, checked against the run
  record and loaded through the task (`Task.restore_for_inference`).
"""

import os
from typing import Any, Callable, Optional, Sequence, Tuple

from absl import logging
import tensorflow as tf

from albert_tf.checkpoints import paths
from albert_tf.core import actions
from albert_tf.core import run_record


def restore_first_readable(candidates: Sequence[str], restore: Callable,
                           unreadable: Callable, error: Callable,
                           check: Optional[Callable[[str], None]] = None
                           ) -> Tuple[Optional[str], Any]:
  """The one walk over checkpoints, newest first (resume, evaluation, every
  export): (path, `restore(path)`) of the first that reads, warning about
  each one skipped; (None, None) when there are none. `check(path)` raises
  (not caught) when a readable checkpoint is not this run's;
  `unreadable(path, e)` says why a failed `restore` is the file's fault
  (None: re-raise `e`, a wrong model). None reads: CheckpointError(`error(
  [(path, why), ...])`)."""
  failed = []
  for path in candidates:
    if check is not None and tf.io.gfile.exists(path + ".index"):
      check(path)
    try:
      return path, restore(path)
    except (tf.errors.OpError, ValueError, AssertionError, IndexError,
            OSError) as e:  # IndexError: a truncated .data file
      why = unreadable(path, e)
      if why is None:
        raise
      failed.append((path, why))
      if path != candidates[-1]:
        logging.warning("checkpoint %s is %s; using the one before it", path,
                        why)
  if failed:
    raise actions.CheckpointError(error(failed))
  return None, None


def resume(checkpoint: tf.train.Checkpoint, directory: str,
           check: Optional[Callable[[str], None]] = None) -> Optional[str]:
  """A resume: restores the newest checkpoint of `directory` that reads
  (`restore_first_readable`). Every object of `checkpoint` must be found;
  saved objects it leaves out (the identity, checked by `check`; a data
  position not restored) are expected, not warned about on every resume.
  Returns the restored path, or None when there is no checkpoint."""
  def restore(path):
    checkpoint.restore(path).expect_partial().assert_existing_objects_matched()

  return restore_first_readable(
      paths.checkpoint_candidates(directory), restore,
      lambda path, e: f"unreadable ({actions.error_summary(e)})",
      lambda failed: (f"no readable checkpoint in {directory}: "
                      f"{', '.join(path for path, _ in failed)} failed to "
                      "load; delete them or restore the files"), check)[0]


def _unreadable(path: str, error: Exception) -> Optional[str]:
  """Why checkpoint `path` could not be read, or None when `error` is
  about the model (a wrong config), not the files."""
  if not tf.io.gfile.exists(path + ".index"):
    return ("deleted while it was read: a training run keeps only its "
            "newest trainer.max_to_keep checkpoints")
  if isinstance(error, (tf.errors.OpError, IndexError, OSError)):
    return f"truncated or unreadable: {actions.error_summary(error)}"
  return None


def restore_given_or_newest(restore: Callable[[str], Any], model_dir: str,
                            checkpoint: Optional[str] = None
                            ) -> Tuple[str, Any]:
  """`restore(path)` of `checkpoint`, or (none given) of the newest
  checkpoint of the run `model_dir` that reads, falling back as a resume
  does (`restore_first_readable`). Returns (path, result).

  A given checkpoint that cannot be read, or a run none of whose
  checkpoints reads, is a one-line CheckpointError naming them.
  """
  if checkpoint:
    candidates = [paths.resolve_checkpoint(checkpoint)]
  else:
    candidates = paths.checkpoint_candidates(
        os.path.join(model_dir, paths.RUN_CHECKPOINT_SUBDIR)) or [
            paths.resolve_checkpoint(model_dir)]
  return restore_first_readable(
      candidates, restore, _unreadable,
      lambda failed: "no readable checkpoint: " + "; ".join(
          f"{path} ({why})" for path, why in failed) + (
              "" if checkpoint else f" (all of {model_dir})"))


def check_checkpoint_run(path: str, model_dir: str, config) -> None:
  """Refuses checkpoint `path` of another run than `model_dir` unless that
  run's settings are `config`'s up to what a resume may change: two runs of
  one model, task and vocabulary pass the identity check, yet their weights
  may mean other labels or text inputs. A checkpoint outside any run has
  its identity only."""
  owner = run_record.run_dir_of_checkpoint(path)
  if owner is None or paths.same_directory(owner, model_dir):
    return
  run_record.check_resume(
      run_record.read(owner), config,
      hint=f"checkpoint {path} belongs to that run; use --model_dir={owner}")


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
  A given checkpoint of another run must have been trained with this
  run's settings (`check_checkpoint_run`). Returns (path, RestoreReport)."""
  def restore(path):
    check(path)
    if checkpoint and model_dir:
      check_checkpoint_run(path, model_dir, task.config)
    return task.restore_for_inference(
        model, path, step=step, allow_missing_heads=allow_missing_heads)
  return restore_given_or_newest(restore, model_dir, checkpoint)
