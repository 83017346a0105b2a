"""LAMB optimizer as in the original ALBERT release, for TF2 / tf_keras.

Update per variable w with gradient g (original `lamb_optimizer.py`, no bias
correction unless `bias_correction=True`):

  m = b1 * m + (1 - b1) * g
  v = b2 * v + (1 - b2) * g^2
  u = m / (sqrt(v) + eps)                 # m_hat / (sqrt(v_hat) + eps) with
                                          # bias correction
  u += weight_decay_rate * w              # unless excluded from weight decay
  r = ||w|| / ||u|| if both > 0 else 1    # 1 if excluded from adaptation
  w -= lr * r * u

`AdamWeightDecay` is the original's AdamWeightDecayOptimizer: the same update
with r fixed at 1.

The class subclasses the legacy tf_keras optimizer (as Model Garden's LAMB
does) so that it works in custom training loops under any tf.distribute
strategy and inside `tf_keras.mixed_precision.LossScaleOptimizer`.
"""

import re
from typing import Callable, Optional, Sequence, Union

import tensorflow as tf
import tf_keras

from albert_tf.optimization.optimizer_config import DEFAULTS

# Regexes searched in variable names. "LayerNorm" matches the original TF1
# names, "layer_norm" the tf_keras layer names.
DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")

# Suffixes that do not belong to the logical variable name: the tensor output
# index (":0") and the per-device copies of a MirroredVariable
# ("/replica_1").
_NAME_SUFFIX_RE = re.compile(r"(/replica_\d+)?(:\d+)?$")


def variable_name(name: str) -> str:
  """Returns the logical variable name used for the exclusion regexes."""
  return _NAME_SUFFIX_RE.sub("", name, count=1)


