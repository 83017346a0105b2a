"""`make demo`: what albert_tf builds, shown on every released model size.

Builds each released ALBERT size from `official_configs/models/`, prints its
parameter count next to the paper's (Table 1/2) and BERT's, and runs a
forward pass plus one pretraining-loss evaluation on a small random batch.

Usage: python -m albert_tf.demo [--sizes=base,large] [--batch=2 --seq=64]
"""

import json
import os
import sys
import time

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertPretrainer, pretraining_loss

FLAGS = flags.FLAGS
flags.DEFINE_list("sizes", ["base", "large", "xlarge", "xxlarge"],
                  "Released sizes to build (v2 configs).")
flags.DEFINE_integer("batch", 2, "Batch size of the demo forward pass.")
flags.DEFINE_integer("seq", 64, "Sequence length of the demo forward pass.")
flags.DEFINE_integer("predictions", 8, "Masked positions per example.")
flags.DEFINE_string("output_dir", "demo_output",
                    "Where the summary JSON is written.")

# The paper's rounded counts (Table 2) and the BERT models it compares with.
PAPER_MILLIONS = {"base": 12, "large": 18, "xlarge": 60, "xxlarge": 235}
BERT_MILLIONS = {"base": 108, "large": 334, "xlarge": 1270, "xxlarge": None}


def random_batch(config, batch, seq, predictions, seed=0):
  """A batch shaped like our pretraining data, ids drawn at random."""
  rng = np.random.default_rng(seed)
  ids = rng.integers(5, config.vocab_size, size=(batch, seq), dtype=np.int32)
  ids[:, 0], ids[:, -1] = 2, 3  # [CLS] ... [SEP]
  types = np.zeros_like(ids)
  types[:, seq // 2:] = 1
  positions = np.sort(np.stack([rng.choice(np.arange(1, seq - 1), predictions,
                                           replace=False)
                                for _ in range(batch)]), axis=1).astype(np.int32)
  features = {
      "input_word_ids": ids,
      "input_mask": np.ones_like(ids),
      "input_type_ids": types,
      "masked_lm_positions": positions,
      "masked_lm_ids": np.take_along_axis(ids, positions, axis=1),
      "masked_lm_weights": np.ones(positions.shape, np.float32),
      "next_sentence_labels": rng.integers(0, 2, size=(batch,), dtype=np.int32),
  }
  return features


def run_size(size, batch, seq, predictions):
  config = AlbertConfig.from_preset(f"albert_{size}_v2")
  start = time.perf_counter()
  model = AlbertPretrainer(config)
  build_s = time.perf_counter() - start
  encoder_params = model.encoder.count_params()
  features = random_batch(config, batch, seq, predictions)
  start = time.perf_counter()
  outputs = model({k: features[k] for k in
                   ("input_word_ids", "input_mask", "input_type_ids",
                    "masked_lm_positions")})
  loss, metrics = pretraining_loss(outputs, features)
  forward_s = time.perf_counter() - start
  return {
      "size": size,
      "hidden": config.hidden_size,
      "layers": config.num_hidden_layers,
      "embedding": config.embedding_size,
      "encoder_params": encoder_params,
      "pretrainer_params": model.count_params(),
      "paper_millions": PAPER_MILLIONS[size],
      "bert_millions": BERT_MILLIONS[size],
      "mlm_logits_shape": list(outputs["mlm_logits"].shape),
      "sop_logits_shape": list(outputs["sop_logits"].shape),
      "loss": float(loss),
      "masked_lm_loss": float(metrics["masked_lm_loss"]),
      "sentence_order_loss": float(metrics["sentence_order_loss"]),
      "build_seconds": round(build_s, 2),
      "forward_seconds": round(forward_s, 2),
  }


def format_table(rows):
  header = (f"{'model':<16}{'H':>6}{'L':>4}{'E':>5}{'encoder params':>17}"
            f"{'+ MLM/SOP heads':>17}{'paper':>8}{'BERT':>8}{'loss':>8}"
            f"{'fwd s':>7}")
  lines = [header, "-" * len(header)]
  for r in rows:
    bert = f"{r['bert_millions']}M" if r["bert_millions"] else "-"
    lines.append(
        f"{'ALBERT-' + r['size']:<16}{r['hidden']:>6}{r['layers']:>4}"
        f"{r['embedding']:>5}{r['encoder_params']:>17,}"
        f"{r['pretrainer_params']:>17,}{str(r['paper_millions']) + 'M':>8}"
        f"{bert:>8}{r['loss']:>8.3f}{r['forward_seconds']:>7.2f}")
  return "\n".join(lines)


def main(argv):
  del argv
  os.makedirs(FLAGS.output_dir, exist_ok=True)
  print(f"albert_tf demo: TensorFlow {tf.__version__}; batch {FLAGS.batch} x "
        f"seq {FLAGS.seq}, {FLAGS.predictions} masked positions per example",
        flush=True)
  rows = []
  for i, size in enumerate(FLAGS.sizes, 1):
    print(f"[{i}/{len(FLAGS.sizes)}] building ALBERT-{size} and running a "
          "forward pass + pretraining loss ...", flush=True)
    row = run_size(size, FLAGS.batch, FLAGS.seq, FLAGS.predictions)
    rows.append(row)
    print(f"    {row['encoder_params']:,} encoder parameters, loss "
          f"{row['loss']:.3f} (ln V = {np.log(30000):.3f} + ln 2 = "
          f"{np.log(2):.3f} expected at init), {row['forward_seconds']} s",
          flush=True)
  print()
  print(format_table(rows))
  path = os.path.join(FLAGS.output_dir, "model_sizes.json")
  with open(path, "w", encoding="utf-8") as f:
    json.dump(rows, f, indent=2)
  print(f"\nwrote {path}")
  return 0


if __name__ == "__main__":
  sys.exit(app.run(main))
