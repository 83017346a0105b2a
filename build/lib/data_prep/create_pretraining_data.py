r"""Creates ALBERT pretraining TFRecords (SOP/NSP/none + n-gram masking).

Input: text with one sentence per line and a blank line between documents
(see prepare_corpus.py). Output: `tf.train.Example` TFRecords with the original
release's feature names (or Model Garden's v2 names) plus a JSON summary.

Streaming design (see docs/data_prep.md): the main process reads documents,
groups them into fixed blocks, and hands blocks to workers that tokenize, build
and mask instances and serialize them. Every random choice for a document comes
from an RNG seeded by (random_seed, document index, dupe pass), and results are
merged in block order, so the output is byte-identical for any --num_workers.
A bounded, seeded shuffle buffer replaces the original's global shuffle, so
memory stays flat however large the corpus is.

Example:
  python -m data_prep.create_pretraining_data \
    --input_file=corpus/*.txt --output_file=out/train.tfrecord@8 \
    --spm_model_file=30k-clean.model --max_seq_length=128 --dupe_factor=5 \
    --num_workers=2
"""

import collections
import dataclasses
import json
import multiprocessing
import os
import random
import sys
import time

from absl import app
from absl import flags

from data_prep import pretraining_instances as pi
from data_prep import text_reader
from data_prep import tfrecord_io
from data_prep import tokenization

FLAGS = flags.FLAGS

def define_flags():
  """Defines the command-line flags (only when run as a program)."""
  # Original flags, same names and defaults.
  flags.DEFINE_string("input_file", None,
                      "Input text file(s): comma-separated list of files or glob "
                      "patterns (plain or .gz). One sentence per line, blank line "
                      "between documents.")
  flags.DEFINE_string("output_file", None,
                      "Output TFRecord file(s): comma-separated list, or a sharded "
                      "pattern PATH@N that expands to PATH-0000i-of-0000N. Instances "
                      "are written round-robin across the files.")
  flags.DEFINE_string("vocab_file", None,
                      "Unused; accepted for compatibility with the original (ALBERT "
                      "uses --spm_model_file).")
  flags.DEFINE_string("spm_model_file", None,
                      "SentencePiece model file (from train_sentencepiece.py).")
  flags.DEFINE_bool("do_lower_case", True,
                    "Lowercase the text before SentencePiece (must match the model).")
  flags.DEFINE_bool("do_whole_word_mask", True,
                    "Mask whole words (pieces continuing a word join its unit).")
  flags.DEFINE_bool("do_permutation", False,
                    "Also permute extra n-gram spans among themselves (original's "
                    "experimental option); permuted spans share the prediction "
                    "budget max_predictions_per_seq.")
  flags.DEFINE_bool("favor_shorter_ngram", True,
                    "Draw n-gram length n with p(n) ~ 1/n (else reversed, favouring "
                    "longer n-grams).")
  flags.DEFINE_bool("random_next_sentence", False,
                    "Original's switch for NSP instead of SOP; same as "
                    "--sentence_pair_task=nsp.")
  flags.DEFINE_integer("max_seq_length", 512, "Maximum sequence length.")
  flags.DEFINE_integer("ngram", 3, "Maximum n-gram length (in word units) to mask.")
  flags.DEFINE_integer("max_predictions_per_seq", 20,
                       "Maximum number of masked LM predictions per sequence.")
  flags.DEFINE_integer("random_seed", 12345, "Random seed for data generation.")
  flags.DEFINE_integer("dupe_factor", 40,
                       "Number of times to duplicate the input data (with "
                       "different masks and pairings).")
  flags.DEFINE_float("masked_lm_prob", 0.15, "Masked LM probability.")
  flags.DEFINE_float("short_seq_prob", 0.1,
                     "Probability of creating sequences shorter than the maximum "
                     "length.")
  # Additions.
  flags.DEFINE_enum("sentence_pair_task", None, ["sop", "nsp", "none"],
                    "Inter-sentence objective (paper Table 5): sop = sentence "
                    "order prediction (default), nsp = next sentence prediction "
                    "(B from another document; = --random_next_sentence), none = "
                    "single-segment examples '[CLS] A [SEP]' with label 0 (not to be "
                    "used as a pair label). Default: nsp if --random_next_sentence "
                    "else sop.")
  flags.DEFINE_integer("num_workers", 1,
                       "Worker processes. Output is byte-identical for any value.")
  flags.DEFINE_enum("compression", "NONE", ["NONE", "GZIP"],
                    "TFRecord compression of the output files.")
  flags.DEFINE_bool("v2_feature_names", False,
                    "Write Model Garden v2 names input_word_ids/input_type_ids "
                    "instead of input_ids/segment_ids.")
  flags.DEFINE_integer("shuffle_buffer_size", 10000,
                       "Instances held in the seeded shuffle buffer before writing "
                       "(replaces the original's in-RAM global shuffle; 0 = write "
                       "in creation order).")
  flags.DEFINE_integer("docs_per_block", 64,
                       "Maximum documents per unit of work (a block also ends "
                       "after 100k characters). NSP negatives are drawn from the "
                       "other documents of the same block. Changing it changes "
                       "the output; --num_workers does not.")
  flags.DEFINE_integer("max_line_chars", 100000,
                       "Lines longer than this are split at whitespace (counted).")
  flags.DEFINE_integer("max_lines_per_document", 20000,
                       "Documents with more lines are cut into pieces (counted), "
                       "bounding memory per document.")
  flags.DEFINE_string("summary_file", None,
                      "JSON summary path (default: <first output file>.summary.json).")
  flags.DEFINE_float("progress_interval", 5.0,
                     "Seconds between progress lines on stderr (0 = none).")


