"""Stages 1-2 of `make demo`: the corpus, then data_prep's tools: sentences,
vocabulary, pretraining TFRecords."""

import json
import os
import shutil

from examples.demo import context
from examples.demo import corpus


def fetch_corpus(run):
  """Stage 1: the raw corpus text -> run.raw."""
  if run.settings["corpus"] in corpus.FETCHERS:
    src, origin = corpus.FETCHERS[run.settings["corpus"]](
        run.path("cache"), log=lambda m: print("  " + m, flush=True))
  elif run.settings["corpus"]:
    src, origin = os.path.abspath(run.settings["corpus"]), "user"
    if not os.path.isfile(src):
      raise SystemExit(f"ERROR: --corpus {src}: no such file")
    print(f"  using your corpus {src}")
  else:
    src, origin = corpus.fetch_botchan(
        run.path("cache"), log=lambda m: print("  " + m, flush=True))
  os.makedirs(run.path("corpus"), exist_ok=True)
  raw = run.path("corpus", "raw.txt")
  if src.endswith(".gz"):
    shutil.copyfile(src, raw + ".gz")
    raw += ".gz"
    stripped = False
  else:
    with open(src, encoding="utf-8", errors="replace") as f:
      text, stripped = corpus.strip_gutenberg(f.read())
    with open(raw, "w", encoding="utf-8") as f:
      f.write(text)
  if stripped:
    print("  dropped the Project Gutenberg header and licence text")
  run.raw = raw
  size = os.path.getsize(raw)
  print(f"  corpus: {run.rel(raw)} ({size:,} bytes, from {origin})")
  run.summary["corpus"] = {"source": src, "origin": origin,
                            "bytes": size,
                            "gutenberg_boilerplate_removed": stripped}


def build_data(run):
  """Stage 2: sentences, held-out split, vocabulary, pretraining TFRecords."""
  sentences = run.path("corpus", "sentences.txt")
  with open(run.raw, "rb") as f:
    head = f.read(200000)
  chapters = b"CHAPTER " in head or b"Chapter " in head
  args = ["-m", "data_prep.prepare_corpus", f"--input_file={run.raw}",
          f"--output_file={sentences}"]
  if chapters:
    args += ["--doc_boundary=regex", r"--doc_regex=^(CHAPTER|Chapter)\b",
             "--drop_boundary_lines"]
  run.tool("prepare_corpus", args)
  docs = corpus.read_documents(sentences)
  train_docs, held_docs = corpus.split_heldout(docs, run.settings["heldout_fraction"])
  run.train_txt = run.path("corpus", "train.txt")
  run.held_txt = run.path("corpus", "heldout.txt")
  corpus.write_documents(run.train_txt, train_docs)
  corpus.write_documents(run.held_txt, held_docs)
  n_train = sum(map(len, train_docs))
  n_held = sum(map(len, held_docs))
  print(f"  {len(docs)} documents, {n_train + n_held:,} sentences: "
        f"{n_train:,} for training, {n_held:,} held out (the last "
        f"{run.settings['heldout_fraction']:.0%} of each document)", flush=True)
  run.summary["corpus"].update(documents=len(docs),
                                train_sentences=n_train,
                                heldout_sentences=n_held)
  prefix = run.path("vocab", "spm")
  os.makedirs(run.path("vocab"), exist_ok=True)
  run.tool("train_sentencepiece", [
      "-m", "data_prep.train_sentencepiece", f"--input_file={run.train_txt}",
      f"--model_prefix={prefix}", f"--vocab_size={run.settings['vocab_size']}"],
            show_filter=lambda l: not l.startswith(("trainer_interface",
                                                    "unigram_model_trainer",
                                                    "normalizer.cc")))
  run.spm = prefix + ".model"
  run.train_rec = run.path("data", "train.tfrecord")
  run.held_rec = run.path("data", "heldout.tfrecord")
  common = [f"--spm_model_file={run.spm}",
            f"--max_seq_length={context.SEQ_LENGTH}",
            f"--max_predictions_per_seq={context.MAX_PREDICTIONS}",
            f"--random_seed={run.settings['seed']}",
            f"--num_workers={run.settings['num_workers']}",
            "--progress_interval=5", *context.MASKING_ARGS]
  run.tool("create_pretraining_data_train", [
      "-m", "data_prep.create_pretraining_data",
      f"--input_file={run.train_txt}", f"--output_file={run.train_rec}",
      f"--dupe_factor={run.settings['dupe_factor']}"] + common)
  run.tool("create_pretraining_data_heldout", [
      "-m", "data_prep.create_pretraining_data",
      f"--input_file={run.held_txt}", f"--output_file={run.held_rec}",
      "--dupe_factor=2"] + common)
  counts = {}
  for name, rec in (("train", run.train_rec), ("heldout", run.held_rec)):
    with open(rec + ".summary.json", encoding="utf-8") as f:
      info = json.load(f)
    counts[name] = info.get("instances", info)
  print(f"  instances: {counts}", flush=True)
  run.summary["data"] = {"instances": counts}
  print("  one training example, decoded (inspect_tfrecord):")
  run.tool("inspect_tfrecord", [
      "-m", "data_prep.inspect_tfrecord", f"--input_file={run.train_rec}",
      f"--spm_model_file={run.spm}", "--max_examples=1"])
