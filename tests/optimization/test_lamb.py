"""Tests for albert_tf.optimization.lamb against NumPy and Model Garden references."""

import json
import os
import re
import sys
import tempfile

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from albert_tf.optimization import lamb
from albert_tf.optimization import optimizer_factory
from tests.testing import tool_server

NUM_STEPS = 5

# name -> initial value. Names are chosen to hit each exclusion path:
# tf_keras-style layer_norm, original-style LayerNorm, a bias, a plain kernel
# and an all-zero kernel (trust ratio must fall back to 1).
_RNG = np.random.RandomState(1234)
INIT = {
    "encoder/dense/kernel": _RNG.normal(size=(4, 3)),
    "encoder/dense/bias": _RNG.normal(size=(3,)),
    "encoder/layer_norm/gamma": 1.0 + 0.1 * _RNG.normal(size=(3,)),
    "bert/encoder/LayerNorm/beta": 0.1 * _RNG.normal(size=(3,)),
    "zero_init/kernel": np.zeros((3, 2)),
}
GRADS = [{k: _RNG.normal(size=v.shape) for k, v in INIT.items()}
         for _ in range(NUM_STEPS)]


# --- NumPy references (written from the original update rule) ---------------


def _excluded(patterns, name):
  return any(re.search(p, name) for p in patterns)


def np_lamb(lrs, wd, excl_wd, excl_la, b1=0.9, b2=0.999, eps=1e-6,
            adapt=True, bias_correction=False):
  """Runs the original ALBERT LAMB (or AdamWeightDecay) update in float64."""
  w = {k: v.astype(np.float64).copy() for k, v in INIT.items()}
  m = {k: np.zeros_like(v) for k, v in w.items()}
  v = {k: np.zeros_like(x) for k, x in w.items()}
  for t, (lr, grads) in enumerate(zip(lrs, GRADS), start=1):
    for k in w:
      g = grads[k]
      m[k] = b1 * m[k] + (1 - b1) * g
      v[k] = b2 * v[k] + (1 - b2) * g * g
      m_hat, v_hat = m[k], v[k]
      if bias_correction:
        m_hat = m_hat / (1 - b1**t)
        v_hat = v_hat / (1 - b2**t)
      u = m_hat / (np.sqrt(v_hat) + eps)
      if not _excluded(excl_wd, k):
        u = u + wd * w[k]
      r = 1.0
      if adapt and not _excluded(excl_la, k):
        w_norm, u_norm = np.linalg.norm(w[k]), np.linalg.norm(u)
        if w_norm > 0 and u_norm > 0:
          r = w_norm / u_norm
      w[k] = w[k] - lr * r * u
  return w


def run_tf(optimizer, steps=NUM_STEPS):
  variables = {k: tf.Variable(v.astype(np.float32), name=k)
               for k, v in INIT.items()}
  for grads in GRADS[:steps]:
    optimizer.apply_gradients(
        [(tf.constant(grads[k], tf.float32), variables[k]) for k in INIT])
  return {k: var.numpy() for k, var in variables.items()}


def assert_close(got, want, tol=1e-6):
  for k in INIT:
    np.testing.assert_allclose(got[k], want[k], rtol=tol, atol=tol,
                               err_msg=k)


DEFAULT_EXCL = ["LayerNorm", "layer_norm", "bias"]


# --- LAMB vs NumPy ------------------------------------------------------------


@pytest.mark.parametrize(
    "wd,excl_wd,excl_la",
    [
        (0.01, None, None),  # ALBERT defaults.
        (0.1, ["bias"], ["gamma", "zero_init"]),  # Separate lists.
        (0.0, [], []),  # No exclusions: every variable adapted.
    ])
def test_lamb_matches_numpy_original(wd, excl_wd, excl_la):
  lr = 0.05
  opt = lamb.LAMB(learning_rate=lr, weight_decay_rate=wd,
                  exclude_from_weight_decay=excl_wd,
                  exclude_from_layer_adaptation=excl_la)
  want_wd = DEFAULT_EXCL if excl_wd is None else excl_wd
  want_la = want_wd if excl_la is None else excl_la
  want = np_lamb([lr] * NUM_STEPS, wd, want_wd, want_la)
  assert_close(run_tf(opt), want)


