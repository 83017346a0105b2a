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
(or --vocab_file=vocab_chinese.txt for a BERT WordPiece vocabulary).
"""

import collections
import itertools
import multiprocessing
import os
import random
import sys
import time

from absl import app
from absl import flags

from albert_toolkit import command_line
from albert_toolkit import output_files as output_files_mod
from data_prep import pretraining_config
from data_prep import pretraining_instances as pi
from data_prep import pretraining_summary
from data_prep import sentence_tokens
from data_prep import shard_sets
from data_prep import text_reader
from albert_toolkit import tfrecord_io

FLAGS = flags.FLAGS

# A block also ends after this much text: bounds memory per task and keeps
# corpora of few, long documents parallel.
_BLOCK_CHARS = 100_000


# ------------------------------------------------------------- workers ----
_W = {}  # per-process state


def init_worker(run_cfg, model_proto=None):
  """model_proto: the vocabulary file's bytes (a Beam worker has no file)."""
  tok = run_cfg.tokenizer(model_proto)
  _W.update(cfg=run_cfg, tok=tok, info=pi.TokenInfo.from_tokenizer(tok),
            enc=tfrecord_io.ExampleEncoder(
                max(tok.vocab_size, run_cfg.instance.max_seq_length) + 1))


def process_block(task):
  """(first_doc_index, docs of str lines) -> (framed records, stats)."""
  first_doc_index, raw_docs = task
  run_cfg, tok, info, enc = _W["cfg"], _W["tok"], _W["info"], _W["enc"]
  cfg = run_cfg.instance
  stats = collections.Counter()
  pair = cfg.sentence_pair_task != "none"
  docs, doc_ids = [], []
  max_tokens = cfg.max_seq_length - (3 if pair else 2)
  for j, lines in enumerate(raw_docs):
    sents = sentence_tokens.encode_lines(tok, lines, max_tokens, stats)
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
def iter_blocks(input_files, stats, docs_per_block, max_line_chars,
                max_lines_per_document, progress, opener=None):
  """Documents of all files, in order -> (index of first document, docs)."""
  block, chars, first = [], 0, 0
  for doc in text_reader.iter_documents(input_files, stats, max_line_chars,
                                        max_lines_per_document, progress,
                                        opener):
    stats["documents_read"] += 1
    block.append(doc)
    chars += sum(len(line) for line in doc)
    if len(block) >= docs_per_block or chars >= _BLOCK_CHARS:
      yield first, block
      first += len(block)
      block, chars = [], 0
  if block:
    yield first, block


class Progress:
  """Rate and ETA on stderr, from input bytes consumed."""

  def __init__(self, total_bytes, interval, stream=None,
               tool="create_pretraining_data"):
    self.tool = tool
    self.total = max(1, total_bytes)
    self.done = 0
    self.interval = interval
    self.stream = stream or sys.stderr  # the current one, not import time's
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
    eta = f"{el * (1 - frac) / frac:.0f}s" if frac > 0 else "unknown"
    self.stream.write(
        f"[{self.tool}] {frac:6.1%} of input, "
        f"{stats['documents_read']} docs ({stats['documents_read'] / el:.1f}/s), "
        f"{stats['instances']} instances ({stats['instances'] / el:.1f}/s), "
        f"elapsed {el:.0f}s, ETA {eta}\n")
    self.stream.flush()


