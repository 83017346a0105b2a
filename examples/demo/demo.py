r"""`make demo`: the whole albert_tf pipeline on a real corpus, on CPU.

Stages (each runs the project's command-line tools as subprocesses, the way a
user would, streaming their progress; full logs go to <output_dir>/logs/):

  1 corpus     botchan.txt from the sentencepiece 0.2.1 source distribution on
               PyPI (`pip download`, cached in <output_dir>/cache/), or --corpus
  2 data       prepare_corpus -> sentences/documents; held-out split;
               train_sentencepiece -> vocabulary; create_pretraining_data ->
               train + held-out TFRecords; inspect_tfrecord shows one example
  3 pretrain   run_pretraining (tiny CPU recipe): held-out MLM/SOP accuracy of
               the initial checkpoint (--mode=eval), training, then the final
               checkpoint (--mode=eval); plot_metrics -> curves.png
  4 export     export_savedmodel: encoder, pretraining and serving exports; a
               fresh process fills masks in held-out sentences
  5 finetune   run_classifier on an order task (GLUE/MRPC format) made from
               the held-out text: which part of a sentence comes first
               (--finetune_task); export_savedmodel (serving, text pair ->
               label); a fresh process classifies the dev pairs from raw text
  6 sizes      every released ALBERT size: parameter counts next to the
               paper's and BERT's, forward pass + pretraining loss
  7 summary    files, sizes, parameter counts, timings, metrics ->
               <output_dir>/summary.json

  python -m examples.demo.demo                    # ~10 min on 2 CPU cores
  python -m examples.demo.demo --quick --corpus=tests/testdata/botchan.txt
"""

import json
import os
import shutil
import sys
import time

from absl import app
from absl import flags
from absl import logging
import numpy as np
import yaml

from examples.demo import stages as ds

FLAGS = flags.FLAGS
flags.DEFINE_string("corpus", None,
                    "Your own English text file (plain or .gz) instead of "
                    "botchan.txt from PyPI. Chapters ('CHAPTER I' lines) "
                    "become documents, else blank lines end documents.")
flags.DEFINE_string("output_dir", "demo_output",
                    "Everything is written here (the download cache in "
                    "<output_dir>/cache/ survives reruns).")
flags.DEFINE_bool("quick", False,
                  "A small, fast run (tests): fewer steps, dupe factor 1, "
                  "only ALBERT-base in the model-size table.")
flags.DEFINE_bool("skip_model_sizes", False,
                  "Skip the table of released model sizes (stage 6).")
flags.DEFINE_list("sizes", None,
                  "Released sizes for stage 6 (default base,large,xlarge,"
                  "xxlarge; --quick: base).")
flags.DEFINE_integer("pretrain_steps", None,
                     "Pretraining steps (default 1500, a few minutes; the "
                     "tiny recipe has 400; --quick: 150). Under ~150 steps "
                     "the model is still in its early phase of predicting "
                     "only frequent pieces, and fine-tuning from it stays "
                     "at chance.")
flags.DEFINE_integer("finetune_steps", None,
                     "Fine-tuning steps (default 300; --quick: 150).")
flags.DEFINE_integer("dupe_factor", None,
                     "create_pretraining_data --dupe_factor for the training "
                     "data (default 10; --quick: 1).")
flags.DEFINE_integer("vocab_size", 1000,
                     "SentencePiece vocabulary size (the tiny recipe's 1000).")
flags.DEFINE_float("heldout_fraction", 0.2,
                   "Share of each document's sentences held out (evaluation, "
                   "fill-mask and the fine-tuning task).")
flags.DEFINE_enum("finetune_task", "split_sentence", sorted(ds.FINETUNE_TASKS),
                  "The stage-5 task, from the held-out text: split_sentence "
                  "(the two parts of a sentence, in order or swapped) or "
                  "sentence_order (two consecutive sentences, in order or "
                  "swapped; the tiny model stays at chance on it, see "
                  "docs/demo.md).")
flags.DEFINE_float("finetune_learning_rate", 5e-4,
                   "Fine-tuning learning rate (AdamW; the tiny model needs "
                   "more than the released models' 1e-5..5e-5).")
