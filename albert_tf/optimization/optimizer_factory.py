"""Learning-rate schedule, optimizer factory and gradient helpers (ALBERT).

Mirrors the original `optimization.create_optimizer`: polynomial decay to 0
over `num_train_steps` computed from step 0, linear warmup over
`num_warmup_steps` starting at `start_warmup_step`, LAMB or AdamW with weight
decay 0.01 (LayerNorm / layer_norm / bias excluded) and gradients clipped to
global norm 1.0 (the defaults: optimizer_config.py).

Training-loop order (see docs/optimization.md):
  grads = tape.gradient(scaled_loss, vars)
  grads = optimizer.get_unscaled_gradients(grads)  # LossScaleOptimizer only
  grads = all_reduce_gradients(grads)               # sum over replicas
  grads, norm = clip_by_global_norm(grads, 1.0)
  optimizer.apply_gradients(zip(grads, vars),
                            experimental_aggregate_gradients=False)
"""

from typing import List, Optional, Sequence, Tuple, Union

import tensorflow as tf
import tf_keras

from albert_tf.optimization import lamb
from albert_tf.optimization import optimizer_config
from albert_tf.optimization.optimizer_config import DEFAULTS

OPTIMIZER_NAMES = ("lamb", "adamw")


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class WarmupPolynomialDecay(
    tf_keras.optimizers.schedules.LearningRateSchedule):
  """The original ALBERT learning-rate schedule.

  lr(step) = (init_lr - end) * (1 - min(step, N) / N) ** poly_power + end
  and, while step - start_warmup_step < num_warmup_steps,
  lr(step) = init_lr * (step - start_warmup_step) / num_warmup_steps.

  `step` is the optimizer's iteration count before the update (0 for the
  first update, so the first warmup update uses lr 0, as in the original).
  Deviation: before `start_warmup_step` the original formula gives a negative
  learning rate; here it is clamped to 0.
  """

  def __init__(self,
               init_lr: float,
               num_train_steps: int,
               num_warmup_steps: int,
               start_warmup_step: int = DEFAULTS.start_warmup_step,
               poly_power: float = DEFAULTS.poly_power,
               end_learning_rate: float = 0.0,
               name: Optional[str] = None):
    super().__init__()
    if num_train_steps <= 0:
      raise ValueError(
          f"num_train_steps must be > 0, got {num_train_steps}.")
    if num_warmup_steps < 0:
      raise ValueError(
          f"num_warmup_steps must be >= 0, got {num_warmup_steps}.")
    if start_warmup_step < 0:
      raise ValueError(
          f"start_warmup_step must be >= 0, got {start_warmup_step}.")
    self.init_lr = init_lr
    self.num_train_steps = num_train_steps
    self.num_warmup_steps = num_warmup_steps
    self.start_warmup_step = start_warmup_step
    self.poly_power = poly_power
    self.end_learning_rate = end_learning_rate
    self.name = name

  def __call__(self, step):
    with tf.name_scope(self.name or "WarmupPolynomialDecay"):
      # float64 inside: near the end 1 - step / N cancels, and float32 would
      # lose ~1e-5 of the (tiny) learning rate there.
      step = tf.cast(step, tf.float64)  # []
      init_lr = tf.cast(self.init_lr, tf.float64)
      end_lr = tf.cast(self.end_learning_rate, tf.float64)
      train_steps = tf.cast(self.num_train_steps, tf.float64)
      # tf.compat.v1.train.polynomial_decay with cycle=False.
      decay_fraction = 1.0 - tf.minimum(step, train_steps) / train_steps
      lr = (init_lr - end_lr) * tf.pow(
          decay_fraction, tf.cast(self.poly_power, tf.float64)) + end_lr
      if self.num_warmup_steps:
        warmup_step = step - tf.cast(self.start_warmup_step, tf.float64)
        warmup_steps = tf.cast(self.num_warmup_steps, tf.float64)
        warmup_lr = init_lr * tf.maximum(warmup_step, 0.0) / warmup_steps
        lr = tf.where(warmup_step < warmup_steps, warmup_lr, lr)
      return tf.cast(lr, tf.float32)

  def get_config(self):
    return {k: getattr(self, k) for k in (
        "init_lr", "num_train_steps", "num_warmup_steps", "start_warmup_step",
        "poly_power", "end_learning_rate", "name")}


def clip_by_global_norm(
    grads: Sequence[Optional[Union[tf.Tensor, tf.IndexedSlices]]],
    clip_norm: float = DEFAULTS.clip_norm,
) -> Tuple[List[Optional[Union[tf.Tensor, tf.IndexedSlices]]], tf.Tensor]:
  """Clips gradients to a global norm, as the original does (clip_norm 1.0).

  Args:
    grads: gradients; None entries (variables without a gradient) are passed
      through as None. IndexedSlices stay IndexedSlices, with duplicate
      indices summed first so the norm is that of the dense gradient
      (tf.clip_by_global_norm alone would use the norm of the raw slices).
    clip_norm: maximum global norm.

  Returns:
    (clipped gradients in the input order, global norm before clipping).
    If the norm is not finite every gradient becomes NaN, which a
    LossScaleOptimizer detects and skips.
  """
  grads = [_sum_duplicate_indices(g) for g in grads]
  clipped, global_norm = tf.clip_by_global_norm(grads, clip_norm)
  return list(clipped), global_norm


