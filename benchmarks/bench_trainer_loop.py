"""Steps/s of the real pretraining loop (run_pretraining.py), with and without
XLA, for the tiny CPU recipe and ALBERT-base.

Writes a synthetic TFRecord file in our pretraining schema (random ids; the
loop's speed does not depend on the text), runs `python -m
albert_tf.run_pretraining` for a few loops of `steps_per_loop` steps, and reads
steps/s and examples/s from its metrics.jsonl (the first loop, which traces
and compiles, is left out).

  python benchmarks/bench_trainer_loop.py [--configs tiny,base] [--json out.json]
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


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--configs", default="tiny,base")
  parser.add_argument("--json")
  args = parser.parse_args()
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
