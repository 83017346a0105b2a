r"""The transforms of beam_pretraining_data (its launcher: the tool's module).

The transforms call create_pretraining_data's `iter_blocks` and
`process_block`, so the set of instances equals the local tool's for the same
input and flags.

Pipeline:
  read      one task reads the inputs in order and groups documents into the
            local tool's blocks (global document indices: the RNG of a
            (document, dupe pass) is seeded by them, so reading is sequential;
            it is a small part of the work, see docs/data_prep.md);
  instances Reshuffle (on Dask: round-robin partitions), then per block:
            tokenize once, all dupe passes, mask, serialize (parallel over
            blocks, on any number of workers);
  shards    each record gets a key hashed from (random_seed, block, index in
            block): key mod N picks its shard, and a shard is written sorted
            by key. Two runs, with any number of workers, write byte-identical
            files (TFDS's BeamWriter does the same). A block's records for
            one shard cross the shuffle as one zlib-compressed element.
  result    the shard counts and skip counters, gathered on one key, go to
            RESULT in the temporary directory (also exported as Beam metrics).
The SentencePiece model travels to workers inside the DoFn; no TensorFlow.
"""

import collections
import hashlib
import itertools
import json
import os
import struct
import typing
import zlib

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from data_prep import create_pretraining_data as cpd
from albert_toolkit import tfrecord_io

TOOL = "beam_pretraining_data"
RESULT = "result.json"


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


def match_any(pattern):
  """The paths `pattern` matches on any Beam filesystem."""
  return [m.path for r in FileSystems.match([pattern]) for m in r.metadata_list]


def block_chars(block):
  """Characters of text in a block: the unit of the progress lines."""
  return sum(len(line) for doc in block[1] for line in doc)


def _count(stats):
  for key, value in stats.items():
    if value:
      Metrics.counter(TOOL, key).inc(value)


def select(element, kind):
  """The value of a (kind, value) element if its kind is `kind`.

  The DoFns with several outputs tag them in the element, not with Beam's
  tagged outputs: Beam 2.77's DaskRunner gives all outputs of a ParDo one
  collection, tags ignored (docs/data_prep.md).
  """
  if element[0] == kind:
    yield element[1]


def keyed_part(element, kind):
  """(kind, value) elements of `kind`, all under one key (the result's)."""
  if element[0] == kind:
    yield 0, element


class ReadBlocks(beam.DoFn):
  """Read partition i of `parts` -> the local tool's blocks (first document
  index, documents) whose number is i mod parts, as ("block", block); then,
  from partition 0 only, the summed stats ("stats") and the characters of
  its blocks ("chars", block_chars).

  Every partition reads all of the input (document indices are global);
  with parts > 1 (Dask) that is `parts` times the read, a few percent of the
  CPU (docs/data_prep.md).
  """

  def __init__(self, input_files, docs_per_block, max_line_chars,
               max_lines_per_document, progress_interval, parts=1):
    self._args = (input_files, docs_per_block, max_line_chars,
                  max_lines_per_document)
    self._interval = progress_interval
    self._parts = parts

  def process(self, part):
    files, docs_per_block, max_line_chars, max_lines = self._args
    stats = collections.Counter()
    total = sum(m.size_in_bytes for r in FileSystems.match(files)
                for m in r.metadata_list)
    progress = cpd.Progress(total, self._interval if part == 0 else 0,
                            tool=f"{TOOL} read")
    chars = 0
    blocks = cpd.iter_blocks(files, stats, docs_per_block, max_line_chars,
                             max_lines, progress.add_bytes, open_any)
    for n, block in enumerate(blocks):
      if n % self._parts == part:
        chars += block_chars(block)
        yield "block", block
      progress.maybe_report(stats)
    if part == 0:
      _count(stats)
      yield "stats", dict(stats)
      yield "chars", chars


