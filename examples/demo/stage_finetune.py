"""The fine-tuning stage of `make demo`: the real task (movie-review
sentiment, real_task.py) or an order task made from held-out text, from the
pretrained and from the random weights (what pretraining adds), the
pretrained run's export, and serving it from raw text in fresh processes."""

import json
import os

import yaml

from examples.demo import context
from examples.demo import corpus
from examples.demo import order_tasks
from examples.demo import plots
from examples.demo import real_task
from examples.demo import tools


def _order_task(run, task, source):
  """An order task (order_tasks.py) from the shown model's held-out text."""
  build_task, description = order_tasks.FINETUNE_TASKS[task]
  data_dir = run.path("finetune", "data")
  counts = build_task(corpus.read_documents(source.held_txt), data_dir,
                      seed=run.settings["seed"])
  print(f"  the {source.name} model; task {task!r} from its held-out text "
        "(MRPC layout): "
        f"{description}\n  {counts}", flush=True)
  with open(os.path.join(data_dir, "train.tsv"), encoding="utf-8") as f:
    example = f.read().splitlines()[1].split("\t")
  print(f"  a training row: label {example[0]} "
        f"({order_tasks.LABEL_NAMES[int(example[0])]})  A: {example[3]!r}  "
        f"B: {example[4]!r}", flush=True)
  majority = max(counts["dev"]["swapped"],
                 counts["dev"]["examples"] - counts["dev"]["swapped"])
  return context.TaskData(task, "mrpc", data_dir, order_tasks.LABEL_NAMES, 2,
                          description, counts,
                          majority / counts["dev"]["examples"], "dev")


def finetune(run):
  """The fine-tuning stage: the real task or an order task (held-out text):
  fine-tune twice (pretrained / random init, same config), evaluate both,
  export and serve the pretrained run from raw text in a fresh process."""
  task_name = run.settings["finetune_task"]
  source = run.shown
  if task_name == real_task.NAME:
    data = real_task.prepare(run, source)
  else:
    data = _order_task(run, task_name, source)
  task = data.name
  steps = run.settings["finetune_steps"]
  config_path = _write_config(run, data, source, steps)
  # The same config, steps and data twice: from the pretrained checkpoint and
  # from the random weights its pretraining started from.
  starts = (("pretrained", source.checkpoint),
            ("random_init", source.random_init))
  results, run_dirs = {}, {}
  for init, checkpoint in starts:
    print(f"  fine-tuning from the {init.replace('_', ' ')} weights "
          f"({run.rel(checkpoint)}):", flush=True)
    run_dirs[init] = run.path("finetune", init)
    run.tool(f"run_classifier_{init}", [
        "-m", "albert_tf.run_classifier", f"--config_file={config_path}",
        f"--model_dir={run_dirs[init]}", f"--init_checkpoint={checkpoint}",
        "--mode=train_and_eval"])
    with open(os.path.join(run_dirs[init], "eval_results.json"),
              encoding="utf-8") as f:
      results[init] = json.load(f)
    print(f"  dev results ({init}, eval_results.json): "
          f"{json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in results[init].items()})}",
          flush=True)
  png = plots.comparison_curves(
      [("from pretrained", run_dirs["pretrained"]),
       ("from random init", run_dirs["random_init"])],
      run.path("finetune_curves.png"),
      f"fine-tuning ({task}, {steps} steps): pretrained vs random "
      "initialisation")
  run.summary["finetune_curves_png"] = png
  if task == real_task.NAME:
    real_task.evaluate_test(run, data, config_path, run_dirs, results)
  served, lite = _export_and_serve(run, data, source, run_dirs["pretrained"])
  run.summary["metrics"]["finetuning"] = {
      "model": source.name, "task": task, "description": data.description,
      "steps": steps,
      "learning_rate": run.settings["finetune_learning_rate"],
      "examples": data.counts,
      "pretrained": {"dev": results["pretrained"],
                     "served_accuracy": served["accuracy"],
                     "served_split": data.serve_split},
      "lite": lite,
      "random_init": {"dev": results["random_init"]},
      "pretraining_gain": (results["pretrained"]["accuracy"] -
                           results["random_init"]["accuracy"]),
      "majority_baseline": data.majority_baseline}