def run(input_files, output_files, run_cfg, num_workers=1, compression="NONE",
        shuffle_buffer_size=10000, docs_per_block=64, max_line_chars=100000,
        max_lines_per_document=20000, summary_file=None, progress_interval=5.0):
  """Creates the TFRecords; returns the summary dict (also written as JSON).

  Every output (shards, summary) is first checked against every input
  (corpus, vocabulary) and each other (pretraining_config.check_files), then
  claimed (a second run writing them at once is refused); shards are written
  under temporary names and renamed at the end;
  a stale summary is deleted first and the new one written last
  (output_files.py); the summaries of earlier runs that describe a
  replaced output are removed just before the renames.
  """
  summary_file = pretraining_config.check_files(input_files, output_files,
                                              summary_file, run_cfg)
  # Fail early and clearly: model and inputs must be readable.
  tok = run_cfg.tokenizer()
  run_cfg.check_vocab_size(tok.vocab_size)
  for path in input_files:
    if not os.access(path, os.R_OK) or os.path.isdir(path):
      raise OSError(f"Cannot read input file {path}")
  start = time.time()
  stats = collections.Counter()
  progress = Progress(sum(os.path.getsize(p) for p in input_files),
                       progress_interval)
  staged = output_files_mod.StagedOutputs(output_files, summary_file)
  writers = []
  try:
    for tmp, final in zip(staged.temp_paths, output_files):
      writers.append(tfrecord_io.RecordWriter(tmp, compression, name=final))
    blocks = iter_blocks(input_files, stats, docs_per_block, max_line_chars,
                         max_lines_per_document, progress.add_bytes)
    _write_all(blocks, writers, run_cfg, stats, progress, num_workers,
               shuffle_buffer_size)
    if not stats["instances"]:
      raise ValueError(no_instances_message(input_files, stats))
    records_per_file = {final: w.count
                        for final, w in zip(output_files, writers)}
    shard_sets.check_no_empty_shards(records_per_file, stats["instances"])
    for w in writers:
      w.close()
    progress.maybe_report(stats, final=True)
    summary = pretraining_summary.build(
        stats, input_files, records_per_file, run_cfg,
        tok.vocab_size, time.time() - start,
        {"compression": compression, "num_workers": num_workers,
         "shuffle_buffer_size": shuffle_buffer_size,
         "docs_per_block": docs_per_block},
        bytes_per_file={final: os.path.getsize(tmp) for tmp, final in zip(
            staged.temp_paths, output_files)})
  except BaseException:
    for w in writers:
      w.discard()  # close() would fail again on a full disk
    staged.abort()
    raise
  staged.commit(summary, pretraining_summary.stale_summaries(
      output_files, summary_file))
  summary["summary_file"] = summary_file
  return summary


def no_instances_message(input_files, stats):
  """The error for a run that made no instance (nothing is written): the
  local tool's and the Beam pipeline's.

  Args:
    input_files: the corpus files read.
    stats: the run's counts (documents_read, documents_used).
  """
  shown = ", ".join(input_files[:3]) + (
      f" and {len(input_files) - 3} more" if len(input_files) > 3 else "")
  if not stats["documents_read"]:
    return f"no instances: the input ({shown}) holds no text; nothing written"
  return (f"no instances: the {stats['documents_read']} documents of the "
          f"input ({shown}) gave none ({stats['documents_used']} had enough "
          "tokens); nothing written")


def _write_all(blocks, writers, run_cfg, stats, progress, num_workers,
               shuffle_buffer_size):
  """Blocks -> workers -> seeded shuffle buffer -> writers (round-robin)."""
  shuffle_rng = random.Random(run_cfg.random_seed)
  buffer = []
  targets = itertools.cycle(writers)

  def emit(record):
    next(targets).write(record)

  def consume(result):
    records, block_stats = result
    stats.update(block_stats)
    for rec in records:
      buffer.append(rec)  # a buffer of 0 passes each record straight on
      if len(buffer) > shuffle_buffer_size:
        k = shuffle_rng.randrange(len(buffer))
        buffer[k], buffer[-1] = buffer[-1], buffer[k]
        emit(buffer.pop())
    progress.maybe_report(stats)

  if num_workers <= 1:
    init_worker(run_cfg)
    for task in blocks:
      consume(process_block(task))
  else:
    ctx = multiprocessing.get_context("spawn")  # safe even if TF is loaded
    with ctx.Pool(num_workers, initializer=init_worker,
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


def main(argv):
  del argv
  command_line.exit_on_sigterm()
  run_cfg = pretraining_config.run_config_from_flags(FLAGS)
  with command_line.exit_on_error("create_pretraining_data"):
    summary = run(
        tfrecord_io.expand_input_files(FLAGS.input_file),
        tfrecord_io.expand_output_files(FLAGS.output_file), run_cfg,
        num_workers=FLAGS.num_workers,
        shuffle_buffer_size=FLAGS.shuffle_buffer_size,
        **pretraining_config.common_run_kwargs(FLAGS))
  pretraining_summary.report(summary, "create_pretraining_data")


def cli():
  """Console-script entry point (pyproject.toml)."""
  pretraining_config.define_flags()
  app.run(main, flags_parser=command_line.parse_flags)


if __name__ == "__main__":
  cli()
