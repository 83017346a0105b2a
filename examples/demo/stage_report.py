"""Stages 6-7 of `make demo`: the released sizes' parameter table and the
summary."""

import json
import os
import time

import numpy as np

from examples.demo import models
from examples.demo import real_task
from examples.demo import tools


def model_sizes(run):
  """Stage 6: every released size's parameter count, forward + loss."""
  rows = []
  sizes = run.settings["sizes"]
  for i, size in enumerate(sizes, 1):
    print(f"  [{i}/{len(sizes)}] building ALBERT-{size} and running a "
          "forward pass + pretraining loss ...", flush=True)
    row = models.run_size(size)
    rows.append(row)
    print(f"      {row['encoder_params']:,} encoder parameters, loss "
          f"{row['loss']:.3f} (ln 30000 + ln 2 = "
          f"{np.log(30000) + np.log(2):.3f} expected at init), "
          f"built in {row['build_seconds']} s, forward "
          f"{row['forward_seconds']} s", flush=True)
  print()
  print("  " + models.format_table(rows).replace("\n", "\n  "))
  path = run.path("model_sizes.json")
  with open(path, "w", encoding="utf-8") as f:
    json.dump(rows, f, indent=2)
  run.summary["parameters"]["released_sizes"] = {
      r["size"]: {"encoder": r["encoder_params"],
                  "with_heads": r["pretrainer_params"],
                  "paper_millions": r["paper_millions"],
                  "bert_millions": r["bert_millions"]} for r in rows}


# The demo's targets for the model it shows (held-out text); the summary
# shows each figure next to its target, as measured.
TARGETS = {"masked_lm_accuracy": 0.30, "sentence_order_accuracy": 0.65,
           "fill_mask_top5": 0.35, "finetune_gain": 0.10,
           # The real task (test split): over random init and over VADER.
           "real_task_gain": 0.03, "real_task_gain_over_vader": 0.03}


def headline(metrics, real=None):
  """The figures a newcomer looks for first: [{name, before, after, target,
  reached}] (before = random initialisation) of the model the demo shows:
  the shipped one when it was used (metrics["shipped"]), else this run's;
  `real`: summary.json's `real_task` (test accuracy, beside VADER's)."""
  rows = []
  shown = metrics.get("shipped", metrics)
  pre = shown.get("pretraining")
  if pre:
    for key in ("masked_lm_accuracy", "sentence_order_accuracy"):
      rows.append({"name": f"held-out {key}", "before": pre["before"][key],
                   "after": pre["after"][key], "target": TARGETS[key]})
  fm = shown.get("fill_mask")
  if fm:
    rows.append({"name": "fill-mask top-5 (held-out words)", "before": None,
                 "after": fm["top5_accuracy"],
                 "target": TARGETS["fill_mask_top5"]})
  ft = metrics.get("finetuning")
  if real:
    rows.append({"name": f"fine-tuned {real['name']} test accuracy",
                 "before": real["random_init_test_accuracy"],
                 "after": real["pretrained_test_accuracy"], "target": None})
    rows.append({"name": "  gain from pretraining", "before": None,
                 "after": real["pretraining_gain"],
                 "target": TARGETS["real_task_gain"]})
    if real["vader_test_accuracy"] is not None:
      rows.append({"name": "  gain over VADER "
                           f"({real['vader_test_accuracy']:.3f})",
                   "before": None, "after": real["gain_over_vader"],
                   "target": TARGETS["real_task_gain_over_vader"]})
  elif ft:
    rows.append({"name": f"fine-tuned {ft['task']} dev accuracy",
                 "before": ft["random_init"]["dev"]["accuracy"],
                 "after": ft["pretrained"]["dev"]["accuracy"],
                 "target": None})
    rows.append({"name": "  gain from pretraining",
                 "before": None, "after": ft["pretraining_gain"],
                 "target": TARGETS["finetune_gain"]})
  for row in rows:
    row["reached"] = (None if row["target"] is None or row["after"] is None
                      else bool(row["after"] >= row["target"]))
  return rows


def print_headline(rows, metrics, real=None):
  shipped = metrics.get("shipped")
  pre, ft = (shipped or metrics).get("pretraining"), metrics.get("finetuning")
  if shipped:
    print(f"  the model shown: the shipped one ({shipped['bundle']}/: "
          f"{shipped['what']}, {shipped['date']}); every figure below was "
          "measured in this run; this run's own short pretraining is "
          "further down")
  print("  what the demo model learned (held-out text; 'before' = the random "
        "initialisation"
        + (f", fine-tuning {ft['steps']} steps from each" if ft else "") +
        (f"; pretraining {pre['steps']} steps" if pre else "") + "):")
  print(f"    {'':<38}{'before':>8}{'after':>8}{'target':>8}")
  fmt = lambda v: "-" if v is None else f"{v:.3f}"
  for r in rows:
    mark = {True: "reached", False: "not reached", None: ""}[r["reached"]]
    print(f"    {r['name']:<38}{fmt(r['before']):>8}{fmt(r['after']):>8}"
          f"{fmt(r['target']):>8}  {mark}")
  if real:
    print(f"    (fine-tuning: 'before' = from random init, 'after' = from "
          f"the pretrained checkpoint, {real['test_examples']:,} test "
          f"sentences: one standard error ~{real['test_accuracy_se']:.3f}, "
          f"of the gain {real['pretraining_gain_se']:.3f}; majority "
          f"baseline {real['majority_baseline']:.3f}; VADER = the lexicon "
          "method published with the data)")
  elif ft:
    print(f"    (fine-tuning: 'before' = from random init, 'after' = from "
          f"the pretrained checkpoint; majority baseline "
          f"{ft['majority_baseline']:.3f})")


