"""Accuracy of the low-precision exports on fine-tuned models that are good
at their task.

1. Data: botchan -> prepare_corpus -> a SentencePiece model (1,000 pieces,
   bench_common), and two tasks from the same text (lite_accuracy_tasks):
   `split_sentence` (classification, MRPC layout) and word look-up
   (SQuAD v1.1 JSON: the question is a word of the context).
2. Fine-tuning from random weights (the demo's model, E 64 / H 128, one
   shared block run 4 times; no pretraining: both tasks are learnt well
   without it, and faster): `run_classifier` and `run_squad` (simple head).
3. Exports of each run: SavedModel float32 and bfloat16; .tflite float32,
   float16, dynamic_int8 and int8 (calibrated on `--representative_examples`
   of the run's training data). SQuAD exports use `--doc_stride=0` (one
   window per question: every question and context fits one).
4. The dev set, text in, through every export's `serving_default`, against
   the float32 SavedModel: label agreement (SQuAD: same `answer_text`), dev
   accuracy (SQuAD: exact match and F1 against the gold answer), the
   largest |logit| difference, and the file size. Targets: agreement >= 99%
   (SQuAD 97%) and accuracy within 1 point of float32.

Writes benchmarks/results/lite_accuracy.json and its section of RESULTS.md.

  python benchmarks/lite_accuracy.py [--workdir DIR] [--results_dir DIR]
      [--representative_examples N] [--smoke]

--workdir keeps the data, runs and exports: a second run with the same
directory reuses every finished run and export. --smoke (a few steps on a
sliver of the text; measures nothing) takes minutes, not seconds: two
fine-tuning runs and twelve exports, so the test suite does not run it.
"""

import argparse
import importlib.metadata as metadata
import json
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

import bench_common  # pylint: disable=g-import-not-at-top
import lite_accuracy_eval  # pylint: disable=g-import-not-at-top
import lite_accuracy_tasks  # pylint: disable=g-import-not-at-top
import run_all  # pylint: disable=g-import-not-at-top
import yaml  # pylint: disable=g-import-not-at-top

from albert_tf.serving import lite_export  # pylint: disable=g-import-not-at-top
from albert_toolkit import output_files  # pylint: disable=g-import-not-at-top
from data_prep import tokenization  # pylint: disable=g-import-not-at-top
from examples.demo import corpus  # pylint: disable=g-import-not-at-top

MODEL_RECIPE = os.path.join(ROOT, "albert_tf", "configs", "pretraining",
                            "albert_demo_cpu.yaml")
# (format, precision) of every export, the float32 SavedModel first: the
# reference the others are compared with.
EXPORTS = (("savedmodel", "float32"), ("savedmodel", "bfloat16"),
           ("tflite", "float32"), ("tflite", "float16"),
           ("tflite", "dynamic_int8"), ("tflite", "int8"))
TARGETS = {"classification": {"agreement": 0.99, "accuracy_drop": 0.01},
           "squad": {"agreement": 0.97, "accuracy_drop": 0.01}}
# Per task: the tool, its settings; smoke: a few steps on a sliver of data.
SETTINGS = {
    "full": {"classification_seq_length": 128, "squad_seq_length": 96,
             "max_query_length": 24, "dev_fraction": 0.4, "vocab_size": 1000,
             "classification_steps": 800, "squad_steps": 2000,
             "learning_rate": 5e-4, "batch_size": 32},
    "smoke": {"classification_seq_length": 64, "squad_seq_length": 64,
              "max_query_length": 24, "dev_fraction": 0.4, "vocab_size": 1000,
              "classification_steps": 4, "squad_steps": 4,
              "learning_rate": 5e-4, "batch_size": 8},
}


def make_tasks(workdir, settings, smoke):
  """The SentencePiece model and both tasks' data (cached in `workdir`)."""
  text, spm = bench_common.sentencepiece_model(workdir,
                                               settings["vocab_size"])
  docs = corpus.read_documents(text)
  if smoke:  # one chapter's first sentences
    docs = [docs[1][:80]]
  tokenizer = tokenization.FullTokenizer(spm)
  data = {"classification": os.path.join(workdir, "classification_data"),
          "squad": os.path.join(workdir, "squad_data")}
  counts = {
      "classification": lite_accuracy_tasks.classification_task(
          docs, data["classification"], settings["dev_fraction"]),
      "squad": lite_accuracy_tasks.squad_task(
          docs, data["squad"], settings["dev_fraction"],
          lambda s: len(tokenizer.tokenize(s)),
          settings["squad_seq_length"] - settings["max_query_length"] - 3)}
  return spm, data, counts


