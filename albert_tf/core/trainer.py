"""A generic custom training loop for albert_tf tasks (pretraining and
fine-tuning share it): the facade over `base_task.Task` (what a task
supplies), `base_trainer.DistributedSteps` (the replica step and the
`steps_per_loop` tf.function), `actions` (checkpoints, signals, TensorBoard
+ metrics.jsonl, the progress line, naming a corrupt input file),
`best_checkpoint` and `run_lock` (one run per model_dir).

`Trainer` drives them (intervals, resume, modes; evaluation and export
restore through `run_restore.restore_run`, checked against the run's
identity); its fault handling is in docs/reliability.md ("Training loop").

  trainer = Trainer(MyTask(...), experiment_config, model_dir, strategy)
  trainer.train()            # or evaluate(), train_and_evaluate(), ...
"""

import os
import time
from typing import Any, Callable, Dict, Optional

from absl import logging
import numpy as np
import tensorflow as tf

from albert_tf.checkpoints import identity
from albert_tf.checkpoints import object_layout
from albert_tf.checkpoints import paths
from albert_tf.core import actions
from albert_tf.core import base_task
from albert_tf.core import base_trainer
from albert_tf.core import best_checkpoint
from albert_tf.core import distribute_utils
from albert_tf.core import run_lock
from albert_tf.core import run_record
from albert_tf.core import run_restore
from albert_tf.optimization import optimizer_config


