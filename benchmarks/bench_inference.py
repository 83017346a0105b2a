"""Inference from exported encoder SavedModels: albert_tf vs Model Garden.

Both ALBERT-base encoders (same weights) are exported as SavedModels with the
same ids-in signature, loaded back with `tf.saved_model.load` (as TF Serving
would load them), and timed on the same inputs at batch 1 and 32, seq 128:
latency p50/p99 and throughput, alternating A/B.

  python benchmarks/bench_inference.py [--seq 128 --batches 1,32 --iters 30]
      [--json out.json]
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

import numpy as np  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top

from albert_tf import AlbertConfig, AlbertEncoder  # pylint: disable=g-import-not-at-top
from albert_tf.checkpoints import canonical_weights  # pylint: disable=g-import-not-at-top
from albert_tf.serving import export_lib  # pylint: disable=g-import-not-at-top
from albert_tf.checkpoints import model_garden_checkpoint  # pylint: disable=g-import-not-at-top

NAMES = ("input_word_ids", "input_mask", "input_type_ids")


class ModelGardenEncoderModule(tf.Module):
  """MG's AlbertEncoder behind the same ids-in signature as our export."""

  def __init__(self, encoder):
    super().__init__()
    self.encoder = encoder

  @tf.function(input_signature=[
      tf.TensorSpec([None, None], tf.int32, name=n) for n in NAMES])
  def serve(self, input_word_ids, input_mask, input_type_ids):
    out = self.encoder(dict(input_word_ids=input_word_ids,
                            input_mask=input_mask,
                            input_type_ids=input_type_ids))
    return {"pooled_output": out["pooled_output"],
            "sequence_output": out["sequence_output"]}


def model_garden_encoder(ours, config):
  """MG AlbertEncoder with our weights copied in (the converter's mapping)."""
  mg = model_garden_checkpoint.build_encoder(config)
  values = {name: var.numpy() for name, var in
            canonical_weights.encoder_variables(ours).items()}
  for name, (var, _, to_mg) in model_garden_checkpoint.variable_map(mg).items():
    var.assign(to_mg(values[name]))
  return mg


def latencies(fn, inputs, iters):
  fn(**inputs)
  out = []
  for _ in range(iters):
    start = time.perf_counter()
    result = fn(**inputs)
    np.asarray(result["pooled_output"])
    out.append(time.perf_counter() - start)
  return np.array(out)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--seq", type=int, default=128)
  parser.add_argument("--batches", default="1,32")
  parser.add_argument("--iters", type=int, default=30)
  parser.add_argument("--rounds", type=int, default=2)
  parser.add_argument("--json")
  args = parser.parse_args()

  config = AlbertConfig.from_preset("albert_base_v2")
  ours = AlbertEncoder(config)
  mg = model_garden_encoder(ours, config)
  workdir = tempfile.mkdtemp(prefix="bench_inference_")
  ours_path = export_lib.export_encoder(ours, os.path.join(workdir,
                                                                  "ours"))
  mg_path = os.path.join(workdir, "model_garden", "1")
  module = ModelGardenEncoderModule(mg)
  tf.saved_model.save(module, mg_path, signatures={"serving_default":
                                                   module.serve})
  loaded = {
      "albert_tf": tf.saved_model.load(ours_path).signatures[
          "serving_default"],
      "model_garden": tf.saved_model.load(mg_path).signatures[
          "serving_default"],
  }
  rng = np.random.default_rng(0)
  results = {"seq": args.seq, "cpu_count": os.cpu_count(), "batches": {}}
  for batch in [int(b) for b in args.batches.split(",")]:
    ids = rng.integers(5, config.vocab_size, (batch, args.seq)).astype(np.int32)
    inputs = {"input_word_ids": tf.constant(ids),
              "input_mask": tf.ones_like(ids), "input_type_ids":
                  tf.zeros_like(ids)}
    check = {k: f(**inputs)["pooled_output"].numpy() for k, f in
             loaded.items()}
    max_diff = float(np.abs(check["albert_tf"] - check["model_garden"]).max())
    times = {k: [] for k in loaded}
    # Large batches take seconds each: fewer timed calls (at least 8).
    iters = max(8, args.iters // max(1, batch // 4))
    for _ in range(args.rounds):  # Alternate A/B.
      for name, fn in loaded.items():
        times[name].extend(latencies(fn, inputs, iters))
    results["batches"][batch] = {"max_abs_diff_pooled": max_diff}
    print(f"batch {batch} x seq {args.seq} (outputs agree to {max_diff:.1e}):")
    for name, values in times.items():
      values = np.array(values)
      row = {"p50_ms": 1e3 * float(np.percentile(values, 50)),
             "p99_ms": 1e3 * float(np.percentile(values, 99)),
             "examples_per_s": batch / float(np.mean(values))}
      results["batches"][batch][name] = row
      print(f"  {name:<13} p50 {row['p50_ms']:8.1f} ms  p99 "
            f"{row['p99_ms']:8.1f} ms  {row['examples_per_s']:8.1f} ex/s")
    ratio = (results["batches"][batch]["model_garden"]["p50_ms"] /
             results["batches"][batch]["albert_tf"]["p50_ms"])
    results["batches"][batch]["albert_tf_speedup_p50"] = ratio
    print(f"  albert_tf is {ratio:.2f}x Model Garden at p50")
  if args.json:
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w", encoding="utf-8") as f:
      json.dump(results, f, indent=2)


if __name__ == "__main__":
  main()