def finetune_config(task, spm, data_dir, settings, path):
  """The experiment config of one fine-tuning run, written to `path`."""
  with open(MODEL_RECIPE, encoding="utf-8") as f:
    model = yaml.safe_load(f)["model"]
  seq_length = settings[f"{task}_seq_length"]
  model["max_position_embeddings"] = seq_length
  steps = settings[f"{task}_steps"]
  data = {"spm_model_file": spm, "max_seq_length": seq_length,
          "global_batch_size": settings["batch_size"], "eval_batch_size": 64,
          "seed": 0}
  if task == "classification":
    data.update(task_name="mrpc", data_dir=data_dir)
    best = "accuracy"
  else:
    data.update(train_file=os.path.join(data_dir, "train.json"),
                predict_file=os.path.join(data_dir, "dev.json"),
                max_query_length=settings["max_query_length"],
                max_answer_length=8)
    best = "f1"
  per_loop = max(1, min(100, steps // 10))
  config = {
      "model": model, "data": data, "task": {"classifier_dropout": 0.1},
      "optimizer": {"name": "adamw", "learning_rate":
                    settings["learning_rate"],
                    "num_warmup_steps": max(1, steps // 10),
                    "weight_decay_rate": 0.01, "epsilon": 1e-6,
                    "clip_norm": 1.0},
      "trainer": {"train_steps": steps, "steps_per_loop": per_loop,
                  "checkpoint_interval": steps, "eval_interval": steps,
                  "max_to_keep": 1, "best_metric": best,
                  "best_metric_mode": "max"},
      "runtime": {"distribution_strategy": "default",
                  "mixed_precision_dtype": "float32", "jit_compile": True,
                  "seed": 0}}
  output_files.atomic_write(path, yaml.safe_dump(config, sort_keys=False))
  return path


def finetune(task, spm, data_dir, settings, workdir):
  """Fine-tunes `task` (skipped when its run finished before); returns the
  run directory and its eval_results.json."""
  run_dir = os.path.join(workdir, f"{task}_run")
  results = os.path.join(run_dir, "eval_results.json")
  if not os.path.exists(results):
    config = finetune_config(task, spm, data_dir, settings,
                             os.path.join(workdir, f"{task}.yaml"))
    tool = ("albert_tf.run_classifier" if task == "classification" else
            "albert_tf.run_squad")
    start = time.time()
    print(f"fine-tuning {task} ({settings[f'{task}_steps']} steps), log: "
          f"{run_dir}.log", flush=True)
    bench_common.run_tool(["-m", tool, f"--config_file={config}",
                           f"--model_dir={run_dir}", "--mode=train_and_eval"],
                          log_path=run_dir + ".log")
    print(f"  done in {time.time() - start:.0f} s", flush=True)
  with open(results, encoding="utf-8") as f:
    return run_dir, json.load(f)


def export(task, run_dir, export_format, precision, workdir,
           representative_examples):
  """Exports `run_dir` in one format and precision (cached); returns the
  version directory."""
  out = os.path.join(workdir, "exports", task, f"{export_format}_{precision}")
  version = os.path.join(out, "1")
  if not os.path.isdir(version):
    args = ["-m", "albert_tf.export_savedmodel", f"--model_dir={run_dir}",
            f"--export_dir={out}", "--version=1", f"--format={export_format}",
            f"--precision={precision}"]
    if task == "squad":
      args.append("--doc_stride=0")
    if precision == "int8" and representative_examples:
      args.append(f"--representative_examples={representative_examples}")
    start = time.time()
    os.makedirs(os.path.dirname(out), exist_ok=True)
    bench_common.run_tool(args, log_path=out + ".log")
    print(f"  exported {task} {export_format} {precision} in "
          f"{time.time() - start:.0f} s", flush=True)
  return version


def measure_task(task, run_dir, data_dir, workdir, representative_examples):
  """Every export of one run, measured on its dev set: a row each, in
  EXPORTS order."""
  dev = (lite_accuracy_tasks.read_classification_dev(data_dir)
         if task == "classification" else
         lite_accuracy_tasks.read_squad_dev(data_dir))
  rows, reference = [], None
  for export_format, precision in EXPORTS:
    name = f"{export_format} {precision}"
    try:
      path = export(task, run_dir, export_format, precision, workdir,
                    representative_examples)
    except RuntimeError as e:  # the exporter failed: the row says why
      if reference is None:  # no float32 SavedModel: nothing to compare with
        raise
      reason = str(e).strip().splitlines()[-1]
      rows.append({"export": name, "format": export_format,
                   "precision": precision, "error": reason})
      print(f"  {task} {name}: EXPORT FAILED: {reason}", flush=True)
      continue
    start = time.time()
    outputs = lite_accuracy_eval.run_dev(path, export_format, task, dev)
    if reference is None:
      reference = outputs
    row = lite_accuracy_eval.compare(task, outputs, reference, dev)
    row.update(export=name, format=export_format, precision=precision,
               size_bytes=lite_accuracy_eval.export_size(path),
               dev_seconds=round(time.time() - start, 1))
    rows.append(row)
    print(f"  {task} {name}: {lite_accuracy_eval.describe(row)}", flush=True)
  return rows


def cpu():
  """The CPU's model and the instruction-set flags that decide which int8,
  float16 and bfloat16 kernels run."""
  wanted = ("avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512_vnni",
            "avx512_bf16", "avx_vnni", "amx_bf16", "amx_int8")
  model, flags = bench_common.read_cpuinfo()
  return {"model": model, "flags": [x for x in wanted if x in flags]}


def versions():
  """Versions of the packages that convert and run the exports."""
  out = {}
  for package in ("tensorflow", "tensorflow-text", "ai-edge-litert"):
    try:
      out[package] = metadata.version(package)
    except metadata.PackageNotFoundError:
      out[package] = None
  return out


def verdicts(task, rows):
  """Per non-reference row: does it meet the task's targets?"""
  target = TARGETS[task]
  reference = rows[0]
  for row in rows[1:]:
    if "error" in row:
      row["meets_targets"] = False
      continue
    drop = reference["accuracy"] - row["accuracy"]
    row["accuracy_drop"] = drop
    row["meets_targets"] = bool(row["agreement"] >= target["agreement"] and
                                drop <= target["accuracy_drop"])


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--workdir", default=None, help="data, runs and "
                      "exports (kept; a second run reuses what is there); "
                      "default: a new temporary directory")
  parser.add_argument("--results_dir", default=os.path.join(HERE, "results"),
                      help="lite_accuracy.json goes here and RESULTS.md "
                      "there is rebuilt")
  parser.add_argument("--representative_examples", type=int, default=None,
                      help="int8 calibration examples (default: the "
                      "exporter's)")
  parser.add_argument("--smoke", action="store_true", help="a few steps on a "
                      "sliver of the text (checks the script runs; measures "
                      "nothing)")
  args = parser.parse_args()
  settings = SETTINGS["smoke" if args.smoke else "full"]
  workdir = args.workdir or tempfile.mkdtemp(prefix="lite_accuracy_")
  os.makedirs(workdir, exist_ok=True)
  start = time.time()
  spm, data, counts = make_tasks(workdir, settings, args.smoke)
  print(f"tasks in {workdir}: {json.dumps(counts)}", flush=True)
  result = {**bench_common.stamp(), "cpu": cpu(), "versions": versions(),
            "smoke": args.smoke, "settings": settings,
            "representative_examples": (
                args.representative_examples or
                lite_export.DEFAULT_REPRESENTATIVE_EXAMPLES),
            "targets": TARGETS, "tasks": {}}
  for task in ("classification", "squad"):
    task_start = time.time()
    run_dir, eval_results = finetune(task, spm, data[task], settings,
                                     workdir)
    rows = measure_task(task, run_dir, data[task], workdir,
                        args.representative_examples)
    verdicts(task, rows)
    result["tasks"][task] = {
        "data": counts[task], "eval_results": eval_results,
        "seconds": round(time.time() - task_start), "rows": rows}
  result["wall_seconds"] = round(time.time() - start)
  os.makedirs(args.results_dir, exist_ok=True)
  output_files.write_json(os.path.join(args.results_dir,
                                       "lite_accuracy.json"), result)
  run_all.RESULTS = os.path.abspath(args.results_dir)
  run_all.write_table(measured_now=False)


if __name__ == "__main__":
  main()