class Trainer:
  """Custom training loop over a `Task` (see the module docstring).

  Args:
    task: a `Task`.
    config: an `experiment_config.ExperimentConfig` (uses `optimizer`,
      `trainer` and `runtime`).
    model_dir: checkpoints (`<model_dir>/checkpoints`), summaries
      (`train/`, `eval/`), `metrics.jsonl`, best checkpoint (`best/`).
    strategy: a tf.distribute strategy (default: the current one).
    restore_data_position: on resume, also restore the saved input position:
      a bool, or a function of the step resumed from (0: a fresh start)
      deciding it for the checkpoint actually restored (train_lib's checks
      the training files against those of that checkpoint's start). When
      False (e.g. the input files or the global batch size changed),
      everything else is restored and the input starts afresh.
  """

  def __init__(self, task: base_task.Task, config, model_dir: str,
               strategy: Optional[tf.distribute.Strategy] = None,
               restore_data_position: bool = True):
    best_checkpoint.check_task_best_metric(task, config)
    self.task = task
    self._keep_data_position = (
        restore_data_position if callable(restore_data_position)
        else lambda step: restore_data_position)
    self._data_position = {}
    self.config = config
    self.model_dir = model_dir = paths.absolute(model_dir)
    self.strategy = strategy or tf.distribute.get_strategy()
    self.is_chief = distribute_utils.is_chief(self.strategy)
    runtime = config.runtime
    self.precision = distribute_utils.resolve_precision(
        runtime.mixed_precision_dtype, self.strategy)
    base_trainer.configure_runtime(runtime, self.precision)
    tc = config.trainer
    self.accum_steps = tc.gradient_accumulation_steps
    base_trainer.check_batch_sizes(
        task, self.strategy.num_replicas_in_sync, self.accum_steps)
    with self.strategy.scope():
      self.model = task.build_model()
      self.optimizer, self.schedule = base_trainer.build_optimizer(
          config.optimizer, tc.train_steps, self.precision)
      self.global_step = tf.Variable(
          0, dtype=tf.int64, trainable=False, name="global_step",
          aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
      # Slots now, so a restore fills them instead of deferring.
      inner = getattr(self.optimizer, "inner_optimizer", self.optimizer)
      inner._create_all_weights(self.model.trainable_variables)  # pylint: disable=protected-access
    self.steps = base_trainer.DistributedSteps(
        task, self.model, self.optimizer, self.strategy, self.global_step,
        accum_steps=self.accum_steps, clip_norm=config.optimizer.clip_norm,
        jit_compile=runtime.jit_compile)
    self._compute_gradients = self.steps.compute_gradients  # tests compile it
    self._train_loop_fn = None
    self._eval_step_fn = None
    self._identity = identity.RunIdentity(
        config.model.as_dict(), run_record.with_fingerprints(
            task.record_facts()), f"the run record of {model_dir}")
    self.checkpoint_dir = os.path.join(model_dir, paths.RUN_CHECKPOINT_SUBDIR)
    self.best_dir = os.path.join(model_dir, run_record.BEST_SUBDIR)
    os.makedirs(model_dir, exist_ok=True)
    self.metrics_logger = actions.MetricsLogger(model_dir, self.is_chief)

  # --- Checkpoints ------------------------------------------------------------

  def _make_manager(self, iterator=None):
    extra = dict(optimizer=self.optimizer, step=self.global_step)
    extra.update(self.task.checkpoint_items(self.model))
    position = {}
    if iterator is not None and self.config.trainer.save_data_position:
      # A checkpoint holds only trackables: the default strategy's tf.data
      # iterator, not a DistributedIterator (even on one replica).
      if isinstance(iterator, tf.__internal__.tracking.Trackable):
        position["data_iterator"] = iterator
      else:
        logging.warning("trainer.save_data_position: the input iterator of "
                        "%s cannot be saved; a resumed run restarts its "
                        "input pipeline", type(self.strategy).__name__)
    # Saves carry the checkpoint's identity; restores use a checkpoint
    # without it and without the iterator, restored on its own once the
    # restored checkpoint's step says whether it still belongs to the input.
    self.checkpoint = object_layout.checkpoint_for(
        self.model, **extra, **position, identity=self._identity.variable)
    self._restore_checkpoint = object_layout.checkpoint_for(self.model,
                                                            **extra)
    self._data_position = position
    directory, keep = self.checkpoint_dir, self.config.trainer.max_to_keep
    if not self.is_chief:
      # Every worker saves (as Model Garden's workers do); a non-chief keeps
      # only its latest copy, in its own directory.
      directory, keep = os.path.join(
          self.model_dir,
          f"tmp_worker_{distribute_utils.worker_id(self.strategy)}"), 1
    self.manager = tf.train.CheckpointManager(
        self.checkpoint, directory, max_to_keep=keep,
        step_counter=self.global_step)
    return self.manager

  def _last_good_checkpoint(self) -> str:
    return paths.latest_checkpoint(self.checkpoint_dir) or "none yet"

  def save_checkpoint(self) -> Optional[str]:
    """Saves the current step, after checking that the weights are finite.

    Raises NonFiniteLossError (nothing saved) on NaN/inf/overflowing
    weights, CheckpointError (naming the path) if the write fails.
    """
    step = int(self.global_step.numpy())
    if not actions.weights_finite(self.model.trainable_variables):
      raise actions.NonFiniteLossError(
          f"the weights became NaN or infinite by step {step}: not saved; "
          f"the last good checkpoint is {self._last_good_checkpoint()}. Try "
          "a lower learning rate, check the input data or the loss scale.")
    self._identity.stamp(step)
    return actions.save_checkpoint(self.manager, step)

  def restore_or_initialize(self) -> int:
    """Resumes from the newest readable checkpoint, else warm-starts the
    task. Drops metrics.jsonl records past the restored step."""
    restored = run_restore.resume(
        self._restore_checkpoint, self.checkpoint_dir,
        check=self._identity.check)
    step = int(self.global_step.numpy())
    keep_position = self._keep_data_position(step)
    if restored:
      logging.info("resumed from %s at step %d%s", restored, step, (
          " (trainer.init_checkpoint not read: the run continues its own)"
          if self.config.trainer.init_checkpoint else ""))
      if not keep_position:
        logging.warning("restore_data_position=False: the input pipeline "
                        "starts afresh (saved data position not restored)")
      elif self._data_position:
        self._restore_data_position(restored)
    else:
      self.task.initialize(self.model)
    self.metrics_logger.drop_after(step)
    return step

  def _restore_data_position(self, path: str) -> None:
    """The input iterator's position saved with checkpoint `path`."""
    status = tf.train.Checkpoint(**self._data_position).restore(path)
    try:
      status.expect_partial().assert_existing_objects_matched()
    except AssertionError:
      logging.warning("%s has no saved data position: the input pipeline "
                      "starts afresh", path)

  def restore_model(self, path: Optional[str] = None) -> str:
    """Loads the model's weights and step from `path`, else the newest
    readable checkpoint (`run_restore.restore_run`); returns the path."""
    if not path and not paths.latest_checkpoint(self.checkpoint_dir):
      raise ValueError(f"no checkpoint in {self.checkpoint_dir}; train "
                       "first or pass --checkpoint")
    path = run_restore.restore_run(
        self.task, self.model, self._identity.check, self.model_dir, path,
        step=self.global_step)[0]
    logging.info("restored %s (step %d)", path, int(self.global_step.numpy()))
    return path

  # --- Training --------------------------------------------------------------

  def distribute_inputs(self, training: bool):
    return self.strategy.distribute_datasets_from_function(
        lambda ctx: self.task.build_inputs(ctx, training=training))

  def _save_after_error(self, error: tf.errors.OpError) -> str:
    """Saves the last finished step after a failed loop (if its weights are
    finite); returns a sentence saying what was saved."""
    logging.error("training loop failed at step %d: %s",
                  int(self.global_step.numpy()), actions.error_summary(error))
    try:
      return f"saved {self.save_checkpoint()}"
    except actions.TrainingError as e:
      logging.error("%s", e)
      return (f"not saved ({type(e).__name__}); the last good checkpoint is "
              f"{self._last_good_checkpoint()}")

  def _run_loop(self, iterator, num_steps):
    """One host call of `num_steps` steps; on an op error saves the last
    finished step first, then raises (InputDataError for bad data)."""
    try:
      return self._train_loop_fn(iterator, tf.constant(num_steps, tf.int32))
    except tf.errors.OpError as e:
      saved = self._save_after_error(e)
      data_error = actions.input_data_error(
          e, lambda: self.task.record_files(training=True),
          int(self.global_step.numpy()), saved, self.task.bad_input(e))
      if data_error is not None:
        raise data_error from e
      raise

  def train(self, eval_callback: Optional[Callable[[int], Any]] = None
            ) -> Dict[str, Any]:
    """Trains to `trainer.train_steps`, resuming from the latest checkpoint.

    `eval_callback(step)` runs every `trainer.eval_interval` steps (used by
    train_and_evaluate). Returns the metrics of the last loop (plus
    "stopped": "completed" | "preempted"; "signal" when a signal stopped it).
    Raises NonFiniteLossError on a NaN/inf loss or weights (nothing saved),
    InputDataError on a corrupt input file (after saving), CheckpointError
    when a save fails, RunLockedError when another live run holds model_dir.
    """
    self.task.validate_inputs(training=True)
    warmup = optimizer_config.warmup_longer_than_run(
        self.config.optimizer, self.config.trainer.train_steps)
    if warmup:
      logging.warning("%s", warmup)
    lock = run_lock.RunLock(self.model_dir) if self.is_chief else None
    if lock:
      lock.acquire()
    try:
      with actions.StopSignals() as stop:
        return self._train(eval_callback, stop)
    finally:
      if lock:
        lock.release()

  def _train(self, eval_callback, stop: actions.StopSignals):
    tc = self.config.trainer
    iterator = iter(self.distribute_inputs(training=True))
    self._make_manager(iterator)
    step = self.restore_or_initialize()
    if self._train_loop_fn is None:
      self._train_loop_fn = self.steps.build_train_loop()
    result = {"stopped": "completed"}
    start_step, start_time = step, time.time()
    while step < tc.train_steps:
      boundary = min(tc.train_steps,
                     (step // tc.checkpoint_interval + 1) *
                     tc.checkpoint_interval)
      if eval_callback is not None:
        boundary = min(boundary, (step // tc.eval_interval + 1) *
                       tc.eval_interval)
      num_steps = min(tc.steps_per_loop, boundary - step)
      t0 = time.time()
      sums, grad_norm, bad_steps = self._run_loop(iterator, num_steps)
      metrics = {k: float(v) for k, v in
                 self.task.metrics_from_sums(sums).items()}
      elapsed = time.time() - t0
      actions.check_loop_finite(step, num_steps, int(bad_steps), metrics,
                                self._last_good_checkpoint())
      step += num_steps
      metrics.update(self._loop_stats(num_steps, elapsed, grad_norm))
      self.metrics_logger.log("train", step, metrics)
      logging.info("%s", actions.progress_line(step, tc.train_steps,
                                               start_step, start_time,
                                               metrics))
      result.update(metrics)
      saved = (step % tc.checkpoint_interval == 0 or
               step >= tc.train_steps or bool(stop.received))
      if saved:
        self.save_checkpoint()
      if stop.received:
        result.update(stopped="preempted", signal=stop.received)
        logging.warning("%s: saved step %d, exiting", stop.received, step)
        break
      if eval_callback is not None and (step % tc.eval_interval == 0 or
                                        step >= tc.train_steps):
        try:
          eval_callback(step)
        except ValueError:  # a setting or data refused: keep the steps
          if not saved:
            self.save_checkpoint()
          raise
    result["step"] = step
    return result

  def _loop_stats(self, num_steps, elapsed, grad_norm) -> Dict[str, float]:
    stats = {
        "learning_rate": float(self.schedule(self.optimizer.iterations - 1)),
        "grad_norm": float(grad_norm),
        "steps_per_sec": num_steps / max(elapsed, 1e-9)}
    stats["examples_per_sec"] = (stats["steps_per_sec"] *
                                 self.task.global_batch_size)
    if self.steps.loss_scaled:
      stats["loss_scale"] = float(self.optimizer.loss_scale)
    return stats

  # --- Evaluation and prediction ----------------------------------------------

  def evaluate(self, keep_best: bool = True) -> Dict[str, float]:
    """Metrics of the current weights over the held-out set (at most
    trainer.eval_steps batches); `keep_best` (in-loop and continuous
    evaluations, not a standalone one) keeps the best checkpoint in best/."""
    tc = self.config.trainer
    self.task.validate_inputs(training=False)
    if self._eval_step_fn is None:
      self._eval_step_fn = self.steps.build_eval_step()
    total, batches, t0 = None, 0, time.time()
    for features in self.distribute_inputs(training=False):
      sums = self._eval_step_fn(features)
      sums = {k: np.asarray(v, np.float64) for k, v in sums.items()}
      total = sums if total is None else base_trainer.add_sums(total, sums)
      batches += 1
      if tc.eval_steps and batches >= tc.eval_steps:
        break
    if total is None:
      raise ValueError("evaluation data produced no batch")
    metrics = {k: float(v) for k, v in
               self.task.metrics_from_sums(total).items()}
    step = int(self.global_step.numpy())
    metrics["eval_batches"] = batches
    self.metrics_logger.log("eval", step, metrics)
    logging.info("eval at step %d (%d batches, %.1fs): %s", step, batches,
                 time.time() - t0, " ".join(
                     f"{k} {v:.4f}" for k, v in metrics.items()))
    if self.is_chief and keep_best:
      best_checkpoint.keep_if_best(
          self.best_dir, self.model, self.global_step, metrics, tc.best_metric,
          tc.best_metric_mode, self._identity, self.task.eval_data())
    return metrics

  def train_and_evaluate(self) -> Dict[str, Any]:
    """Trains, evaluating every `trainer.eval_interval` steps and at the end."""
    evals = {}

    def callback(step):
      evals[step] = self.evaluate()

    result = self.train(eval_callback=callback)
    result["eval"] = evals
    return result

  def continuous_evaluate(self, timeout: Optional[int] = None
                          ) -> Dict[int, Dict[str, float]]:
    """Evaluates each new checkpoint until the final step (or `timeout`
    seconds without a new checkpoint)."""
    timeout = (self.config.trainer.continuous_eval_timeout
               if timeout is None else timeout)
    results = {}
    for path in tf.train.checkpoints_iterator(self.checkpoint_dir,
                                              timeout=timeout):
      try:
        self.restore_model(path)
      except (tf.errors.NotFoundError, ValueError,
              actions.CheckpointError) as e:
        logging.warning("skipping %s: %s", path, e)  # deleted meanwhile
        continue
      step = int(self.global_step.numpy())
      results[step] = self.evaluate()
      if step >= self.config.trainer.train_steps:
        break
    return results

  def predict(self, dataset_fn: Callable[..., tf.data.Dataset],
              output_fn: Optional[Callable] = None):
    """Runs the model over a distributed dataset; yields numpy dicts.

    `dataset_fn(input_context)` gives per-replica batches;
    `output_fn(model, features)` (default: the model's outputs) may keep
    ids from the features. One dict per replica batch, in order.
    """
    step = self.steps.build_predict_step(output_fn)
    for features in self.strategy.distribute_datasets_from_function(
        dataset_fn):
      out = step(features)
      for local in self.strategy.experimental_local_results(out):
        yield tf.nest.map_structure(np.asarray, local)

