r"""create_pretraining_data on Apache Beam (Dataflow, Flink, Spark, Direct).

Same flags as create_pretraining_data plus Beam's pipeline options, and the
same instance logic: the transforms call create_pretraining_data's
`iter_blocks` and `process_block`, so the set of instances equals the local
tool's for the same input and flags.

Pipeline:
  read      one task reads the inputs in order and groups documents into the
            local tool's blocks (global document indices: the RNG of a
            (document, dupe pass) is seeded by them, so reading is sequential;
            it is a small part of the work, see docs/data_prep.md);
  instances Reshuffle, then per block: tokenize once, all dupe passes, mask,
            serialize (parallel over blocks, on any number of workers);
  shards    each record gets a key hashed from (random_seed, block, index in
            block): key mod N picks its shard, and a shard is written sorted
            by key. Two runs, with any number of workers, write byte-identical
            files (TFDS's BeamWriter does the same). A block's records for
            one shard cross the shuffle as one zlib-compressed element.
Shards go to a hidden temporary directory next to the output; the launcher
renames them after the pipeline succeeded and writes the summary last (counts
and skip counters computed in the pipeline; also exported as Beam metrics).
The SentencePiece model travels to workers inside the DoFn; no TensorFlow.

Example (local, 2 processes):
  python -m data_prep.beam_pretraining_data --input_file=corpus/*.txt \
    --output_file=out/train.tfrecord@16 --spm_model_file=30k-clean.model \
    --max_seq_length=512 --dupe_factor=40 \
    --runner=DirectRunner --direct_running_mode=multi_processing \
    --direct_num_workers=2
"""

import collections
import dataclasses
import hashlib
import itertools
import json
import os
import struct
import sys
import tempfile
import time
import typing
import zlib

from absl import app
from absl import flags
import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from data_prep import beam_options
from data_prep import command_line
from data_prep import create_pretraining_data as cpd
from data_prep import output_files
from data_prep import pretraining_config
from data_prep import pretraining_summary
from data_prep import text_reader
from data_prep import tfrecord_io
from data_prep import tokenization

FLAGS = flags.FLAGS
TOOL = "beam_pretraining_data"
_RESULT = "result.json"


# The shuffle moves and copies every byte of every record (on the DirectRunner
# several times, in the one launcher process; on Dataflow it is billed per
# byte). Padded tf.Examples shrink 2-3x even one record at a time, ~3.8x in
# batches, and level 1 compresses at ~140 MB/s per core (docs/data_prep.md).
_SHUFFLE_ZLIB_LEVEL = 1


def record_key(seed, first_doc_index, index):
  """Shard/order key of a record: depends only on its place in the data."""
  digest = hashlib.sha256(f"{seed}/{first_doc_index}/{index}".encode()).digest()
  return int.from_bytes(digest[:8], "big") >> 1  # 63 bits


def pack_records(keyed):
  """[(key, framed record)] -> one compressed shuffle element."""
  keys = [key for key, _ in keyed]
  head = struct.pack(f"<I{len(keys)}Q", len(keys), *keys)
  return zlib.compress(head + b"".join(record for _, record in keyed),
                       _SHUFFLE_ZLIB_LEVEL)


def unpack_records(blob):
  """pack_records' element -> [(key, framed record)]."""
  data = zlib.decompress(blob)
  (n,) = struct.unpack_from("<I", data)
  keys = struct.unpack_from(f"<{n}Q", data, 4)
  records = tfrecord_io.split_framed(data, 4 + 8 * n)
  if len(records) != n:
    raise ValueError(f"shuffle element holds {len(records)} records for "
                     f"{n} keys")
  return list(zip(keys, records))


def open_any(path):
  """Binary reader for any Beam filesystem path (local, gs://, hdfs://)."""
  return FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)


def block_chars(block):
  """Characters of text in a block: the unit of the progress lines."""
  return sum(len(line) for doc in block[1] for line in doc)


