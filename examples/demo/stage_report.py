"""Stages 6-7 of `make demo`: the released sizes' parameter table and the
summary."""

import json
import os
import time

import numpy as np

from examples.demo import models
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


def write_summary(run):
  """Stage 7: summary.json and the closing report."""
  total = time.time() - run.t0
  run.summary["timings"] = run.timings
  run.summary["total_seconds"] = round(total, 1)
  run.summary["total_cpu_seconds"] = round(tools.child_cpu_seconds(), 1)
  files = {}
  for name in ("corpus", "vocab", "data", "pretrain", "exports",
               "finetune", "logs", "curves.png", "finetune_curves.png",
               "model_sizes.json"):
    p = run.path(name)
    if os.path.exists(p):
      files[name] = tools.dir_size(p)
  run.summary["files"] = files
  run.summary["exports"] = run.exports
  path = run.path("summary.json")
  with open(path, "w", encoding="utf-8") as f:
    json.dump(run.summary, f, indent=2, default=str)
  m = run.summary["metrics"]
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
    print(f"    {'export ' + kind:<22}{run.rel(p)}")
  p = run.summary["parameters"]
  if "tiny_encoder" in p:
    print(f"  parameters: tiny encoder {p['tiny_encoder']:,}, with MLM/SOP "
          f"heads {p['tiny_pretrainer']:,}")
  for size, r in p.get("released_sizes", {}).items():
    print(f"    ALBERT-{size:<8} {r['encoder']:>13,}  (paper "
          f"{r['paper_millions']}M, BERT {r['bert_millions'] or '-'}"
          f"{'M' if r['bert_millions'] else ''})")
  if "pretraining" in m:
    b, a = m["pretraining"]["before"], m["pretraining"]["after"]
    print(f"  pretraining ({m['pretraining']['steps']} steps) held-out: "
          f"MLM accuracy {b['masked_lm_accuracy']:.3f} -> "
          f"{a['masked_lm_accuracy']:.3f}, SOP accuracy "
          f"{b['sentence_order_accuracy']:.3f} -> "
          f"{a['sentence_order_accuracy']:.3f}")
  if "fill_mask" in m:
    fm = m["fill_mask"]
    print(f"  fill-mask (pretraining export): top-1 "
          f"{fm['top1_accuracy']:.3f}, top-5 {fm['top5_accuracy']:.3f} "
          f"over {fm['masked_words']} masked held-out words")
  if "finetuning" in m:
    ft = m["finetuning"]
    print(f"  fine-tuning {ft['task']} ({ft['steps']} steps): dev accuracy "
          f"{ft['dev'].get('accuracy', float('nan')):.3f} "
          f"(majority baseline {ft['majority_baseline']:.3f}), F1 "
          f"{ft['dev'].get('f1', float('nan')):.3f}; served from the "
          f"export: {ft['served_accuracy']:.3f}")
  print("  timings (wall / CPU seconds):")
  for name, t in run.timings.items():
    print(f"    {name:<12}{t['seconds']:>8.1f}{t['cpu_seconds']:>10.1f}")
  print(f"    {'total':<12}{total:>8.1f}"
        f"{run.summary['total_cpu_seconds']:>10.1f}")
  print(f"  wrote {run.rel(path)}")
