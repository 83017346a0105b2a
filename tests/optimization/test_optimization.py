"""Tests for albert_tf.optimization.optimizer_factory: schedule, factory, gradient helpers."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from albert_tf.optimization import lamb
from albert_tf.optimization import optimizer_factory


def ref_lr(step, init_lr, num_train_steps, num_warmup_steps,
           start_warmup_step=0, poly_power=1.0):
  """The original schedule, written out in plain Python."""
  decayed = init_lr * (1.0 - min(step, num_train_steps) /
                       num_train_steps)**poly_power
  warm_step = step - start_warmup_step
  if num_warmup_steps and warm_step < num_warmup_steps:
    return init_lr * warm_step / num_warmup_steps
  return decayed


# --- schedule -----------------------------------------------------------------


@pytest.mark.parametrize("start,power", [(0, 1.0), (100, 1.0), (100, 0.5),
                                         (0, 2.0)])
def test_schedule_matches_formula(start, power):
  init_lr, n, w = 0.00176, 1000, 50
  schedule = optimizer_factory.WarmupPolynomialDecay(
      init_lr, n, w, start_warmup_step=start, poly_power=power)
  points = {
      "warmup start": start,
      "warmup middle": start + w // 2,
      "last warmup step": start + w - 1,
      "warmup end": start + w,
      "mid decay": 500,
      "late decay": 999,
      "end": n,
      "past end": n + 10,
  }
  for label, step in points.items():
    want = ref_lr(step, init_lr, n, w, start, power)
    got = float(schedule(step))
    assert got == pytest.approx(want, rel=1e-6, abs=1e-12), (label, step)
  assert float(schedule(start)) == 0.0
  assert float(schedule(n)) == 0.0
  # After warmup the value is the plain polynomial decay from step 0.
  keras_decay = tf_keras.optimizers.schedules.PolynomialDecay(
      init_lr, n, end_learning_rate=0.0, power=power)
  for step in (start + w, 500, 999):
    # Keras computes in float32 (1 - 999/1000 loses ~1e-5 relative); ours
    # is float64 inside, hence the looser tolerance here only.
    assert float(schedule(step)) == pytest.approx(float(keras_decay(step)),
                                                  rel=1e-4)


def test_schedule_values_by_hand():
  schedule = optimizer_factory.WarmupPolynomialDecay(1.0, 100, 10)
  assert float(schedule(0)) == 0.0
  assert float(schedule(5)) == pytest.approx(0.5)
  assert float(schedule(10)) == pytest.approx(0.9)  # Decay counted from 0.
  assert float(schedule(55)) == pytest.approx(0.45)
  sqrt_schedule = optimizer_factory.WarmupPolynomialDecay(
      1.0, 100, 10, start_warmup_step=20, poly_power=0.5)
  assert float(sqrt_schedule(25)) == pytest.approx(0.5)
  assert float(sqrt_schedule(30)) == pytest.approx(0.7**0.5)
  assert float(sqrt_schedule(75)) == pytest.approx(0.5)


def test_schedule_before_start_warmup_is_zero_not_negative():
  # The original formula gives init_lr * (step - start) / warmup < 0 here.
  schedule = optimizer_factory.WarmupPolynomialDecay(
      1.0, 100, 10, start_warmup_step=20)
  assert float(schedule(0)) == 0.0
  assert float(schedule(19)) == 0.0
  assert float(schedule(21)) == pytest.approx(0.1)


def test_schedule_without_warmup_starts_at_init_lr():
  schedule = optimizer_factory.WarmupPolynomialDecay(0.5, 10, 0)
  assert float(schedule(0)) == pytest.approx(0.5)
  assert float(schedule(5)) == pytest.approx(0.25)


def test_schedule_in_tf_function_with_int64_step():
  schedule = optimizer_factory.WarmupPolynomialDecay(1.0, 100, 10)
  fn = tf.function(schedule)
  assert float(fn(tf.constant(5, tf.int64))) == pytest.approx(0.5)
  assert float(fn(tf.constant(40, tf.int64))) == pytest.approx(0.6)


def test_schedule_config_round_trip():
  schedule = optimizer_factory.WarmupPolynomialDecay(
      0.1, 100, 10, start_warmup_step=3, poly_power=0.5, name="lr")
  config = tf_keras.optimizers.schedules.serialize(schedule)
  clone = tf_keras.optimizers.schedules.deserialize(config)
  assert isinstance(clone, optimizer_factory.WarmupPolynomialDecay)
  assert clone.get_config() == schedule.get_config()
  for step in (0, 5, 13, 50, 100):
    assert float(clone(step)) == float(schedule(step))


@pytest.mark.parametrize("kwargs,field", [
    (dict(num_train_steps=0, num_warmup_steps=1), "num_train_steps"),
    (dict(num_train_steps=10, num_warmup_steps=-1), "num_warmup_steps"),
    (dict(num_train_steps=10, num_warmup_steps=1, start_warmup_step=-2),
     "start_warmup_step"),
])
def test_schedule_rejects_bad_steps(kwargs, field):
  with pytest.raises(ValueError, match=field):
    optimizer_factory.WarmupPolynomialDecay(0.1, **kwargs)


# --- gradient helpers ---------------------------------------------------------


def test_clip_by_global_norm_numbers_and_none():
  a = np.array([3.0, 4.0], np.float32)
  b = np.array([[12.0]], np.float32)
  grads = [tf.constant(a), None, tf.constant(b)]
  clipped, norm = optimizer_factory.clip_by_global_norm(grads, 1.0)
  assert float(norm) == pytest.approx(13.0)
  assert clipped[1] is None
  np.testing.assert_allclose(clipped[0].numpy(), a / 13.0, rtol=1e-6)
  np.testing.assert_allclose(clipped[2].numpy(), b / 13.0, rtol=1e-6)
  # Below the threshold: unchanged.
  small, small_norm = optimizer_factory.clip_by_global_norm(
      [tf.constant([0.3, 0.4])], 1.0)
  assert float(small_norm) == pytest.approx(0.5)
  np.testing.assert_allclose(small[0].numpy(), [0.3, 0.4], rtol=1e-6)


def test_clip_by_global_norm_indexed_slices_uses_dense_norm():
  # Row 1 appears twice: dense gradient row 1 is [3, 4] + [3, 4] = [6, 8].
  slices = tf.IndexedSlices(
      tf.constant([[3.0, 4.0], [3.0, 4.0], [0.0, 0.0]]),
      tf.constant([1, 1, 0]), tf.constant([3, 2]))
  clipped, norm = optimizer_factory.clip_by_global_norm([slices], 5.0)
  assert float(norm) == pytest.approx(10.0)  # Not sqrt(50) of raw slices.
  assert isinstance(clipped[0], tf.IndexedSlices)
  np.testing.assert_allclose(
      tf.convert_to_tensor(clipped[0]).numpy(),
      [[0.0, 0.0], [3.0, 4.0], [0.0, 0.0]], rtol=1e-6)


def test_clip_non_finite_norm_gives_nan():
  clipped, norm = optimizer_factory.clip_by_global_norm(
      [tf.constant([np.inf, 1.0])], 1.0)
  assert not np.isfinite(float(norm))
  assert np.isnan(clipped[0].numpy()).all()


def test_all_reduce_gradients_without_strategy_is_identity():
  grads = [tf.constant([1.0, 2.0]), None]
  out = optimizer_factory.all_reduce_gradients(grads)
  assert out[1] is None
  np.testing.assert_array_equal(out[0].numpy(), [1.0, 2.0])


# --- factory ------------------------------------------------------------------


def test_create_lamb_defaults():
  opt, schedule = optimizer_factory.create_optimizer(
      "lamb", init_lr=0.00176, num_train_steps=125000, num_warmup_steps=3125)
  assert type(opt) is lamb.LAMB  # pylint: disable=unidiomatic-typecheck
  assert opt._get_hyper("learning_rate") is schedule
  assert opt.layer_adaptation and not opt.bias_correction
  assert opt.exclude_from_weight_decay == ["LayerNorm", "layer_norm", "bias"]
  assert opt.exclude_from_layer_adaptation == opt.exclude_from_weight_decay
  assert (opt.beta_1, opt.beta_2, opt.epsilon) == (0.9, 0.999, 1e-6)
  assert float(opt._get_hyper("weight_decay_rate")) == pytest.approx(0.01)
  assert float(schedule(3125)) == pytest.approx(
      0.00176 * (1 - 3125 / 125000), rel=1e-6)


def test_create_adamw_and_options():
  opt, schedule = optimizer_factory.create_optimizer(
      "AdamW", 1e-3, 100, 10, weight_decay_rate=0.1, poly_power=0.5,
      start_warmup_step=5, bias_correction=True,
      exclude_from_weight_decay=["bias"])
  assert isinstance(opt, lamb.AdamWeightDecay)
  assert not opt.layer_adaptation and opt.bias_correction
  assert opt.exclude_from_weight_decay == ["bias"]
  assert (schedule.poly_power, schedule.start_warmup_step) == (0.5, 5)
  assert float(opt._get_hyper("weight_decay_rate")) == pytest.approx(0.1)


def test_create_unknown_name_raises():
  with pytest.raises(ValueError, match=r"optimizer.*'sgd'.*lamb, adamw"):
    optimizer_factory.create_optimizer("sgd", 1e-3, 100, 10)


def test_create_bad_policy_raises():
  with pytest.raises(ValueError, match="mixed_precision_policy"):
    optimizer_factory.create_optimizer("lamb", 1e-3, 100, 10,
                                  mixed_precision_policy="mixed_float8")


@pytest.mark.parametrize("policy,wrapped", [
    (None, False), ("float32", False), ("mixed_bfloat16", False),
    ("mixed_float16", True),
    (tf_keras.mixed_precision.Policy("mixed_float16"), True),
])
def test_create_wraps_loss_scale_only_for_float16(policy, wrapped):
  opt, _ = optimizer_factory.create_optimizer(
      "lamb", 1e-3, 100, 10, mixed_precision_policy=policy)
  assert isinstance(opt, tf_keras.mixed_precision.LossScaleOptimizer) == (
      wrapped)
  if wrapped:
    assert opt.dynamic
    assert isinstance(opt.inner_optimizer, lamb.LAMB)


def test_loss_scaled_float16_step():
  policy = tf_keras.mixed_precision.Policy("mixed_float16")
  layer = tf_keras.layers.Dense(3, dtype=policy, name="dense")
  norm = tf_keras.layers.LayerNormalization(dtype=policy, name="layer_norm")
  x = tf.constant(np.random.RandomState(0).normal(size=(4, 5)), tf.float32)
  opt, _ = optimizer_factory.create_optimizer(
      "lamb", 0.1, 100, 0, mixed_precision_policy=policy)

  def loss_fn():
    y = norm(layer(x))  # [4, 3] float16
    # Small loss so the first step at loss scale 2**15 does not overflow.
    return 1e-3 * tf.reduce_mean(
        tf.cast(y, tf.float32)**2 * tf.range(1.0, 4.0))

  loss_fn()
  model_vars = layer.trainable_variables + norm.trainable_variables
  assert all(v.dtype == tf.float32 for v in model_vars)
  before = [v.numpy().copy() for v in model_vars]

  @tf.function
  def step(poison):
    with tf.GradientTape() as tape:
      loss = loss_fn()
      scaled = opt.get_scaled_loss(loss)
    grads = tape.gradient(scaled, model_vars)
    grads = opt.get_unscaled_gradients(grads)
    grads = [g * poison for g in grads]
    grads, global_norm = optimizer_factory.clip_by_global_norm(grads, 1.0)
    opt.apply_gradients(zip(grads, model_vars))
    return global_norm

  global_norm = step(tf.constant(1.0))
  assert np.isfinite(float(global_norm)) and float(global_norm) > 0
  after = [v.numpy().copy() for v in model_vars]
  for b, a in zip(before, after):
    assert np.all(np.isfinite(a))
    assert not np.array_equal(a, b)
  assert int(opt.iterations.numpy()) == 1
  scale = float(opt.loss_scale)
  assert scale == 2.0**15

  # An overflowing step (inf gradients -> NaN after clipping) is skipped and
  # the dynamic loss scale halves. The legacy LossScaleOptimizer still counts
  # the skipped step in `iterations` (so the schedule advances).
  step(tf.constant(np.inf))
  for a, v in zip(after, model_vars):
    np.testing.assert_array_equal(v.numpy(), a)
  assert float(opt.loss_scale) == scale / 2
  assert int(opt.iterations.numpy()) == 2