def _count(stats):
  for key, value in stats.items():
    if value:
      Metrics.counter(TOOL, key).inc(value)


class ReadBlocks(beam.DoFn):
  """None -> the local tool's blocks (first document index, documents).

  Also: the summed stats and the text's characters (block_chars), on tags.
  """

  def __init__(self, input_files, docs_per_block, max_line_chars,
               max_lines_per_document, progress_interval):
    self._args = (input_files, docs_per_block, max_line_chars,
                  max_lines_per_document)
    self._interval = progress_interval

  def process(self, unused_element):
    files, docs_per_block, max_line_chars, max_lines = self._args
    stats = collections.Counter()
    total = sum(m.size_in_bytes for r in FileSystems.match(files)
                for m in r.metadata_list)
    progress = cpd.Progress(total, self._interval, tool=f"{TOOL} read")
    chars = 0
    for block in cpd.iter_blocks(files, stats, docs_per_block, max_line_chars,
                                 max_lines, progress.add_bytes, open_any):
      chars += block_chars(block)
      yield block
      progress.maybe_report(stats)
    _count(stats)
    yield beam.pvalue.TaggedOutput("stats", dict(stats))
    yield beam.pvalue.TaggedOutput("chars", chars)


class MakeInstances(beam.DoFn):
  """Block -> (shard, pack_records of its records); block stats on a tag.

  One element per (block, shard), compressed: fewer, smaller elements for
  the runner's data plane and shuffle. With `workers` (the DirectRunner's,
  which splits the blocks evenly) each worker logs its progress against its
  share of the text; other runners show theirs in their UI.
  """

  def __init__(self, run_cfg, model_bytes, num_shards, workers=None,
               progress_interval=0):
    self._run_cfg = run_cfg
    self._model_bytes = model_bytes
    self._num_shards = num_shards
    self._workers = workers
    self._interval = progress_interval if workers else 0
    self._progress = None
    self._done = collections.Counter()

  def setup(self):
    # Workers get the model inside this DoFn; FullTokenizer wants a file.
    fd, path = tempfile.mkstemp(suffix=".model")
    with os.fdopen(fd, "wb") as f:
      f.write(self._model_bytes)
    cpd.init_worker(dataclasses.replace(self._run_cfg, spm_model_file=path))
    os.remove(path)

  def process(self, block, total_chars):
    records, stats = cpd.process_block(block)
    if self._interval:
      if self._progress is None:
        self._progress = cpd.Progress(
            total_chars / self._workers, self._interval,
            tool=f"{TOOL} instances, worker {os.getpid()}")
      self._progress.add_bytes(block_chars(block))
      self._done.update(documents_read=len(block[1]), instances=len(records))
      self._progress.maybe_report(self._done)
    seed = self._run_cfg.random_seed
    by_shard = collections.defaultdict(list)
    for i, record in enumerate(records):
      key = record_key(seed, block[0], i)
      by_shard[key % self._num_shards].append((key, record))
    for shard, keyed in by_shard.items():
      yield shard, pack_records(keyed)
    _count(stats)
    yield beam.pvalue.TaggedOutput("stats", dict(stats))

  def finish_bundle(self):
    if self._progress is not None:
      self._progress.maybe_report(self._done, final=True)


def write_shard(item, temp_dir, compression):
  """(shard, pack_records elements) -> (shard, count); sorted by key."""
  shard, packed = item
  path = f"{temp_dir}/shard-{shard:05d}"
  writer = tfrecord_io.RecordWriter(path, compression,
                                    fileobj=FileSystems.create(path))
  keyed = itertools.chain.from_iterable(map(unpack_records, packed))
  for _, record in sorted(keyed):
    writer.write(record)
  writer.close()
  return shard, writer.count


def sum_stats(dicts):
  total = collections.Counter()
  for d in dicts:
    total.update(d)
  return dict(total)


def write_result(unused, temp_dir, counts, stats):
  with FileSystems.create(f"{temp_dir}/{_RESULT}") as f:
    f.write(json.dumps({"counts": dict(counts), "stats": stats}).encode())