# A block also ends after this much text: bounds memory per task and keeps
# corpora of few, long documents parallel.
_BLOCK_CHARS = 100_000


@dataclasses.dataclass(frozen=True)
class RunConfig:
  spm_model_file: str
  do_lower_case: bool
  instance: pi.InstanceConfig
  random_seed: int = 12345
  dupe_factor: int = 40
  v2_feature_names: bool = False


# ------------------------------------------------------------- workers ----
_W = {}  # per-process state


def _init_worker(run_cfg):
  tok = tokenization.FullTokenizer(run_cfg.spm_model_file, run_cfg.do_lower_case)
  _W["cfg"] = run_cfg
  _W["tok"] = tok
  _W["info"] = pi.TokenInfo.from_tokenizer(tok)
  _W["enc"] = tfrecord_io.ExampleEncoder(
      max(tok.vocab_size, run_cfg.instance.max_seq_length) + 1)


def process_block(task):
  """(first_doc_index, docs of str lines) -> (framed records, stats)."""
  first_doc_index, raw_docs = task
  run_cfg, tok, info, enc = _W["cfg"], _W["tok"], _W["info"], _W["enc"]
  cfg = run_cfg.instance
  stats = collections.Counter()
  pair = cfg.sentence_pair_task != "none"
  docs, doc_ids = [], []
  for j, lines in enumerate(raw_docs):
    sents = [ids for ids in tok.encode_ids_batch(lines) if ids]
    stats["lines_without_tokens"] += len(lines) - len(sents)
    ntok = sum(len(s) for s in sents)
    if ntok == 0:
      stats["documents_empty_after_tokenization"] += 1
      continue
    if pair and ntok < 2:
      stats["documents_too_short_for_pair"] += 1
      continue
    stats["documents_used"] += 1
    stats["document_tokens"] += ntok
    docs.append(sents)
    doc_ids.append(first_doc_index + j)
  records = []
  for dupe in range(run_cfg.dupe_factor):
    for j, doc in enumerate(docs):
      rng = pi.document_rng(run_cfg.random_seed, doc_ids[j], dupe)
      for inst in pi.create_instances_from_document(doc, j, docs, cfg, info,
                                                    rng, stats):
        ints, floats = pi.instance_features(inst, cfg.max_seq_length,
                                            cfg.max_predictions_per_seq,
                                            run_cfg.v2_feature_names)
        records.append(tfrecord_io.frame_record(enc.encode(ints, floats)))
  return records, stats


# ---------------------------------------------------------------- main ----
def _iter_blocks(input_files, stats, docs_per_block, max_line_chars,
                 max_lines_per_document, progress):
  block, chars, first = [], 0, 0
  for doc in text_reader.iter_documents(input_files, stats, max_line_chars,
                                        max_lines_per_document, progress):
    stats["documents_read"] += 1
    block.append(doc)
    chars += sum(len(line) for line in doc)
    if len(block) >= docs_per_block or chars >= _BLOCK_CHARS:
      yield first, block
      first += len(block)
      block, chars = [], 0
  if block:
    yield first, block


class _Progress:
  """Rate and ETA on stderr, from input bytes consumed."""

  def __init__(self, total_bytes, interval, stream=sys.stderr):
    self.total = max(1, total_bytes)
    self.done = 0
    self.interval = interval
    self.stream = stream
    self.start = time.time()
    self.last = self.start

  def add_bytes(self, n):
    self.done += n

  def maybe_report(self, stats, final=False):
    now = time.time()
    if not self.interval or (not final and now - self.last < self.interval):
      return
    self.last = now
    el = max(1e-9, now - self.start)
    frac = min(1.0, self.done / self.total)
    eta = el * (1 - frac) / frac if frac > 0 else float("nan")
    self.stream.write(
        f"[create_pretraining_data] {frac:6.1%} of input, "
        f"{stats['documents_read']} docs ({stats['documents_read'] / el:.1f}/s), "
        f"{stats['instances']} instances ({stats['instances'] / el:.1f}/s), "
        f"elapsed {el:.0f}s, ETA {eta:.0f}s\n")
    self.stream.flush()


