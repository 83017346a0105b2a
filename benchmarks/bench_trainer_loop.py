"""The run_pretraining loop against the bare compiled step of the same model,
in one process, alternating, in the steady state.

Data are made as users make them (botchan -> prepare_corpus ->
train_sentencepiece -> create_pretraining_data, which writes the summary the
trainer checks). The loop side is `Trainer.train()` as `run_pretraining`
runs it (config from the official recipe + overrides, PretrainingTask, the
configured strategy, metrics.jsonl, checkpoints); the bare side is one
`tf.function` of forward + MLM/SOP loss + backward + clip + the recipe's
optimizer on one fixed batch of the same data, the same model config, no
input pipeline and no loop (with XLA, forward + backward compiled, as the
trainer compiles them). Between two of the trainer's loops (its
`eval_callback`, every `steps_per_loop` steps) the bare step runs
`steps_per_loop` times: one round = one loop + the same number of bare
steps, timed wall-clock. Rounds follow bench_common.Alternation (warm-up
until the step settles, then timed rounds); the loop's cost is the median
per-round ratio loop / bare.

Settings: "tiny" (the tiny CPU recipe, batch 64 x seq 64) and "base"
(ALBERT-base, batch 8 x seq 128, 20 predictions, LAMB, clip 1, dropout 0; a
4,000-piece vocabulary from botchan instead of 30,000), each without and with
XLA; "smoke" is a 1-layer model for the quick test.

  python benchmarks/bench_trainer_loop.py [--configs tiny,base]
      [--json out.json]

`--compare_loops` instead times our outer loop (`Trainer.train`) against
`orbit.Controller` over the same step, each in its own process, alternating.
"""

import argparse
import json
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_common  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top

from albert_tf.core import base_trainer  # pylint: disable=g-import-not-at-top
from albert_tf.core import experiment_config  # pylint: disable=g-import-not-at-top
from albert_tf.core import train_lib  # pylint: disable=g-import-not-at-top
from albert_tf.core import trainer as trainer_lib  # pylint: disable=g-import-not-at-top
from albert_tf.modeling import albert_config  # pylint: disable=g-import-not-at-top
from albert_tf.modeling import losses  # pylint: disable=g-import-not-at-top
from albert_tf.optimization import optimizer_factory  # pylint: disable=g-import-not-at-top
from albert_tf.tasks import pretraining as pretraining_task  # pylint: disable=g-import-not-at-top

RECIPES = os.path.join(albert_config.CONFIG_DIR, "pretraining")
# name -> recipe, overrides, (seq, predictions, vocab), steps_per_loop,
#         Alternation arguments
SETTINGS = {
    "tiny": ("albert_tiny_cpu.yaml", "data.global_batch_size=64",
             (64, 10, 1000), 50, dict(window=3, max_warmup=12, rounds=5)),
    "base": ("albert_base_v2.yaml",
             "data.global_batch_size=8,data.seq_length=128,"
             "data.max_predictions_per_seq=20,model.vocab_size=4000",
             (128, 20, 4000), 2, dict(window=3, max_warmup=10, rounds=5)),
    "smoke": ("albert_tiny_cpu.yaml",
              "data.global_batch_size=8,model.num_hidden_layers=1",
              (64, 10, 1000), 2, dict(window=1, max_warmup=2, rounds=2)),
}
_DROPOUT_0 = "model.hidden_dropout_prob=0.0,model.attention_probs_dropout_prob=0.0"


class _Enough(Exception):
  """Raised from the trainer's callback when the timed rounds are done."""


def experiment(name, data, jit, max_loops):
  recipe, overrides, _, steps_per_loop, _ = SETTINGS[name]
  steps = steps_per_loop * max_loops
  return experiment_config.load_experiment_config(
      pretraining_task.PretrainingExperimentConfig,
      [os.path.join(RECIPES, recipe)],
      f"{overrides},{_DROPOUT_0},data.input_path={data},"
      f"trainer.train_steps={steps},trainer.steps_per_loop={steps_per_loop},"
      f"trainer.eval_interval={steps_per_loop},"
      f"trainer.checkpoint_interval={steps},runtime.jit_compile={jit}")


