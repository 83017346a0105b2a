"""Runs an experiment (Model Garden's `train_lib.run_experiment` role).

Every training tool goes through `run_experiment`: strategy from
`config.runtime`, the run record (written at the first start, checked on
every later one, see run_record.py), the Trainer, and the mode:

  train            train to trainer.train_steps (resumes from model_dir)
  eval             the latest (or `checkpoint`) model: the task's evaluation
  train_and_eval   train (with in-loop evaluation when the task's
                   `in_loop_eval`), then the task's evaluation when its
                   `evaluate_after_training` (skipped when a signal
                   stopped the training)
  continuous_eval  evaluate each new checkpoint until the timeout
  predict          task predictions into output_dir
  export           a SavedModel of the restored model, by `export_fn`

The task (built by the entry point; core never names one) declares every
hook it is called through (core/base_task.py). Export lives above core (the
task's serving module): the entry point passes `export_fn(task, model,
export_dir, record)`. The run record is read once per command: by the
caller (`record`) or here.
"""

import os
from typing import Any, Callable, Dict, Optional

from absl import logging
import tensorflow as tf

from albert_tf.checkpoints import paths
from albert_tf.core import actions
from albert_tf.core import base_trainer
from albert_tf.core import best_checkpoint
from albert_tf.core import data_position
from albert_tf.core import distribute_utils
from albert_tf.core import run_record
from albert_tf.core import trainer as trainer_lib
from albert_toolkit import output_files

MODES = ("train", "eval", "train_and_eval", "continuous_eval", "predict",
         "export")
EVAL_RESULTS_FILE = "eval_results.json"


def strategy_from_config(runtime) -> tf.distribute.Strategy:
  return distribute_utils.get_strategy(
      runtime.distribution_strategy, tpu=runtime.tpu or None,
      num_cpu_devices=runtime.num_cpu_devices)


def _restore_data_position(task, config, model_dir: str, is_chief: bool,
                           check: run_record.ResumeCheck,
                           mode: str) -> Callable[[int], bool]:
  """Whether the data position saved with the checkpoint of step N is
  restored (a function of N): not when a setting it depends on changed
  (`check`), nor (training) when the training files changed since the
  start that saved it (data regenerated under the same names). Called with
  the step a run starts from, it records this start's files
  (data_position.py), and a reset they caused in the run's change log."""
  training = mode in ("train", "train_and_eval")
  reset = check.data_position_reset
  if reset:
    changed = ", ".join(f"{k} {v[0]!r} -> {v[1]!r}"
                        for k, v in check.changes.items()
                        if k in check.data_position_fields)
    logging.warning("input changed since the last start (%s): the data "
                    "position is reset, the input pipeline starts over",
                    changed)
  if not (training and config.trainer.save_data_position):
    return lambda step: not reset

  def keep(step: int) -> bool:
    os.makedirs(model_dir, exist_ok=True)
    changed = data_position.input_changed(
        model_dir, task.input_files(training=True), step, record=is_chief)
    if changed and not reset:
      logging.warning("the training input changed since the checkpoint it "
                      "resumes from was saved (%s): its saved data position "
                      "belongs to the old files; the input pipeline starts "
                      "over", changed)
      if is_chief:
        run_record.append_input_change(model_dir, mode, changed)
    return not (changed or reset)
  return keep


def write_eval_results(output_dir: str, results: Dict[str, Any]) -> str:
  os.makedirs(output_dir, exist_ok=True)
  path = os.path.join(output_dir, EVAL_RESULTS_FILE)
  output_files.write_json(path, results, default=float)
  logging.info("eval results: %s -> %s", results, path)
  return path


def _nearest_existing(path: str) -> str:
  while path and not os.path.exists(path) and os.path.dirname(path) != path:
    path = os.path.dirname(path)
  return path


def check_writable(mode: str, model_dir: str, output_dir: str,
                   export_dir: Optional[str]) -> None:
  """Refuses, naming it, a directory `mode` writes to but cannot (a
  read-only run directory ended evaluation in a PermissionError deep in
  TensorFlow's summary writer). URLs (gs://) are not checked."""
  written = []
  if mode not in ("predict", "export"):  # checkpoints, summaries, metrics
    written.append(("--model_dir", model_dir))
  if mode in ("eval", "train_and_eval", "predict"):
    written.append(("--output_dir", output_dir))
  if mode == "export" and export_dir:
    written.append(("--export_dir", export_dir))
  for flag, directory in written:
    if "://" in directory:
      continue
    existing = _nearest_existing(os.path.abspath(directory))
    if not (os.path.isdir(existing) and
            os.access(existing, os.W_OK | os.X_OK)):
      raise PermissionError(
          f"{flag} {directory}: cannot write to {existing} (permission "
          f"denied or a read-only file system); --mode={mode} writes its "
          "summaries, metrics or results there")


