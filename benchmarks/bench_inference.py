"""Inference from exported encoder SavedModels: albert_tf vs Model Garden,
and the text-in serving signatures against the ids one.

1. Encoder, ids in. Both ALBERT-base encoders (same weights) are exported as
   SavedModels (ours with `export_lib.export_encoder`, Model Garden's
   `AlbertEncoder` behind the same ids-in signature), loaded back with
   `tf.saved_model.load` as TF Serving would, and called alternately, one
   call each per round (bench_common.Alternation: warm-up until the latency
   settles, then timed rounds), at batch 1 and 32, seq 128. Reported: p50,
   p99, and ours / Model Garden as the median of per-round ratios, against
   the targets (<= 0.6x at batch 1, <= 0.55x at batch 32), with the load.
2. Text in. The same encoder (vocabulary: a 4,000-piece SentencePiece model
   trained on botchan) exported with the pretraining task's `serving` export: its
   `serving_default` (text), `serve_examples` (tf.Example) and `serve_ids`
   signatures called alternately on texts that fill the sequence and on
   their ids; reported: what text in adds over ids.

  python benchmarks/bench_inference.py [--seq 128 --batches 1,32]
      [--json out.json] [--smoke]
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
import numpy as np  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top

from albert_tf import AlbertConfig, AlbertEncoder  # pylint: disable=g-import-not-at-top
from albert_tf.checkpoints import canonical_weights  # pylint: disable=g-import-not-at-top
from albert_tf.checkpoints import model_garden_checkpoint  # pylint: disable=g-import-not-at-top
from albert_tf.serving import export_lib  # pylint: disable=g-import-not-at-top
from albert_tf.tasks import export as tasks_export  # pylint: disable=g-import-not-at-top
from albert_tf.tasks import pretraining  # pylint: disable=g-import-not-at-top

NAMES = ("input_word_ids", "input_mask", "input_type_ids")
TARGETS = {1: 0.6, 32: 0.55}  # ours / Model Garden p50
SMOKE_CONFIG = dict(vocab_size=1000, embedding_size=16, hidden_size=32,
                    num_hidden_layers=1, num_attention_heads=2,
                    intermediate_size=64, max_position_embeddings=64)
# batch -> Alternation arguments: calls of seconds need fewer rounds.
def alternation_args(batch, smoke):
  if smoke:
    return dict(window=1, max_warmup=2, rounds=3)
  if batch <= 4:
    return dict(window=5, tolerance=0.05, max_warmup=40, rounds=40)
  return dict(window=2, tolerance=0.05, max_warmup=8, rounds=8)


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


def timed_call(fn, inputs):
  """Seconds of one call, its outputs fetched to host memory."""
  start = time.perf_counter()
  out = fn(**inputs)
  for value in out.values():
    value.numpy()
  return time.perf_counter() - start


def alternate(fns, inputs, alt):
  """Rounds of one call per side (order flipping) until `alt` is done."""
  for order in alt:
    alt.add_round({name: timed_call(fns[name], inputs[name])
                   for name in order})
  return alt


def side_stats(alt, batch):
  out = {}
  for name, times in alt.timed.items():
    out[name] = {"p50_ms": 1e3 * bench_common.percentile(times, 50),
                 "p99_ms": 1e3 * bench_common.percentile(times, 99),
                 "examples_per_s": batch / float(np.mean(times))}
  return out


def encoder_comparison(config, seq, batches, workdir, smoke):
  ours = AlbertEncoder(config)
  mg = model_garden_encoder(ours, config)
  ours_path = export_lib.export_encoder(ours, os.path.join(workdir, "ours"))
  mg_path = os.path.join(workdir, "model_garden", "1")
  module = ModelGardenEncoderModule(mg)
  tf.saved_model.save(module, mg_path, signatures={"serving_default":
                                                   module.serve})
  loaded = {"albert_tf": tf.saved_model.load(ours_path).signatures[
                "serving_default"],
            "model_garden": tf.saved_model.load(mg_path).signatures[
                "serving_default"]}
  rng = np.random.default_rng(0)
  results = {}
  for batch in batches:
    ids = rng.integers(5, config.vocab_size, (batch, seq)).astype(np.int32)
    feed = {"input_word_ids": tf.constant(ids),
            "input_mask": tf.ones_like(ids), "input_type_ids":
                tf.zeros_like(ids)}
    outs = {k: f(**feed) for k, f in loaded.items()}
    diff = {key: float(np.abs(outs["albert_tf"][key].numpy() -
                              outs["model_garden"][key].numpy()).max())
            for key in ("pooled_output", "sequence_output")}
    spin = bench_common.SMOKE_MATMUL_SECONDS if smoke else 1.0
    before = bench_common.load(spin)
    alt = alternate(loaded, {k: feed for k in loaded},
                    bench_common.Alternation(list(loaded),
                                             **alternation_args(batch, smoke)))
    row = side_stats(alt, batch)
    row.update(max_abs_diff=diff, warmup_rounds=len(alt.warmup["albert_tf"]),
               settled=alt.settled, timed_rounds=len(alt.timed["albert_tf"]),
               ours_over_model_garden=alt.ratio("albert_tf", "model_garden"),
               target=TARGETS.get(batch), load_before=before,
               load_after=bench_common.load(spin))
    results[batch] = row
    report_encoder(batch, seq, row)
  return results


def report_encoder(batch, seq, row):
  print(f"batch {batch} x seq {seq} (outputs agree to "
        f"{max(row['max_abs_diff'].values()):.1e}; {row['timed_rounds']} "
        f"alternating rounds after {row['warmup_rounds']} warm-up, "
        f"{'settled' if row['settled'] else 'NOT settled (cap)'}):")
  for name in ("albert_tf", "model_garden"):
    m = row[name]
    print(f"  {name:<13} p50 {m['p50_ms']:8.1f} ms  p99 {m['p99_ms']:8.1f} ms"
          f"  {m['examples_per_s']:8.1f} ex/s")
  target = row["target"]
  verdict = "" if target is None else (
      f" (target <= {target}: {'met' if row['ours_over_model_garden'] <= target else 'NOT met'})")
  print(f"  albert_tf / model_garden = {row['ours_over_model_garden']:.3f}"
        f"{verdict}; load {row['load_before']['loadavg_1min']}/"
        f"{row['load_after']['loadavg_1min']}, matmul "
        f"{row['load_before']['matmul_gflops']:.0f}/"
        f"{row['load_after']['matmul_gflops']:.0f} GFLOP/s before/after",
        flush=True)


def texts_of_length(lines, batch, seq):
  """`batch` different texts of `seq` words from `lines`: at least `seq`
  pieces each, so every text fills the sequence (and is cut to it)."""
  words = " ".join(lines).split()
  starts = [(i * seq) % max(1, len(words) - seq) for i in range(batch)]
  return [" ".join(words[s:s + seq]) for s in starts]


def text_signatures(config, seq, batches, workdir, smoke):
  """Added latency of the text-in and tf.Example signatures over ids."""
  corpus, spm = bench_common.sentencepiece_model(
      workdir, SMOKE_CONFIG["vocab_size"] if smoke else 4000)
  config = AlbertConfig(**dict(config.as_dict(), vocab_size=(
      SMOKE_CONFIG["vocab_size"] if smoke else 4000)))
  path = tasks_export.export_model(
      pretraining.PretrainingTask, "serving", AlbertEncoder(config),
      pretraining.PretrainingServingParams(seq_length=seq,
                                           spm_model_file=spm),
      os.path.join(workdir, "text"))
  loaded = tf.saved_model.load(path)
  signatures = loaded.signatures
  with open(corpus, encoding="utf-8") as f:
    lines = [l.strip() for l in f if l.strip()]
  results = {}
  for batch in batches:
    texts = texts_of_length(lines, batch, seq)
    text = tf.constant(texts)
    # The ids the text signature feeds its model: the saved preprocessor's.
    features = loaded.preprocessor(text)
    examples = tf.constant([tf.train.Example(features=tf.train.Features(
        feature={"text": tf.train.Feature(bytes_list=tf.train.BytesList(
            value=[t.encode()]))})).SerializeToString() for t in texts])
    feeds = {"text": {"text": text}, "examples": {"examples": examples},
             "ids": {k: features[k] for k in NAMES}}
    fns = {"text": signatures["serving_default"],
           "examples": signatures["serve_examples"],
           "ids": signatures["serve_ids"]}
    alt = alternate(fns, feeds, bench_common.Alternation(
        list(fns), **alternation_args(batch, smoke)))
    row = side_stats(alt, batch)
    for name in ("text", "examples"):
      row[f"{name}_added_ms"] = 1e3 * float(np.median(
            [a - b for a, b in zip(alt.timed[name], alt.timed["ids"])]))
    results[batch] = row
    print(f"text signatures, batch {batch} x seq {seq}: " + ", ".join(
        f"{n} p50 {row[n]['p50_ms']:.1f} ms" for n in fns) + "; added over "
          "ids: " + ", ".join(f"{n} {row[f'{n}_added_ms']:.1f} ms"
                              for n in ("text", "examples")), flush=True)
  return results


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--seq", type=int, default=128)
  parser.add_argument("--batches", default="1,32")
  parser.add_argument("--smoke", action="store_true",
                      help="a 1-layer model, seq 16, batches 1 and 2")
  parser.add_argument("--no_text", action="store_true",
                      help="skip the text-in signatures")
  parser.add_argument("--no_encoder", action="store_true",
                      help="skip the comparison with Model Garden")
  parser.add_argument("--json")
  args = parser.parse_args()
  if args.smoke:
    config, seq, batches = AlbertConfig(**SMOKE_CONFIG), 16, [1, 2]
  else:
    config = AlbertConfig.from_preset("albert_base_v2")
    seq, batches = args.seq, [int(b) for b in args.batches.split(",")]
  workdir = tempfile.mkdtemp(prefix="bench_inference_")
  results = {"seq": seq, "cpu_count": os.cpu_count(), **bench_common.stamp()}
  if not args.no_encoder:
    results["batches"] = encoder_comparison(config, seq, batches, workdir,
                                            args.smoke)
  if not args.no_text:
    results["text_signatures"] = text_signatures(config, seq, batches,
                                                 workdir, args.smoke)
  if args.json:
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w", encoding="utf-8") as f:
      json.dump(results, f, indent=2)


if __name__ == "__main__":
  main()
