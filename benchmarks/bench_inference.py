"""Inference: albert_tf's exported encoder vs Model Garden's, and the
low-precision and text-in forms of an exported classifier.

1. Encoder, ids in. Both ALBERT-base encoders (same weights) are exported as
   SavedModels (ours with `export_lib.export_encoder`, Model Garden's
   `AlbertEncoder` behind the same ids-in signature), loaded back with
   `tf.saved_model.load` as TF Serving would, and called alternately, one
   call each per round (bench_common.Alternation: warm-up until the latency
   settles, then timed rounds), at batch 1 and 32, seq 128. Reported: p50,
   p99, and ours / Model Garden as the median of per-round ratios, against
   the targets (<= 0.6x at batch 1, <= 0.55x at batch 32), with the load.
2. Forms (inference_forms.py). An ALBERT-base classifier (vocabulary: a
   4,000-piece SentencePiece model trained on botchan) exported by the
   classification serving export as SavedModels in float32 and bfloat16 and
   as .tflite files in float32, float16, dynamic_int8 and int8 (calibrated
   on 32 of the benchmark's texts), plus Model Garden's float32 encoder
   SavedModel with the same weights: all called alternately in one run, at
   batch 1 and 32, ids in (`serve_ids`) and text in (`serving_default`, on
   texts that fill the sequence; the float32 SavedModel also tf.Example
   in). Reported per form and input: p50, p99, p50 over Model Garden's
   (median of per-round ratios), the largest logits difference from the
   float32 SavedModel, file size, and peak RSS of a fresh process per form
   (batch 32, ids in); the CPU's model and VNNI / BF16 / AMX flags; the
   targets (dynamic_int8 or int8 at batch 1 <= 0.25x Model Garden on a CPU
   with VNNI; the bfloat16 SavedModel at batch 32 <= 0.40x on a CPU with
   BF16). `text_signatures`: what text in and tf.Example add over ids for
   the float32 SavedModel, from the same rounds.

  python benchmarks/bench_inference.py [--seq 128 --batches 1,32]
      [--lite_threads 2] [--no_encoder] [--no_forms] [--json out.json]
      [--smoke]
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
import form_exports  # pylint: disable=g-import-not-at-top
import inference_forms  # pylint: disable=g-import-not-at-top
import numpy as np  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top

from albert_tf import AlbertConfig, AlbertEncoder  # pylint: disable=g-import-not-at-top
from albert_tf.serving import export_lib  # pylint: disable=g-import-not-at-top

TARGETS = {1: 0.6, 32: 0.55}  # ours / Model Garden p50
SMOKE_CONFIG = dict(vocab_size=1000, embedding_size=16, hidden_size=32,
                    num_hidden_layers=1, num_attention_heads=2,
                    intermediate_size=64, max_position_embeddings=64)
def alternation_args(batch, smoke, many_sides=False):
  """Alternation arguments: calls of seconds, and rounds of many sides (the
  forms: 15 calls a round), get fewer rounds."""
  if smoke:
    return dict(window=1, max_warmup=2, rounds=3)
  if batch <= 4:
    return (dict(window=5, tolerance=0.05, max_warmup=30, rounds=30)
            if many_sides else
            dict(window=5, tolerance=0.05, max_warmup=40, rounds=40))
  return (dict(window=1, tolerance=0.05, max_warmup=4, rounds=5)
          if many_sides else
          dict(window=2, tolerance=0.05, max_warmup=8, rounds=8))


def seconds(fn):
  """Seconds of one call of `fn` (its outputs already fetched to host
  memory: inference_forms.Form's calls and `fetched` do)."""
  start = time.perf_counter()
  fn()
  return time.perf_counter() - start


def alternate(calls, alt):
  """Rounds of one call per side (order flipping) until `alt` is done."""
  for order in alt:
    alt.add_round({name: seconds(calls[name]) for name in order})
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
  ours_path = export_lib.export_encoder(ours, os.path.join(workdir, "ours"))
  mg_path = form_exports.save_model_garden(
      ours, config, os.path.join(workdir, "model_garden", "1"))
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
    calls = {k: (lambda f=f: inference_forms.fetched(f(**feed)))
             for k, f in loaded.items()}
    alt = alternate(calls, bench_common.Alternation(
        list(loaded), **alternation_args(batch, smoke)))
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


# --- 2. The forms (low precision, text in) -----------------------------------

MG_IDS = f"{inference_forms.MODEL_GARDEN}:ids"
# Targets against Model Garden's float32 SavedModel p50 (ids in): (sides,
# batch, fraction, the CPU flags under which the target applies).
FORM_TARGETS = (
    (("tflite_dynamic_int8:ids", "tflite_int8:ids"), 1, 0.25,
     ("avx512_vnni", "avx_vnni")),
    (("savedmodel_bfloat16:ids",), 32, 0.40, ("avx512_bf16", "amx_bf16")),
)
CALIBRATION_TEXTS = 32  # int8's calibration examples (4 with --smoke)


def added_ms(alt, side, base):
  """Median over rounds of time(side) - time(base), in ms."""
  return 1e3 * float(np.median([a - b for a, b in zip(alt.timed[side],
                                                      alt.timed[base])]))


def agreement(outs, side):
  """Largest |logits - float32 SavedModel's| on the same input, and the
  share of equal labels."""
  kind = side.split(":")[1]
  ref = outs[f"savedmodel_float32:{'text' if kind == 'examples' else kind}"]
  out = outs[side]
  if "logits" not in out:  # Model Garden's encoder
    return {}
  return {"logits_max_abs_diff": float(np.abs(
              np.asarray(out["logits"], np.float32) - ref["logits"]).max()),
          "labels_agree": float(np.mean(out["label_id"] ==
                                        ref["label_id"]))}


def form_targets(alt, batch, cpu):
  rows = []
  for sides, target_batch, fraction, flags in FORM_TARGETS:
    if batch != target_batch:
      continue
    ratios = {s: alt.ratio(s, MG_IDS) for s in sides}
    best = min(ratios, key=ratios.get)
    rows.append({"sides": list(sides), "best": best, "ratio": ratios[best],
                 "target": fraction, "met": ratios[best] <= fraction,
                 "applies": any(cpu["flags"][f] for f in flags),
                 "cpu_flags": list(flags)})
  return rows


def forms_comparison(config, seq, batches, workdir, smoke, lite_threads):
  """Every form alternating in one run, ids in and text in; then each
  form's peak RSS in its own process."""
  vocab = SMOKE_CONFIG["vocab_size"] if smoke else 4000
  corpus, spm = bench_common.sentencepiece_model(workdir, vocab)
  config = AlbertConfig(**dict(config.as_dict(), vocab_size=vocab))
  with open(corpus, encoding="utf-8") as f:
    lines = [l.strip() for l in f if l.strip()]
  calibration = texts_of_length(lines, 4 if smoke else CALIBRATION_TEXTS, seq)
  names = [name for name, _, _ in inference_forms.FORMS]
  paths = form_exports.export_forms(config, spm, seq, calibration,
                                    os.path.join(workdir, "forms"), names)
  forms = {n: inference_forms.Form(n, p, lite_threads)
           for n, p in paths.items()}
  cpu = bench_common.cpu_info()
  print(f"CPU: {cpu['model']}; " + ", ".join(
      f"{flag} {'yes' if present else 'no'}"
      for flag, present in cpu["flags"].items()) +
        f"; TFLite interpreter threads: {lite_threads}", flush=True)
  result = {"cpu": cpu, "lite_threads": lite_threads, "vocab_size": vocab,
            "calibration_texts": len(calibration), "batches": {},
            "size_bytes": {n: inference_forms.size_bytes(n, p)
                           for n, p in paths.items()}}
  for batch in batches:
    texts = texts_of_length(lines, batch, seq)
    ids = form_exports.packed_ids(spm, seq, texts)
    calls = {f"{n}:{kind}": fn for n, form in forms.items()
             for kind, fn in form.calls(texts, ids).items()}
    outs = {side: fn() for side, fn in calls.items()}
    spin = bench_common.SMOKE_MATMUL_SECONDS if smoke else 1.0
    before = bench_common.load(spin)
    alt = alternate(calls, bench_common.Alternation(
        list(calls), **alternation_args(batch, smoke, many_sides=True)))
    sides = side_stats(alt, batch)
    for side, stats in sides.items():
      stats.update(over_model_garden=alt.ratio(side, MG_IDS),
                   **agreement(outs, side))
    result["batches"][batch] = {
        "sides": sides, "warmup_rounds": len(alt.warmup[MG_IDS]),
        "settled": alt.settled, "timed_rounds": len(alt.timed[MG_IDS]),
        "targets": form_targets(alt, batch, cpu),
        "text_added_ms": added_ms(alt, "savedmodel_float32:text",
                                  "savedmodel_float32:ids"),
        "examples_added_ms": added_ms(alt, "savedmodel_float32:examples",
                                      "savedmodel_float32:ids"),
        "load_before": before, "load_after": bench_common.load(spin)}
    report_forms(batch, seq, result["batches"][batch])
  rss = names if not smoke else names[-1:]
  result["peak_rss_batch"] = max(batches)
  result["peak_rss"] = {n: inference_forms.peak_rss(
      n, paths[n], max(batches), seq, vocab, lite_threads) for n in rss}
  for n, m in result["peak_rss"].items():
    print(f"  {n:<22} peak RSS {m['peak_rss_mb']:7.0f} MB (after imports "
          f"{m['baseline_rss_mb']:.0f} MB), size "
          f"{result['size_bytes'][n] / 1e6:.1f} MB", flush=True)
  return result


def text_signatures(forms):
  """The float32 SavedModel's text-in and tf.Example signatures against its
  ids-in one (the rows of the forms run)."""
  out = {}
  for batch, row in forms["batches"].items():
    sides = row["sides"]
    out[batch] = {"ids": sides["savedmodel_float32:ids"],
                  "text": sides["savedmodel_float32:text"],
                  "examples": sides["savedmodel_float32:examples"],
                  "text_added_ms": row["text_added_ms"],
                  "examples_added_ms": row["examples_added_ms"]}
  return out


def report_forms(batch, seq, row):
  print(f"forms, batch {batch} x seq {seq} ({row['timed_rounds']} "
        f"alternating rounds after {row['warmup_rounds']} warm-up; load "
        f"{row['load_before']['loadavg_1min']}/"
        f"{row['load_after']['loadavg_1min']}):")
  for side, m in row["sides"].items():
    diff = m.get("logits_max_abs_diff")
    print(f"  {side:<30} p50 {m['p50_ms']:9.1f} ms  p99 {m['p99_ms']:9.1f} "
          f"ms  x{m['over_model_garden']:.3f} of Model Garden"
          + ("" if diff is None else f"  logits diff {diff:.1e}"))
  for t in row["targets"]:
    verdict = "met" if t["met"] else "NOT met"
    print(f"  target: {t['best']} <= {t['target']}x Model Garden: "
          f"{t['ratio']:.3f}, {verdict}" + ("" if t["applies"] else
          f" (no {'/'.join(t['cpu_flags'])}: reported only)"), flush=True)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--seq", type=int, default=128)
  parser.add_argument("--batches", default="1,32")
  parser.add_argument("--smoke", action="store_true",
                      help="a 1-layer model, seq 16, batch 1")
  parser.add_argument("--no_forms", action="store_true",
                      help="skip the forms (low precision, text in)")
  parser.add_argument("--lite_threads", type=int, default=2,
                      help="threads of the TFLite interpreter")
  parser.add_argument("--no_encoder", action="store_true",
                      help="skip the comparison with Model Garden")
  parser.add_argument("--json")
  args = parser.parse_args()
  if args.smoke:
    config, seq, batches = AlbertConfig(**SMOKE_CONFIG), 16, [1]
  else:
    config = AlbertConfig.from_preset("albert_base_v2")
    seq, batches = args.seq, [int(b) for b in args.batches.split(",")]
  results = {"seq": seq, "cpu_count": os.cpu_count(), **bench_common.stamp()}
  # The exports (about 260 MB at ALBERT-base) go when the run ends.
  with tempfile.TemporaryDirectory(prefix="bench_inference_") as workdir:
    if not args.no_encoder:
      results["batches"] = encoder_comparison(config, seq, batches, workdir,
                                              args.smoke)
    if not args.no_forms:
      results["forms"] = forms_comparison(config, seq, batches, workdir,
                                          args.smoke, args.lite_threads)
      results["text_signatures"] = text_signatures(results["forms"])
  if args.json:
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w", encoding="utf-8") as f:
      json.dump(results, f, indent=2)


if __name__ == "__main__":
  main()