def build_pipeline(p, input_files, run_cfg, model_bytes, num_shards, temp_dir,
                   compression, docs_per_block, max_line_chars,
                   max_lines_per_document, progress_interval, workers=None):
  """Adds the transforms to pipeline `p` (`workers`: see MakeInstances)."""
  read = (p | "Start" >> beam.Create([None])
          | "ReadBlocks" >> beam.ParDo(ReadBlocks(
              input_files, docs_per_block, max_line_chars,
              max_lines_per_document, progress_interval)).with_outputs(
                  "stats", "chars", main="blocks"))
  make_instances = beam.ParDo(
      MakeInstances(run_cfg, model_bytes, num_shards, workers,
                    progress_interval),
      total_chars=beam.pvalue.AsSingleton(read.chars))
  made = (read.blocks | "SpreadBlocks" >> beam.Reshuffle()
          | "MakeInstances" >> make_instances.with_output_types(
              typing.Tuple[int, bytes]).with_outputs("stats", main="records"))
  counts = (made.records | "GroupByShard" >> beam.GroupByKey()
            | "WriteShards" >> beam.Map(write_shard, temp_dir, compression)
            | "AllCounts" >> beam.combiners.ToList())
  stats = ((read.stats, made.stats) | "AllStats" >> beam.Flatten()
           | "SumStats" >> beam.CombineGlobally(sum_stats))
  _ = (p | "Finish" >> beam.Create([None])
       | "WriteResult" >> beam.Map(write_result, temp_dir,
                                   beam.pvalue.AsSingleton(counts),
                                   beam.pvalue.AsSingleton(stats)))


def expand_inputs(spec):
  """Comma-separated files or globs on any Beam filesystem -> sorted paths."""
  files = []
  for part in (p.strip() for p in spec.split(",")):
    if not part:
      continue
    matched = sorted(m.path for r in FileSystems.match([part])
                     for m in r.metadata_list
                     if not output_files.is_tool_output(m.path))
    if not matched:
      raise FileNotFoundError(f"input_file matched no files: {part}")
    files.extend(matched)
  if not files:
    raise ValueError("input_file is empty")
  return output_files.read_once(files)


def _load_model(path, do_lower_case):
  """Model bytes from any filesystem, checked by loading them."""
  try:
    with open_any(path) as f:
      data = f.read()
  except Exception as e:  # Beam raises its own IOError/BeamIOError types.
    raise OSError(f"Cannot read SentencePiece model {path}: {e}") from e
  with tempfile.TemporaryDirectory() as d:
    local = os.path.join(d, "spm.model")
    with open(local, "wb") as f:
      f.write(data)
    try:
      tok = tokenization.FullTokenizer(local, do_lower_case)
    except ValueError as e:
      raise ValueError(str(e).replace(local, path)) from e
  return data, tok.vocab_size


def _finalize(temp_dir, output_paths, compression):
  """Temporary shards -> final names (empty shards created). Returns counts."""
  with FileSystems.open(f"{temp_dir}/{_RESULT}") as f:
    result = json.loads(f.read().decode())
  counts = {int(k): v for k, v in result["counts"].items()}
  for i in range(len(output_paths)):
    if i not in counts:  # a shard no record hashed to
      write_shard((i, []), temp_dir, compression)
  FileSystems.rename([f"{temp_dir}/shard-{i:05d}"
                      for i in range(len(output_paths))], list(output_paths))
  return ({p: counts.get(i, 0) for i, p in enumerate(output_paths)},
          collections.Counter(result["stats"]))


def _delete(path):
  if FileSystems.exists(path):
    FileSystems.delete([path])


