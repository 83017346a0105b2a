"""The distributed step functions of the training loop (no I/O, no policy).

- the global batch is split across replicas (and, with gradient
  accumulation, into micro-batches); the loss is normalised by global counts
  (e.g. the masked-token weight of the whole global batch), so summing the
  replicas' gradients gives exactly the single-device gradient;
- a `tf.function` runs `steps_per_loop` steps per host call (the TPU
  pattern); XLA (`jit_compile`) compiles forward + backward; mixed precision
  (float16 with dynamic loss scaling, or bfloat16) unscales the gradients;
- gradient order: unscale -> all-reduce -> clip -> apply
  (docs/optimization.md).
"""

import dataclasses
from typing import Any, Callable, Optional

import tensorflow as tf
import tf_keras

from albert_tf.core import base_task
from albert_tf.core import distribute_utils
from albert_tf.optimization import optimizer_factory


def configure_runtime(runtime, precision: str) -> None:
  """Seed, op determinism and the Keras precision policy of
  `runtime` (an experiment_config.RuntimeConfig)."""
  if runtime.seed is not None:
    tf_keras.utils.set_random_seed(runtime.seed)
  if runtime.deterministic:
    tf.config.experimental.enable_op_determinism()
  tf_keras.mixed_precision.set_global_policy(
      distribute_utils.policy_name(precision))


def build_optimizer(optimizer_config, train_steps: int, precision: str):
  """(optimizer, learning-rate schedule) of an experiment's `optimizer`
  config; call under the strategy's scope."""
  return optimizer_factory.create_optimizer_from_config(
      optimizer_config, train_steps,
      mixed_precision_policy=distribute_utils.policy_name(precision))


def check_batch_sizes(task: base_task.Task, replicas: int,
                      accum_steps: int) -> None:
  """Refuses, before anything is built, a batch the replicas cannot split
  evenly: the training batch (`task.global_batch_size`, also into
  `accum_steps` micro-batches) and the evaluation batch
  (`task.eval_batch_size`, used by evaluation and prediction).

  Args:
    task: the task, with its global and evaluation batch sizes.
    replicas: the strategy's `num_replicas_in_sync`.
    accum_steps: trainer.gradient_accumulation_steps.
  """
  if task.global_batch_size % (replicas * accum_steps):
    raise ValueError(
        f"data.global_batch_size ({task.global_batch_size}) is not divisible "
        f"by {replicas} replica(s) x {accum_steps} gradient accumulation "
        "step(s): make it a multiple of their product")
  if task.eval_batch_size % replicas:
    raise ValueError(
        f"data.eval_batch_size ({task.eval_batch_size}) is not divisible by "
        f"{replicas} replica(s): make it a multiple of {replicas} (0: "
        "data.global_batch_size)")


def add_sums(a, b):
  return {k: a[k] + b[k] for k in a}