def _matches_any(patterns: Sequence[str], name: str) -> bool:
  return any(re.search(p, name) is not None for p in patterns)


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class LAMB(tf_keras.optimizers.legacy.Optimizer):
  """Layer-wise Adaptive Moments optimizer (ALBERT's original update)."""

  def __init__(
      self,
      learning_rate: Union[float, Callable] = DEFAULTS.learning_rate,
      beta_1: float = DEFAULTS.beta_1,
      beta_2: float = DEFAULTS.beta_2,
      epsilon: float = DEFAULTS.epsilon,
      weight_decay_rate: float = DEFAULTS.weight_decay_rate,
      exclude_from_weight_decay: Optional[Sequence[str]] = None,
      exclude_from_layer_adaptation: Optional[Sequence[str]] = None,
      bias_correction: bool = DEFAULTS.bias_correction,
      layer_adaptation: bool = True,
      name: str = "LAMB",
      **kwargs,
  ):
    """Creates the optimizer.

    Args:
      learning_rate: float, tensor or a `LearningRateSchedule` (called with
        the optimizer's iteration count before the step, as in the original).
      beta_1, beta_2, epsilon, weight_decay_rate: as in the update above.
      exclude_from_weight_decay: regexes; a variable whose name contains a
        match is not decayed. None means DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY,
        [] means no exclusions.
      exclude_from_layer_adaptation: regexes; a matching variable uses trust
        ratio 1. None means the same list as exclude_from_weight_decay.
      bias_correction: apply Adam's bias correction to m and v (Model
        Garden's LAMB). The original ALBERT update has none.
      layer_adaptation: if False the trust ratio is always 1 (AdamW).
      **kwargs: passed to the base optimizer (e.g. clipnorm).
    """
    super().__init__(name, **kwargs)
    self._set_hyper("learning_rate", kwargs.get("lr", learning_rate))
    self._set_hyper("decay", self._initial_decay)
    self._set_hyper("weight_decay_rate", weight_decay_rate)
    # Python floats, not hyper variables: 1 - beta is then computed in
    # float64 before the cast (as the original does), so 1 - 0.999 becomes
    # float32(0.001) rather than float32(1) - float32(0.999), a 1.3e-5
    # relative difference.
    self.beta_1 = float(beta_1)
    self.beta_2 = float(beta_2)
    self.epsilon = float(epsilon)
    if exclude_from_weight_decay is None:
      exclude_from_weight_decay = DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY
    if exclude_from_layer_adaptation is None:
      exclude_from_layer_adaptation = exclude_from_weight_decay
    self.exclude_from_weight_decay = list(exclude_from_weight_decay)
    self.exclude_from_layer_adaptation = list(exclude_from_layer_adaptation)
    for pattern in (self.exclude_from_weight_decay +
                    self.exclude_from_layer_adaptation):
      re.compile(pattern)  # Fail at construction on a malformed regex.
    self.bias_correction = bool(bias_correction)
    self.layer_adaptation = bool(layer_adaptation)

  # --- which variables get decay / adaptation -------------------------------

  def do_use_weight_decay(self, name: str) -> bool:
    """Whether the variable `name` (var.name accepted) is weight-decayed."""
    return not _matches_any(self.exclude_from_weight_decay,
                            variable_name(name))

  def do_layer_adaptation(self, name: str) -> bool:
    """Whether the variable `name` (var.name accepted) uses a trust ratio."""
    if not self.layer_adaptation:
      return False
    return not _matches_any(self.exclude_from_layer_adaptation,
                            variable_name(name))

  # --- keras optimizer hooks -------------------------------------------------

  def _create_slots(self, var_list):
    # Two loops so all "m" slots come before all "v" slots (stable ordering).
    for var in var_list:
      self.add_slot(var, "m")
    for var in var_list:
      self.add_slot(var, "v")

  def _prepare_local(self, var_device, var_dtype, apply_state):
    super()._prepare_local(var_device, var_dtype, apply_state)
    coefficients = dict(
        beta_1_t=tf.constant(self.beta_1, var_dtype),
        one_minus_beta_1_t=tf.constant(1.0 - self.beta_1, var_dtype),
        beta_2_t=tf.constant(self.beta_2, var_dtype),
        one_minus_beta_2_t=tf.constant(1.0 - self.beta_2, var_dtype),
        epsilon=tf.constant(self.epsilon, var_dtype),
        weight_decay_rate=tf.identity(
            self._get_hyper("weight_decay_rate", var_dtype)),
    )
    if self.bias_correction:
      # Step t of the update being applied (iterations is 0-based); float64
      # for the same reason as 1 - beta above.
      local_step = tf.cast(self.iterations + 1, tf.float64)
      for i, beta in ((1, self.beta_1), (2, self.beta_2)):
        correction = 1.0 - tf.pow(tf.constant(beta, tf.float64), local_step)
        coefficients[f"bias_correction_{i}"] = tf.cast(correction, var_dtype)
    apply_state[(var_device, var_dtype)].update(coefficients)

  def _resource_apply_dense(self, grad, var, apply_state=None):
    var_device, var_dtype = var.device, var.dtype.base_dtype
    coefficients = ((apply_state or {}).get((var_device, var_dtype)) or
                    self._fallback_apply_state(var_device, var_dtype))

    m = self.get_slot(var, "m")
    v = self.get_slot(var, "v")
    m_t = (coefficients["beta_1_t"] * m +
           coefficients["one_minus_beta_1_t"] * grad)
    v_t = (coefficients["beta_2_t"] * v +
           coefficients["one_minus_beta_2_t"] * tf.square(grad))
    # The update reads the new moments as computed, not back from the slots
    # (the same values, fewer ops to trace for every variable).
    m_assign = m.assign(m_t, use_locking=self._use_locking, read_value=False)
    v_assign = v.assign(v_t, use_locking=self._use_locking, read_value=False)

    if self.bias_correction:
      m_t = m_t / coefficients["bias_correction_1"]
      v_t = v_t / coefficients["bias_correction_2"]
    update = m_t / (tf.sqrt(v_t) + coefficients["epsilon"])

    decay = self.do_use_weight_decay(var.name)
    adapt = self.do_layer_adaptation(var.name)
    w = tf.convert_to_tensor(var) if decay or adapt else None
    if decay:
      update += coefficients["weight_decay_rate"] * w

    step_size = coefficients["lr_t"]
    if adapt:
      w_norm = tf.sqrt(tf.reduce_sum(tf.square(w)))
      u_norm = tf.sqrt(tf.reduce_sum(tf.square(update)))
      # Both norms must be positive, else r = 1 (fresh zero-init variables
      # such as biases, or an all-zero update).
      ratio = tf.where((w_norm > 0.0) & (u_norm > 0.0), w_norm / u_norm, 1.0)
      step_size = ratio * step_size

    var_update = var.assign_sub(step_size * update,
                                use_locking=self._use_locking,
                                read_value=False)
    return tf.group(var_update, m_assign, v_assign)

  def _resource_apply_sparse_duplicate_indices(self, grad, var, indices,
                                               **kwargs):
    # The original densifies sparse gradients: every row's moments decay
    # each step and the trust ratio needs the whole update, so the update is
    # dense anyway. Densifying here (which also sums duplicates, as
    # converting the IndexedSlices to a tensor does) makes the sparse path
    # equal to the dense one by construction.
    dense = tf.math.unsorted_segment_sum(
        grad, indices, num_segments=tf.shape(var, out_type=indices.dtype)[0])
    return self._resource_apply_dense(dense, var, **kwargs)

  def get_config(self):
    config = super().get_config()
    config.update({k: self._serialize_hyperparameter(k) for k in (
        "learning_rate", "decay", "weight_decay_rate")})
    config.update({k: getattr(self, k) for k in (
        "beta_1", "beta_2", "epsilon", "bias_correction", "layer_adaptation")})
    config.update({k: list(getattr(self, k)) for k in (
        "exclude_from_weight_decay", "exclude_from_layer_adaptation")})
    return config


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class AdamWeightDecay(LAMB):
  """The original AdamWeightDecayOptimizer: LAMB with trust ratio fixed at 1.

  The original has no bias correction and no layer adaptation; the update is
  w -= lr * (m / (sqrt(v) + eps) + weight_decay_rate * w).
  """

  def __init__(
      self,
      learning_rate: Union[float, Callable] = DEFAULTS.learning_rate,
      beta_1: float = DEFAULTS.beta_1,
      beta_2: float = DEFAULTS.beta_2,
      epsilon: float = DEFAULTS.epsilon,
      weight_decay_rate: float = DEFAULTS.weight_decay_rate,
      exclude_from_weight_decay: Optional[Sequence[str]] = None,
      bias_correction: bool = DEFAULTS.bias_correction,
      name: str = "AdamWeightDecay",
      **kwargs,
  ):
    # Configs written by LAMB.get_config carry these; AdamW fixes them.
    kwargs.pop("layer_adaptation", None)
    kwargs.pop("exclude_from_layer_adaptation", None)
    super().__init__(learning_rate, beta_1, beta_2, epsilon, weight_decay_rate,
                     exclude_from_weight_decay, bias_correction=bias_correction,
                     layer_adaptation=False, name=name, **kwargs)
