"""Stage 5 of `make demo`: fine-tuning on an order task made from held-out
text, its export, and serving it from raw text in a fresh process."""

import json
import os

import yaml

from examples.demo import context
from examples.demo import corpus
from examples.demo import order_tasks


def finetune(run):
  """Stage 5: an order task from held-out text: fine-tune, evaluate,
  export, serve from raw text in a fresh process."""
  task = run.settings["finetune_task"]
  build_task, description = order_tasks.FINETUNE_TASKS[task]
  data_dir = run.path("finetune", "data")
  counts = build_task(corpus.read_documents(run.held_txt), data_dir,
                      seed=run.settings["seed"])
  print(f"  task {task!r} from the held-out text (MRPC layout): "
        f"{description}\n  {counts}", flush=True)
  with open(os.path.join(data_dir, "train.tsv"), encoding="utf-8") as f:
    example = f.read().splitlines()[1].split("\t")
  print(f"  a training row: label {example[0]} "
        f"({order_tasks.LABEL_NAMES[int(example[0])]})  A: {example[3]!r}  "
        f"B: {example[4]!r}", flush=True)
  with open(os.path.join(run.model_dir, "experiment_config.yaml"),
            encoding="utf-8") as f:
    model_section = yaml.safe_load(f)["model"]
  steps = run.settings["finetune_steps"]
  per_loop = min(50, max(10, steps // 6))
  config = {
      "model": model_section,
      "data": {"task_name": "mrpc", "data_dir": data_dir,
               "spm_model_file": run.spm, "max_seq_length": context.SEQ_LENGTH,
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
                  "eval_interval": max(per_loop, steps // 3),
                  "max_to_keep": 2, "best_metric": "accuracy",
                  "best_metric_mode": "max"},
      "runtime": {"distribution_strategy": "default",
                  "mixed_precision_dtype": "float32",
                  "seed": run.settings["seed"]},
  }
  config_path = run.path("finetune", f"{task}.yaml")
  with open(config_path, "w", encoding="utf-8") as f:
    f.write("# Written by examples/demo/demo.py: the tiny pretrained model, "
            f"fine-tuned on {task}.\n")
    yaml.safe_dump(config, f, sort_keys=False)
  run_dir = run.path("finetune", "run")
  run.tool("run_classifier", [
      "-m", "albert_tf.run_classifier", f"--config_file={config_path}",
      f"--model_dir={run_dir}",
      f"--init_checkpoint={os.path.join(run.model_dir, 'checkpoints')}",
      "--mode=train_and_eval"])
  with open(os.path.join(run_dir, "eval_results.json"),
            encoding="utf-8") as f:
    results = json.load(f)
  png = run.path("finetune_curves.png")
  run.tool("plot_metrics_finetune", ["-m", "albert_tf.plot_metrics",
                                      f"--model_dir={run_dir}",
                                      f"--output={png}"])
  run.summary["finetune_curves_png"] = png
  print(f"  dev results (eval_results.json): "
        f"{json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in results.items()})}",
        flush=True)
  export_dir = run.path("exports", task)
  run.tool(f"export_{task}", [
      "-m", "albert_tf.export_savedmodel", "--export_kind=serving",
      "--task=classification", "--num_labels=2", "--num_text_fields=2",
      f"--label_names={','.join(order_tasks.LABEL_NAMES)}",
      f"--config_file={os.path.join(run_dir, 'experiment_config.yaml')}",
      f"--checkpoint={os.path.join(run_dir, 'checkpoints')}",
      f"--spm_model_file={run.spm}", f"--seq_length={context.SEQ_LENGTH}",
      f"--export_dir={export_dir}", "--version=1"])
  run.exports[task] = os.path.join(export_dir, "1")
  print("  a fresh process serves the export: raw text pair -> label",
        flush=True)
  out = run.path("exports", f"{task}_predictions.json")
  run.tool(f"serve_{task}", [
      os.path.join(context.REPO, "examples", "demo", "savedmodel_client.py"),
      "classify", f"--export_dir={run.exports[task]}",
      f"--tsv={os.path.join(data_dir, 'dev.tsv')}",
      f"--label_names={','.join(order_tasks.LABEL_NAMES)}", f"--output_json={out}"])
  with open(out, encoding="utf-8") as f:
    served = json.load(f)
  run.summary["metrics"]["finetuning"] = {
      "task": task, "description": description, "steps": steps,
      "examples": counts,
      "dev": {k: v for k, v in results.items()},
      "majority_baseline": max(counts["dev"]["swapped"],
                               counts["dev"]["examples"] -
                               counts["dev"]["swapped"]) /
                           counts["dev"]["examples"],
      "served_accuracy": served["accuracy"]}