def test_lamb_with_schedule_uses_step_before_update():
  schedule = optimizer_factory.WarmupPolynomialDecay(
      init_lr=0.1, num_train_steps=10, num_warmup_steps=2)
  opt = lamb.LAMB(learning_rate=schedule)
  # Step 0 (first update) has lr 0 in warmup, as in the original.
  lrs = [0.0, 0.05, 0.08, 0.07, 0.06]
  want = np_lamb(lrs, 0.01, DEFAULT_EXCL, DEFAULT_EXCL)
  assert_close(run_tf(opt), want)
  assert int(opt.iterations.numpy()) == NUM_STEPS


def test_zero_variable_gets_trust_ratio_one():
  lr = 0.5
  var = tf.Variable(tf.zeros([2, 2]), name="zero/kernel")
  grad = np.array([[1.0, -2.0], [0.5, 0.0]], np.float32)
  lamb.LAMB(learning_rate=lr).apply_gradients([(tf.constant(grad), var)])
  # First step: u = g*(1-b1) / (|g|*sqrt(1-b2) + eps); r = 1 since ||w|| = 0.
  u = 0.1 * grad / (np.sqrt(0.001) * np.abs(grad) + 1e-6)
  np.testing.assert_allclose(var.numpy(), -lr * u, rtol=1e-6, atol=1e-7)
  assert np.abs(var.numpy()).max() > 0.1  # Not stuck at r = 0.


def test_exclusion_matching_by_name():
  opt = lamb.LAMB()
  names = {
      "albert_encoder/transformer/layer_0/self_attention/query/kernel:0":
          (True, True),
      "albert_encoder/transformer/layer_0/output_layer_norm/gamma:0":
          (False, False),
      "bert/encoder/transformer/group_0/inner_group_0/LayerNorm/beta:0":
          (False, False),
      "albert_encoder/pooler_transform/bias:0": (False, False),
      "dense/kernel/replica_1:0": (True, True),  # Mirrored component.
      "dense/bias/replica_1:0": (False, False),
  }
  for name, (decay, adapt) in names.items():
    assert opt.do_use_weight_decay(name) == decay, name
    assert opt.do_layer_adaptation(name) == adapt, name
  # Anchored pattern still works on per-replica names (suffix stripped).
  anchored = lamb.LAMB(exclude_from_weight_decay=["bias$"])
  assert not anchored.do_use_weight_decay("dense/bias/replica_1:0")
  assert anchored.do_use_weight_decay("dense/bias_scale:0")
  with pytest.raises(re.error):
    lamb.LAMB(exclude_from_weight_decay=["("])


# --- bias correction vs Model Garden ------------------------------------------


@pytest.mark.parametrize("excl_la", [None, ["gamma", "zero_init"]])
def test_bias_correction_matches_model_garden(excl_la):
  from official.modeling.optimization import lamb as mg_lamb  # pylint: disable=g-import-not-at-top
  kwargs = dict(learning_rate=0.05, beta_1=0.9, beta_2=0.999, epsilon=1e-6,
                weight_decay_rate=0.01,
                exclude_from_weight_decay=DEFAULT_EXCL,
                exclude_from_layer_adaptation=excl_la)
  ours = run_tf(lamb.LAMB(bias_correction=True, **kwargs))
  theirs = run_tf(mg_lamb.LAMB(**kwargs))
  assert_close(ours, theirs)
  # And both equal the NumPy bias-corrected update.
  want_la = DEFAULT_EXCL if excl_la is None else excl_la
  assert_close(ours, np_lamb([0.05] * NUM_STEPS, 0.01, DEFAULT_EXCL, want_la,
                             bias_correction=True))
  # Without bias correction the result really differs.
  plain = run_tf(lamb.LAMB(bias_correction=False, **kwargs))
  assert not np.allclose(plain["encoder/dense/kernel"],
                         ours["encoder/dense/kernel"], atol=1e-4)