def write_summary(run):
  """Stage 7: summary.json and the closing report."""
  total = time.time() - run.t0
  run.summary["timings"] = run.timings
  run.summary["total_seconds"] = round(total, 1)
  run.summary["total_cpu_seconds"] = round(tools.child_cpu_seconds(), 1)
  files = {}
  for name in ("corpus", "vocab", "data", "pretrain", "shipped", "exports",
               "finetune", "logs", "curves.png", "finetune_curves.png",
               "model_sizes.json"):
    p = run.path(name)
    if os.path.exists(p):
      files[name] = tools.dir_size(p)
  run.summary["files"] = files
  run.summary["exports"] = run.exports
  m = run.summary["metrics"]
  real = run.summary.get("real_task")
  run.summary["headline"] = headline(m, real)
  path = run.path("summary.json")
  with open(path + ".tmp", "w", encoding="utf-8") as f:
    json.dump(run.summary, f, indent=2, default=str)
  os.replace(path + ".tmp", path)
  print_headline(run.summary["headline"], m, real)
  if real:
    real_task.print_figures(real)
  print(f"  output: {run.rel(run.out)}/")
  for name, size in files.items():
    print(f"    {name:<22}{tools.human_bytes(size):>10}")
  print("  key files:")
  for label, p in (("vocabulary", run.spm),
                   ("train TFRecords", run.train_rec),
                   ("held-out TFRecords", run.held_rec),
                   ("pretraining run", run.model_dir),
                   ("training curves", run.summary.get("curves_png")),
                   ("fine-tuning curves",
                    run.summary.get("finetune_curves_png"))):
    if p:
      print(f"    {label:<22}{run.rel(p)}")
  for kind, p in run.summary["exports"].items():
    print(f"    {'export ' + kind:<28}{run.rel(p)}")
  p = run.summary["parameters"]
  if "demo_encoder" in p:
    print(f"  parameters: demo model encoder {p['demo_encoder']:,}, with MLM/SOP "
          f"heads {p['demo_pretrainer']:,}")
  for size, r in p.get("released_sizes", {}).items():
    print(f"    ALBERT-{size:<8} {r['encoder']:>13,}  (paper "
          f"{r['paper_millions']}M, BERT {r['bert_millions'] or '-'}"
          f"{'M' if r['bert_millions'] else ''})")
  if "pretraining" in m:
    b, a = m["pretraining"]["before"], m["pretraining"]["after"]
    print(f"  this run's pretraining ({m['pretraining']['steps']} steps) held-out: "
          f"MLM accuracy {b['masked_lm_accuracy']:.3f} -> "
          f"{a['masked_lm_accuracy']:.3f}, SOP accuracy "
          f"{b['sentence_order_accuracy']:.3f} -> "
          f"{a['sentence_order_accuracy']:.3f}")
  if "fill_mask" in m:
    fm = m["fill_mask"]
    print(f"  fill-mask (this run's pretraining export): top-1 "
          f"{fm['top1_accuracy']:.3f}, top-5 {fm['top5_accuracy']:.3f} "
          f"over {fm['masked_words']} masked held-out words")
  if "finetuning" in m:
    ft = m["finetuning"]
    pre, rnd = ft["pretrained"], ft["random_init"]
    print(f"  fine-tuning the {ft.get('model', 'pretrained')} model on "
          f"{ft['task']} ({ft['steps']} steps): dev accuracy "
          f"{pre['dev'].get('accuracy', float('nan')):.3f} from the "
          f"pretrained checkpoint, {rnd['dev'].get('accuracy', float('nan')):.3f}"
          f" from random init (majority baseline "
          f"{ft['majority_baseline']:.3f}); served from the export "
          f"({pre.get('served_split', 'dev')}): {pre['served_accuracy']:.3f}")
    lite = ft.get("lite")
    if lite:
      print(f"  on device ({lite['precision']} .tflite, text in): "
            f"{tools.human_bytes(lite['tflite_bytes'])} vs SavedModel "
            f"{tools.human_bytes(lite['saved_model_bytes'])}; one row "
            f"{lite['tflite_batch1_p50_ms']:.2f} ms vs "
            f"{lite['saved_model_batch1_p50_ms']:.2f} ms (p50); labels "
            f"agree with the SavedModel's on "
            f"{100 * lite['label_agreement']:.1f}% of "
            f"{pre.get('served_split', 'dev')} rows; accuracy "
            f"{lite['accuracy']:.3f}")
  print("  timings (wall / CPU seconds):")
  for name, t in run.timings.items():
    print(f"    {name:<12}{t['seconds']:>8.1f}{t['cpu_seconds']:>10.1f}")
  print(f"    {'total':<12}{total:>8.1f}"
        f"{run.summary['total_cpu_seconds']:>10.1f}")
  print(f"  wrote {run.rel(path)}")
