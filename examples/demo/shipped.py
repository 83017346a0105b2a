"""The model `make demo` ships: the small ALBERT that `make demo
DEMO_ARGS=--long` pretrains (60,000 steps on 50,000 IMDb movie reviews, an
8000-piece vocabulary), kept under examples/demo/pretrained_imdb/.

The default demo's own pretraining (3000 steps on botchan) is too short to
leave the masked-LM plateau (docs/demo.md), so after running the whole
pipeline it evaluates, fills masks with and fine-tunes this model instead,
saying which figures come from which. MANIFEST.json beside the files records
the command, date, machine, data and figures of the run that wrote them, and
each file's sha256 (checked before use: `verify`).

  weights.index, weights.data-00000-of-00001   the final pretraining weights
                                 (MLM/SOP heads included, no optimizer state;
                                 the checkpoint carries its own identity:
                                 model config, vocabulary sha256, updates)
  spm.model                      the SentencePiece vocabulary it was trained with
  model.yaml                     its model config (the demo recipe's)
  heldout.txt.gz                 the held-out sentences (the last 5% of each
                                 review of 30 sentences or more, never trained
                                 on): evaluation and fill-mask come from them
"""

import gzip
import json
import os
import shutil
import time

import yaml

from albert_tf import AlbertConfig
from albert_toolkit import output_files
from examples.demo import context
from examples.demo import corpus
from examples.demo import models
from examples.demo import stage_export
from examples.demo import stage_pretrain

BUNDLE_DIR = os.path.join(context.REPO, "examples", "demo", "pretrained_imdb")
MANIFEST = "MANIFEST.json"
WEIGHTS = "weights"
FILES = (f"{WEIGHTS}.index", f"{WEIGHTS}.data-00000-of-00001", "spm.model",
         "model.yaml", "heldout.txt.gz")


def verify(bundle_dir=BUNDLE_DIR):
  """The bundle's manifest, after checking every file against its sha256
  (a one-line error names the file that is missing or differs)."""
  path = os.path.join(bundle_dir, MANIFEST)
  if not os.path.isfile(path):
    raise ValueError(f"{path}: missing (the shipped model's record)")
  with open(path, encoding="utf-8") as f:
    manifest = json.load(f)
  recorded = manifest.get("sha256", {})
  if sorted(recorded) != sorted(FILES):
    raise ValueError(f"{path}: sha256 lists {sorted(recorded)}, expected "
                     f"{sorted(FILES)}")
  for name in FILES:
    file = os.path.join(bundle_dir, name)
    if not os.path.isfile(file):
      raise ValueError(f"{file}: missing from the shipped model")
    if output_files.file_sha256(file) != recorded[name]:
      raise ValueError(f"{file}: sha256 differs from {MANIFEST}'s; the "
                       "shipped model was changed (git checkout it back)")
  return manifest


def write_bundle(run, bundle_dir):
  """--long: writes this run's final model as a bundle (what is shipped)
  with its manifest; the figures are the run's summary metrics."""
  best = os.path.join(run.model_dir, "best")
  with open(os.path.join(best, "best.json"), encoding="utf-8") as f:
    best_step = json.load(f)["step"]
  steps = run.settings["pretrain_steps"]
  if best_step != steps:
    raise ValueError(f"{best}: the best checkpoint is step {best_step}, not "
                     f"the final step {steps}; the bundle ships the final "
                     "weights the summary evaluated")
  tmp = bundle_dir + ".tmp"
  shutil.rmtree(tmp, ignore_errors=True)
  os.makedirs(tmp)
  for suffix in (".index", ".data-00000-of-00001"):
    shutil.copyfile(os.path.join(best, "ckpt" + suffix),
                    os.path.join(tmp, WEIGHTS + suffix))
  shutil.copyfile(run.spm, os.path.join(tmp, "spm.model"))
  with open(os.path.join(tmp, "model.yaml"), "w", encoding="utf-8") as f:
    yaml.safe_dump(context.model_section(run.model_dir), f, sort_keys=False)
  with open(run.held_txt, "rb") as src, gzip.GzipFile(
      os.path.join(tmp, "heldout.txt.gz"), "wb", mtime=0) as dst:
    shutil.copyfileobj(src, dst)
  metrics = run.summary["metrics"]
  manifest = {
      "what": "the demo recipe's ALBERT (albert_demo_cpu.yaml) pretrained "
              f"{steps} steps by `make demo DEMO_ARGS=--long`",
      "command": "make demo DEMO_ARGS=--long",
      "date": time.strftime("%Y-%m-%d", time.gmtime()),
      "machine": models.machine(),
      "seed": run.settings["seed"],
      "data": {k: run.summary["corpus"].get(k) for k in (
          "origin", "bytes", "documents", "train_sentences",
          "heldout_sentences")} | {
          "corpus": run.settings["corpus"],
          "heldout_fraction": run.settings["heldout_fraction"],
          "dupe_factor": run.settings["dupe_factor"],
          "instances": run.summary["data"]["instances"]},
      "figures": {"pretraining": metrics.get("pretraining"),
                  "fill_mask": metrics.get("fill_mask"),
                  "finetuning": {k: metrics["finetuning"].get(k) for k in (
                      "task", "steps", "pretraining_gain", "pretrained",
                      "random_init", "majority_baseline")}
                  if "finetuning" in metrics else None,
                  "real_task": run.summary.get("real_task")},
      "sha256": {name: output_files.file_sha256(os.path.join(tmp, name))
                 for name in FILES},
  }
  with open(os.path.join(tmp, MANIFEST), "w", encoding="utf-8") as f:
    json.dump(manifest, f, indent=2, default=str)
    f.write("\n")
  shutil.rmtree(bundle_dir, ignore_errors=True)
  os.replace(tmp, bundle_dir)
  print(f"  wrote the bundle {run.rel(bundle_dir)} (copy it to "
        f"{os.path.relpath(BUNDLE_DIR, context.REPO)}/ to ship it)",
        flush=True)
  return manifest


