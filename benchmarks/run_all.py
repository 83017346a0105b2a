"""`make bench`: every benchmark, results as JSON and one Markdown table.

Runs (each prints its own figures as it goes):
  1. bench_train_step.py: ALBERT-base train step, batch 8 x seq 128, ours vs
     Model Garden vs keras-hub, without and with XLA, and under
     mixed_bfloat16; seq 512 x batch 2, ours vs Model Garden, without and
     with XLA; peak memory with/without gradient checkpointing.
  2. bench_trainer_loop.py: steps/s of run_pretraining itself (tiny, base;
     with and without XLA).
  3. bench_inference.py: exported encoder SavedModels, batch 1 and 32.
  4. bench_data_prep.py: create_pretraining_data and the Beam pipeline:
     instances/s, peak RSS, scaling in workers; with --runners the local
     tool, the DirectRunner and the DaskRunner on the same corpora.
  5. lite_accuracy.py: the low-precision exports (bfloat16 SavedModel,
     .tflite float16 / dynamic_int8 / int8) of two models fine-tuned here,
     against float32 on their dev sets (not with --quick or --smoke: it
     trains for minutes).
Writes benchmarks/results/*.json and benchmarks/results/RESULTS.md. Every
figure is measured against its peer or limit in the same run, sides called
alternately after the warm-up has settled (benchmarks/bench_common.py).

  python benchmarks/run_all.py [--quick | --smoke] [--results_dir DIR]

--smoke runs every script on its smallest setting into --results_dir (the
quick test, tests/benchmarks/test_benchmarks_run.py: checks that nothing
rotted, measures nothing; keras-hub only if .venv-bench exists, so it
downloads nothing).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import bench_common

SMOKE = False  # set by --smoke: every script on its smallest setting
HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")  # --results_dir changes it
# bench_train_step.py result files, in table order, with their row labels.
TRAIN_STEP_RESULTS = (("train_step.json", "b8 x s128"),
                      ("train_step_xla.json", "b8 x s128, XLA"),
                      ("train_step_bf16.json", "b8 x s128, mixed_bfloat16"),
                      ("train_step_seq512.json", "b2 x s512"),
                      ("train_step_seq512_xla.json", "b2 x s512, XLA"))


def run(script, *args, imports_tf=True):
  global_args = ["--smoke"] if SMOKE else []
  cmd = [sys.executable, os.path.join(HERE, script), *args, *global_args]
  print(f"\n=== {' '.join(cmd[1:])}", flush=True)
  start = time.time()
  (bench_common.bench_run if imports_tf else subprocess.run)(cmd, check=True)
  print(f"=== done in {time.time() - start:.0f} s", flush=True)


def load(name):
  path = os.path.join(RESULTS, name)
  if not os.path.exists(path):
    return None
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def train_rows(result, label):
  rows = []
  for name, m in result["models"].items():
    rows.append(f"| {label} | {name} | {m['seconds_per_step']:.2f} | "
                f"{m['gflops']:.0f} | {m['fraction_of_matmul']:.0%} | "
                f"{m['albert_tf_speedup']:.2f}x |")
  return rows


def op_profile_lines(summary, label):
  """Markdown of a train step's op profile (benchmarks/op_profile.py)."""
  def shares(rows):
    return ", ".join(f"{r['name']} {r['share']:.0%} "
                     f"({1e3 * r['seconds_per_step']:.0f} ms)" for r in rows)
  return [f"Op profile of albert_tf's step, {label} ({summary['steps']} "
          f"traced steps, {summary['wall_seconds_per_step']:.2f} s/step "
          f"wall, op time {summary['op_over_wall']:.2f}x wall); shares of "
          "op time:",
          f"- by part: {shares(summary['parts'])}",
          f"- by component: {shares(summary.get('components', []))}",
          f"- by kind: {shares(summary['kinds'])}",
          f"- top op types: {shares(summary['top_ops'][:8])}"]


