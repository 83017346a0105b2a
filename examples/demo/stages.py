"""Building blocks of `make demo` (examples/demo/demo.py).

Everything here is plain Python or a small TF step; the real work is done by
the command-line tools, which the demo runs as subprocesses (`run_tool`), so
the demo also proves the CLIs work the way docs/*.md say.
"""

import glob
import json
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import tarfile
import time

import numpy as np

# --- Corpus ---------------------------------------------------------------------

SENTENCEPIECE_SDIST = "sentencepiece==0.2.1"
BOTCHAN_MEMBER = "sentencepiece-0.2.1/test/botchan.txt"
CHAPTER_REGEX = r"^CHAPTER [IVXLC]+\.?$"


def fetch_botchan(cache_dir, log=print):
  """botchan.txt from the sentencepiece sdist on PyPI, cached in `cache_dir`.

  `pip download` goes through the user's pip configuration (index, proxy), so
  the corpus comes from the package registry, not the network at large.
  """
  os.makedirs(cache_dir, exist_ok=True)
  target = os.path.join(cache_dir, "botchan.txt")
  if os.path.exists(target) and os.path.getsize(target) > 0:
    log(f"cached: {target}")
    return target, "cache"
  tarballs = glob.glob(os.path.join(cache_dir, "sentencepiece-0.2.1.tar.gz"))
  if not tarballs:
    cmd = [sys.executable, "-m", "pip", "download", "--no-binary", ":all:",
           "--no-deps", "--disable-pip-version-check", SENTENCEPIECE_SDIST,
           "-d", cache_dir]
    log("$ " + " ".join(cmd))
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, check=False)
    for line in proc.stdout.splitlines()[-3:]:
      log("  | " + line)
    tarballs = glob.glob(os.path.join(cache_dir,
                                      "sentencepiece-0.2.1.tar.gz"))
    if proc.returncode or not tarballs:
      raise RuntimeError(
          "could not download the sentencepiece 0.2.1 source distribution "
          f"from PyPI (pip exit code {proc.returncode}); run with "
          "--corpus=PATH to use a local text file instead")
  with tarfile.open(tarballs[0], "r:gz") as tar:
    member = tar.extractfile(BOTCHAN_MEMBER)
    if member is None:
      raise RuntimeError(f"{tarballs[0]} has no {BOTCHAN_MEMBER}")
    data = member.read()
  tmp = target + ".tmp"
  with open(tmp, "wb") as f:
    f.write(data)
  os.replace(tmp, target)
  log(f"extracted {BOTCHAN_MEMBER} ({len(data):,} bytes) -> {target}")
  return target, "pypi"


def strip_gutenberg(text):
  """Drops Project Gutenberg's header and licence (not part of the novel).

  Returns (text, stripped?). Text without the markers is returned unchanged.
  """
  lines = text.splitlines()
  start = next((i for i, l in enumerate(lines)
                if re.match(CHAPTER_REGEX, l.strip())), None)
  end = next((i for i, l in enumerate(lines)
              if l.startswith("End of Project Gutenberg") or
              l.startswith("*** END OF")), None)
  if start is None or end is None or end <= start:
    return text, False
  return "\n".join(lines[start:end]) + "\n", True


def read_documents(path):
  """prepare_corpus output -> [[sentence, ...], ...] (blank line = new doc)."""
  docs, doc = [], []
  with open(path, encoding="utf-8") as f:
    for line in f:
      line = line.strip()
      if line:
        doc.append(line)
      elif doc:
        docs.append(doc)
        doc = []
  if doc:
    docs.append(doc)
  return docs


def write_documents(path, docs):
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n\n".join("\n".join(d) for d in docs if d) + "\n")


