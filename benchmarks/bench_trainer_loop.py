"""Steps/s of the real pretraining loop (run_pretraining.py), with and without
XLA, for the tiny CPU recipe and ALBERT-base.

Writes a synthetic TFRecord file in our pretraining schema (random ids; the
loop's speed does not depend on the text), runs `python -m
albert_tf.run_pretraining` for a few loops of `steps_per_loop` steps, and reads
steps/s and examples/s from its metrics.jsonl (the first loop, which traces
and compiles, is left out).

  python benchmarks/bench_trainer_loop.py [--configs tiny,base] [--json out.json]

`--compare_loops` instead times our outer loop (`Trainer.train`) against
`orbit.Controller` driving an `orbit.StandardTrainer` over the same step
function (`base_trainer.DistributedSteps.step`), each variant in its own
process, alternating, on the tiny recipe: wall-clock steps/s between the
first and the last loop (tracing excluded; summaries every loop, one
checkpoint at the end, in both).

  python benchmarks/bench_trainer_loop.py --compare_loops [--repeats 2]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top

# name -> (recipe, overrides, seq, predictions, vocab, steps_per_loop, loops)
SETTINGS = {
    "tiny": ("albert_tiny_cpu.yaml", "data.global_batch_size=64", 64, 10, 1000,
             50, 4),
    "base": ("albert_base_v2.yaml",
             "data.global_batch_size=8,data.seq_length=128,"
             "data.max_predictions_per_seq=20", 128, 20, 30000, 2, 4),
}


def write_records(path, num, seq, predictions, vocab, seed=0):
  """Random examples in the original feature schema."""
  rng = np.random.default_rng(seed)

  def feature(values):
    values = np.asarray(values)
    if values.dtype.kind == "f":
      return tf.train.Feature(float_list=tf.train.FloatList(value=values))
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

  writer = tf.io.TFRecordWriter(path)
  for _ in range(num):
    ids = rng.integers(5, vocab, seq)
    ids[0], ids[seq // 2], ids[-1] = 2, 3, 3
    positions = np.sort(rng.choice(np.arange(1, seq - 1), predictions,
                                   replace=False))
    features = {
        "input_ids": ids, "input_mask": np.ones(seq, np.int64),
        "segment_ids": (np.arange(seq) > seq // 2).astype(np.int64),
        "token_boundary": np.ones(seq, np.int64),
        "masked_lm_positions": positions, "masked_lm_ids": ids[positions],
        "masked_lm_weights": np.ones(predictions, np.float32),
        "next_sentence_labels": rng.integers(0, 2, 1),
    }
    writer.write(tf.train.Example(features=tf.train.Features(feature={
        k: feature(v) for k, v in features.items()})).SerializeToString())
  writer.close()


def run(name, jit, workdir):
  recipe, overrides, seq, pred, vocab, steps_per_loop, loops = SETTINGS[name]
  data = os.path.join(workdir, f"{name}.tfrecord")
  if not os.path.exists(data):
    write_records(data, 512, seq, pred, vocab)
  model_dir = os.path.join(workdir, f"{name}_{'xla' if jit else 'plain'}")
  steps = steps_per_loop * loops
  cmd = [sys.executable, "-m", "albert_tf.run_pretraining",
         f"--config_file={os.path.join(ROOT, 'official_configs', 'pretraining', recipe)}",
         f"--params_override={overrides},data.input_path={data},"
         f"trainer.train_steps={steps},trainer.steps_per_loop={steps_per_loop},"
         f"trainer.checkpoint_interval={steps},runtime.jit_compile={jit},"
         "model.hidden_dropout_prob=0.0,model.attention_probs_dropout_prob=0.0",
         f"--model_dir={model_dir}", "--mode=train"]
  subprocess.run(cmd, check=True, cwd=ROOT, env=dict(os.environ,
                                                    PYTHONPATH=ROOT))
  with open(os.path.join(model_dir, "metrics.jsonl"), encoding="utf-8") as f:
    rows = [json.loads(l) for l in f if l.strip()]
  rows = [r for r in rows if r.get("mode", "train") == "train" and
          "steps_per_sec" in r][1:]  # the first loop traces and compiles
  return {"steps_per_sec": float(np.median([r["steps_per_sec"] for r in rows])),
          "examples_per_sec": float(np.median([r["examples_per_sec"]
                                               for r in rows]))}


def _time_loop(variant, data, model_dir, steps_per_loop, loops):
  """Runs one variant in this process; {"steps_per_sec": wall-clock rate
  from the end of the first loop to the end of the last}."""
  # pylint: disable=g-import-not-at-top
  import time
  import orbit
  from albert_tf import run_pretraining
  from albert_tf.core import trainer as trainer_lib
  from albert_tf.tasks import pretraining as pretraining_task
  steps = steps_per_loop * loops
  config = run_pretraining.build_config(
      [os.path.join(ROOT, "official_configs", "pretraining",
                    SETTINGS["tiny"][0])],
      f"{SETTINGS['tiny'][1]},data.input_path={data},"
      f"data.eval_input_path={data},trainer.train_steps={steps},"
      f"trainer.steps_per_loop={steps_per_loop},"
      f"trainer.checkpoint_interval={steps}")
  trainer = trainer_lib.Trainer(pretraining_task.PretrainingTask(config),
                                config, model_dir)
  if variant == "ours":
    trainer.train()
    with open(os.path.join(model_dir, "metrics.jsonl"), encoding="utf-8") as f:
      rows = [json.loads(l) for l in f]
    ends = [(r["step"], r["time"]) for r in rows]
  else:
    ends = []

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
    controller.train(steps)
  (s0, t0), (s1, t1) = ends[0], ends[-1]
  return {"steps_per_sec": (s1 - s0) / (t1 - t0), "loops": len(ends)}


def compare_loops(repeats, json_path):
  workdir = tempfile.mkdtemp(prefix="bench_loops_")
  _, _, seq, pred, vocab, steps_per_loop, loops = SETTINGS["tiny"]
  data = os.path.join(workdir, "tiny.tfrecord")
  write_records(data, 512, seq, pred, vocab)
  rates = {"ours": [], "orbit": []}
  for i in range(repeats):
    for variant in rates:
      out = subprocess.run(
          [sys.executable, __file__, f"--loop_child={variant}",
           f"--data={data}", f"--model_dir={workdir}/{variant}{i}",
           f"--steps_per_loop={steps_per_loop}", f"--loops={loops}"],
          check=True, cwd=ROOT, capture_output=True, text=True,
          env=dict(os.environ, PYTHONPATH=ROOT)).stdout
      result = json.loads(out.strip().splitlines()[-1])
      rates[variant].append(result["steps_per_sec"])
      print(f"{variant:<6} run {i}: {result['steps_per_sec']:8.2f} steps/s",
            flush=True)
  summary = {v: {"median_steps_per_sec": float(np.median(r)), "runs": r}
             for v, r in rates.items()}
  print(json.dumps(summary, indent=2))
  if json_path:
    with open(json_path, "w", encoding="utf-8") as f:
      json.dump(summary, f, indent=2)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--configs", default="tiny,base")
  parser.add_argument("--json")
  parser.add_argument("--compare_loops", action="store_true")
  parser.add_argument("--repeats", type=int, default=2)
  parser.add_argument("--loop_child", choices=("ours", "orbit"))
  parser.add_argument("--data")
  parser.add_argument("--model_dir")
  parser.add_argument("--steps_per_loop", type=int, default=50)
  parser.add_argument("--loops", type=int, default=4)
  args = parser.parse_args()
  if args.loop_child:
    print(json.dumps(_time_loop(args.loop_child, args.data, args.model_dir,
                                args.steps_per_loop, args.loops)))
    return
  if args.compare_loops:
    compare_loops(args.repeats, args.json)
    return
  workdir = tempfile.mkdtemp(prefix="bench_trainer_loop_")
  results = {}
  for name in args.configs.split(","):
    for jit in (False, True):
      key = f"{name}{' + XLA' if jit else ''}"
      results[key] = run(name, jit, workdir)
      print(f"{key:<12} {results[key]['steps_per_sec']:8.3f} steps/s "
            f"{results[key]['examples_per_sec']:9.1f} examples/s", flush=True)
  if args.json:
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w", encoding="utf-8") as f:
      json.dump(results, f, indent=2)


if __name__ == "__main__":
  main()
