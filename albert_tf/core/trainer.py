"""A generic custom training loop for albert_tf tasks (pretraining and
fine-tuning share it).

A `Task` supplies the model, the input pipeline and its loss as additive sums;
`Trainer` does everything else:

- distribution: the global batch is split across replicas (and, with
  gradient accumulation, into micro-batches); the loss is normalised by
  global counts (e.g. the masked-token weight of the whole global batch), so
  summing the replicas' gradients gives exactly the single-device gradient;
- a `tf.function` running `steps_per_loop` steps per host call (the TPU
  pattern), optional XLA (`jit_compile`) for forward + backward, mixed
  precision (float16 with dynamic loss scaling, or bfloat16);
- gradient order: unscale -> all-reduce -> clip -> apply (docs/optimization.md);
- `tf.train.CheckpointManager` over model, optimizer, step and (where the
  strategy supports it) the input iterator; resume from the latest, or warm
  start through `Task.initialize`;
- TensorBoard summaries, `<model_dir>/metrics.jsonl`, a progress line with
  steps/s and ETA;
- faults: a non-finite loss raises `NonFiniteLossError` without saving (the
  last good checkpoint stays the latest); SIGTERM saves and stops;
- evaluation over a held-out set, keeping the best checkpoint under
  `<model_dir>/best`.

Writing a task:

  class MyTask(trainer.Task):
    def build_model(self): ...                      # tf_keras.Model
    def build_inputs(self, input_context, training):
      ...  # tf.data.Dataset of per-replica batches (dicts of tensors)
    def loss_normalizers(self, features):           # from the features only
      return {"count": tf.cast(tf.shape(features["label"])[0], tf.float32)}
    def compute_sums(self, model, features, training):
      ...  # additive float32 scalars: {"loss_sum":..., "correct":..., ...}
    def loss_from_sums(self, sums, normalizers):    # linear in `sums`
      return sums["loss_sum"] / normalizers["count"]
    def metrics_from_sums(self, sums):              # includes "loss"
      return {"loss": ..., "accuracy": ...}

  trainer = Trainer(MyTask(...), experiment_config, model_dir, strategy)
  trainer.train()            # or evaluate(), train_and_evaluate(), ...
"""

import json
import math
import os
import signal
import time
from typing import Any, Callable, Dict, Optional

from absl import logging
import numpy as np
import tensorflow as tf
import tf_keras

from albert_tf.checkpoints import object_layout
from albert_tf.checkpoints import restore as restore_lib
from albert_tf.core import distribute_utils
from albert_tf.optimization import optimizer_factory

METRICS_FILE = "metrics.jsonl"
CHECKPOINT_SUBDIR = "checkpoints"
BEST_SUBDIR = "best"


class NonFiniteLossError(RuntimeError):
  """The training loss became NaN or infinite."""


class Task:
  """What the trainer needs from a task (see the module docstring)."""

  # Global batch sizes (examples per optimizer step / per eval step).
  global_batch_size: int = 0
  eval_batch_size: int = 0

  def build_model(self) -> tf_keras.Model:
    raise NotImplementedError

  def build_inputs(self, input_context: Optional[tf.distribute.InputContext],
                   training: bool) -> tf.data.Dataset:
    """Per-replica batches (batch = global // num_replicas)."""
    raise NotImplementedError

  def loss_normalizers(self, features) -> Dict[str, tf.Tensor]:
    """Additive denominators of the loss, computed from the features only.

    The trainer sums them over replicas (and micro-batches) before the
    forward pass, so each replica's loss is already normalised globally.
    """
    raise NotImplementedError

  def compute_sums(self, model, features, training: bool
                   ) -> Dict[str, tf.Tensor]:
    """Runs the model; additive float32 scalar sums (losses, hits, counts)."""
    raise NotImplementedError

  def loss_from_sums(self, sums, normalizers) -> tf.Tensor:
    """The loss, linear in `sums` (so per-replica losses add up)."""
    raise NotImplementedError

  def metrics_from_sums(self, sums) -> Dict[str, Any]:
    """Metrics (must include "loss") from sums added over batches."""
    raise NotImplementedError

  def validate_inputs(self, training: bool = True) -> None:
    """Raises a clear error before training on bad/missing input files."""

  def initialize(self, model) -> None:
    """Warm start of a fresh run (e.g. from an init checkpoint)."""

  def checkpoint_items(self, model) -> Dict[str, Any]:
    """Objects saved with the model (default: our layout, encoder + model)."""
    return {}