def split_heldout(docs, fraction):
  """The last `fraction` of each document is held out (contiguous text).

  Holding out a tail of every document (rather than whole documents) works
  for corpora of any number of documents, including one.
  """
  train, heldout = [], []
  for doc in docs:
    n = int(round(len(doc) * fraction))
    if len(doc) >= 4 and n >= 2:
      train.append(doc[:-n])
      heldout.append(doc[-n:])
    else:
      train.append(doc)
  if not heldout:
    raise ValueError("the corpus is too small to hold out text: need "
                     "documents of at least 4 sentences")
  return train, heldout


# --- The fine-tuning tasks -----------------------------------------------------

# MRPC's TSV layout: the demo tasks reuse run_classifier's `mrpc` reader
# (text pair, labels 0/1, accuracy + F1).
MRPC_HEADER = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"
LABEL_NAMES = ("in_order", "swapped")


def _clean(s):
  return " ".join(s.replace("\t", " ").split())


def _split_by_position(items, dev_fraction):
  """(train, dev): the last `dev_fraction` of `items` is dev."""
  cut = len(items) - int(round(len(items) * dev_fraction))
  return items[:cut], items[cut:]


def _ordered_rows(first, second, row_id, both_orders, rng):
  """MRPC rows for a (first, second) text pair; label 1 = swapped."""
  in_order = ("0", f"{row_id}a", f"{row_id}b", first, second)
  swapped = ("1", f"{row_id}b", f"{row_id}a", second, first)
  if both_orders:
    return [in_order, swapped]
  return [swapped if rng.random() < 0.5 else in_order]


def write_mrpc_task(data_dir, train_rows, dev_rows):
  """Writes train.tsv and dev.tsv (MRPC layout); returns their counts."""
  if len(train_rows) < 8 or len(dev_rows) < 4:
    raise ValueError(f"too few examples for the fine-tuning task "
                     f"({len(train_rows)} train, {len(dev_rows)} dev rows); "
                     "use a larger corpus or --heldout_fraction")
  os.makedirs(data_dir, exist_ok=True)
  counts = {}
  for split, rows in (("train", train_rows), ("dev", dev_rows)):
    with open(os.path.join(data_dir, f"{split}.tsv"), "w",
              encoding="utf-8") as f:
      f.write(MRPC_HEADER + "\n")
      for row in rows:
        f.write("\t".join(row) + "\n")
    counts[split] = {"examples": len(rows),
                     "swapped": sum(r[0] == "1" for r in rows)}
  return counts


def sentence_pairs(docs, min_words=3):
  """Consecutive sentence pairs (a, b) inside documents."""
  pairs = []
  for doc in docs:
    for a, b in zip(doc, doc[1:]):
      a, b = _clean(a), _clean(b)
      if len(a.split()) >= min_words and len(b.split()) >= min_words:
        pairs.append((a, b))
  return pairs


def write_sentence_order_task(docs, data_dir, dev_fraction=0.25, seed=0):
  """Sentence order of two consecutive sentences (MRPC format).

  Each document's pairs are split by position (the first part trains, the
  rest is dev, so no sentence is shared between train and dev pairs other
  than at one boundary). Label 1 = the two sentences are swapped: train gets
  both orders of each pair (balanced labels), dev one order at random.
  """
  rng = random.Random(seed)
  train_rows, dev_rows = [], []
  for d, doc in enumerate(docs):
    train, dev = _split_by_position(
        list(enumerate(sentence_pairs([doc]))), dev_fraction)
    for rows, part, both in ((train_rows, train, True),
                             (dev_rows, dev, False)):
      for i, (a, b) in part:
        rows += _ordered_rows(a, b, f"{d}-{i}", both, rng)
  rng.shuffle(train_rows)
  return write_mrpc_task(data_dir, train_rows, dev_rows)