def forms_table(forms):
  """Markdown of bench_inference's low-precision forms."""
  cpu = forms["cpu"]
  flags = ", ".join(f"{f} {'yes' if v else 'no'}"
                    for f, v in cpu["flags"].items())
  batches = list(forms["batches"])
  lines = ["### Inference, low-precision forms (ALBERT-base classifier, all "
           "forms called alternately in one run)", "",
           f"CPU: {cpu['model']} ({flags}); TFLite interpreter threads: "
           f"{forms['lite_threads']}; int8 calibrated on "
           f"{forms['calibration_texts']} of the benchmark's texts. ids in: "
           "`serve_ids` of the classification serving export (Model Garden: "
           "its encoder behind the same signature); text in: its "
           "`serving_default`. x MG: p50 over Model Garden's float32 "
           "SavedModel (ids in), median of per-round ratios. Peak RSS: a "
           "fresh process per form loading it and running batch "
           f"{forms.get('peak_rss_batch')} ids in (in brackets: the same "
           "process after its imports).", "",
           "| form | input | " + " | ".join(
               f"b{b} p50 / p99 ms | b{b} x MG" for b in batches) +
           " | logits max diff | size MB | peak RSS MB |",
           "|---|---|" + "---|---|" * len(batches) + "---|---|---|"]
  first = forms["batches"][batches[0]]["sides"]
  for side in first:
    name, kind = side.split(":")
    cells = []
    for b in batches:
      m = forms["batches"][b]["sides"][side]
      cells.append(f"{m['p50_ms']:.1f} / {m['p99_ms']:.1f} | "
                   f"{m['over_model_garden']:.2f}")
    diff = first[side].get("logits_max_abs_diff")
    rss = forms.get("peak_rss", {}).get(name) if kind == "ids" else None
    lines.append(
        f"| {name} | {kind} | " + " | ".join(cells) +
        f" | {'-' if diff is None else f'{diff:.1e}'} | "
        f"{forms['size_bytes'][name] / 1e6:.1f} | " +
        (f"{rss['peak_rss_mb']:.0f} ({rss['baseline_rss_mb']:.0f})" if rss
         else "") + " |")
  lines.append("")
  for b in batches:
    r = forms["batches"][b]
    for t in r["targets"]:
      lines.append(
          f"Target, batch {b}: {t['best']} p50 {t['ratio']:.2f}x Model "
          f"Garden's (<= {t['target']}): {'met' if t['met'] else 'NOT met'}"
          + ("" if t["applies"] else f" (this CPU has no "
             f"{'/'.join(t['cpu_flags'])}: reported only)") + ".")
    lines.append(
        f"Batch {b}: {r['timed_rounds']} timed rounds after "
        f"{r['warmup_rounds']} warm-up"
        f"{'' if r['settled'] else ' (not settled: the cap)'}; load average "
        f"{r['load_before']['loadavg_1min']}/"
        f"{r['load_after']['loadavg_1min']}, float32 matmul "
        f"{r['load_before']['matmul_gflops']:.0f}/"
        f"{r['load_after']['matmul_gflops']:.0f} GFLOP/s before/after.")
  return lines