def _export_and_serve(run, data, source, run_dir):
  """The pretrained run as a serving SavedModel (raw text in) and a
  dynamic_int8 .tflite; fresh processes classify `data.serve_split` from
  each. Returns (the SavedModel client's result, the .tflite figures)."""
  task, labels = data.name, ",".join(data.label_names)
  export_dir = run.path("exports", task)
  run.tool(f"export_{task}", [
      "-m", "albert_tf.export_savedmodel", "--export_kind=serving",
      "--task=classification", f"--num_labels={len(data.label_names)}",
      f"--num_text_fields={data.num_text_fields}", f"--label_names={labels}",
      f"--config_file={os.path.join(run_dir, 'experiment_config.yaml')}",
      f"--checkpoint={os.path.join(run_dir, 'checkpoints')}",
      f"--spm_model_file={source.spm}", f"--max_seq_length={context.SEQ_LENGTH}",
      f"--export_dir={export_dir}", "--version=1"])
  run.exports[task] = os.path.join(export_dir, "1")
  what = "raw text pair" if data.num_text_fields == 2 else "raw sentence"
  print(f"  a fresh process serves the export: {what} -> label "
        f"({data.serve_split} split)", flush=True)
  out = run.path("exports", f"{task}_predictions.json")
  tsv = os.path.join(data.data_dir, f"{data.serve_split}.tsv")
  run.tool(f"serve_{task}", [
      os.path.join(context.REPO, "examples", "demo", "savedmodel_client.py"),
      "classify", f"--export_dir={run.exports[task]}", f"--tsv={tsv}",
      f"--label_names={labels}", f"--output_json={out}"])
  with open(out, encoding="utf-8") as f:
    served = json.load(f)
  return served, _serve_lite(run, task, run_dir, tsv, labels, served)


def _serve_lite(run, task, run_dir, tsv, labels, served):
  """The fine-tuned run as a dynamic_int8 .tflite (text in), served in a
  fresh process: size, one-row latency and labels beside the SavedModel's."""
  export_dir = run.path("exports", f"{task}_tflite")
  run.tool(f"export_{task}_tflite", [
      "-m", "albert_tf.export_savedmodel", f"--model_dir={run_dir}",
      f"--label_names={labels}", "--format=tflite",
      "--precision=dynamic_int8", f"--export_dir={export_dir}", "--version=1"])
  run.exports[f"{task}_tflite"] = os.path.join(export_dir, "1")
  print("  a fresh process serves the .tflite (dynamic_int8): raw text -> "
        "label", flush=True)
  out = run.path("exports", f"{task}_tflite_predictions.json")
  run.tool(f"serve_{task}_tflite", [
      "-m", "examples.demo.lite_client",
      f"--model={run.exports[f'{task}_tflite']}", f"--tsv={tsv}",
      f"--label_names={labels}", f"--output_json={out}"])
  with open(out, encoding="utf-8") as f:
    lite = json.load(f)
  agreement = sum(a == b for a, b in zip(lite["labels"], served["labels"]))
  return {"precision": "dynamic_int8",
          "tflite_bytes": lite["file_bytes"],
          "saved_model_bytes": tools.dir_size(run.exports[task]),
          "tflite_batch1_p50_ms": lite["batch1_p50_ms"],
          "saved_model_batch1_p50_ms": served["batch1_p50_ms"],
          "label_agreement": agreement / len(served["labels"]),
          "accuracy": lite["accuracy"],
          "examples": lite["examples"]}


def _write_config(run, data, source, steps):
  """The fine-tuning experiment config (both runs use it); returns its path."""
  per_loop = min(50, max(10, steps // 6))
  config = {
      "model": source.model_section,
      "data": {"task_name": data.glue_task, "data_dir": data.data_dir,
               "spm_model_file": source.spm, "max_seq_length": context.SEQ_LENGTH,
               "global_batch_size": 32, "eval_batch_size": 64,
               "seed": run.settings["seed"]},
      "task": {"classifier_dropout": 0.1},
      "optimizer": {"name": "adamw",
                    "learning_rate": run.settings["finetune_learning_rate"],
                    "num_warmup_steps": max(1, steps // 10),
                    "weight_decay_rate": 0.01, "epsilon": 1e-6,
                    "clip_norm": 1.0},
      "trainer": {"train_steps": steps, "steps_per_loop": per_loop,
                  "checkpoint_interval": steps,
                  "eval_interval": max(per_loop,
                                       steps // run.settings["evals"]),
                  "max_to_keep": 2, "best_metric": "accuracy",
                  "best_metric_mode": "max"},
      "runtime": {"distribution_strategy": "default",
                  "mixed_precision_dtype": "float32",
                  "seed": run.settings["seed"]},
  }
  task = data.name
  config_path = run.path("finetune", f"{task}.yaml")
  tmp = config_path + ".tmp"
  with open(tmp, "w", encoding="utf-8") as f:
    f.write(f"# Written by examples/demo/demo.py: the {source.name} demo "
            f"model, fine-tuned on {task} (from the pretrained and from the "
            "random weights).\n")
    yaml.safe_dump(config, f, sort_keys=False)
  os.replace(tmp, config_path)
  return config_path
