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
                                   f"--seq_length={context.SEQ_LENGTH}"])):
    export_dir = run.path("exports", kind)
    run.tool(f"export_{kind}", [
        "-m", "albert_tf.export_savedmodel", f"--export_kind={kind}",
        f"--config_file={config_file}", f"--checkpoint={ckpt}",
        f"--spm_model_file={run.spm}", f"--export_dir={export_dir}",
        "--version=1"] + extra)
    run.exports[kind] = os.path.join(export_dir, "1")
  print("  a fresh process (TensorFlow + TF Text only) loads the "
        "pretraining export and fills masked words of held-out sentences:",
        flush=True)
  out = run.path("exports", "fill_mask.json")
  run.tool("fill_mask", [
      os.path.join(context.REPO, "examples", "demo", "savedmodel_client.py"),
      "fill_mask", f"--export_dir={run.exports['pretraining']}",
      f"--sentences_file={run.held_txt}", f"--seq_length={context.SEQ_LENGTH}",
      f"--seed={run.settings['seed']}", f"--output_json={out}"])
  with open(out, encoding="utf-8") as f:
    result = json.load(f)
  run.summary["metrics"]["fill_mask"] = {
      k: result[k] for k in ("sentences", "masked_words", "top1_accuracy",
                             "top5_accuracy")}