def bare_step(config, task, features):
  """The same model's train step alone: a fixed batch, no loop, no input."""
  model = task.build_model()
  optimizer, _ = base_trainer.build_optimizer(
      config.optimizer, config.trainer.train_steps, "float32")
  clip_norm = config.optimizer.clip_norm
  inputs = {k: features[k] for k in pretraining_task._MODEL_INPUTS}  # pylint: disable=protected-access

  def gradients():
    with tf.GradientTape() as tape:
      loss, _ = losses.pretraining_loss(model(inputs, training=True),
                                        features)
    return tape.gradient(loss, model.trainable_variables), loss

  if config.runtime.jit_compile:  # what XLA compiles in the trainer too
    gradients = tf.function(gradients, jit_compile=True)

  @tf.function
  def step():
    grads, loss = gradients()
    if clip_norm > 0:
      grads, _ = optimizer_factory.clip_by_global_norm(grads, clip_norm)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss
  return step


def measure(name, jit, workdir):
  """{"loop_over_bare": ratio, seconds per step of each side, load, ...}."""
  _, _, (seq, pred, vocab), steps_per_loop, alt_args = SETTINGS[name]
  data = bench_common.pretraining_data(workdir, seq, pred, vocab)
  alt = bench_common.Alternation(["loop", "bare"], **alt_args)
  config = experiment(name, data, jit, alt.max_warmup + alt.rounds + 2)
  task = pretraining_task.PretrainingTask(config)
  strategy = train_lib.strategy_from_config(config.runtime)
  model_dir = os.path.join(workdir, f"{name}_{'xla' if jit else 'plain'}")
  trainer = trainer_lib.Trainer(task, config, model_dir, strategy)
  features = next(iter(task.build_inputs(None, training=True)))
  step = bare_step(config, task, features)
  step().numpy()  # traced before timing, as the trainer's first loop is
  spin = bench_common.SMOKE_MATMUL_SECONDS if name == "smoke" else 2.0
  before = bench_common.load(spin)
  last_exit = [None]

  def between_loops(_):
    # The trainer's loop ran since the last exit from here (the first loop
    # since the start, which traces: a warm-up round like any other).
    now = time.perf_counter()
    loop_seconds = now - (last_exit[0] or start)
    t0 = time.perf_counter()
    for _ in range(steps_per_loop):
      step().numpy()
    alt.add_round({"loop": loop_seconds / steps_per_loop,
                   "bare": (time.perf_counter() - t0) / steps_per_loop})
    if alt.done:
      raise _Enough()
    last_exit[0] = time.perf_counter()

  start = time.perf_counter()
  try:
    trainer.train(eval_callback=between_loops)
  except _Enough:
    pass
  result = alt.summary()
  result.update(
      loop_over_bare=alt.ratio("loop", "bare"),
      loop_seconds_per_step=result["sides"]["loop"]["median_s"],
      bare_seconds_per_step=result["sides"]["bare"]["median_s"],
      steps_per_loop=steps_per_loop, batch=config.data.global_batch_size,
      **bench_common.stamp(),
      seq=seq, vocab_size=vocab, xla=jit,
      load_before=before, load_after=bench_common.load(spin))
  return result


