"""Stage 4 of `make demo`: SavedModel exports and fill-mask from the
pretraining export in a fresh process."""

import json
import os

from examples.demo import context


def export(run):
  """Stage 4: encoder, pretraining and serving exports; fill-mask from the
  pretraining export in a fresh process."""
  config_file = os.path.join(run.model_dir, "experiment_config.yaml")
  ckpt = os.path.join(run.model_dir, "checkpoints")
  run.exports = {}
  for kind, extra in (("encoder", []), ("pretraining", []),
                      ("serving", ["--task=encoder",
                                   f"--max_seq_length={context.SEQ_LENGTH}"])):
    run.exports[kind] = export_model(run, kind, run.path("exports", kind),
                                     config_file, ckpt, run.spm, extra)
  run.summary["metrics"]["fill_mask"] = fill_mask(
      run, "fill_mask", run.exports["pretraining"], run.held_txt)


def export_model(run, kind, export_dir, config_file, checkpoint, spm,
                 extra=(), log_name=None):
  """export_savedmodel --export_kind=`kind` -> the version directory."""
  run.tool(log_name or f"export_{kind}", [
      "-m", "albert_tf.export_savedmodel", f"--export_kind={kind}",
      f"--config_file={config_file}", f"--checkpoint={checkpoint}",
      f"--spm_model_file={spm}", f"--export_dir={export_dir}",
      "--version=1", *extra])
  return os.path.join(export_dir, "1")


def fill_mask(run, name, export_dir, held_txt):
  """A fresh process (TensorFlow + TF Text only) loads pretraining export
  `export_dir` and fills masked words of the held-out sentences; returns
  its top-1 / top-5 accuracy."""
  print("  a fresh process (TensorFlow + TF Text only) loads the "
        "pretraining export and fills masked words of held-out sentences:",
        flush=True)
  out = run.path("exports", f"{name}.json")
  run.tool(name, [
      os.path.join(context.REPO, "examples", "demo", "savedmodel_client.py"),
      "fill_mask", f"--export_dir={export_dir}",
      f"--sentences_file={held_txt}", f"--seq_length={context.SEQ_LENGTH}",
      f"--seed={run.settings['seed']}", f"--output_json={out}"])
  with open(out, encoding="utf-8") as f:
    result = json.load(f)
  return {k: result[k] for k in ("sentences", "masked_words", "top1_accuracy",
                                 "top5_accuracy")}
