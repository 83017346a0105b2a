"""Stage 3 of `make demo`: pretraining with run_pretraining, held-out MLM/SOP
accuracy before and after."""

import os

import numpy as np

from albert_tf.checkpoints import paths
from albert_tf.core import experiment_config
from albert_tf.tasks import pretraining
from examples.demo import context
from examples.demo import models
from examples.demo import plots
from examples.demo import tools


def pretrain(run):
  """Stage 3: held-out eval of the initial model, training, eval again."""
  steps = run.settings["pretrain_steps"]
  per_loop = min(50, max(10, steps // 8))
  overrides = ",".join([
      f"data.input_path={run.train_rec}",
      f"data.eval_input_path={run.held_rec}",
      f"model.vocab_size={run.settings['vocab_size']}",
      f"trainer.train_steps={steps}",
      f"trainer.steps_per_loop={per_loop}",
      f"trainer.checkpoint_interval={max(per_loop, steps // 2)}",
      "trainer.eval_interval="
      f"{max(per_loop, steps // run.settings['evals'])}",
      f"runtime.seed={run.settings['seed']}"])
  run.pretrain_overrides = overrides
  # The recipe as run_pretraining resolves it from the same file and overrides.
  recipe = experiment_config.load_experiment_config(
      pretraining.PretrainingExperimentConfig, [context.PRETRAIN_RECIPE],
      overrides)
  model_config = recipe.model
  init_dir = run.path("pretrain_init")
  print("  writing the randomly initialised model as the initial "
        "checkpoint ...", flush=True)
  # Beside, not inside, the eval run's directory: a run's own checkpoints
  # are the ones it wrote (its record vouches for them).
  init_ckpt, enc_params, all_params = models.write_initial_checkpoint(
      model_config, os.path.join(init_dir, "initial"), run.settings["seed"],
      context.SEQ_LENGTH, context.MAX_PREDICTIONS)
  print(f"  {run.rel(init_ckpt)}: {enc_params:,} encoder parameters, "
        f"{all_params:,} with the MLM/SOP heads", flush=True)
  run.summary["parameters"]["demo_encoder"] = enc_params
  run.summary["parameters"]["demo_pretrainer"] = all_params
  print("  held-out evaluation of the initial checkpoint:", flush=True)
  before = evaluate(run, "eval_initial", init_dir, [context.PRETRAIN_RECIPE],
                    overrides, init_ckpt)
  run.model_dir = run.path("pretrain")
  print(f"  training {steps} steps (batch {recipe.data.global_batch_size}, "
        f"seq {recipe.data.seq_length}, "
        f"recipe {os.path.basename(context.PRETRAIN_RECIPE)}) ...",
        flush=True)
  run.tool("run_pretraining", [
      "-m", "albert_tf.run_pretraining", f"--config_file={context.PRETRAIN_RECIPE}",
      f"--params_override={overrides}", f"--model_dir={run.model_dir}",
      f"--init_checkpoint={init_ckpt}", "--mode=train_and_eval"],
            show_filter=lambda l: not l.startswith(("saved checkpoint",
                                                    "done:")))
  if run.settings["quick"]:
    # --quick saves a process: the training run's last evaluation is the
    # final checkpoint's (same weights, same data).
    after = tools.read_metrics(run.model_dir, "eval")[-1]
    print("  held-out evaluation of the final checkpoint: the training "
          "run's last eval (--quick)", flush=True)
  else:
    after = _final_eval(run, overrides)
  _report_pretraining(run, before, after, steps)
  run.shown = context.ModelSource(
      name="this run's", checkpoint=os.path.join(run.model_dir, "checkpoints"),
      random_init=os.path.dirname(init_ckpt),
      model_section=context.model_section(run.model_dir), spm=run.spm,
      held_txt=run.held_txt, held_rec=run.held_rec)


def evaluate(run, name, model_dir, config_files, overrides, checkpoint):
  """`run_pretraining --mode=eval` of `checkpoint` in its own run dir (its
  metrics.jsonl line is not mixed with another run's)."""
  run.tool(name, [
      "-m", "albert_tf.run_pretraining",
      *[f"--config_file={f}" for f in config_files],
      f"--params_override={overrides}", f"--model_dir={model_dir}",
      f"--checkpoint={checkpoint}", "--mode=eval"])
  records = tools.read_metrics(model_dir, "eval")
  if not records:
    raise tools.ToolError(f"{name}: no eval record in {model_dir}/metrics.jsonl")
  return records[-1]


def _final_eval(run, overrides):
  print("  held-out evaluation of the final checkpoint:", flush=True)
  final = paths.latest_checkpoint(
      os.path.join(run.model_dir, paths.RUN_CHECKPOINT_SUBDIR))
  return evaluate(run, "eval_final", run.path("pretrain", "final_eval"),
                  [context.PRETRAIN_RECIPE], overrides, final)


EVAL_KEYS = ("masked_lm_accuracy", "sentence_order_accuracy",
             "masked_lm_loss", "sentence_order_loss")


def before_after(before, after):
  """Prints held-out eval records `before` / `after` side by side; returns
  them as {"before": {...}, "after": {...}}."""
  print(f"\n  {'held-out (' + str(int(after.get('eval_batches', 0))) + ' batches)':<28}"
        f"{'initial':>10}{'final':>10}")
  for k in EVAL_KEYS:
    print(f"  {k:<28}{before.get(k, float('nan')):>10.4f}"
          f"{after.get(k, float('nan')):>10.4f}")
  return {"before": {k: before.get(k) for k in EVAL_KEYS},
          "after": {k: after.get(k) for k in EVAL_KEYS}}


def _report_pretraining(run, before, after, steps):
  train = tools.read_metrics(run.model_dir, "train")
  run.summary["metrics"]["pretraining"] = {
      "steps": steps, **before_after(before, after),
      "final_train_loss": train[-1].get("loss") if train else None,
      "steps_per_sec": (round(float(np.mean([r["steps_per_sec"]
                                             for r in train[1:] or train])),
                              2) if train else None)}
  run.summary["curves_png"] = plots.pretraining_curves(
      run.model_dir, run.path("curves.png"),
      f"stage 3 pretraining ({os.path.basename(context.PRETRAIN_RECIPE)}, "
      f"{steps} steps): train and held-out eval")