def compare_loops(repeats, json_path, workdir, setting="tiny"):
  """Our Trainer.train against orbit.Controller, one process each."""
  _, _, (seq, pred, vocab), _, _ = SETTINGS[setting]
  data = bench_common.pretraining_data(workdir, seq, pred, vocab)
  rates = {"ours": [], "orbit": []}
  for i in range(repeats):
    for variant in rates:
      out = bench_common.bench_run(
          [sys.executable, os.path.abspath(__file__), f"--loop_child={variant}",
           f"--data={data}", f"--model_dir={workdir}/{variant}{i}",
           f"--configs={setting}"],
          check=True, cwd=ROOT, capture_output=True, text=True,
          env=dict(os.environ, PYTHONPATH=ROOT)).stdout
      rate = json.loads(out.strip().splitlines()[-1])["steps_per_sec"]
      rates[variant].append(rate)
      print(f"{variant:<6} run {i}: {rate:8.2f} steps/s", flush=True)
  summary = {v: {"median_steps_per_sec": sorted(r)[len(r) // 2], "runs": r}
             for v, r in rates.items()}
  print(json.dumps(summary, indent=2))
  if json_path:
    with open(json_path, "w", encoding="utf-8") as f:
      json.dump(summary, f, indent=2)


def loop_child(variant, data, model_dir, setting, loops=4):
  """One variant's wall-clock steps/s from the first loop's end to the last."""
  import orbit  # pylint: disable=g-import-not-at-top
  steps_per_loop = SETTINGS[setting][3]
  config = experiment(setting, data, False, loops)
  trainer = trainer_lib.Trainer(pretraining_task.PretrainingTask(config),
                                config, model_dir)
  ends = []
  if variant == "ours":
    trainer.train(eval_callback=lambda step: ends.append(
        (step, time.time())))
  else:
    class _OrbitTrainer(orbit.StandardTrainer):
      def __init__(self):
        self.loss_sum = tf.Variable(0.0)
        super().__init__(trainer.distribute_inputs(training=True))

      def train_loop_begin(self):
        self.loss_sum.assign(0.0)

      def train_step(self, iterator):
        sums, _, _ = trainer.steps.step(iterator)
        self.loss_sum.assign_add(trainer.task.metrics_from_sums(sums)["loss"])

      def train_loop_end(self):
        return {"loss": self.loss_sum.read_value() / steps_per_loop}

    trainer._make_manager()  # pylint: disable=protected-access
    controller = orbit.Controller(
        global_step=trainer.global_step, trainer=_OrbitTrainer(),
        strategy=trainer.strategy, steps_per_loop=steps_per_loop,
        checkpoint_manager=trainer.manager,
        summary_dir=os.path.join(model_dir, "train"),
        summary_interval=steps_per_loop,
        train_actions=[lambda _: ends.append(
            (int(trainer.global_step.numpy()), time.time()))])
    controller.train(steps_per_loop * loops)
  (s0, t0), (s1, t1) = ends[0], ends[-1]
  return {"steps_per_sec": (s1 - s0) / (t1 - t0), "loops": len(ends)}


def report(key, r):
  print(f"{key:<12} loop {r['loop_seconds_per_step']:.4f} s/step, bare step "
        f"{r['bare_seconds_per_step']:.4f} s/step: loop / bare = "
        f"{r['loop_over_bare']:.3f} ({r['timed_rounds']} timed rounds after "
        f"{r['warmup_rounds']} warm-up, "
        f"{'settled' if r['settled'] else 'NOT settled (cap)'}; load "
        f"{r['load_before']['loadavg_1min']}/{r['load_after']['loadavg_1min']}"
        f", matmul {r['load_before']['matmul_gflops']:.0f}/"
        f"{r['load_after']['matmul_gflops']:.0f} GFLOP/s before/after)",
        flush=True)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--configs", default="tiny,base")
  parser.add_argument("--no_xla", action="store_true",
                      help="only without XLA")
  parser.add_argument("--smoke", action="store_true",
                      help="the smallest setting (for the quick test)")
  parser.add_argument("--json")
  parser.add_argument("--workdir", help="data and runs (default: a new "
                      "temporary directory)")
  parser.add_argument("--compare_loops", action="store_true")
  parser.add_argument("--repeats", type=int, default=2)
  parser.add_argument("--loop_child", choices=("ours", "orbit"),
                      help=argparse.SUPPRESS)
  parser.add_argument("--data", help=argparse.SUPPRESS)
  parser.add_argument("--model_dir", help=argparse.SUPPRESS)
  args = parser.parse_args()
  configs = "smoke" if args.smoke else args.configs
  if args.loop_child:
    print(json.dumps(loop_child(args.loop_child, args.data, args.model_dir,
                                configs.split(",")[0])))
    return
  workdir = args.workdir or tempfile.mkdtemp(prefix="bench_trainer_loop_")
  os.makedirs(workdir, exist_ok=True)
  if args.compare_loops:
    compare_loops(args.repeats, args.json, workdir, configs.split(",")[0])
    return
  results = {}
  for name in configs.split(","):
    for jit in (False,) if args.no_xla or args.smoke else (False, True):
      key = f"{name}{' + XLA' if jit else ''}"
      results[key] = measure(name, jit, workdir)
      report(key, results[key])
  if args.json:
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w", encoding="utf-8") as f:
      json.dump(results, f, indent=2)


if __name__ == "__main__":
  main()
