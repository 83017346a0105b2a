"""keras-hub's ALBERT-base pretraining step, timed (runs in .venv-bench).

The same job as bench_train_step.py: AlbertBackbone + MaskedLMHead tied to
its token embedding + a 2-way sentence-order Dense on the pooled output,
LAMB, trained with `train_on_batch` as a keras-hub user would (Keras 3 on
the TensorFlow backend; XLA when --jit, otherwise keras' own default
"auto"), under the Keras precision policy --policy (Keras 3's losses compute
in float32 whatever the policy).
Prints one JSON line: {"seconds": s_per_step, ...}.
"""

import argparse
import json
import os
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common  # pylint: disable=g-import-not-at-top  (stdlib only)
import keras  # pylint: disable=g-import-not-at-top
import keras_hub  # pylint: disable=g-import-not-at-top
import numpy as np  # pylint: disable=g-import-not-at-top


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--batch", type=int, default=8)
  parser.add_argument("--seq", type=int, default=128)
  parser.add_argument("--predictions", type=int, default=20)
  parser.add_argument("--steps", type=int, default=5)
  parser.add_argument("--jit", action="store_true")
  parser.add_argument("--policy", choices=("float32", "mixed_bfloat16"),
                      default="float32")
  parser.add_argument("--smoke", action="store_true",
                      help="bench_train_step's 1-layer smoke model")
  args = parser.parse_args()

  vocab, layers, heads, emb, hidden, inter = (
      (1000, 1, 2, 16, 32, 64) if args.smoke else (30000, 12, 12, 128, 768,
                                                   3072))
  keras.mixed_precision.set_global_policy(args.policy)
  backbone = keras_hub.models.AlbertBackbone(
      vocabulary_size=vocab, num_layers=layers, num_heads=heads,
      embedding_dim=emb, hidden_dim=hidden, intermediate_dim=inter,
      num_groups=1,
      num_inner_repetitions=1, dropout=0.0, max_sequence_length=512,
      num_segments=2)
  inputs = {
      "token_ids": keras.Input((None,), dtype="int32", name="token_ids"),
      "segment_ids": keras.Input((None,), dtype="int32", name="segment_ids"),
      "padding_mask": keras.Input((None,), dtype="int32",
                                  name="padding_mask"),
      "mask_positions": keras.Input((None,), dtype="int32",
                                    name="mask_positions"),
  }
  outputs = backbone({k: inputs[k] for k in
                      ("token_ids", "segment_ids", "padding_mask")})
  mlm = keras_hub.layers.MaskedLMHead(
      vocabulary_size=vocab, token_embedding=backbone.token_embedding,
      intermediate_activation="gelu", name="mlm")(
          outputs["sequence_output"], inputs["mask_positions"])
  sop = keras.layers.Dense(2, name="sop")(outputs["pooled_output"])
  model = keras.Model(inputs, {"mlm": mlm, "sop": sop})
  model.compile(
      optimizer=keras.optimizers.Lamb(learning_rate=1e-4, clipnorm=1.0),
      loss={"mlm": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            "sop": keras.losses.SparseCategoricalCrossentropy(from_logits=True)},
      jit_compile=True if args.jit else "auto")

  rng = np.random.default_rng(0)
  ids = rng.integers(5, vocab, size=(args.batch, args.seq)).astype(np.int32)
  positions = np.sort(np.stack([
      rng.choice(args.seq, args.predictions, replace=False)
      for _ in range(args.batch)]), 1).astype(np.int32)
  x = {"token_ids": ids, "segment_ids": np.zeros_like(ids),
       "padding_mask": np.ones_like(ids), "mask_positions": positions}
  y = {"mlm": np.take_along_axis(ids, positions, 1),
       "sop": rng.integers(0, 2, (args.batch,)).astype(np.int32)}
  warmup = []  # until the step settles (bench_common's rule), at most 12
  while len(warmup) < 12 and not bench_common.window_settled(
      warmup, 1 if args.smoke else 3, 0.05):
    t0 = time.perf_counter()
    model.train_on_batch(x, y)
    warmup.append(time.perf_counter() - t0)
  start = time.perf_counter()
  for _ in range(args.steps):
    model.train_on_batch(x, y)
  seconds = (time.perf_counter() - start) / args.steps
  print(json.dumps({"seconds": seconds, "warmup_seconds": warmup,
                    "params": model.count_params(),
                    "keras": keras.__version__,
                    "keras_hub": keras_hub.__version__}))


if __name__ == "__main__":
  main()