def run(input_files, output_files, run_cfg, num_workers=1, compression="NONE",
        shuffle_buffer_size=10000, docs_per_block=64, max_line_chars=100000,
        max_lines_per_document=20000, summary_file=None, progress_interval=5.0):
  """Creates the TFRecords; returns the summary dict (also written as JSON)."""
  # Fail early and clearly: model and inputs must be readable.
  tok = tokenization.FullTokenizer(run_cfg.spm_model_file, run_cfg.do_lower_case)
  for path in input_files:
    if not os.access(path, os.R_OK) or os.path.isdir(path):
      raise OSError(f"Cannot read input file {path}")
  start = time.time()
  stats = collections.Counter()
  progress = _Progress(sum(os.path.getsize(p) for p in input_files),
                       progress_interval)
  writers = [tfrecord_io.RecordWriter(p, compression) for p in output_files]
  shuffle_rng = random.Random(run_cfg.random_seed)
  buffer = []
  widx = 0

  def emit(record):
    nonlocal widx
    writers[widx].write(record)
    widx = (widx + 1) % len(writers)

  def consume(result):
    records, block_stats = result
    stats.update(block_stats)
    for rec in records:
      if shuffle_buffer_size <= 0:
        emit(rec)
        continue
      buffer.append(rec)
      if len(buffer) > shuffle_buffer_size:
        k = shuffle_rng.randrange(len(buffer))
        buffer[k], buffer[-1] = buffer[-1], buffer[k]
        emit(buffer.pop())
    progress.maybe_report(stats)

  blocks = _iter_blocks(input_files, stats, docs_per_block, max_line_chars,
                        max_lines_per_document, progress.add_bytes)
  try:
    if num_workers <= 1:
      _init_worker(run_cfg)
      for task in blocks:
        consume(process_block(task))
    else:
      ctx = multiprocessing.get_context("spawn")  # safe even if TF is loaded
      with ctx.Pool(num_workers, initializer=_init_worker,
                    initargs=(run_cfg,)) as pool:
        pending = collections.deque()
        max_pending = 2 * num_workers + 1  # bounds memory: no eager feeding
        for task in blocks:
          pending.append(pool.apply_async(process_block, (task,)))
          while len(pending) >= max_pending:
            consume(pending.popleft().get())
        while pending:
          consume(pending.popleft().get())
    shuffle_rng.shuffle(buffer)
    for rec in buffer:
      emit(rec)
    buffer.clear()
  finally:
    for w in writers:
      w.close()
  progress.maybe_report(stats, final=True)
  elapsed = time.time() - start
  summary = _summary(stats, input_files, writers, run_cfg, tok, elapsed,
                     num_workers, compression, shuffle_buffer_size,
                     docs_per_block)
  summary_file = summary_file or output_files[0] + ".summary.json"
  with open(summary_file, "w") as f:
    json.dump(summary, f, indent=2, sort_keys=True)
  summary["summary_file"] = summary_file
  return summary


_SKIP_KEYS = {
    "invalid_utf8_lines": "lines with invalid UTF-8 (bad bytes dropped)",
    "control_char_lines": "lines with control characters (removed)",
    "huge_lines_split": "lines over max_line_chars (split at whitespace)",
    "empty_documents": "empty documents (skipped)",
    "long_documents_split": "documents over max_lines_per_document (cut)",
    "lines_without_tokens": "lines with no SentencePiece tokens (skipped)",
    "documents_empty_after_tokenization": "documents with no tokens (skipped)",
    "documents_too_short_for_pair": "documents of < 2 tokens (skipped)",
    "skipped_chunk_single_unit": "one-word chunks that cannot form a pair "
                                 "(skipped)",
    "one_sentence_chunk_split": "one-sentence chunks split inside the sentence "
                                "(repaired)",
    "nsp_no_other_document": "NSP negatives impossible, block has one document "
                             "(in-order pair used)",
    "instances_under_budget": "instances with fewer masks than the budget",
}