def sentence_halves(sentence, num_cuts, rng):
  """Up to `num_cuts` (head, tail) splits of `sentence` at word boundaries.

  Cuts fall in the middle half of the words, so both parts have some text.
  """
  words = sentence.split()
  lo, hi = max(1, len(words) // 4), max(1, (3 * len(words)) // 4)
  cuts = sorted(rng.sample(range(lo, hi + 1), min(num_cuts, hi + 1 - lo)))
  return [(" ".join(words[:c]), " ".join(words[c:])) for c in cuts]


def write_split_sentence_task(docs, data_dir, dev_fraction=0.25,
                              train_cuts=4, min_words=6, seed=0):
  """Order of the two parts of one sentence (MRPC format).

  Every sentence of at least `min_words` words is cut at a word boundary
  into (head, tail); label 1 = shown swapped as (tail, head). Within each
  document the first sentences train and the last `dev_fraction` are dev, so
  no sentence is in both. Train: `train_cuts` different cuts per sentence,
  each in both orders; dev: one cut per sentence in both orders, so the
  majority baseline is exactly 0.5.

  Unlike the order of two whole sentences (which needs an understanding of
  the story no tiny model gets from one novel; docs/demo.md), this is
  learnable in minutes: where a sentence starts and ends and how its
  phrases run are visible in the text itself.
  """
  rng = random.Random(seed)
  train_rows, dev_rows = [], []
  for d, doc in enumerate(docs):
    sentences = [_clean(s) for s in doc]
    sentences = [s for s in sentences if len(s.split()) >= min_words]
    train, dev = _split_by_position(list(enumerate(sentences)), dev_fraction)
    for rows, part, cuts in ((train_rows, train, train_cuts),
                             (dev_rows, dev, 1)):
      for i, sentence in part:
        for head, tail in sentence_halves(sentence, cuts, rng):
          cut = len(head.split())
          rows += _ordered_rows(head, tail, f"{d}-{i}.{cut}", True, rng)
  rng.shuffle(train_rows)
  return write_mrpc_task(data_dir, train_rows, dev_rows)


# --finetune_task name -> (builder, description).
FINETUNE_TASKS = {
    "split_sentence": (
        write_split_sentence_task,
        "the two parts of a sentence, cut at a word boundary; label 1 = "
        "shown tail first"),
    "sentence_order": (
        write_sentence_order_task,
        "two consecutive sentences; label 1 = shown in the wrong order"),
}


# --- Released sizes (stage 6: the first issue's parameter table) -------------

# The paper's rounded counts (Table 2) and the BERT models it compares with.
PAPER_MILLIONS = {"base": 12, "large": 18, "xlarge": 60, "xxlarge": 235}
BERT_MILLIONS = {"base": 108, "large": 334, "xlarge": 1270, "xxlarge": None}


def random_batch(config, batch, seq, predictions, seed=0):
  """A batch shaped like our pretraining data, ids drawn at random."""
  rng = np.random.default_rng(seed)
  ids = rng.integers(5, config.vocab_size, size=(batch, seq), dtype=np.int32)
  ids[:, 0], ids[:, -1] = 2, 3  # [CLS] ... [SEP]
  types = np.zeros_like(ids)
  types[:, seq // 2:] = 1
  positions = np.sort(np.stack([rng.choice(np.arange(1, seq - 1), predictions,
                                           replace=False)
                                for _ in range(batch)]), axis=1).astype(np.int32)
  return {
      "input_word_ids": ids,
      "input_mask": np.ones_like(ids),
      "input_type_ids": types,
      "masked_lm_positions": positions,
      "masked_lm_ids": np.take_along_axis(ids, positions, axis=1),
      "masked_lm_weights": np.ones(positions.shape, np.float32),
      "next_sentence_labels": rng.integers(0, 2, size=(batch,), dtype=np.int32),
  }


def run_size(size, batch=2, seq=64, predictions=8):
  from albert_tf import AlbertConfig, AlbertPretrainer, pretraining_loss  # pylint: disable=g-import-not-at-top
  config = AlbertConfig.from_preset(f"albert_{size}_v2")
  start = time.perf_counter()
  model = AlbertPretrainer(config)
  build_s = time.perf_counter() - start
  features = random_batch(config, batch, seq, predictions)
  start = time.perf_counter()
  outputs = model({k: features[k] for k in
                   ("input_word_ids", "input_mask", "input_type_ids",
                    "masked_lm_positions")})
  loss, metrics = pretraining_loss(outputs, features)
  forward_s = time.perf_counter() - start
  return {
      "size": size,
      "hidden": config.hidden_size,
      "layers": config.num_hidden_layers,
      "embedding": config.embedding_size,
      "encoder_params": model.encoder.count_params(),
      "pretrainer_params": model.count_params(),
      "paper_millions": PAPER_MILLIONS[size],
      "bert_millions": BERT_MILLIONS[size],
      "mlm_logits_shape": list(outputs["mlm_logits"].shape),
      "sop_logits_shape": list(outputs["sop_logits"].shape),
      "loss": float(loss),
      "masked_lm_loss": float(metrics["masked_lm_loss"]),
      "sentence_order_loss": float(metrics["sentence_order_loss"]),
      "build_seconds": round(build_s, 2),
      "forward_seconds": round(forward_s, 2),
  }


def format_table(rows):
  header = (f"{'model':<16}{'H':>6}{'L':>4}{'E':>5}{'encoder params':>17}"
            f"{'+ MLM/SOP heads':>17}{'paper':>8}{'BERT':>8}{'loss':>8}"
            f"{'fwd s':>7}")
  lines = [header, "-" * len(header)]
  for r in rows:
    bert = f"{r['bert_millions']}M" if r["bert_millions"] else "-"
    lines.append(
        f"{'ALBERT-' + r['size']:<16}{r['hidden']:>6}{r['layers']:>4}"
        f"{r['embedding']:>5}{r['encoder_params']:>17,}"
        f"{r['pretrainer_params']:>17,}{str(r['paper_millions']) + 'M':>8}"
        f"{bert:>8}{r['loss']:>8.3f}{r['forward_seconds']:>7.2f}")
  return "\n".join(lines)


# --- Subprocesses -----------------------------------------------------------------

_ABSL_PREFIX = re.compile(r"^[IWEF]\d{4} [\d:.]+\s+\d+ ([\w.]+):\d+\] ")
_TF_PREFIX = re.compile(r"^\d{4}-\d\d-\d\d [\d:.]+: [IWE] \S+\] ")
# Start-up chatter of TensorFlow on CPU: kept in the log file, not shown.
_NOISE = ("Could not find cuda", "oneDNN custom operations",
          "cpu_feature_guard", "To enable the following instructions",
          "absl::InitializeLog", "rebuild TensorFlow", "cuda_executor",
          "failed call to cuInit", "computation placer",
          "Unable to register cu", "TF-TRT Warning", "E0000 00:00",
          "All log messages before", "WARNING: All log messages",
          "oneDNN", "tensorflow/core/util/port.cc",
          "Preparing metadata", "Collecting ", "Saved ", "Successfully",
          "Sharding callback duration", "with unsupported characters")


class ToolError(RuntimeError):
  pass


def _shown(line):
  if any(n in line for n in _NOISE):
    return None
  line = _ABSL_PREFIX.sub("", line)
  line = _TF_PREFIX.sub("", line)
  return line


def child_cpu_seconds():
  r = resource.getrusage(resource.RUSAGE_CHILDREN)
  s = resource.getrusage(resource.RUSAGE_SELF)
  return r.ru_utime + r.ru_stime + s.ru_utime + s.ru_stime


def run_tool(args, log_path, env=None, show=True, show_filter=None,
             cwd=None):
  """Runs `python -m <args...>`, streaming its output (indented) and saving it.

  Returns the captured output lines. Raises ToolError with the command, the
  exit code and the last lines of output when it fails.
  """
  cmd = [sys.executable] + list(args)
  full_env = dict(os.environ)
  full_env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  full_env["PYTHONUNBUFFERED"] = "1"
  repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  full_env["PYTHONPATH"] = os.pathsep.join(
      [repo] + [p for p in full_env.get("PYTHONPATH", "").split(os.pathsep)
                if p])
  full_env.update(env or {})
  os.makedirs(os.path.dirname(log_path), exist_ok=True)
  print("  $ python " + " ".join(_quote(a) for a in args), flush=True)
  lines = []
  start = time.time()
  with open(log_path, "w", encoding="utf-8") as log, subprocess.Popen(
      cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
      env=full_env, cwd=cwd, bufsize=1, errors="replace") as proc:
    log.write("$ " + " ".join(cmd) + "\n")
    for raw in proc.stdout:
      raw = raw.rstrip("\n")
      log.write(raw + "\n")
      lines.append(raw)
      if not show:
        continue
      line = _shown(raw)
      if line is None or not line.strip():
        continue
      if show_filter is not None and not show_filter(line):
        continue
      print(f"  | {line}", flush=True)
    code = proc.wait()
  if code:
    tail = "\n".join("    " + l for l in lines[-25:])
    raise ToolError(f"command failed (exit code {code}, "
                    f"{time.time() - start:.0f} s): {' '.join(cmd)}\n"
                    f"last output lines (full log: {log_path}):\n{tail}")
  return lines


def _quote(a):
  return f"'{a}'" if any(c in a for c in " *?$\"'()") else a


# --- Metrics and files -------------------------------------------------------------


def read_metrics(model_dir, mode):
  """Records of `mode` ("train" / "eval") in <model_dir>/metrics.jsonl."""
  path = os.path.join(model_dir, "metrics.jsonl")
  out = []
  if not os.path.exists(path):
    return out
  with open(path, encoding="utf-8") as f:
    for line in f:
      if line.strip():
        rec = json.loads(line)
        if rec.get("mode") == mode:
          out.append(rec)
  return out


def dir_size(path):
  if os.path.isfile(path):
    return os.path.getsize(path)
  total = 0
  for root, _, files in os.walk(path):
    for name in files:
      total += os.path.getsize(os.path.join(root, name))
  return total


def human_bytes(n):
  for unit in ("B", "KB", "MB", "GB"):
    if n < 1024 or unit == "GB":
      return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
    n /= 1024.0
  return f"{n:.1f} GB"


def clean_output_dir(output_dir, names):
  """Removes what an earlier demo run wrote (resuming would skip training)."""
  for name in names:
    path = os.path.join(output_dir, name)
    if os.path.isdir(path):
      shutil.rmtree(path)
    elif os.path.exists(path):
      os.remove(path)


# --- Initial checkpoint --------------------------------------------------------------


def write_initial_checkpoint(model_config, model_dir, seed, seq_length,
                             max_predictions):
  """Writes the randomly initialised pretraining model as ckpt-0.

  `run_pretraining --mode=eval` evaluates it (the "before" numbers) and the
  training run warm-starts from it (--init_checkpoint), so "before" and
  "after" are the same weights before and after training.
  """
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tf_keras  # pylint: disable=g-import-not-at-top
  from albert_tf.checkpoints import object_layout  # pylint: disable=g-import-not-at-top
  from albert_tf.modeling.models.albert_pretrainer import AlbertPretrainer  # pylint: disable=g-import-not-at-top

  tf_keras.utils.set_random_seed(seed)
  model = AlbertPretrainer(model_config)
  ids = np.full((1, seq_length), 5, np.int32)
  model({"input_word_ids": ids, "input_mask": np.ones_like(ids),
         "input_type_ids": np.zeros_like(ids),
         "masked_lm_positions": np.ones((1, max_predictions), np.int32)})
  step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
  ckpt = object_layout.checkpoint_for(model, step=step)
  manager = tf.train.CheckpointManager(
      ckpt, os.path.join(model_dir, "checkpoints"), max_to_keep=1)
  path = manager.save(checkpoint_number=0)
  return path, model.encoder.count_params(), model.count_params()