def split_micro_batches(features, num_micro):
  """[b, ...] -> [num_micro, b / num_micro, ...] for every feature."""
  def split(t):
    shape = t.shape.as_list()
    if shape and shape[0] is not None:
      return tf.reshape(t, [num_micro, shape[0] // num_micro] + shape[1:])
    return tf.reshape(t, tf.concat([[num_micro, -1], tf.shape(t)[1:]], 0))
  return tf.nest.map_structure(split, features)


@dataclasses.dataclass(eq=False)
class DistributedSteps:
  """Train, eval and predict steps of a task's model under a strategy."""
  task: base_task.Task  # loss as sums, metrics
  model: tf_keras.Model  # model and optimizer: built under strategy.scope()
  optimizer: Any
  strategy: tf.distribute.Strategy
  global_step: tf.Variable  # int64, incremented once per optimizer step
  accum_steps: int = 1  # micro-batches per optimizer step
  clip_norm: float = 0.0  # global-norm clipping after the all-reduce; 0: none
  jit_compile: bool = False  # compile forward + backward with XLA

  def __post_init__(self):
    self.loss_scaled = isinstance(
        self.optimizer, tf_keras.mixed_precision.LossScaleOptimizer)

  def compute_gradients(self, features, normalizers):
    """Forward + backward over the micro-batches; unscaled local gradients."""
    task, model, opt = self.task, self.model, self.optimizer
    variables = model.trainable_variables

    def grads_of(micro):
      with tf.GradientTape() as tape:
        sums = task.compute_sums(model, micro, training=True)
        loss = task.loss_from_sums(sums, normalizers)
        if self.loss_scaled:
          loss = opt.get_scaled_loss(loss)
      return tape.gradient(loss, variables), sums

    if self.accum_steps == 1:
      grads, sums = grads_of(features)
    else:
      micro = split_micro_batches(features, self.accum_steps)
      grads = [tf.zeros(v.shape, v.dtype) for v in variables]
      sums = None
      for i in range(self.accum_steps):
        g, s = grads_of(tf.nest.map_structure(lambda t, i=i: t[i], micro))
        grads = [a if b is None else a + tf.convert_to_tensor(b)
                 for a, b in zip(grads, g)]
        sums = s if sums is None else add_sums(sums, s)
    if self.loss_scaled:
      grads = opt.get_unscaled_gradients(grads)
    return grads, sums

  def replica_train_step(self, features):
    ctx = tf.distribute.get_replica_context()
    normalizers = self.task.loss_normalizers(features)
    normalizers = ctx.all_reduce(tf.distribute.ReduceOp.SUM, normalizers)
    compute = self.compute_gradients
    if self.jit_compile:
      compute = tf.function(compute, jit_compile=True, autograph=False)
    grads, sums = compute(features, normalizers)
    variables = self.model.trainable_variables
    # Dense before the all-reduce: replicas' IndexedSlices (embedding
    # gathers) differ in length, which collective all-reduce rejects; LAMB
    # densifies them anyway.
    grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g
             for g in grads]
    grads = optimizer_factory.all_reduce_gradients(grads)
    if self.clip_norm > 0:
      grads, grad_norm = optimizer_factory.clip_by_global_norm(
          grads, self.clip_norm)
    else:
      grad_norm = tf.linalg.global_norm([g for g in grads if g is not None])
    self.optimizer.apply_gradients(
        [(g, v) for g, v in zip(grads, variables) if g is not None],
        experimental_aggregate_gradients=False)
    return sums, grad_norm

  def reduce_sum(self, sums):
    # Key by key: MultiWorkerMirroredStrategy.reduce rejects a dict.
    return {k: self.strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None)
            for k, v in sums.items()}

  def step(self, iterator):
    """One global step in cross-replica context; reduced sums."""
    sums, grad_norm = self.strategy.run(self.replica_train_step,
                                        args=(next(iterator),))
    sums = self.reduce_sum(sums)
    grad_norm = self.strategy.reduce(tf.distribute.ReduceOp.MEAN, grad_norm,
                                     axis=None)
    finite = tf.math.is_finite(self.task.metrics_from_sums(sums)["loss"])
    # Counted once the step's batch was read and its update computed: ops
    # on different resources are not ordered, and an input error inside the
    # step must not count it (a save after it would be labelled one ahead).
    with tf.control_dependencies([finite, grad_norm]):
      self.global_step.assign_add(1)
    return sums, grad_norm, finite

  def build_train_loop(self) -> Callable:
    """tf.function(iterator, num_steps) -> (summed sums, mean grad norm,
    number of steps with a non-finite loss)."""
    # The step is one tf.function, traced once: its outputs' structure
    # gives the loop's zero sums, and the loop's body is its only call. (A
    # first step outside the loop traced, optimised and, with jit_compile,
    # XLA-compiled the whole step twice: seconds of every run's start.)
    # autograph=False here and in every step function: nothing in the step
    # branches on a tensor.
    step = tf.function(self.step, autograph=False)

    @tf.function(autograph=False)
    def train_loop(iterator, num_steps):
      zeros = tf.nest.map_structure(
          lambda t: tf.zeros(t.shape, t.dtype),
          step.get_concrete_function(iterator).structured_outputs)
      sums, norm_sum, finite = zeros

      def body(i, sums, norm_sum, bad_steps):
        s, n, f = step(iterator)
        return (i + 1, add_sums(sums, s), norm_sum + n,
                bad_steps + tf.cast(tf.logical_not(f), tf.int32))

      _, sums, norm_sum, bad_steps = tf.while_loop(
          lambda i, *_: i < num_steps, body,
          (tf.constant(0, num_steps.dtype), sums, norm_sum,
           tf.zeros(finite.shape, tf.int32)),
          maximum_iterations=num_steps)
      return sums, norm_sum / tf.cast(num_steps, norm_sum.dtype), bad_steps
    return train_loop

  def build_eval_step(self) -> Callable:
    """tf.function(distributed features) -> sums reduced over replicas."""
    @tf.function(autograph=False)
    def eval_step(features):
      sums = self.strategy.run(
          lambda f: self.task.compute_sums(self.model, f, training=False),
          args=(features,))
      return self.reduce_sum(sums)
    return eval_step

  def build_predict_step(self, output_fn: Optional[Callable] = None
                         ) -> Callable:
    """tf.function(distributed features) -> per-replica `output_fn(model,
    features)` (default: the model's outputs)."""
    output_fn = output_fn or (lambda model, f: model(f, training=False))

    @tf.function(autograph=False)
    def predict_step(features):
      return self.strategy.run(lambda f: output_fn(self.model, f),
                               args=(features,))
    return predict_step