def run(input_files, output_paths, run_cfg, pipeline_args=(),
        compression="NONE", docs_per_block=64, max_line_chars=100000,
        max_lines_per_document=20000, summary_file=None,
        progress_interval=5.0, num_workers=None):
  """Runs the pipeline; returns the summary dict (also written as JSON).

  `pipeline_args` are Beam's command-line options; `num_workers`, when not
  None, the runner's worker count (beam_options.pipeline_options).
  """
  options, runner_name, beam_args = beam_options.pipeline_options(
      pipeline_args, num_workers)
  summary_file = summary_file or output_paths[0] + output_files.SUMMARY_SUFFIX
  output_files.check_disjoint(input_files, list(output_paths) + [summary_file])
  model_bytes, vocab_size = _load_model(run_cfg.spm_model_file,
                                        run_cfg.do_lower_case)
  run_cfg.check_vocab_size(vocab_size)
  _delete(summary_file)  # a stale summary must not describe new files
  for path in input_files:  # here, not in a worker: one line, no traceback
    text_reader.check_text_file(path, open_any)
  temp_dir = output_files.temp_path(output_paths[0] + ".beam")
  _delete(temp_dir)
  start = time.time()
  try:
    with beam.Pipeline(runner=beam_options.make_runner(runner_name),
                       options=options) as p:
      build_pipeline(p, input_files, run_cfg, model_bytes, len(output_paths),
                     temp_dir, compression, docs_per_block, max_line_chars,
                     max_lines_per_document, progress_interval,
                     beam_options.direct_workers(options, runner_name))
    records_per_file, stats = _finalize(temp_dir, output_paths, compression)
  finally:
    _delete(temp_dir)
  summary = pretraining_summary.build(
      stats, input_files, records_per_file, run_cfg, vocab_size,
      time.time() - start,
      {"compression": compression, "docs_per_block": docs_per_block,
       "runner": runner_name, "pipeline_args": beam_args})
  tmp = output_files.temp_path(summary_file)
  with FileSystems.create(tmp) as f:
    f.write(json.dumps(summary, indent=2, sort_keys=True).encode())
  FileSystems.rename([tmp], [summary_file])
  summary["summary_file"] = summary_file
  return summary


def parse_flags(argv):
  """Our flags (shared with create_pretraining_data); the rest go to Beam,
  whose options are checked here, before any input is read."""
  rest = command_line.parse_flags(argv, known_only=True)
  try:
    beam_options.pipeline_options(
        rest[1:], FLAGS.num_workers if FLAGS["num_workers"].present else None)
  except ValueError as e:
    sys.stderr.write(f"{TOOL}: error: {e}\n")
    sys.exit(1)
  return rest


def main(argv):
  pretraining_config.check_required_flags(FLAGS)
  run_cfg = pretraining_config.run_config_from_flags(FLAGS)
  try:
    if FLAGS["shuffle_buffer_size"].present:
      raise ValueError("--shuffle_buffer_size is not used by " + TOOL +
                       ": every shard is already a hash-ordered sample of "
                       "the whole corpus")
    summary = run(
        expand_inputs(FLAGS.input_file),
        tfrecord_io.expand_output_files(FLAGS.output_file), run_cfg,
        pipeline_args=argv[1:],
        num_workers=(FLAGS.num_workers if FLAGS["num_workers"].present
                     else None),
        **pretraining_config.common_run_kwargs(FLAGS))
  except (OSError, ValueError) as e:
    sys.stderr.write(f"{TOOL}: error: {e}\n")
    sys.exit(1)
  except Exception as e:  # pylint: disable=broad-except
    # Runners wrap worker errors in their own types with long multi-line
    # texts: the last line names the cause (e.g. the unreadable file).
    lines = [l.strip() for l in str(e).splitlines() if l.strip()]
    sys.stderr.write(f"{TOOL}: error: pipeline failed: "
                     f"{lines[-1] if lines else type(e).__name__}\n")
    sys.exit(1)
  pretraining_summary.report(summary, TOOL)


def cli():
  """Console-script entry point (pyproject.toml)."""
  pretraining_config.define_flags()
  app.run(main, flags_parser=parse_flags)


if __name__ == "__main__":
  cli()