# --- AdamW --------------------------------------------------------------------


def test_adamw_matches_numpy_adam_weight_decay():
  lr = 0.01
  opt = lamb.AdamWeightDecay(learning_rate=lr, weight_decay_rate=0.01)
  assert isinstance(opt, lamb.LAMB)
  assert not opt.do_layer_adaptation("encoder/dense/kernel:0")
  want = np_lamb([lr] * NUM_STEPS, 0.01, DEFAULT_EXCL, [], adapt=False)
  got = run_tf(opt)
  assert_close(got, want)
  lamb_result = run_tf(lamb.LAMB(learning_rate=lr))
  assert not np.allclose(lamb_result["encoder/dense/kernel"],
                         got["encoder/dense/kernel"], atol=1e-4)


# --- sparse gradients ---------------------------------------------------------


def test_sparse_equals_dense():
  table = np.random.RandomState(0).normal(size=(7, 4)).astype(np.float32)
  # Duplicate ids within a step, and rows untouched in some steps.
  id_steps = [[1, 3, 1], [0, 0, 6], [2, 3, 4, 3]]
  results = []
  for sparse in (True, False):
    emb = tf.Variable(table, name="embeddings/word_embeddings")
    opt = lamb.LAMB(learning_rate=0.1)
    for ids in id_steps:
      with tf.GradientTape() as tape:
        rows = tf.gather(emb, ids)  # [n, 4]
        loss = tf.reduce_sum(rows**2 * tf.range(1.0, 5.0))
      grad = tape.gradient(loss, emb)
      assert isinstance(grad, tf.IndexedSlices)
      if not sparse:
        grad = tf.convert_to_tensor(grad)
      opt.apply_gradients([(grad, emb)])
    results.append((emb.numpy(), opt.get_slot(emb, "m").numpy(),
                    opt.get_slot(emb, "v").numpy()))
  for got, want in zip(results[0], results[1]):
    np.testing.assert_array_equal(got, want)
  # Rows never looked up still moved (their moments decay, weight decay).
  assert not np.allclose(results[0][0][5], table[5])


def test_sparse_in_tf_function_matches_numpy():
  table = np.random.RandomState(3).normal(size=(5, 2))
  emb = tf.Variable(table.astype(np.float32), name="emb")
  opt = lamb.LAMB(learning_rate=0.1)
  values = np.array([[1.0, 2.0], [3.0, -1.0], [0.5, 0.5]])

  @tf.function
  def step():
    opt.apply_gradients([(tf.IndexedSlices(
        tf.constant(values, tf.float32), tf.constant([4, 0, 4]),
        tf.constant([5, 2])), emb)])

  step()
  dense = np.zeros_like(table)
  np.add.at(dense, [4, 0, 4], values)
  m = 0.1 * dense
  v = 0.001 * dense**2
  u = m / (np.sqrt(v) + 1e-6) + 0.01 * table
  want = table - 0.1 * np.linalg.norm(table) / np.linalg.norm(u) * u
  np.testing.assert_allclose(emb.numpy(), want, rtol=1e-6, atol=1e-6)


# --- checkpoint & config ------------------------------------------------------


def _make_state(schedule_steps=20):
  variables = {k: tf.Variable(v.astype(np.float32), name=k)
               for k, v in INIT.items()}
  schedule = optimizer_factory.WarmupPolynomialDecay(0.05, schedule_steps, 2)
  opt = lamb.LAMB(learning_rate=schedule, bias_correction=True)
  return variables, opt


def _apply(variables, opt, grads):
  opt.apply_gradients(
      [(tf.constant(grads[k], tf.float32), variables[k]) for k in INIT])