def unpack(run, bundle_dir=BUNDLE_DIR):
  """Checks the bundle and lays out what the stages need under
  <output_dir>/shipped/: the held-out text, the held-out TFRecords (made with
  the bundle's vocabulary, as --long made them) and the random initial
  weights the --long run started from (same function, config and seed)."""
  manifest = verify(bundle_dir)
  print(f"  {os.path.relpath(bundle_dir, context.REPO)}/: "
        f"{manifest['what']}; {manifest['date']}, {manifest['machine']}; "
        "every file matches its sha256 in MANIFEST.json", flush=True)
  out = run.path("shipped")
  os.makedirs(out, exist_ok=True)
  held_txt = os.path.join(out, "heldout.txt")
  with gzip.open(os.path.join(bundle_dir, "heldout.txt.gz"), "rb") as src, \
      open(held_txt, "wb") as dst:
    shutil.copyfileobj(src, dst)
  spm = os.path.join(bundle_dir, "spm.model")
  held_rec = os.path.join(out, "heldout.tfrecord")
  run.tool("create_pretraining_data_shipped", [
      "-m", "data_prep.create_pretraining_data", f"--input_file={held_txt}",
      f"--output_file={held_rec}", "--dupe_factor=2",
      f"--spm_model_file={spm}", f"--max_seq_length={context.SEQ_LENGTH}",
      f"--max_predictions_per_seq={context.MAX_PREDICTIONS}",
      f"--random_seed={manifest['seed']}",
      f"--num_workers={run.settings['num_workers']}",
      *context.MASKING_ARGS])
  with open(os.path.join(bundle_dir, "model.yaml"), encoding="utf-8") as f:
    model_section = yaml.safe_load(f)
  init_ckpt, _, _ = models.write_initial_checkpoint(
      AlbertConfig.from_dict(model_section), os.path.join(out, "initial"),
      manifest["seed"], context.SEQ_LENGTH, context.MAX_PREDICTIONS)
  docs = corpus.read_documents(held_txt)
  print(f"  held-out text: {len(docs)} documents, "
        f"{sum(map(len, docs)):,} sentences", flush=True)
  return manifest, context.ModelSource(
      name="shipped", checkpoint=os.path.join(bundle_dir, WEIGHTS),
      random_init=os.path.dirname(init_ckpt), model_section=model_section,
      spm=spm, held_txt=held_txt, held_rec=held_rec)


def stage(run):
  """The shipped model, after this run's pipeline: checked, its held-out
  MLM/SOP accuracy (and that of the random weights it started from; with
  --quick, as MANIFEST.json records it), its pretraining export and
  fill-mask in a fresh process. The fine-tuning stage then starts from it
  (run.shown)."""
  manifest, source = unpack(run)
  model_yaml = os.path.join(BUNDLE_DIR, "model.yaml")
  files = [context.PRETRAIN_RECIPE, model_yaml]
  overrides = f"data.eval_input_path={source.held_rec}"
  recorded = manifest["figures"]["pretraining"]
  if run.settings["quick"]:
    # --quick saves an evaluation: the random weights are the --long run's
    # own (same config and seed), whose figures on these records it recorded.
    before = recorded["before"]
    print("  held-out evaluation of the random weights it started from: as "
          "MANIFEST.json records it (--quick); of the shipped weights:",
          flush=True)
  else:
    print("  held-out evaluation of the random weights it started from and "
          "of the shipped weights:", flush=True)
    before = stage_pretrain.evaluate(run, "eval_shipped_initial",
                                     run.path("shipped", "eval_initial"),
                                     files, overrides, source.random_init)
  after = stage_pretrain.evaluate(run, "eval_shipped",
                                  run.path("shipped", "eval"), files,
                                  overrides, source.checkpoint)
  pretraining = {"steps": recorded["steps"],
                 **stage_pretrain.before_after(before, after)}
  export_dir = stage_export.export_model(
      run, "pretraining", run.path("exports", "shipped_pretraining"),
      model_yaml, source.checkpoint, source.spm,
      log_name="export_shipped_pretraining")
  run.exports["shipped_pretraining"] = export_dir
  run.summary["metrics"]["shipped"] = {
      "bundle": os.path.relpath(BUNDLE_DIR, context.REPO),
      "what": manifest["what"], "date": manifest["date"],
      "machine": manifest["machine"], "pretraining": pretraining,
      "fill_mask": stage_export.fill_mask(run, "fill_mask_shipped",
                                          export_dir, source.held_txt),
      "recorded": manifest["figures"]}
  run.shown = source