def check_trained(result: Dict[str, Any], config, model_dir: str) -> None:
  """A resume past trainer.train_steps trains nothing: an error, not a
  silent success."""
  step, train_steps = result.get("step"), config.trainer.train_steps
  if step is not None and step > train_steps:
    raise actions.TrainingError(
        f"nothing trained: {model_dir} resumed at step {step}, past "
        f"trainer.train_steps={train_steps}; pass a larger --train_steps to "
        "train on, or --mode=eval to evaluate the checkpoint")


def _evaluation(trainer, task, output_dir):
  metrics = task.evaluate(trainer, output_dir)
  if trainer.is_chief:
    write_eval_results(output_dir, metrics)
  return metrics


def _stopped_early(train_result: Dict[str, Any]) -> bool:
  """Whether a signal stopped the training (its evaluation would be of an
  unfinished model, and would spend the grace period); logs the skip."""
  if train_result.get("stopped") != "preempted":
    return False
  logging.warning("evaluation after training skipped: the run stopped at "
                  "step %d (%s); it runs when the run completes (rerun the "
                  "same command)", train_result.get("step", 0),
                  train_result.get("signal", "preempted"))
  return True


def run_experiment(task, config, model_dir: str, mode: str = "train",
                   output_dir: Optional[str] = None,
                   checkpoint: Optional[str] = None,
                   export_dir: Optional[str] = None,
                   export_fn: Optional[Callable[..., str]] = None,
                   record: Any = run_record.UNREAD) -> Dict[str, Any]:
  """Runs `mode` of `task`; returns a dict of what each step produced.

  export_fn: `export_fn(task, model, export_dir, record, checkpoint)` for
    mode export (the run's RunRecord, the checkpoint restored).
  record: the run record of `model_dir` the caller read already (None: it
    has none), so it is read once.
  """
  if mode not in MODES:
    raise ValueError(f"unknown mode {mode!r}; expected one of {MODES}")
  if mode == "export" and not (export_dir and export_fn):
    raise ValueError("--export_dir is required with --mode=export")
  model_dir = paths.absolute(model_dir)
  output_dir = output_dir or model_dir
  # First: multi-worker collectives must be set up before any TF op.
  strategy = strategy_from_config(config.runtime)
  # Fail on missing/empty/mismatched data before building anything.
  if mode in ("train", "train_and_eval"):
    task.validate_inputs(training=True)
  if mode in ("eval", "train_and_eval", "continuous_eval"):
    task.validate_inputs(training=False)
  check_writable(mode, model_dir, output_dir, export_dir)
  # Before the run record, which would log a refused start's changes.
  best_checkpoint.check_task_best_metric(task, config)
  base_trainer.check_batch_sizes(task, strategy.num_replicas_in_sync,
                                 config.trainer.gradient_accumulation_steps)
  is_chief = distribute_utils.is_chief(strategy)
  record, check = run_record.prepare(model_dir, config, task.record_facts(),
                                     is_chief=is_chief, record=record,
                                     mode=mode)
  if is_chief:  # only changes this start accepted
    run_record.append_changes(model_dir, mode, check)
  trainer = trainer_lib.Trainer(
      task, config, model_dir, strategy,
      restore_data_position=_restore_data_position(
          task, config, model_dir, is_chief, check, mode))
  result = {}
  if mode == "train":
    result["train"] = trainer.train()
    check_trained(result["train"], config, model_dir)
  elif mode == "train_and_eval":
    if task.in_loop_eval:
      result["train"] = trainer.train_and_evaluate()
    else:
      result["train"] = trainer.train()
    check_trained(result["train"], config, model_dir)
    if task.evaluate_after_training and not _stopped_early(result["train"]):
      result["eval"] = _evaluation(trainer, task, output_dir)
  elif mode == "continuous_eval":
    result["eval"] = trainer.continuous_evaluate()
  else:
    result["checkpoint"] = trainer.restore_model(checkpoint)
    if mode == "eval":
      result["eval"] = _evaluation(trainer, task, output_dir)
    elif mode == "predict":
      result["predict"] = task.predict(trainer, output_dir)
    else:
      result["export"] = export_fn(task, trainer.model, export_dir, record,
                                   result["checkpoint"])
  return result