def test_checkpoint_round_trip_continues_identically():
  variables, opt = _make_state()
  for grads in GRADS[:2]:
    _apply(variables, opt, grads)
  ckpt = tf.train.Checkpoint(optimizer=opt, **{
      k.replace("/", "_"): v for k, v in variables.items()})
  with tempfile.TemporaryDirectory() as tmp:
    path = ckpt.save(os.path.join(tmp, "ckpt"))
    for grads in GRADS[2:]:
      _apply(variables, opt, grads)
    want = {k: v.numpy() for k, v in variables.items()}

    variables2, opt2 = _make_state()
    ckpt2 = tf.train.Checkpoint(optimizer=opt2, **{
        k.replace("/", "_"): v for k, v in variables2.items()})
    status = ckpt2.restore(path)
    # Slots are restored lazily when the optimizer creates them.
    for grads in GRADS[2:]:
      _apply(variables2, opt2, grads)
    status.assert_consumed()
  assert int(opt2.iterations.numpy()) == NUM_STEPS
  for k in INIT:
    np.testing.assert_array_equal(variables2[k].numpy(), want[k], err_msg=k)
    np.testing.assert_array_equal(
        opt2.get_slot(variables2[k], "v").numpy(),
        opt.get_slot(variables[k], "v").numpy(), err_msg=k)


def test_fresh_optimizer_without_restore_differs():
  # Guards the round-trip test: skipping the restore must change the result.
  variables, opt = _make_state()
  for grads in GRADS[:2]:
    _apply(variables, opt, grads)
  variables2 = {k: tf.Variable(v.numpy(), name=k)
                for k, v in variables.items()}
  _, opt2 = _make_state()
  for grads in GRADS[2:]:
    _apply(variables, opt, grads)
    _apply(variables2, opt2, grads)
  assert not np.allclose(variables["encoder/dense/kernel"].numpy(),
                         variables2["encoder/dense/kernel"].numpy(),
                         atol=1e-5)


def test_get_config_round_trip():
  schedule = optimizer_factory.WarmupPolynomialDecay(0.1, 100, 10, poly_power=0.5)
  opt = lamb.LAMB(learning_rate=schedule, weight_decay_rate=0.02,
                  exclude_from_weight_decay=["bias"],
                  exclude_from_layer_adaptation=["gamma"],
                  bias_correction=True)
  config = opt.get_config()
  json.dumps(tf_keras.optimizers.serialize(opt))  # JSON-serialisable.
  clone = lamb.LAMB.from_config(config)
  assert clone.exclude_from_weight_decay == ["bias"]
  assert clone.exclude_from_layer_adaptation == ["gamma"]
  assert clone.bias_correction and clone.layer_adaptation
  assert isinstance(clone._get_hyper("learning_rate"),
                    optimizer_factory.WarmupPolynomialDecay)
  assert float(clone._get_hyper("learning_rate")(50)) == pytest.approx(
      0.1 * 0.5**0.5, rel=1e-6)
  adamw = lamb.AdamWeightDecay.from_config(
      lamb.AdamWeightDecay(learning_rate=0.1).get_config())
  assert not adamw.layer_adaptation
  restored = tf_keras.optimizers.deserialize(
      tf_keras.optimizers.serialize(opt), use_legacy_optimizer=True)
  assert isinstance(restored, lamb.LAMB) and restored.bias_correction


# --- MirroredStrategy (subprocess: logical devices must be set before TF
# initialises, which the rest of this module already did) ----------------------


def test_mirrored_strategy_matches_single_device():
  proc = tool_server.run(
      [sys.executable, os.path.abspath(__file__), "--distributed-check"],
      env=tool_server.tool_env(), capture_output=True, text=True, timeout=600,
      check=False)
  assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
  result = json.loads(proc.stdout.strip().splitlines()[-1])
  assert result["replicas"] == 2
  assert result["max_diff_default_aggregation"] < 1e-6
  assert result["max_diff_allreduce_clip"] < 1e-6
  assert result["clip_was_active"]