class MakeInstances(beam.DoFn):
  """Block -> ("records", (shard, pack_records of its records)) and
  ("stats", the block's stats).

  One element per (block, shard), compressed: fewer, smaller elements for
  the runner's data plane and shuffle. With `workers` (the DirectRunner's,
  which splits the blocks evenly) each worker logs its progress against its
  share of the text; Dataflow, Flink and Spark show theirs in their UI.
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
    cpd.init_worker(self._run_cfg, self._model_bytes)  # the model: in the DoFn

  def process(self, block, total_chars=None):
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
      yield "records", (shard, pack_records(keyed))
    _count(stats)
    yield "stats", dict(stats)

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


def write_result(grouped, temp_dir):
  """(key, all ("count", (shard, count)) and ("stats", dict)) -> result.json."""
  counts, stats = {}, collections.Counter()
  for kind, value in grouped[1]:
    if kind == "count":
      counts[value[0]] = value[1]
    else:
      stats.update(value)
  with FileSystems.create(f"{temp_dir}/{RESULT}") as f:
    f.write(json.dumps({"counts": counts, "stats": dict(stats)}).encode())


def _read_partitions(p, parts):
  """One element per read partition (0 .. parts-1).

  One Create on most runners: Reshuffle then spreads the blocks (Direct,
  Dataflow, Flink, Spark). Beam 2.77's DaskRunner puts a Create's elements in
  one partition, keeps every step's partitions and makes Reshuffle a no-op;
  a worker that read the blocks would also make all their instances. There
  each partition gets a Create of its own, flattened: `parts` tasks with no
  inputs, which Dask spreads over the workers.
  """
  if parts == 1:
    return p | "Start" >> beam.Create([0])
  return ([p | f"Start{i}" >> beam.Create([i]) for i in range(parts)]
          | "Starts" >> beam.Flatten())


def build_pipeline(p, input_files, run_cfg, model_bytes, num_shards, temp_dir,
                   compression, docs_per_block, max_line_chars,
                   max_lines_per_document, progress_interval, workers=None,
                   parts=1):
  """Adds the transforms to pipeline `p` (`workers`: see MakeInstances;
  `parts`: see _read_partitions).

  Only transforms every runner translates faithfully: no tagged outputs (see
  select), one side input, on the DirectRunner only (the DaskRunner would
  compute a side input again in every task that reads it), and the result
  gathered with a GroupByKey on one key.
  """
  read = _read_partitions(p, parts) | "ReadBlocks" >> beam.ParDo(ReadBlocks(
      input_files, docs_per_block, max_line_chars, max_lines_per_document,
      progress_interval, parts))
  progress = {}
  if workers:
    chars = read | "SelectChars" >> beam.FlatMap(select, "chars")
    progress["total_chars"] = beam.pvalue.AsSingleton(chars)
  blocks = read | "SelectBlocks" >> beam.FlatMap(select, "block")
  if parts == 1:
    blocks = blocks | "SpreadBlocks" >> beam.Reshuffle()
  made = blocks | "MakeInstances" >> beam.ParDo(
      MakeInstances(run_cfg, model_bytes, num_shards, workers,
                    progress_interval), **progress)
  counts = (made | "SelectRecords" >> beam.FlatMap(select, "records")
            .with_output_types(typing.Tuple[int, bytes])
            | "GroupByShard" >> beam.GroupByKey()
            | "WriteShards" >> beam.Map(write_shard, temp_dir, compression)
            | "TagCounts" >> beam.Map(lambda count: ("count", count)))
  parts_of_result = [
      read | "ReadStats" >> beam.FlatMap(keyed_part, "stats"),
      made | "BlockStats" >> beam.FlatMap(keyed_part, "stats"),
      counts | "Counts" >> beam.FlatMap(keyed_part, "count")]
  _ = (parts_of_result | "AllParts" >> beam.Flatten()
       | "Together" >> beam.GroupByKey()
       | "WriteResult" >> beam.Map(write_result, temp_dir))
