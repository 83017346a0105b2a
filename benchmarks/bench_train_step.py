"""Pretraining train-step speed: albert_tf vs Model Garden vs keras-hub.

One full step = forward, MLM + SOP loss, backward, optimizer apply, on the
same inputs (ALBERT-base, dropout 0, batch 8 x seq 128, 20 masked positions
by default). Model Garden (AlbertEncoder + BertPretrainerV2 + its LAMB) runs
in this process, one step each per round, alternating (bench_common:
warm-up until both steps settle, then timed rounds; the ratio is the median
of per-round ratios); keras-hub (Keras 3 AlbertBackbone + AlbertMaskedLM
head) runs in a separate process (it needs Keras 3) from the venv built from
benchmarks/requirements.txt, one run per outer round, warming up until its
own step settles. Also measured in every outer round: a dense matmul's
GFLOP/s on this machine in the policy's compute dtype (and in float32),
against which our achieved GFLOP/s is reported, and the load average.

--policy=mixed_bfloat16 builds all three models under Keras' mixed_bfloat16
policy (the TPU setting: float32 weights, bfloat16 matmuls; on a CPU with
AVX512_BF16, oneDNN runs them as bfloat16 dot products).

  python benchmarks/bench_train_step.py [--batch 8 --seq 128 --steps 5]
      [--rounds 3] [--jit] [--policy float32|mixed_bfloat16]
      [--profile STEPS] [--no-keras-hub] [--json out.json] [--smoke]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_common  # pylint: disable=g-import-not-at-top
import op_profile  # pylint: disable=g-import-not-at-top

import numpy as np  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top

BASE = dict(vocab_size=30000, embedding_size=128, hidden_size=768,
            num_hidden_layers=12, num_attention_heads=12,
            intermediate_size=3072, max_position_embeddings=512,
            type_vocab_size=2)
# --smoke (the quick test): the same code on a 1-layer model.
SMOKE = dict(BASE, vocab_size=1000, embedding_size=16, hidden_size=32,
             num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
             max_position_embeddings=64)


def train_flops(c, batch, seq, predictions):
  """Matmul FLOPs of one training step (backward counted as 2x forward)."""
  tokens = batch * seq
  H, I, E, V, L = (c["hidden_size"], c["intermediate_size"],
                   c["embedding_size"], c["vocab_size"],
                   c["num_hidden_layers"])
  per_layer = (2 * tokens * H * 3 * H + 2 * tokens * H * H      # QKV, output
               + 2 * 2 * tokens * H * I                         # FFN
               + 2 * 2 * batch * seq * seq * H)                 # scores, context
  forward = (L * per_layer + 2 * tokens * E * H + 2 * batch * H * H
             + 2 * batch * predictions * (H * E + E * V))
  return 3 * forward


def make_batch(batch, seq, predictions, vocab, seed=0):
  rng = np.random.default_rng(seed)
  ids = rng.integers(5, vocab, size=(batch, seq)).astype(np.int32)
  positions = np.sort(np.stack([rng.choice(seq, predictions, replace=False)
                                for _ in range(batch)]), 1).astype(np.int32)
  return {
      "input_word_ids": ids, "input_mask": np.ones_like(ids),
      "input_type_ids": np.zeros_like(ids),
      "masked_lm_positions": positions,
      "masked_lm_ids": np.take_along_axis(ids, positions, 1),
      "masked_lm_weights": np.ones(positions.shape, np.float32),
      "next_sentence_labels": rng.integers(0, 2, (batch,)).astype(np.int32),
  }


matmul_gflops = bench_common.matmul_gflops


# --policy -> the compute dtype of the matmuls (the matmul rate's dtype).
POLICIES = {"float32": "float32", "mixed_bfloat16": "bfloat16"}


def set_policy(policy):
  """Keras' global precision policy for the whole run, as a user sets it
  before building: Model Garden's heads create sublayers when first
  called, so a policy only around the constructors would miss them."""
  import tf_keras  # pylint: disable=g-import-not-at-top
  tf_keras.mixed_precision.set_global_policy(policy)


def ours_step_fn(batch, jit, gradient_checkpointing=False, dims=None):
  from albert_tf import AlbertConfig, AlbertPretrainer
  from albert_tf.modeling import losses
  from albert_tf.optimization import optimizer_factory
  config = AlbertConfig(**(dims or BASE),
                        gradient_checkpointing=gradient_checkpointing)
  model = AlbertPretrainer(config)
  optimizer, _ = optimizer_factory.create_optimizer(
      "lamb", init_lr=1e-4, num_train_steps=1000, num_warmup_steps=10)
  inputs = {k: batch[k] for k in ("input_word_ids", "input_mask",
                                  "input_type_ids", "masked_lm_positions")}

  @tf.function(jit_compile=jit)
  def step():
    with tf.GradientTape() as tape:
      loss, _ = losses.pretraining_loss(model(inputs, training=True), batch)
    grads = tape.gradient(loss, model.trainable_variables)
    grads, _ = optimizer_factory.clip_by_global_norm(grads, 1.0)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss
  return step


def model_garden_step_fn(batch, jit, dims=None):
  import tf_keras
  from official.modeling.optimization import lamb
  from official.nlp.modeling import models, networks
  c = dims or BASE
  encoder = networks.AlbertEncoder(
      vocab_size=c["vocab_size"], embedding_width=c["embedding_size"],
      hidden_size=c["hidden_size"], num_layers=c["num_hidden_layers"],
      num_attention_heads=c["num_attention_heads"],
      max_sequence_length=c["max_position_embeddings"],
      type_vocab_size=c["type_vocab_size"],
      intermediate_size=c["intermediate_size"], dropout_rate=0.0,
      attention_dropout_rate=0.0, dict_outputs=True)
  model = models.BertPretrainerV2(
      encoder_network=encoder, mlm_activation=tf_keras.activations.gelu)
  # SOP on the encoder's pooled output, as ALBERT does (MG's ClassificationHead
  # would add a second pooler).
  sop_head = tf_keras.layers.Dense(2, name="sentence_order")
  optimizer = lamb.LAMB(learning_rate=1e-4, weight_decay_rate=0.01,
                        exclude_from_weight_decay=["LayerNorm", "layer_norm",
                                                   "bias"])
  inputs = {k: batch[k] for k in ("input_word_ids", "input_mask",
                                  "input_type_ids", "masked_lm_positions")}

  @tf.function(jit_compile=jit)
  def step():
    with tf.GradientTape() as tape:
      out = model(inputs, training=True)
      # The losses in float32 (as ours) under mixed_bfloat16.
      mlm = tf.nn.sparse_softmax_cross_entropy_with_logits(
          batch["masked_lm_ids"], tf.cast(out["mlm_logits"], tf.float32))
      w = batch["masked_lm_weights"]
      sop = tf.nn.sparse_softmax_cross_entropy_with_logits(
          batch["next_sentence_labels"],
          tf.cast(sop_head(out["pooled_output"]), tf.float32))
      loss = tf.reduce_sum(mlm * w) / (tf.reduce_sum(w) + 1e-5) + \
          tf.reduce_mean(sop)
    variables = model.trainable_variables + sop_head.trainable_variables
    grads = tape.gradient(loss, variables)
    grads, _ = tf.clip_by_global_norm(grads, 1.0)
    optimizer.apply_gradients(zip(grads, variables))
    return loss
  return step


def time_step(step):
  start = time.perf_counter()
  step().numpy()
  return time.perf_counter() - start


def common_args(args):
  """The flags a child process (memory, keras-hub) repeats from ours."""
  return (["--jit"] if args.jit else []) + ["--policy", args.policy]


def peak_memory_mb(args, gradient_checkpointing):
  """Peak RSS of a fresh process running our train step (2 steps)."""
  cmd = [sys.executable, os.path.abspath(__file__), "--memory-child",
         "--batch", str(args.batch), "--seq", str(args.seq),
         "--predictions", str(args.predictions)]
  if gradient_checkpointing:
    cmd.append("--gradient-checkpointing")
  cmd += common_args(args)
  if args.smoke:
    cmd.append("--smoke")
  out = bench_common.bench_run(cmd, check=True, capture_output=True,
                               text=True)
  return json.loads(out.stdout.strip().splitlines()[-1])["peak_rss_mb"]


def memory_child(args):
  dims = SMOKE if args.smoke else BASE
  batch = make_batch(args.batch, args.seq, args.predictions,
                     dims["vocab_size"])
  set_policy(args.policy)
  step = ours_step_fn(batch, args.jit, args.gradient_checkpointing, dims)
  step().numpy()
  step().numpy()
  print(json.dumps({"peak_rss_mb": bench_common.own_peak_rss_mb()}))


def keras_hub_venv():
  return os.path.join(ROOT, ".venv-bench", "bin", "python")


def ensure_keras_hub_venv():
  python = keras_hub_venv()
  if not os.path.exists(python):
    print("[bench] creating .venv-bench from benchmarks/requirements.txt",
          flush=True)
    subprocess.run([sys.executable, "-m", "venv",
                    os.path.join(ROOT, ".venv-bench")], check=True)
    subprocess.run([python, "-m", "pip", "install", "-q", "-r",
                    os.path.join(ROOT, "benchmarks", "requirements.txt")],
                   check=True)
  return python


def keras_hub_run(args, steps):
  """Seconds/step of keras-hub in a fresh Keras 3 process (it warms up
  until its step settles, then times `steps` steps)."""
  cmd = [keras_hub_venv(), os.path.join(ROOT, "benchmarks",
                                        "keras_hub_train_step.py"),
         "--batch", str(args.batch), "--seq", str(args.seq),
         "--predictions", str(args.predictions), "--steps", str(steps),
         *common_args(args)]
  if args.smoke:
    cmd.append("--smoke")
  # Keras 3 there: a TF_USE_LEGACY_KERAS=1 of ours (the test suite's) must
  # not reach it.
  env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
  out = subprocess.run(cmd, check=True, capture_output=True, text=True,
                       env=env)
  return json.loads(out.stdout.strip().splitlines()[-1])


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--batch", type=int, default=8)
  parser.add_argument("--seq", type=int, default=128)
  parser.add_argument("--predictions", type=int, default=20)
  parser.add_argument("--steps", type=int, default=5,
                      help="timed steps per round and model")
  parser.add_argument("--rounds", type=int, default=3,
                      help="alternating A/B rounds")
  parser.add_argument("--jit", action="store_true", help="XLA for all")
  parser.add_argument("--policy", choices=sorted(POLICIES), default="float32",
                      help="Keras precision policy of all models")
  parser.add_argument("--profile", type=int, default=0, metavar="STEPS",
                      help="after the timing, trace this many of our steps "
                      "with the TF profiler: op time by type (op_profile.py)")
  parser.add_argument("--no-keras-hub", action="store_true")
  parser.add_argument("--no-model-garden", action="store_true")
  parser.add_argument("--memory", action="store_true",
                      help="also peak memory with/without gradient "
                      "checkpointing (fresh processes)")
  parser.add_argument("--json", help="write the results here")
  parser.add_argument("--memory-child", action="store_true",
                      help=argparse.SUPPRESS)
  parser.add_argument("--gradient-checkpointing", action="store_true",
                      help=argparse.SUPPRESS)
  parser.add_argument("--smoke", action="store_true",
                      help="a 1-layer model, batch 2 x seq 16, one round "
                      "(for the quick test; keras-hub only if .venv-bench "
                      "exists)")
  args = parser.parse_args()
  if args.smoke:
    args.batch, args.seq, args.predictions = 2, 16, 4
    args.steps, args.rounds = 2, 1
    if not os.path.exists(keras_hub_venv()):
      print("[bench] --smoke: no .venv-bench, keras-hub skipped", flush=True)
      args.no_keras_hub = True
  if args.memory_child:
    memory_child(args)
    return
  dims = SMOKE if args.smoke else BASE
  batch = make_batch(args.batch, args.seq, args.predictions,
                     dims["vocab_size"])
  flops = train_flops(dims, args.batch, args.seq, args.predictions)
  print(f"{'1-layer (smoke)' if args.smoke else 'ALBERT-base'} train step, "
        f"batch {args.batch} x seq {args.seq}, "
        f"{args.predictions} predictions, XLA={'on' if args.jit else 'off'}, "
        f"{args.policy}: "
        f"{flops / 1e9:.1f} GFLOP/step", flush=True)
  set_policy(args.policy)
  steps = {"albert_tf": ours_step_fn(batch, args.jit, dims=dims)}
  if not args.no_model_garden:
    steps["model_garden"] = model_garden_step_fn(batch, args.jit, dims)
  if not args.no_keras_hub:
    ensure_keras_hub_venv()
  # In-process sides: one step each per round, order flipping, warm-up until
  # every side's step settles; then `rounds` x (`steps` rounds, a matmul
  # rate, one keras-hub process).
  alt = bench_common.Alternation(
      list(steps), window=1 if args.smoke else 3, max_warmup=2 if args.smoke
      else 12, rounds=args.rounds * args.steps)
  while alt.warming_up:
    alt.add_round({name: time_step(steps[name]) for name in alt.order()})
  print(f"warm-up: {len(alt.warmup['albert_tf'])} rounds, "
        f"{'settled' if alt.settled else 'NOT settled (cap)'}: " + ", ".join(
            f"{k} {' '.join(f'{t:.2f}' for t in v)}"
            for k, v in alt.warmup.items()), flush=True)
  keras_hub, matmul_rates, loads = [], [], [os.getloadavg()[0]]
  float32_rates = []  # beside a bfloat16 rate: what bfloat16 gains
  spin = bench_common.SMOKE_MATMUL_SECONDS if args.smoke else 2.0
  for r in range(args.rounds):
    matmul_rates.append(matmul_gflops(spin, POLICIES[args.policy]))
    if args.policy != "float32":
      float32_rates.append(matmul_gflops(spin))
    for _ in range(args.steps):
      alt.add_round({name: time_step(steps[name]) for name in alt.order()})
    if not args.no_keras_hub:
      keras_hub.append(keras_hub_run(args, args.steps)["seconds"])
    loads.append(os.getloadavg()[0])
    print(f"round {r + 1}/{args.rounds}: " + ", ".join(
        f"{k} {statistics.median(v[-args.steps:]):.3f} s/step"
        for k, v in alt.timed.items()) +
          (f", keras_hub {keras_hub[-1]:.3f} s/step" if keras_hub else "") +
          f", matmul {matmul_rates[-1]:.0f} GFLOP/s, load {loads[-1]:.2f}",
          flush=True)

  matmul = statistics.median(matmul_rates)
  result = {"batch": args.batch, "seq": args.seq,
            "predictions": args.predictions, "xla": args.jit,
            "policy": args.policy, "matmul_dtype": POLICIES[args.policy],
            "gflop_per_step": flops / 1e9, "matmul_gflops": matmul,
            "matmul_gflops_rounds": matmul_rates, "loadavg_1min": loads,
            "matmul_gflops_float32": statistics.median(
                float32_rates or matmul_rates),
            "warmup_rounds": len(alt.warmup["albert_tf"]),
            "settled": alt.settled, "cpu_count": os.cpu_count(),
            **bench_common.stamp(), "models": {}}
  times = dict(alt.timed)
  if keras_hub:
    times["keras_hub"] = keras_hub
  ours = statistics.median(times["albert_tf"])
  for name, values in times.items():
    median = statistics.median(values)
    # In-process peers: the median of per-round ratios (same load); keras-hub
    # (other processes, other moments) only medians.
    speedup = (alt.ratio(name, "albert_tf") if name in alt.timed
               else median / ours)
    result["models"][name] = {
        "seconds_per_step": median,
        "gflops": flops / median / 1e9,
        "fraction_of_matmul": flops / median / 1e9 / matmul,
        "albert_tf_speedup": speedup,
    }
  print(f"\n{'model':<14}{'s/step':>9}{'GFLOP/s':>9}{'of matmul':>11}"
        f"{'ours is x faster':>18}")
  for name, m in result["models"].items():
    print(f"{name:<14}{m['seconds_per_step']:>9.3f}{m['gflops']:>9.1f}"
          f"{m['fraction_of_matmul']:>10.0%}{m['albert_tf_speedup']:>18.2f}")
  print(f"dense {POLICIES[args.policy]} matmul: {matmul:.1f} GFLOP/s" + (
      f" (float32 {result['matmul_gflops_float32']:.1f})" if float32_rates
      else ""))
  if args.profile:
    result["op_profile"] = op_profile.profile(steps["albert_tf"],
                                              args.profile)
    print("\n".join(op_profile.report(result["op_profile"],
                                      f"albert_tf, {args.policy}")))
  if args.memory:
    result["peak_rss_mb"] = {
        "albert_tf": peak_memory_mb(args, False),
        "albert_tf_gradient_checkpointing": peak_memory_mb(args, True)}
    print("peak RSS of a process running our train step: "
          f"{result['peak_rss_mb']['albert_tf']:.0f} MB, with gradient "
          "checkpointing "
          f"{result['peak_rss_mb']['albert_tf_gradient_checkpointing']:.0f} MB")
  if args.json:
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w", encoding="utf-8") as f:
      json.dump(result, f, indent=2)


if __name__ == "__main__":
  main()