def _add(a, b):
  return {k: a[k] + b[k] for k in a}


def _to_float(x):
  return float(np.asarray(x))


def _split_micro_batches(features, num_micro):
  """[b, ...] -> [num_micro, b / num_micro, ...] for every feature."""
  def split(t):
    shape = t.shape.as_list()
    if shape and shape[0] is not None:
      return tf.reshape(t, [num_micro, shape[0] // num_micro] + shape[1:])
    return tf.reshape(t, tf.concat([[num_micro, -1], tf.shape(t)[1:]], 0))
  return tf.nest.map_structure(split, features)


class Trainer:
  """Custom training loop over a `Task` (see the module docstring).

  Args:
    task: a `Task`.
    config: an `experiment_config.ExperimentConfig` (uses `optimizer`,
      `trainer` and `runtime`).
    model_dir: checkpoints (`<model_dir>/checkpoints`), summaries
      (`train/`, `eval/`), `metrics.jsonl`, best checkpoint (`best/`).
    strategy: a tf.distribute strategy (default: the current one).
  """

  def __init__(self, task: Task, config, model_dir: str,
               strategy: Optional[tf.distribute.Strategy] = None):
    self.task = task
    self.config = config
    self.model_dir = model_dir
    self.strategy = strategy or tf.distribute.get_strategy()
    self.is_chief = distribute_utils.is_chief(self.strategy)
    runtime = config.runtime
    self.precision = distribute_utils.resolve_precision(
        runtime.mixed_precision_dtype, self.strategy)
    if runtime.seed is not None:
      tf_keras.utils.set_random_seed(runtime.seed)
    if runtime.deterministic:
      tf.config.experimental.enable_op_determinism()
    tf_keras.mixed_precision.set_global_policy(
        distribute_utils.policy_name(self.precision))
    tc = config.trainer
    self.accum_steps = tc.gradient_accumulation_steps
    replicas = self.strategy.num_replicas_in_sync
    if task.global_batch_size % (replicas * self.accum_steps):
      raise ValueError(
          f"global batch size {task.global_batch_size} is not divisible by "
          f"{replicas} replica(s) x {self.accum_steps} accumulation step(s)")
    oc = config.optimizer
    with self.strategy.scope():
      self.model = task.build_model()
      self.optimizer, self.schedule = optimizer_factory.create_optimizer(
          oc.name, init_lr=oc.learning_rate, num_train_steps=tc.train_steps,
          num_warmup_steps=oc.num_warmup_steps,
          weight_decay_rate=oc.weight_decay_rate, poly_power=oc.poly_power,
          start_warmup_step=oc.start_warmup_step,
          bias_correction=oc.bias_correction, beta_1=oc.beta_1,
          beta_2=oc.beta_2, epsilon=oc.epsilon,
          mixed_precision_policy=distribute_utils.policy_name(self.precision))
      self.global_step = tf.Variable(
          0, dtype=tf.int64, trainable=False, name="global_step",
          aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
      # Slots now, so a restore fills them instead of deferring.
      inner = getattr(self.optimizer, "inner_optimizer", self.optimizer)
      inner._create_all_weights(self.model.trainable_variables)  # pylint: disable=protected-access
    self._loss_scaled = isinstance(
        self.optimizer, tf_keras.mixed_precision.LossScaleOptimizer)
    self._train_loop_fn = None
    self._eval_step_fn = None
    self._preempted = False
    self.checkpoint_dir = os.path.join(model_dir, CHECKPOINT_SUBDIR)
    self.best_dir = os.path.join(model_dir, BEST_SUBDIR)
    os.makedirs(model_dir, exist_ok=True)
    self._writers = {}

  # --- Checkpoints ----------------------------------------------------------

  def _make_manager(self, iterator=None):
    extra = dict(optimizer=self.optimizer, step=self.global_step)
    extra.update(self.task.checkpoint_items(self.model))
    if iterator is not None and self.config.trainer.save_data_position:
      # Multi-replica input iterators cannot be saved (TF raises at save
      # time), so the data position is kept for single-replica runs only.
      if self.strategy.num_replicas_in_sync == 1:
        extra["data_iterator"] = iterator
      else:
        logging.warning("save_data_position: not supported with %d replicas;"
                        " a resumed run restarts its input pipeline",
                        self.strategy.num_replicas_in_sync)
    self.checkpoint = object_layout.checkpoint_for(self.model, **extra)
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

  def save_checkpoint(self) -> Optional[str]:
    path = self.manager.save(checkpoint_number=self.global_step)
    logging.info("saved checkpoint %s", path)
    return path

  def restore_or_initialize(self) -> int:
    """Resumes from the latest checkpoint, else warm-starts the task."""
    latest = tf.train.latest_checkpoint(self.checkpoint_dir)
    if latest:
      self.checkpoint.restore(latest).assert_existing_objects_matched()
      logging.info("resumed from %s at step %d", latest,
                   int(self.global_step.numpy()))
    else:
      self.task.initialize(self.model)
    return int(self.global_step.numpy())

  def restore_model(self, path: str) -> int:
    """Loads model weights (and step) only, e.g. for evaluation."""
    restore_lib.restore(self.model, path, step=self.global_step)
    return int(self.global_step.numpy())

  # --- Logging ---------------------------------------------------------------

  def _writer(self, name):
    if name not in self._writers:
      self._writers[name] = (
          tf.summary.create_file_writer(os.path.join(self.model_dir, name))
          if self.is_chief else tf.summary.create_noop_writer())
    return self._writers[name]

  def _log(self, mode: str, step: int, values: Dict[str, float]) -> None:
    if not self.is_chief:
      return
    with self._writer(mode).as_default(step=step):
      for k, v in values.items():
        tf.summary.scalar(k, v)
    self._writer(mode).flush()
    record = {"mode": mode, "step": step, "time": round(time.time(), 3)}
    record.update({k: float(v) for k, v in values.items()})
    with open(os.path.join(self.model_dir, METRICS_FILE), "a",
              encoding="utf-8") as f:
      f.write(json.dumps(record) + "\n")

  # --- Steps -----------------------------------------------------------------

  def _compute_gradients(self, features, normalizers):
    """Forward + backward over the micro-batches; unscaled local gradients."""
    task, model, opt = self.task, self.model, self.optimizer
    variables = model.trainable_variables

    def grads_of(micro):
      with tf.GradientTape() as tape:
        sums = task.compute_sums(model, micro, training=True)
        loss = task.loss_from_sums(sums, normalizers)
        if self._loss_scaled:
          loss = opt.get_scaled_loss(loss)
      return tape.gradient(loss, variables), sums

    if self.accum_steps == 1:
      grads, sums = grads_of(features)
    else:
      micro = _split_micro_batches(features, self.accum_steps)
      grads = [tf.zeros(v.shape, v.dtype) for v in variables]
      sums = None
      for i in range(self.accum_steps):
        g, s = grads_of(tf.nest.map_structure(lambda t, i=i: t[i], micro))
        grads = [a if b is None else a + tf.convert_to_tensor(b)
                 for a, b in zip(grads, g)]
        sums = s if sums is None else _add(sums, s)
    if self._loss_scaled:
      grads = opt.get_unscaled_gradients(grads)
    return grads, sums

  def _replica_train_step(self, features):
    ctx = tf.distribute.get_replica_context()
    normalizers = self.task.loss_normalizers(features)
    normalizers = ctx.all_reduce(tf.distribute.ReduceOp.SUM, normalizers)
    compute = self._compute_gradients
    if self.config.runtime.jit_compile:
      compute = tf.function(compute, jit_compile=True)
    grads, sums = compute(features, normalizers)
    variables = self.model.trainable_variables
    # Dense before the all-reduce: replicas' IndexedSlices (embedding
    # gathers) differ in length, which collective all-reduce rejects; LAMB
    # densifies them anyway.
    grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g
             for g in grads]
    grads = optimizer_factory.all_reduce_gradients(grads)
    clip = self.config.optimizer.clip_norm
    if clip > 0:
      grads, grad_norm = optimizer_factory.clip_by_global_norm(grads, clip)
    else:
      grad_norm = tf.linalg.global_norm([g for g in grads if g is not None])
    self.optimizer.apply_gradients(
        [(g, v) for g, v in zip(grads, variables) if g is not None],
        experimental_aggregate_gradients=False)
    return sums, grad_norm

  def _reduce_sum(self, sums):
    # Key by key: MultiWorkerMirroredStrategy.reduce rejects a dict.
    return {k: self.strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None)
            for k, v in sums.items()}

  def _step(self, iterator):
    """One global step in cross-replica context; reduced sums."""
    sums, grad_norm = self.strategy.run(self._replica_train_step,
                                        args=(next(iterator),))
    sums = self._reduce_sum(sums)
    grad_norm = self.strategy.reduce(tf.distribute.ReduceOp.MEAN, grad_norm,
                                     axis=None)
    finite = tf.math.is_finite(self.task.metrics_from_sums(sums)["loss"])
    self.global_step.assign_add(1)
    return sums, grad_norm, finite

  def _build_train_loop(self):
    @tf.function
    def train_loop(iterator, num_steps):
      # The first step outside the loop fixes the structure of the sums.
      sums, norm_sum, finite = self._step(iterator)
      bad_steps = tf.cast(tf.logical_not(finite), tf.int32)
      for _ in tf.range(num_steps - 1):
        s, n, f = self._step(iterator)
        sums = _add(sums, s)
        norm_sum += n
        bad_steps += tf.cast(tf.logical_not(f), tf.int32)
      return sums, norm_sum / tf.cast(num_steps, norm_sum.dtype), bad_steps
    return train_loop

  def _replica_eval_step(self, features):
    return self.task.compute_sums(self.model, features, training=False)

  def _build_eval_step(self):
    @tf.function
    def eval_step(features):
      sums = self.strategy.run(self._replica_eval_step, args=(features,))
      return self._reduce_sum(sums)
    return eval_step

  # --- Public API ---------------------------------------------------------------

  def distribute_inputs(self, training: bool):
    return self.strategy.distribute_datasets_from_function(
        lambda ctx: self.task.build_inputs(ctx, training=training))

  def _on_sigterm(self, signum, frame):  # pylint: disable=unused-argument
    logging.warning("SIGTERM received: saving a checkpoint after this loop")
    self._preempted = True

  def train(self, eval_callback: Optional[Callable[[int], Any]] = None
            ) -> Dict[str, float]:
    """Trains to `trainer.train_steps`, resuming from the latest checkpoint.

    `eval_callback(step)` runs every `trainer.eval_interval` steps (used by
    train_and_evaluate). Returns the metrics of the last loop (plus
    "stopped": "completed" | "preempted").
    Raises NonFiniteLossError on a NaN/inf loss (nothing saved).
    """
    tc = self.config.trainer
    self.task.validate_inputs(training=True)
    iterator = iter(self.distribute_inputs(training=True))
    self._make_manager(iterator)
    step = self.restore_or_initialize()
    if self._train_loop_fn is None:
      self._train_loop_fn = self._build_train_loop()
    try:
      previous = signal.signal(signal.SIGTERM, self._on_sigterm)
    except ValueError:  # not the main thread
      previous = None
    result = {"stopped": "completed"}
    start_step, start_time = step, time.time()
    try:
      while step < tc.train_steps:
        boundary = min(tc.train_steps,
                       (step // tc.checkpoint_interval + 1) *
                       tc.checkpoint_interval)
        if eval_callback is not None:
          boundary = min(boundary, (step // tc.eval_interval + 1) *
                         tc.eval_interval)
        num_steps = min(tc.steps_per_loop, boundary - step)
        t0 = time.time()
        sums, grad_norm, bad_steps = self._train_loop_fn(
            iterator, tf.constant(num_steps, tf.int32))
        metrics = {k: _to_float(v) for k, v in
                   self.task.metrics_from_sums(sums).items()}
        elapsed = time.time() - t0
        if int(bad_steps) or not all(math.isfinite(v) for v in
                                     metrics.values()):
          latest = tf.train.latest_checkpoint(self.checkpoint_dir)
          raise NonFiniteLossError(
              f"training loss became NaN or infinite between steps {step} "
              f"and {step + num_steps} ({int(bad_steps)} bad step(s); "
              f"metrics {metrics}). Stopped without saving; the last good "
              f"checkpoint is {latest or 'none (no checkpoint yet)'}. Try a "
              "lower learning rate, check the input data or the loss scale.")
        step += num_steps
        metrics["learning_rate"] = _to_float(
            self.schedule(self.optimizer.iterations - 1))
        metrics["grad_norm"] = _to_float(grad_norm)
        metrics["steps_per_sec"] = num_steps / max(elapsed, 1e-9)
        metrics["examples_per_sec"] = (metrics["steps_per_sec"] *
                                       self.task.global_batch_size)
        if self._loss_scaled:
          metrics["loss_scale"] = _to_float(self.optimizer.loss_scale)
        self._log("train", step, metrics)
        self._progress(step, start_step, start_time, metrics)
        result.update(metrics)
        if (step % tc.checkpoint_interval == 0 or step >= tc.train_steps or
            self._preempted):
          self.save_checkpoint()
        if self._preempted:
          result["stopped"] = "preempted"
          logging.warning("preempted: saved step %d, exiting", step)
          break
        if eval_callback is not None and (step % tc.eval_interval == 0 or
                                          step >= tc.train_steps):
          eval_callback(step)
    finally:
      if previous is not None:
        signal.signal(signal.SIGTERM, previous)
    result["step"] = step
    return result

  def _progress(self, step, start_step, start_time, metrics):
    total = self.config.trainer.train_steps
    rate = (step - start_step) / max(time.time() - start_time, 1e-9)
    eta = (total - step) / rate if rate > 0 else float("inf")
    eta_text = (time.strftime("%H:%M:%S", time.gmtime(eta))
                if math.isfinite(eta) else "?")
    shown = " ".join(f"{k} {metrics[k]:.4f}" for k in metrics
                     if k not in ("steps_per_sec", "examples_per_sec",
                                  "learning_rate", "grad_norm",
                                  "loss_scale"))
    logging.info(
        "step %d/%d | %s | lr %.3g | grad_norm %.3f | %.2f steps/s "
        "%.1f examples/s | ETA %s", step, total, shown,
        metrics["learning_rate"], metrics["grad_norm"],
        metrics["steps_per_sec"], metrics["examples_per_sec"], eta_text)

  def evaluate(self, eval_steps: Optional[int] = None) -> Dict[str, float]:
    """Metrics of the current weights over the held-out set."""
    tc = self.config.trainer
    eval_steps = tc.eval_steps if eval_steps is None else eval_steps
    self.task.validate_inputs(training=False)
    if self._eval_step_fn is None:
      self._eval_step_fn = self._build_eval_step()
    total, batches, t0 = None, 0, time.time()
    for features in self.distribute_inputs(training=False):
      sums = self._eval_step_fn(features)
      sums = {k: np.asarray(v, np.float64) for k, v in sums.items()}
      total = sums if total is None else _add(total, sums)
      batches += 1
      if eval_steps and batches >= eval_steps:
        break
    if total is None:
      raise ValueError("evaluation data produced no batch")
    metrics = {k: _to_float(v) for k, v in
               self.task.metrics_from_sums(total).items()}
    step = int(self.global_step.numpy())
    metrics["eval_batches"] = batches
    self._log("eval", step, metrics)
    logging.info("eval at step %d (%d batches, %.1fs): %s", step, batches,
                 time.time() - t0, " ".join(
                     f"{k} {v:.4f}" for k, v in metrics.items()))
    self._maybe_keep_best(step, metrics)
    return metrics

  def _maybe_keep_best(self, step, metrics):
    tc = self.config.trainer
    if not self.is_chief or tc.best_metric not in metrics:
      return
    info_path = os.path.join(self.best_dir, "best.json")
    value = metrics[tc.best_metric]
    if os.path.exists(info_path):
      with open(info_path, encoding="utf-8") as f:
        best = json.load(f)[tc.best_metric]
      better = value > best if tc.best_metric_mode == "max" else value < best
      if not better:
        return
    os.makedirs(self.best_dir, exist_ok=True)
    path = object_layout.checkpoint_for(self.model, step=self.global_step
                                        ).write(os.path.join(self.best_dir,
                                                             "ckpt"))
    with open(info_path, "w", encoding="utf-8") as f:
      json.dump({tc.best_metric: value, "step": step, "checkpoint": path,
                 "metrics": metrics}, f, indent=2)
    logging.info("new best %s %.4f at step %d -> %s", tc.best_metric, value,
                 step, path)

  def train_and_evaluate(self) -> Dict[str, Any]:
    """Trains, evaluating every `trainer.eval_interval` steps and at the end."""
    evals = {}

    def callback(step):
      evals[step] = self.evaluate()

    result = self.train(eval_callback=callback)
    result["eval"] = evals
    return result

  def evaluate_checkpoint(self, path: Optional[str] = None) -> Dict[str, float]:
    """Evaluates a checkpoint (default: the latest in model_dir)."""
    path = path or tf.train.latest_checkpoint(self.checkpoint_dir)
    if not path:
      raise ValueError(f"no checkpoint to evaluate in {self.checkpoint_dir}")
    self.restore_model(path)
    return self.evaluate()

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
        step = self.restore_model(path)
      except (tf.errors.NotFoundError, ValueError) as e:
        logging.warning("skipping %s: %s", path, e)  # deleted meanwhile
        continue
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
    output_fn = output_fn or (lambda model, f: model(f, training=False))

    @tf.function
    def step(features):
      return self.strategy.run(lambda f: output_fn(self.model, f),
                               args=(features,))

    for features in self.strategy.distribute_datasets_from_function(
        dataset_fn):
      out = step(features)
      for local in self.strategy.experimental_local_results(out):
        yield tf.nest.map_structure(np.asarray, local)


def run_experiment(trainer: Trainer, mode: str) -> Dict[str, Any]:
  """Dispatches --mode: train | eval | train_and_eval | continuous_eval."""
  if mode == "train":
    return trainer.train()
  if mode == "eval":
    return trainer.evaluate_checkpoint()
  if mode == "train_and_eval":
    return trainer.train_and_evaluate()
  if mode == "continuous_eval":
    return trainer.continuous_evaluate()
  raise ValueError(f"unknown mode {mode!r}; expected train, eval, "
                   "train_and_eval or continuous_eval")
