"""Runs an experiment (Model Garden's `train_lib.run_experiment` role).

Every training tool goes through `run_experiment`: strategy from
`config.runtime`, the run record (written at the first start, checked on
every later one, see run_record.py), the Trainer, and the mode:

  train            train to trainer.train_steps (resumes from model_dir)
  eval             the latest (or `checkpoint`) model on the held-out data
  train_and_eval   train (with in-loop evaluation unless the task says
                   `in_loop_eval = False`), then the task's full evaluation
  continuous_eval  evaluate each new checkpoint until the timeout
  predict          task predictions into output_dir (fine-tuning)
  export           a serving SavedModel (fine-tuning)

The task (built by the entry point; core never imports tasks) gives
`run_record_facts()` and, optionally, `evaluate(trainer, output_dir)`,
`predict(trainer, output_dir)` and `export(model, export_dir)`.
"""

import inspect
import json
import os
from typing import Any, Dict, Optional

from absl import logging
import tensorflow as tf

from albert_tf.checkpoints import paths
from albert_tf.core import distribute_utils
from albert_tf.core import run_record
from albert_tf.core import trainer as trainer_lib

MODES = ("train", "eval", "train_and_eval", "continuous_eval", "predict",
         "export")
EVAL_RESULTS_FILE = "eval_results.json"


def strategy_from_config(runtime) -> tf.distribute.Strategy:
  return distribute_utils.get_strategy(
      runtime.distribution_strategy, tpu=runtime.tpu or None,
      num_cpu_devices=runtime.num_cpu_devices)


def _trainer_kwargs(check: run_record.ResumeCheck, config) -> Dict[str, Any]:
  """restore_data_position=False when the data position must be reset."""
  if not check.data_position_reset:
    return {}
  changed = ", ".join(f"{k} {v[0]!r} -> {v[1]!r}"
                      for k, v in check.changes.items()
                      if k in run_record.DATA_POSITION_FIELDS)
  params = inspect.signature(trainer_lib.Trainer).parameters
  if "restore_data_position" in params:
    logging.warning("input changed since the last start (%s): the data "
                    "position is reset, the input pipeline starts over",
                    changed)
    return {"restore_data_position": False}
  if not config.trainer.save_data_position:
    logging.warning("input changed since the last start (%s): the data "
                    "position is not restored (save_data_position=false)",
                    changed)
    return {}
  raise ValueError(
      f"the input changed since the last start ({changed}) and the "
      "checkpoint's saved data position belongs to the old input (and batch "
      "size): resume with trainer.save_data_position=false to restart the "
      "input pipeline, or keep the old values")


def write_eval_results(output_dir: str, results: Dict[str, Any]) -> str:
  os.makedirs(output_dir, exist_ok=True)
  path = os.path.join(output_dir, EVAL_RESULTS_FILE)
  run_record.atomic_write(path, json.dumps(results, indent=2, sort_keys=True,
                                           default=float))
  logging.info("eval results: %s -> %s", results, path)
  return path


def restore_for_inference(trainer, task,
                          checkpoint: Optional[str] = None) -> str:
  """Loads `checkpoint` (default: the latest of the run) into the model
  (through the task's `restore_for_inference` when it has one)."""
  if checkpoint:
    path = paths.resolve_checkpoint(checkpoint)
  else:
    path = paths.latest_checkpoint(trainer.checkpoint_dir)
    if not path:
      raise ValueError(f"no checkpoint in {trainer.checkpoint_dir}; train "
                       "first or pass --checkpoint")
  restore = getattr(task, "restore_for_inference", None)
  if restore is not None:
    restore(trainer, path)
  else:
    trainer.restore_model(path)
  logging.info("restored %s (step %d)", path, int(trainer.global_step.numpy()))
  return path


def _full_evaluation(trainer, task, output_dir):
  metrics = task.evaluate(trainer, output_dir)
  if trainer.is_chief:
    write_eval_results(output_dir, metrics)
  return metrics


def run_experiment(task, config, model_dir: str, mode: str = "train",
                   output_dir: Optional[str] = None,
                   checkpoint: Optional[str] = None,
                   export_dir: Optional[str] = None) -> Dict[str, Any]:
  """Runs `mode` of `task`; returns a dict of what each step produced."""
  if mode not in MODES:
    raise ValueError(f"unknown mode {mode!r}; expected one of {MODES}")
  has_full_eval = hasattr(task, "evaluate")
  if mode in ("predict", "export") and not hasattr(task, mode):
    raise ValueError(f"--mode={mode} is not available for this task")
  if mode == "export" and not export_dir:
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
  is_chief = distribute_utils.is_chief(strategy)
  check = run_record.prepare(model_dir, config, task.run_record_facts(),
                             is_chief=is_chief)
  trainer_kwargs = _trainer_kwargs(check, config)
  if is_chief:  # only changes this start accepted
    run_record.append_changes(model_dir, mode, check)
  trainer = trainer_lib.Trainer(task, config, model_dir, strategy,
                                **trainer_kwargs)
  result = {}
  if mode == "train":
    result["train"] = trainer.train()
  elif mode == "train_and_eval":
    if getattr(task, "in_loop_eval", True):
      result["train"] = trainer.train_and_evaluate()
    else:
      result["train"] = trainer.train()
    if has_full_eval:
      result["eval"] = _full_evaluation(trainer, task, output_dir)
  elif mode == "continuous_eval":
    result["eval"] = trainer.continuous_evaluate()
  elif mode == "eval" and not has_full_eval:
    result["eval"] = trainer.evaluate_checkpoint(checkpoint)
  else:
    result["checkpoint"] = restore_for_inference(trainer, task, checkpoint)
    if mode == "eval":
      result["eval"] = _full_evaluation(trainer, task, output_dir)
    elif mode == "predict":
      result["predict"] = task.predict(trainer, output_dir)
    else:
      result["export"] = task.export(trainer.model, export_dir)
  return result
