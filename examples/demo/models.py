"""The demo's in-process model work: the released sizes' parameter table
(stage 6) and the initial checkpoint of the tiny model (stage 3)."""

import os
import time

import numpy as np
import tensorflow as tf
import tf_keras

from albert_tf import AlbertConfig, AlbertPretrainer, pretraining_loss
from albert_tf.checkpoints import object_layout

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
  return {
      "input_word_ids": ids,
      "input_mask": np.ones_like(ids),
      "input_type_ids": types,
      "masked_lm_positions": positions,
      "masked_lm_ids": np.take_along_axis(ids, positions, axis=1),
      "masked_lm_weights": np.ones(positions.shape, np.float32),
      "next_sentence_labels": rng.integers(0, 2, size=(batch,), dtype=np.int32),
  }


def run_size(size, batch=2, seq=64, predictions=8):
  config = AlbertConfig.from_preset(f"albert_{size}_v2")
  start = time.perf_counter()
  model = AlbertPretrainer(config)
  build_s = time.perf_counter() - start
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
      "encoder_params": model.encoder.count_params(),
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


def machine():
  """'<CPU model>, <n> cores' (/proc/cpuinfo), recorded with measured figures."""
  model = "unknown CPU"
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      model = next((l.split(":", 1)[1].strip() for l in f
                    if l.startswith("model name")), model)
  except OSError:
    pass
  return f"{model}, {os.cpu_count()} cores"


def write_initial_checkpoint(model_config, directory, seed, seq_length,
                             max_predictions):
  """Writes the randomly initialised pretraining model as
  `<directory>/ckpt-0` (with a checkpoint state file).

  `run_pretraining --mode=eval` evaluates it (the "before" numbers) and the
  training run warm-starts from it (--init_checkpoint), so "before" and
  "after" are the same weights before and after training.
  """
  tf_keras.utils.set_random_seed(seed)
  model = AlbertPretrainer(model_config)
  ids = np.full((1, seq_length), 5, np.int32)
  model({"input_word_ids": ids, "input_mask": np.ones_like(ids),
         "input_type_ids": np.zeros_like(ids),
         "masked_lm_positions": np.ones((1, max_predictions), np.int32)})
  step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
  ckpt = object_layout.checkpoint_for(model, step=step)
  manager = tf.train.CheckpointManager(ckpt, directory, max_to_keep=1)
  path = manager.save(checkpoint_number=0)
  return path, model.encoder.count_params(), model.count_params()