def _summary(stats, input_files, writers, run_cfg, tok, elapsed, num_workers,
             compression, shuffle_buffer_size, docs_per_block):
  cfg = run_cfg.instance
  ngram = {}
  for prefix in ("", "permute_"):
    for n in range(1, cfg.ngram + 1):
      for what in ("spans", "masked_tokens"):
        key = f"{prefix}{what}_{n}gram"
        if stats[key]:
          ngram[key] = stats[key]
  drawn = {str(n): stats[f"ngram_drawn_{n}"] for n in range(1, cfg.ngram + 1)}
  inst = stats["instances"]
  return {
      "config": {**dataclasses.asdict(cfg), "random_seed": run_cfg.random_seed,
                 "dupe_factor": run_cfg.dupe_factor,
                 "do_lower_case": run_cfg.do_lower_case,
                 "spm_model_file": run_cfg.spm_model_file,
                 "vocab_size": tok.vocab_size,
                 "v2_feature_names": run_cfg.v2_feature_names,
                 "compression": compression, "num_workers": num_workers,
                 "shuffle_buffer_size": shuffle_buffer_size,
                 "docs_per_block": docs_per_block},
      "input_files": list(input_files),
      "output_files": {w.path: w.count for w in writers},
      "documents_read": stats["documents_read"],
      "documents_used": stats["documents_used"],
      "instances": inst,
      "tokens": stats["tokens"],
      "document_tokens": stats["document_tokens"],
      "masked_tokens": stats["masked_tokens"],
      "mask_budget": stats["mask_budget"],
      "masked_by_ngram": ngram,
      "ngram_drawn_full_choice": drawn,
      "pair_labels": {"0": stats["label_0"], "1": stats["label_1"],
                      "fraction_1": stats["label_1"] / inst if inst else 0.0},
      "skipped_or_repaired": {k: stats[k] for k in _SKIP_KEYS},
      "elapsed_seconds": round(elapsed, 3),
      "instances_per_second": round(inst / elapsed, 1) if elapsed else None,
  }


def _report(summary, stream=sys.stderr):
  stream.write(
      f"[create_pretraining_data] wrote {summary['instances']} instances from "
      f"{summary['documents_used']}/{summary['documents_read']} documents in "
      f"{summary['elapsed_seconds']:.1f}s "
      f"({summary['instances_per_second']} instances/s); masked "
      f"{summary['masked_tokens']} tokens; pair labels "
      f"{summary['pair_labels']}\n")
  for key, desc in _SKIP_KEYS.items():
    n = summary["skipped_or_repaired"][key]
    if n:
      stream.write(f"  {n:>8} {desc}\n")
  stream.write(f"  summary: {summary['summary_file']}\n")


def main(argv):
  del argv
  for name in ("input_file", "output_file", "spm_model_file"):
    if not getattr(FLAGS, name):
      raise app.UsageError(f"--{name} is required")
  task = FLAGS.sentence_pair_task or ("nsp" if FLAGS.random_next_sentence
                                      else "sop")
  if FLAGS.random_next_sentence and task != "nsp":
    raise app.UsageError("--random_next_sentence conflicts with "
                         f"--sentence_pair_task={task}")
  instance_cfg = pi.InstanceConfig(
      max_seq_length=FLAGS.max_seq_length,
      short_seq_prob=FLAGS.short_seq_prob,
      sentence_pair_task=task,
      masked_lm_prob=FLAGS.masked_lm_prob,
      max_predictions_per_seq=FLAGS.max_predictions_per_seq,
      ngram=FLAGS.ngram,
      favor_shorter_ngram=FLAGS.favor_shorter_ngram,
      do_whole_word_mask=FLAGS.do_whole_word_mask,
      do_permutation=FLAGS.do_permutation)
  run_cfg = RunConfig(spm_model_file=FLAGS.spm_model_file,
                      do_lower_case=FLAGS.do_lower_case,
                      instance=instance_cfg, random_seed=FLAGS.random_seed,
                      dupe_factor=FLAGS.dupe_factor,
                      v2_feature_names=FLAGS.v2_feature_names)
  try:
    summary = run(
        tfrecord_io.expand_input_files(FLAGS.input_file),
        tfrecord_io.expand_output_files(FLAGS.output_file), run_cfg,
        num_workers=FLAGS.num_workers, compression=FLAGS.compression,
        shuffle_buffer_size=FLAGS.shuffle_buffer_size,
        docs_per_block=FLAGS.docs_per_block,
        max_line_chars=FLAGS.max_line_chars,
        max_lines_per_document=FLAGS.max_lines_per_document,
        summary_file=FLAGS.summary_file,
        progress_interval=FLAGS.progress_interval)
  except (OSError, ValueError) as e:
    sys.stderr.write(f"create_pretraining_data: error: {e}\n")
    sys.exit(1)
  _report(summary)


def cli():
  """Console-script entry point (pyproject.toml)."""
  define_flags()
  app.run(main)


if __name__ == "__main__":
  cli()