def _distributed_check():
  """Compares 2-replica MirroredStrategy training to one device (3 steps)."""
  cpu = tf.config.list_physical_devices("CPU")[0]
  tf.config.set_logical_device_configuration(
      cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
  rng = np.random.RandomState(7)
  init = {
      "embeddings/word_embeddings": rng.normal(size=(9, 4)),
      "dense/kernel": rng.normal(size=(4, 3)),
      "dense/bias": rng.normal(size=(3,)),
      "layer_norm/gamma": 1.0 + 0.1 * rng.normal(size=(3,)),
  }
  ids = rng.randint(0, 9, size=(3, 4, 2))  # [steps, global_batch, seq]
  targets = rng.normal(size=(3, 4, 3)) * 10.0  # Large: clipping is active.

  def build():
    variables = {k: tf.Variable(v.astype(np.float32), name=k)
                 for k, v in init.items()}
    opt = lamb.LAMB(learning_rate=0.05, bias_correction=True)
    return variables, opt

  def loss_fn(variables, batch_ids, batch_targets, global_batch):
    x = tf.gather(variables["embeddings/word_embeddings"], batch_ids)
    x = tf.reduce_mean(x, axis=1)  # [batch, 4]
    y = tf.matmul(x, variables["dense/kernel"]) + variables["dense/bias"]
    y = y * variables["layer_norm/gamma"]  # [batch, 3]
    per_example = tf.reduce_sum((y - batch_targets)**2, axis=-1)  # [batch]
    return tf.reduce_sum(per_example) / global_batch

  def grads_of(variables, batch_ids, batch_targets):
    names = list(init)
    with tf.GradientTape() as tape:
      loss = loss_fn(variables, batch_ids, batch_targets, 4.0)
    return names, tape.gradient(loss, [variables[k] for k in names])

  def run(strategy, mode):
    with strategy.scope():
      variables, opt = build()
    norms = []

    @tf.function
    def step(batch_ids, batch_targets):
      names, grads = grads_of(variables, batch_ids, batch_targets)
      vs = [variables[k] for k in names]
      if mode == "default":
        opt.apply_gradients(zip(grads, vs))
        return tf.constant(0.0)
      grads = optimizer_factory.all_reduce_gradients(grads)
      grads, norm = optimizer_factory.clip_by_global_norm(grads, 1.0)
      opt.apply_gradients(zip(grads, vs),
                          experimental_aggregate_gradients=False)
      return norm

    n = strategy.num_replicas_in_sync
    per = 4 // n
    for s in range(3):
      def value_fn(ctx, s=s, src=ids):
        i = ctx.replica_id_in_sync_group
        return tf.constant(src[s, i * per:(i + 1) * per])

      def target_fn(ctx, s=s):
        i = ctx.replica_id_in_sync_group
        return tf.constant(targets[s, i * per:(i + 1) * per], tf.float32)

      batch_ids = strategy.experimental_distribute_values_from_function(
          value_fn)
      batch_targets = strategy.experimental_distribute_values_from_function(
          target_fn)
      norm = strategy.run(step, args=(batch_ids, batch_targets))
      norms.append(float(strategy.experimental_local_results(norm)[0]))
    return {k: v.numpy() for k, v in variables.items()}, norms

  mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
  single = tf.distribute.OneDeviceStrategy("/cpu:0")
  out = {"replicas": mirrored.num_replicas_in_sync}
  for mode in ("default", "allreduce_clip"):
    got, norms = run(mirrored, mode)
    want, want_norms = run(single, mode)
    diff = max(float(np.abs(got[k] - want[k]).max()) for k in init)
    key = "max_diff_default_aggregation" if mode == "default" else (
        "max_diff_allreduce_clip")
    out[key] = diff
    if mode == "allreduce_clip":
      np.testing.assert_allclose(norms, want_norms, rtol=1e-5)
      out["clip_was_active"] = bool(min(want_norms) > 1.0)
  print(json.dumps(out))


if __name__ == "__main__" and "--distributed-check" in sys.argv:
  _distributed_check()