def markdown(machine_line):
  lines = [machine_line, ""]
  lines += ["### Pretraining train step (ALBERT-base, dropout 0)", "",
            "| setting | model | s/step | GFLOP/s | of matmul rate | albert_tf faster by |",
            "|---|---|---|---|---|---|"]
  for name, label in TRAIN_STEP_RESULTS:
    result = load(name)
    if result:
      lines += train_rows(result, label)
  lines.append("")
  for name, label in TRAIN_STEP_RESULTS:
    result = load(name)
    if not result:
      continue
    dtype = result.get("matmul_dtype", "float32")
    when = (f" (measured {result['timestamp']})" if "timestamp" in result
            else "")
    line = (f"{label}{when}: dense {dtype} matmul rate measured in the "
            f"same run {result['matmul_gflops']:.0f} GFLOP/s"
            + (f" (float32 {result['matmul_gflops_float32']:.0f})"
               if dtype != "float32" else "") + ".")
    if "peak_rss_mb" in result:
      mem = result["peak_rss_mb"]
      line += (f" Peak RSS of our train step {mem['albert_tf']:.0f} MB, "
               f"with gradient checkpointing "
               f"{mem['albert_tf_gradient_checkpointing']:.0f} MB.")
    lines.append(line)
    if "op_profile" in result:
      lines += ["", *op_profile_lines(result["op_profile"], label), ""]
  loop = load("trainer_loop.json")
  if loop:
    lines += ["", "### run_pretraining loop against the bare step of the same "
              "model (same process, alternating)", "",
              "| config | loop s/step | bare step s/step | loop / bare | "
              "warm-up rounds | load avg before/after | matmul GFLOP/s "
              "before/after |", "|---|---|---|---|---|---|---|"]
    for name, m in loop.items():
      lines.append(
          f"| {name} | {m['loop_seconds_per_step']:.4f} | "
          f"{m['bare_seconds_per_step']:.4f} | {m['loop_over_bare']:.3f} | "
          f"{m['warmup_rounds']}{'' if m['settled'] else ' (cap)'} | "
          f"{m['load_before']['loadavg_1min']}/"
          f"{m['load_after']['loadavg_1min']} | "
          f"{m['load_before']['matmul_gflops']:.0f}/"
          f"{m['load_after']['matmul_gflops']:.0f} |")
    first = next(iter(loop.values()))
    if "machine" in first:
      lines += ["", f"Measured {first['timestamp']} on {first['machine']}."]
  inference = load("inference.json")
  if inference:
    lines += ["", "### Inference, exported encoder SavedModel (seq "
              f"{inference['seq']}; the two called alternately)", "",
              "| batch | model | p50 ms | p99 ms | examples/s |",
              "|---|---|---|---|---|"]
    if "machine" in inference:
      lines[-2:-2] = [f"Measured {inference['timestamp']} on "
                      f"{inference['machine']}.", ""]
    for batch, r in inference["batches"].items():
      for name in ("albert_tf", "model_garden"):
        m = r[name]
        lines.append(f"| {batch} | {name} | {m['p50_ms']:.1f} | "
                     f"{m['p99_ms']:.1f} | {m['examples_per_s']:.1f} |")
    lines.append("")
    for batch, r in inference["batches"].items():
      target = (f" (target <= {r['target']})" if r.get("target") else "")
      lines.append(
          f"Batch {batch}: albert_tf / Model Garden "
          f"{r['ours_over_model_garden']:.2f}{target}, median of "
          f"{r['timed_rounds']} per-round ratios; outputs agree to "
          f"{max(r['max_abs_diff'].values()):.1e}; load average "
          f"{r['load_before']['loadavg_1min']}/"
          f"{r['load_after']['loadavg_1min']}, matmul "
          f"{r['load_before']['matmul_gflops']:.0f}/"
          f"{r['load_after']['matmul_gflops']:.0f} GFLOP/s before/after.")
    text = inference.get("text_signatures")
    if text:
      lines += ["", "Text-in signatures (the float32 SavedModel of the "
                "classifier below): "
                "added latency over `serve_ids` (median of per-round "
                "differences):", "",
                "| batch | serve_ids p50 ms | text p50 ms | tf.Example p50 ms "
                "| text adds ms | tf.Example adds ms |",
                "|---|---|---|---|---|---|"]
      for batch, r in text.items():
        lines.append(
            f"| {batch} | {r['ids']['p50_ms']:.1f} | "
            f"{r['text']['p50_ms']:.1f} | {r['examples']['p50_ms']:.1f} | "
            f"{r['text_added_ms']:.1f} | {r['examples_added_ms']:.1f} |")
    if inference.get("forms"):
      lines += [""] + forms_table(inference["forms"])
  data = load("data_prep.json")
  if data:
    ref = data["original_reference"]
    lines += ["", "### Data prep (local: create_pretraining_data; beam: "
              "beam_pretraining_data on the DirectRunner; dupe 5, 4k-piece "
              "vocabulary; 1x = 4 copies of botchan)", "",
              f"Measured {data['timestamp']}"
              + (f" on {data['machine']}." if "machine" in data else "."), "",
              "| tool | corpus | seq | workers | instances | wall s | CPU s | "
              "instances/s | vs original | peak RSS MB (largest process) |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for r in data["runs"]:
      lines.append(
          f"| {r['tool']} | {r['corpus']} | {r['max_seq_length']} | "
          f"{r['workers']} | {r['instances']} | {r['wall_seconds']:.1f} | "
          f"{r['cpu_seconds']:.1f} | {r['instances_per_second']:.0f} | "
          f"{r['instances_per_second'] / ref['instances_per_second']:.1f}x | "
          f"{r['peak_rss_mb_max_process']:.0f} |")
    lines.append(f"\nThe original script: {ref['instances_per_second']} "
                 "instances/s on this kind of machine, memory growing with "
                 "the corpus.")
    scaling = {c: f for c, f in (data.get("scaling") or {}).items()
               if f.get("beam_speedup_2_over_1_workers")}
    if scaling:
      lines += ["", "Speed-up from 1 to 2 workers (wall time; Beam also without "
                "its fixed start-up, the tiny corpus's wall time):", "",
                "| corpus | local | beam | beam after start-up |",
                "|---|---|---|---|"]
      for corpus, f in scaling.items():
        lines.append(
            f"| {corpus} | {f['local_speedup_2_over_1_workers']}x | "
            f"{f['beam_speedup_2_over_1_workers']}x | "
            f"{f['beam_speedup_2_over_1_workers_after_startup']}x |")
  lines += runner_rows(load("data_prep_runners.json"))
  lines += lite_accuracy_lines(load("lite_accuracy.json"))
  return "\n".join(lines) + "\n"


def runner_rows(data):
  """RESULTS.md lines of bench_data_prep.py --runners (none without it)."""
  if not data:
    return []
  lines = ["", "### Data prep by runner (2 workers each; dupe 5, seq 128; "
           "Dask: a local cluster of 2 worker processes, its CPU included)",
           "", f"Measured {data['timestamp']} on {data['machine']} "
           f"({len(data['cpu']['flags'])} CPU flags in "
           "data_prep_runners.json) while other work was running on it: "
           f"load average {data['load_average_at_start'][0]:.2f} at the start"
           f", {data['load_average_at_end'][0]:.2f} at the end. Each row is "
           "the fastest of its trials. Dask cluster start-up "
           f"{data['dask_cluster_startup_seconds']} s, not in the rows.", "",
           "| runner | corpus | MB | instances | wall s | wall s, all trials "
           "| CPU s | instances/s |", "|---|---|---|---|---|---|---|---|"]
  for r in data["runs"]:
    lines.append(f"| {r['runner']} | {r['corpus']} | {r['corpus_mb']} | "
                 f"{r['instances']} | {r['wall_seconds']:.1f} | "
                 f"{', '.join(map(str, r['wall_seconds_all_trials']))} | "
                 f"{r['cpu_seconds']:.1f} | {r['instances_per_second']:.0f} |")
  return lines


def lite_accuracy_lines(result):
  """RESULTS.md's section of benchmarks/lite_accuracy.py (none without its
  JSON): one row per task and export."""
  if not result:
    return []
  cpu = result["cpu"]
  lines = ["", "### Low-precision exports: accuracy of fine-tuned models "
           "(benchmarks/lite_accuracy.py)", "",
           f"Measured {result['timestamp']} on {cpu['model']} (flags: "
           f"{' '.join(cpu['flags'])}); TensorFlow "
           f"{result['versions']['tensorflow']}, LiteRT "
           f"{result['versions']['ai-edge-litert']}; int8 calibrated on "
           f"{result['representative_examples']} examples of the run's "
           f"training data.{' SMOKE RUN: measures nothing.' if result['smoke'] else ''}",
           "", "| task | export | size MB | agreement with float32 | "
           "dev accuracy (SQuAD: EM / F1) | max abs logit diff | targets |",
           "|---|---|---|---|---|---|---|"]
  for task, t in result["tasks"].items():
    for row in t["rows"]:
      name = row["export"]
      if "error" in row:
        lines.append(f"| {task} | {name} | - | - | - | - | NOT met: export "
                     f"failed ({row['error']}) |")
        continue
      accuracy = f"{row['accuracy']:.4f}" + (
          f" / {row['f1']:.4f}" if "f1" in row else "")
      verdict = ("reference" if "meets_targets" not in row else
                 "met" if row["meets_targets"] else "NOT met")
      lines.append(f"| {task} | {name} | {row['size_bytes'] / 1e6:.2f} | "
                   f"{row['agreement']:.2%} | {accuracy} | "
                   f"{row['max_abs_logit_diff']:.4f} | {verdict} |")
  targets = result["targets"]
  lines += ["", "Targets: agreement with the float32 SavedModel >= "
            f"{targets['classification']['agreement']:.0%} (SQuAD: same "
            f"answer text >= {targets['squad']['agreement']:.0%}), dev "
            "accuracy (SQuAD: exact match) at most "
            f"{100 * targets['classification']['accuracy_drop']:.0f} point "
            "below float32's. Dev examples: " + ", ".join(
                f"{task} {t['rows'][0]['examples']}"
                for task, t in result["tasks"].items()) + "."]
  return lines


def write_table(measured_now):
  """RESULTS.md from the JSON files; also printed.

  The first line names the machine and date of the measurements: this
  machine and today after a full run; with --table_only, the line already
  there (the JSON files were measured then, not now).
  """
  path = os.path.join(RESULTS, "RESULTS.md")
  line = f"Machine: {bench_common.machine()}. Date: {time.strftime('%Y-%m-%d')}."
  if not measured_now and os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      line = f.readline().rstrip("\n")
  table = markdown(line)
  with open(path, "w", encoding="utf-8") as f:
    f.write(table)
  print("\n" + table)


def main():
  global RESULTS, SMOKE  # pylint: disable=global-statement
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--quick", action="store_true",
                      help="fewer rounds; no seq-512 or data-prep runs")
  parser.add_argument("--smoke", action="store_true",
                      help="every script on its smallest setting (the quick "
                      "test; measures nothing)")
  parser.add_argument("--results_dir", default=RESULTS)
  parser.add_argument("--table_only", action="store_true",
                      help="only rebuild RESULTS.md from the JSON files")
  args = parser.parse_args()
  RESULTS, SMOKE = os.path.abspath(args.results_dir), args.smoke
  os.makedirs(RESULTS, exist_ok=True)
  if args.table_only:
    write_table(measured_now=False)
    return
  rounds = ["--rounds", "2" if args.quick else "3"]
  run("bench_train_step.py", *rounds, "--memory", "--profile", "2",
      "--json", os.path.join(RESULTS, "train_step.json"))
  run("bench_train_step.py", *rounds, "--jit",
      "--json", os.path.join(RESULTS, "train_step_xla.json"))
  run("bench_train_step.py", *rounds, "--policy", "mixed_bfloat16",
      "--profile", "2", "--json", os.path.join(RESULTS,
                                               "train_step_bf16.json"))
  if not (args.quick or args.smoke):
    run("bench_train_step.py", "--batch", "2", "--seq", "512", *rounds,
        "--no-keras-hub", "--memory", "--json",
        os.path.join(RESULTS, "train_step_seq512.json"))
    run("bench_train_step.py", "--batch", "2", "--seq", "512", *rounds,
        "--no-keras-hub", "--jit", "--json",
        os.path.join(RESULTS, "train_step_seq512_xla.json"))
  # The loop runs share their data (made by the data_prep tools once).
  loop_workdir = tempfile.mkdtemp(prefix="bench_trainer_loop_")
  run("bench_trainer_loop.py", f"--workdir={loop_workdir}", "--json",
      os.path.join(RESULTS, "trainer_loop.json"))
  if args.smoke:
    run("bench_trainer_loop.py", "--compare_loops", "--repeats", "1",
        f"--workdir={loop_workdir}", "--json",
        os.path.join(RESULTS, "trainer_loop_vs_orbit.json"))
  shutil.rmtree(loop_workdir, ignore_errors=True)
  run("bench_inference.py", "--json", os.path.join(RESULTS, "inference.json"))
  if not args.quick:
    run("bench_data_prep.py", "--json", os.path.join(RESULTS,
                                                     "data_prep.json"),
        imports_tf=False)
  if not (args.quick or args.smoke):
    run("bench_data_prep.py", "--runners", "--json",
        os.path.join(RESULTS, "data_prep_runners.json"), imports_tf=False)
    run("lite_accuracy.py", f"--results_dir={RESULTS}")
  write_table(measured_now=True)


if __name__ == "__main__":
  main()