flags.DEFINE_integer("seed", 1234, "Seed of training and data generation.")
flags.DEFINE_integer("num_workers", 2,
                     "create_pretraining_data worker processes.")

SEQ_LENGTH = 64          # the tiny recipe's data.seq_length
MAX_PREDICTIONS = 10     # the tiny recipe's data.max_predictions_per_seq
OUTPUT_NAMES = ("corpus", "vocab", "data", "pretrain", "pretrain_init",
                "exports", "finetune", "logs", "summary.json",
                "model_sizes.json", "curves.png", "finetune_curves.png")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PRETRAIN_RECIPE = os.path.join(REPO, "albert_tf", "configs", "pretraining",
                               "albert_tiny_cpu.yaml")


# --- The pipeline ---------------------------------------------------------------------


class Demo:
  """Runs the stages in order, timing each; collects the summary."""

  def __init__(self, output_dir, settings):
    self.out = os.path.abspath(output_dir)
    self.s = settings
    self.t0 = time.time()
    self.timings = {}
    self.summary = {"settings": settings, "metrics": {}, "parameters": {}}
    self.stage_count = 7

  def path(self, *parts):
    return os.path.join(self.out, *parts)

  def rel(self, p):
    rel = os.path.relpath(p, os.getcwd())
    return p if rel.startswith("..") else rel

  def tool(self, name, args, **kw):
    return ds.run_tool(args, self.path("logs", f"{name}.log"), cwd=REPO, **kw)

  def stage(self, number, name, title, fn):
    elapsed = time.time() - self.t0
    bar = "=" * 78
    print(f"\n{bar}\n[stage {number}/{self.stage_count}] {title}   "
          f"(elapsed {elapsed // 60:.0f}:{elapsed % 60:04.1f})\n{bar}",
          flush=True)
    start, cpu = time.time(), ds.child_cpu_seconds()
    fn()
    took, cpu_took = time.time() - start, ds.child_cpu_seconds() - cpu
    self.timings[name] = {"seconds": round(took, 1),
                          "cpu_seconds": round(cpu_took, 1)}
    print(f"-- stage {number} ({name}) done in {took:.1f} s "
          f"(CPU {cpu_took:.1f} s)", flush=True)

  # 1 -------------------------------------------------------------------------
  def corpus(self):
    if self.s["corpus"]:
      src, origin = os.path.abspath(self.s["corpus"]), "user"
      if not os.path.isfile(src):
        raise SystemExit(f"ERROR: --corpus {src}: no such file")
      print(f"  using your corpus {src}")
    else:
      src, origin = ds.fetch_botchan(self.path("cache"),
                                     log=lambda m: print("  " + m, flush=True))
    os.makedirs(self.path("corpus"), exist_ok=True)
    raw = self.path("corpus", "raw.txt")
    if src.endswith(".gz"):
      shutil.copyfile(src, raw + ".gz")
      raw += ".gz"
      stripped = False
    else:
      with open(src, encoding="utf-8", errors="replace") as f:
        text, stripped = ds.strip_gutenberg(f.read())
      with open(raw, "w", encoding="utf-8") as f:
        f.write(text)
    if stripped:
      print("  dropped the Project Gutenberg header and licence text")
    self.raw = raw
    size = os.path.getsize(raw)
    print(f"  corpus: {self.rel(raw)} ({size:,} bytes, from {origin})")
    self.summary["corpus"] = {"source": src, "origin": origin,
                              "bytes": size,
                              "gutenberg_boilerplate_removed": stripped}

  # 2 -------------------------------------------------------------------------
  def data(self):
    sentences = self.path("corpus", "sentences.txt")
    with open(self.raw, "rb") as f:
      head = f.read(200000)
    chapters = b"CHAPTER " in head or b"Chapter " in head
    args = ["-m", "data_prep.prepare_corpus", f"--input_file={self.raw}",
            f"--output_file={sentences}"]
    if chapters:
      args += ["--doc_boundary=regex", r"--doc_regex=^(CHAPTER|Chapter)\b",
               "--drop_boundary_lines"]
    self.tool("prepare_corpus", args)
    docs = ds.read_documents(sentences)
    train_docs, held_docs = ds.split_heldout(docs, self.s["heldout_fraction"])
    self.train_txt = self.path("corpus", "train.txt")
    self.held_txt = self.path("corpus", "heldout.txt")
    ds.write_documents(self.train_txt, train_docs)
    ds.write_documents(self.held_txt, held_docs)
    n_train = sum(map(len, train_docs))
    n_held = sum(map(len, held_docs))
    print(f"  {len(docs)} documents, {n_train + n_held:,} sentences: "
          f"{n_train:,} for training, {n_held:,} held out (the last "
          f"{self.s['heldout_fraction']:.0%} of each document)", flush=True)
    self.summary["corpus"].update(documents=len(docs),
                                  train_sentences=n_train,
                                  heldout_sentences=n_held)
    prefix = self.path("vocab", "spm")
    os.makedirs(self.path("vocab"), exist_ok=True)
    self.tool("train_sentencepiece", [
        "-m", "data_prep.train_sentencepiece", f"--input_file={self.train_txt}",
        f"--model_prefix={prefix}", f"--vocab_size={self.s['vocab_size']}"],
              show_filter=lambda l: not l.startswith(("trainer_interface",
                                                      "unigram_model_trainer",
                                                      "normalizer.cc")))
    self.spm = prefix + ".model"
    self.train_rec = self.path("data", "train.tfrecord")
    self.held_rec = self.path("data", "heldout.tfrecord")
    common = [f"--spm_model_file={self.spm}",
              f"--max_seq_length={SEQ_LENGTH}",
              f"--max_predictions_per_seq={MAX_PREDICTIONS}",
              f"--random_seed={self.s['seed']}",
              f"--num_workers={self.s['num_workers']}",
              "--progress_interval=5"]
    self.tool("create_pretraining_data_train", [
        "-m", "data_prep.create_pretraining_data",
        f"--input_file={self.train_txt}", f"--output_file={self.train_rec}",
        f"--dupe_factor={self.s['dupe_factor']}"] + common)
    self.tool("create_pretraining_data_heldout", [
        "-m", "data_prep.create_pretraining_data",
        f"--input_file={self.held_txt}", f"--output_file={self.held_rec}",
        "--dupe_factor=2"] + common)
    counts = {}
    for name, rec in (("train", self.train_rec), ("heldout", self.held_rec)):
      with open(rec + ".summary.json", encoding="utf-8") as f:
        info = json.load(f)
      counts[name] = info.get("instances", info)
    print(f"  instances: {counts}", flush=True)
    self.summary["data"] = {"instances": counts}
    print("  one training example, decoded (inspect_tfrecord):")
    self.tool("inspect_tfrecord", [
        "-m", "data_prep.inspect_tfrecord", f"--input_file={self.train_rec}",
        f"--spm_model_file={self.spm}", "--max_examples=1"])

  # 3 -------------------------------------------------------------------------
  def _eval(self, name, model_dir, overrides):
    self.tool(name, [
        "-m", "albert_tf.run_pretraining", f"--config_file={PRETRAIN_RECIPE}",
        f"--params_override={overrides}", f"--model_dir={model_dir}",
        "--mode=eval"])
    records = ds.read_metrics(model_dir, "eval")
    if not records:
      raise ds.ToolError(f"{name}: no eval record in {model_dir}/metrics.jsonl")
    return records[-1]

  def pretrain(self):
    from albert_tf import AlbertConfig  # pylint: disable=g-import-not-at-top
    steps = self.s["pretrain_steps"]
    per_loop = min(50, max(10, steps // 8))
    overrides = ",".join([
        f"data.input_path={self.train_rec}",
        f"data.eval_input_path={self.held_rec}",
        f"model.vocab_size={self.s['vocab_size']}",
        f"trainer.train_steps={steps}",
        f"trainer.steps_per_loop={per_loop}",
        f"trainer.checkpoint_interval={max(per_loop, steps // 2)}",
        f"trainer.eval_interval={max(per_loop, steps // 6)}",
        f"runtime.seed={self.s['seed']}"])
    self.pretrain_overrides = overrides
    model_config = AlbertConfig.from_yaml(PRETRAIN_RECIPE).replace(
        vocab_size=self.s["vocab_size"])
    init_dir = self.path("pretrain_init")
    print("  writing the randomly initialised model as the initial "
          "checkpoint ...", flush=True)
    init_ckpt, enc_params, all_params = ds.write_initial_checkpoint(
        model_config, init_dir, self.s["seed"], SEQ_LENGTH, MAX_PREDICTIONS)
    print(f"  {self.rel(init_ckpt)}: {enc_params:,} encoder parameters, "
          f"{all_params:,} with the MLM/SOP heads", flush=True)
    self.summary["parameters"]["tiny_encoder"] = enc_params
    self.summary["parameters"]["tiny_pretrainer"] = all_params
    print("  held-out evaluation of the initial checkpoint:", flush=True)
    before = self._eval("eval_initial", init_dir, overrides)
    self.model_dir = self.path("pretrain")
    print(f"  training {steps} steps (batch 64, seq {SEQ_LENGTH}) ...",
          flush=True)
    self.tool("run_pretraining", [
        "-m", "albert_tf.run_pretraining", f"--config_file={PRETRAIN_RECIPE}",
        f"--params_override={overrides}", f"--model_dir={self.model_dir}",
        f"--init_checkpoint={init_ckpt}", "--mode=train_and_eval"],
              show_filter=lambda l: not l.startswith(("saved checkpoint",
                                                      "done:")))
    if self.s["quick"]:
      # --quick saves a process: the training run's last evaluation is the
      # final checkpoint's (same weights, same data).
      after = ds.read_metrics(self.model_dir, "eval")[-1]
      print("  held-out evaluation of the final checkpoint: the training "
            "run's last eval (--quick)", flush=True)
    else:
      after = self._final_eval(overrides)
    self._report_pretraining(before, after, steps)

  def _final_eval(self, overrides):
    print("  held-out evaluation of the final checkpoint:", flush=True)
    eval_dir = self.path("pretrain", "final_eval")
    os.makedirs(os.path.join(eval_dir, "checkpoints"), exist_ok=True)
    # A copy of the final checkpoint in its own run dir, so this eval's
    # metrics.jsonl line is not mixed with the training run's.
    self._copy_latest(os.path.join(self.model_dir, "checkpoints"),
                      os.path.join(eval_dir, "checkpoints"))
    return self._eval("eval_final", eval_dir, overrides)

  def _report_pretraining(self, before, after, steps):
    keys = ("masked_lm_accuracy", "sentence_order_accuracy",
            "masked_lm_loss", "sentence_order_loss")
    print(f"\n  {'held-out (' + str(int(after.get('eval_batches', 0))) + ' batches)':<28}"
          f"{'initial':>10}{'final':>10}")
    for k in keys:
      print(f"  {k:<28}{before.get(k, float('nan')):>10.4f}"
            f"{after.get(k, float('nan')):>10.4f}")
    train = ds.read_metrics(self.model_dir, "train")
    self.summary["metrics"]["pretraining"] = {
        "steps": steps,
        "before": {k: before.get(k) for k in keys},
        "after": {k: after.get(k) for k in keys},
        "final_train_loss": train[-1].get("loss") if train else None,
        "steps_per_sec": (round(float(np.mean([r["steps_per_sec"]
                                               for r in train[1:] or train])),
                                2) if train else None)}
    png = self.path("curves.png")
    self.tool("plot_metrics", ["-m", "albert_tf.plot_metrics",
                               f"--model_dir={self.model_dir}",
                               f"--output={png}"])
    self.summary["curves_png"] = png

  @staticmethod
  def _copy_latest(src_dir, dst_dir):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    latest = tf.train.latest_checkpoint(src_dir)
    base = os.path.basename(latest)
    for name in os.listdir(src_dir):
      if name.startswith(base + "."):
        shutil.copyfile(os.path.join(src_dir, name),
                        os.path.join(dst_dir, name))
    with open(os.path.join(dst_dir, "checkpoint"), "w",
              encoding="utf-8") as f:
      f.write(f'model_checkpoint_path: "{base}"\n'
              f'all_model_checkpoint_paths: "{base}"\n')

  # 4 -------------------------------------------------------------------------
  def export(self):
    config_file = os.path.join(self.model_dir, "experiment_config.yaml")
    ckpt = os.path.join(self.model_dir, "checkpoints")
    self.exports = {}
    for kind, extra in (("encoder", []), ("pretraining", []),
                        ("serving", ["--task=encoder",
                                     f"--seq_length={SEQ_LENGTH}"])):
      export_dir = self.path("exports", kind)
      self.tool(f"export_{kind}", [
          "-m", "albert_tf.export_savedmodel", f"--export_kind={kind}",
          f"--albert_config_file={config_file}", f"--checkpoint={ckpt}",
          f"--spm_model_file={self.spm}", f"--export_dir={export_dir}",
          "--version=1"] + extra)
      self.exports[kind] = os.path.join(export_dir, "1")
    print("  a fresh process (TensorFlow + TF Text only) loads the "
          "pretraining export and fills masked words of held-out sentences:",
          flush=True)
    out = self.path("exports", "fill_mask.json")
    self.tool("fill_mask", [
        os.path.join(REPO, "examples", "demo", "savedmodel_client.py"),
        "fill_mask", f"--export_dir={self.exports['pretraining']}",
        f"--sentences_file={self.held_txt}", f"--seq_length={SEQ_LENGTH}",
        f"--seed={self.s['seed']}", f"--output_json={out}"])
    with open(out, encoding="utf-8") as f:
      result = json.load(f)
    self.summary["metrics"]["fill_mask"] = {
        k: result[k] for k in ("sentences", "masked_words", "top1_accuracy",
                               "top5_accuracy")}

  # 5 -------------------------------------------------------------------------
  def finetune(self):
    task = self.s["finetune_task"]
    build_task, description = ds.FINETUNE_TASKS[task]
    data_dir = self.path("finetune", "data")
    counts = build_task(ds.read_documents(self.held_txt), data_dir,
                        seed=self.s["seed"])
    print(f"  task {task!r} from the held-out text (MRPC layout): "
          f"{description}\n  {counts}", flush=True)
    with open(os.path.join(data_dir, "train.tsv"), encoding="utf-8") as f:
      example = f.read().splitlines()[1].split("\t")
    print(f"  a training row: label {example[0]} "
          f"({ds.LABEL_NAMES[int(example[0])]})  A: {example[3]!r}  "
          f"B: {example[4]!r}", flush=True)
    with open(os.path.join(self.model_dir, "experiment_config.yaml"),
              encoding="utf-8") as f:
      model_section = yaml.safe_load(f)["model"]
    steps = self.s["finetune_steps"]
    per_loop = min(50, max(10, steps // 6))
    config = {
        "model": model_section,
        "data": {"task_name": "mrpc", "data_dir": data_dir,
                 "spm_model_file": self.spm, "max_seq_length": SEQ_LENGTH,
                 "global_batch_size": 32, "eval_batch_size": 64,
                 "seed": self.s["seed"]},
        "task": {"classifier_dropout": 0.1},
        "optimizer": {"name": "adamw",
                      "learning_rate": self.s["finetune_learning_rate"],
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
                    "seed": self.s["seed"]},
    }
    config_path = self.path("finetune", f"{task}.yaml")
    with open(config_path, "w", encoding="utf-8") as f:
      f.write("# Written by examples/demo/demo.py: the tiny pretrained model, "
              f"fine-tuned on {task}.\n")
      yaml.safe_dump(config, f, sort_keys=False)
    run_dir = self.path("finetune", "run")
    self.tool("run_classifier", [
        "-m", "albert_tf.run_classifier", f"--config_file={config_path}",
        f"--model_dir={run_dir}",
        f"--init_checkpoint={os.path.join(self.model_dir, 'checkpoints')}",
        "--mode=train_and_eval"])
    with open(os.path.join(run_dir, "eval_results.json"),
              encoding="utf-8") as f:
      results = json.load(f)
    png = self.path("finetune_curves.png")
    self.tool("plot_metrics_finetune", ["-m", "albert_tf.plot_metrics",
                                        f"--model_dir={run_dir}",
                                        f"--output={png}"])
    self.summary["finetune_curves_png"] = png
    print(f"  dev results (eval_results.json): "
          f"{json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in results.items()})}",
          flush=True)
    export_dir = self.path("exports", task)
    self.tool(f"export_{task}", [
        "-m", "albert_tf.export_savedmodel", "--export_kind=serving",
        "--task=classification", "--num_labels=2", "--num_text_fields=2",
        f"--label_names={','.join(ds.LABEL_NAMES)}",
        f"--albert_config_file={os.path.join(run_dir, 'experiment_config.yaml')}",
        f"--checkpoint={os.path.join(run_dir, 'checkpoints')}",
        f"--spm_model_file={self.spm}", f"--seq_length={SEQ_LENGTH}",
        f"--export_dir={export_dir}", "--version=1"])
    self.exports[task] = os.path.join(export_dir, "1")
    print("  a fresh process serves the export: raw text pair -> label",
          flush=True)
    out = self.path("exports", f"{task}_predictions.json")
    self.tool(f"serve_{task}", [
        os.path.join(REPO, "examples", "demo", "savedmodel_client.py"),
        "classify", f"--export_dir={self.exports[task]}",
        f"--tsv={os.path.join(data_dir, 'dev.tsv')}",
        f"--label_names={','.join(ds.LABEL_NAMES)}", f"--output_json={out}"])
    with open(out, encoding="utf-8") as f:
      served = json.load(f)
    self.summary["metrics"]["finetuning"] = {
        "task": task, "description": description, "steps": steps,
        "examples": counts,
        "dev": {k: v for k, v in results.items()},
        "majority_baseline": max(counts["dev"]["swapped"],
                                 counts["dev"]["examples"] -
                                 counts["dev"]["swapped"]) /
                             counts["dev"]["examples"],
        "served_accuracy": served["accuracy"]}

  # 6 -------------------------------------------------------------------------
  def sizes(self):
    rows = []
    sizes = self.s["sizes"]
    for i, size in enumerate(sizes, 1):
      print(f"  [{i}/{len(sizes)}] building ALBERT-{size} and running a "
            "forward pass + pretraining loss ...", flush=True)
      row = ds.run_size(size)
      rows.append(row)
      print(f"      {row['encoder_params']:,} encoder parameters, loss "
            f"{row['loss']:.3f} (ln 30000 + ln 2 = "
            f"{np.log(30000) + np.log(2):.3f} expected at init), "
            f"built in {row['build_seconds']} s, forward "
            f"{row['forward_seconds']} s", flush=True)
    print()
    print("  " + ds.format_table(rows).replace("\n", "\n  "))
    path = self.path("model_sizes.json")
    with open(path, "w", encoding="utf-8") as f:
      json.dump(rows, f, indent=2)
    self.summary["parameters"]["released_sizes"] = {
        r["size"]: {"encoder": r["encoder_params"],
                    "with_heads": r["pretrainer_params"],
                    "paper_millions": r["paper_millions"],
                    "bert_millions": r["bert_millions"]} for r in rows}

  # 7 -------------------------------------------------------------------------
  def write_summary(self):
    total = time.time() - self.t0
    self.summary["timings"] = self.timings
    self.summary["total_seconds"] = round(total, 1)
    self.summary["total_cpu_seconds"] = round(ds.child_cpu_seconds(), 1)
    files = {}
    for name in ("corpus", "vocab", "data", "pretrain", "exports",
                 "finetune", "logs", "curves.png", "finetune_curves.png",
                 "model_sizes.json"):
      p = self.path(name)
      if os.path.exists(p):
        files[name] = ds.dir_size(p)
    self.summary["files"] = files
    self.summary["exports"] = getattr(self, "exports", {})
    path = self.path("summary.json")
    with open(path, "w", encoding="utf-8") as f:
      json.dump(self.summary, f, indent=2, default=str)
    m = self.summary["metrics"]
    print(f"  output: {self.rel(self.out)}/")
    for name, size in files.items():
      print(f"    {name:<22}{ds.human_bytes(size):>10}")
    print("  key files:")
    for label, p in (("vocabulary", getattr(self, "spm", None)),
                     ("train TFRecords", getattr(self, "train_rec", None)),
                     ("held-out TFRecords", getattr(self, "held_rec", None)),
                     ("pretraining run", getattr(self, "model_dir", None)),
                     ("training curves", self.summary.get("curves_png")),
                     ("fine-tuning curves",
                      self.summary.get("finetune_curves_png"))):
      if p:
        print(f"    {label:<22}{self.rel(p)}")
    for kind, p in self.summary["exports"].items():
      print(f"    {'export ' + kind:<22}{self.rel(p)}")
    p = self.summary["parameters"]
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
    for name, t in self.timings.items():
      print(f"    {name:<12}{t['seconds']:>8.1f}{t['cpu_seconds']:>10.1f}")
    print(f"    {'total':<12}{total:>8.1f}"
          f"{self.summary['total_cpu_seconds']:>10.1f}")
    print(f"  wrote {self.rel(path)}")


def settings_from_flags():
  quick = FLAGS.quick
  pick = lambda value, full, fast: value if value is not None else (
      fast if quick else full)
  return {
      "quick": quick,
      "corpus": FLAGS.corpus,
      "pretrain_steps": pick(FLAGS.pretrain_steps, 1500, 150),
      "finetune_steps": pick(FLAGS.finetune_steps, 300, 150),
      "dupe_factor": pick(FLAGS.dupe_factor, 10, 1),
      "vocab_size": FLAGS.vocab_size,
      "heldout_fraction": FLAGS.heldout_fraction,
      "finetune_task": FLAGS.finetune_task,
      "finetune_learning_rate": FLAGS.finetune_learning_rate,
      "seed": FLAGS.seed,
      "num_workers": FLAGS.num_workers,
      "sizes": ([] if FLAGS.skip_model_sizes else
                pick(FLAGS.sizes, ["base", "large", "xlarge", "xxlarge"],
                     ["base"])),
  }


def main(argv):
  del argv
  settings = settings_from_flags()
  logging.set_verbosity(logging.WARNING)  # in-process TF steps stay quiet
  for size in settings["sizes"]:
    if size not in ds.PAPER_MILLIONS:
      raise app.UsageError(f"--sizes: unknown size {size!r}; expected "
                           f"{sorted(ds.PAPER_MILLIONS)}")
  demo = Demo(FLAGS.output_dir, settings)
  os.makedirs(demo.out, exist_ok=True)
  ds.clean_output_dir(demo.out, OUTPUT_NAMES)
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  print(f"albert_tf demo: TensorFlow {tf.__version__}, {os.cpu_count()} CPU "
        f"core(s); output -> {demo.rel(demo.out)}/; settings "
        f"{json.dumps({k: v for k, v in settings.items() if k != 'sizes'})}",
        flush=True)
  stages = [("corpus", "corpus: a real English novel from PyPI",
             demo.corpus),
            ("data", "data: sentences, vocabulary, pretraining TFRecords",
             demo.data),
            ("pretrain", "pretraining (tiny CPU recipe), held-out eval "
             "before/after", demo.pretrain),
            ("export", "SavedModel exports; fill-mask in a fresh process",
             demo.export),
            ("finetune", f"fine-tuning ({settings['finetune_task']}), eval, "
             "export, serve",
             demo.finetune)]
  if settings["sizes"]:
    stages.append(("sizes", "released ALBERT sizes: parameters, forward + "
                   "loss", demo.sizes))
  stages.append(("summary", "summary", demo.write_summary))
  demo.stage_count = len(stages)
  try:
    for i, (name, title, fn) in enumerate(stages, 1):
      demo.stage(i, name, title, fn)
  except ds.ToolError as e:
    print(f"\nDEMO FAILED: {e}", file=sys.stderr, flush=True)
    return 1
  return 0


if __name__ == "__main__":
  sys.exit(app.run(main))