def _sum_duplicate_indices(grad):
  if not isinstance(grad, tf.IndexedSlices):
    return grad
  unique_indices, positions = tf.unique(grad.indices)  # [n_unique], [n]
  values = tf.math.unsorted_segment_sum(
      grad.values, positions, tf.shape(unique_indices)[0])  # [n_unique, ...]
  return tf.IndexedSlices(values, unique_indices, grad.dense_shape)


def all_reduce_gradients(
    grads: Sequence[Optional[Union[tf.Tensor, tf.IndexedSlices]]],
) -> List[Optional[Union[tf.Tensor, tf.IndexedSlices]]]:
  """Sums gradients over replicas (call in replica context; None kept).

  Global-norm clipping must see the aggregated gradient to match
  single-device training, so a distributed loop sums first, clips, then
  calls apply_gradients(..., experimental_aggregate_gradients=False).
  Without a strategy this returns the gradients unchanged.
  """
  grads = list(grads)
  present = [g for g in grads if g is not None]
  if not present:
    return grads
  context = tf.distribute.get_replica_context()
  if context is None:
    raise RuntimeError(
        "all_reduce_gradients must be called in replica context "
        "(inside strategy.run).")
  reduced = iter(context.all_reduce(tf.distribute.ReduceOp.SUM, present))
  return [None if g is None else next(reduced) for g in grads]


def _is_mixed_float16(policy) -> bool:
  if policy is None:
    return False
  if isinstance(policy, str):
    try:
      policy = tf_keras.mixed_precision.Policy(policy)
    except ValueError as e:
      raise ValueError(
          f"mixed_precision_policy: unknown policy {policy!r} ({e})") from e
  if not isinstance(policy, tf_keras.mixed_precision.Policy):
    raise ValueError(
        "mixed_precision_policy must be None, a policy name or a "
        f"tf_keras.mixed_precision.Policy, got {type(policy).__name__}.")
  return policy.compute_dtype == "float16"


def create_optimizer(
    name: str,
    init_lr: float,
    num_train_steps: int,
    num_warmup_steps: int,
    weight_decay_rate: float = DEFAULTS.weight_decay_rate,
    poly_power: float = DEFAULTS.poly_power,
    start_warmup_step: int = DEFAULTS.start_warmup_step,
    bias_correction: bool = DEFAULTS.bias_correction,
    beta_1: float = DEFAULTS.beta_1,
    beta_2: float = DEFAULTS.beta_2,
    epsilon: float = DEFAULTS.epsilon,
    exclude_from_weight_decay: Optional[Sequence[str]] = None,
    exclude_from_layer_adaptation: Optional[Sequence[str]] = None,
    mixed_precision_policy=None,
):
  """Builds the ALBERT optimizer and its learning-rate schedule.

  `name`: "lamb" (the original) or "adamw" (case-insensitive). The schedule
  takes init_lr (the peak), the step counts and poly_power
  (`WarmupPolynomialDecay`); the optimizer the others (`lamb.LAMB`; adamw
  ignores exclude_from_layer_adaptation). With `mixed_precision_policy`
  "mixed_float16" (a name or a Policy) the optimizer is wrapped in a dynamic
  tf_keras.mixed_precision.LossScaleOptimizer.

  Returns (optimizer, schedule); ValueError for an unknown optimizer name or
  policy, or bad step counts.
  """
  key = str(name).strip().lower()
  if key not in OPTIMIZER_NAMES:
    raise ValueError(
        f"optimizer: unknown optimizer name {name!r}; expected one of "
        f"{', '.join(OPTIMIZER_NAMES)}.")
  schedule = WarmupPolynomialDecay(
      init_lr=init_lr,
      num_train_steps=num_train_steps,
      num_warmup_steps=num_warmup_steps,
      start_warmup_step=start_warmup_step,
      poly_power=poly_power)
  # AdamWeightDecay ignores exclude_from_layer_adaptation (no adaptation).
  optimizer_cls = lamb.LAMB if key == "lamb" else lamb.AdamWeightDecay
  optimizer = optimizer_cls(
      learning_rate=schedule, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon,
      weight_decay_rate=weight_decay_rate,
      exclude_from_weight_decay=exclude_from_weight_decay,
      exclude_from_layer_adaptation=exclude_from_layer_adaptation,
      bias_correction=bias_correction)
  if _is_mixed_float16(mixed_precision_policy):
    optimizer = tf_keras.mixed_precision.LossScaleOptimizer(
        optimizer, dynamic=True)
  return optimizer, schedule


def create_optimizer_from_config(
    config: optimizer_config.OptimizerConfig,
    num_train_steps: int,
    mixed_precision_policy=None,
):
  """`create_optimizer` with the fields of an `OptimizerConfig` (the
  experiment's `optimizer` section); its `clip_norm` is the training loop's
  to apply. Returns (optimizer, schedule)."""
  values = config.as_dict()  # the other fields are create_optimizer's
  del values["clip_norm"]
  return create_optimizer(init_lr=values.pop("learning_rate"),
                          num_train_steps=num_train_steps,
                          mixed_precision_policy=mixed_precision_policy,
                          **values)
