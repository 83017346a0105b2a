"""Shared feature plumbing for fine-tuning: packing, TFRecord cache, datasets.

Text becomes ids only through `data_prep.tokenization`'s tokenizers
(SentencePiece `FullTokenizer` or the WordPiece tokenizer: the tokenizer
pretraining data and the export preprocessing use), so fine-tuning features
are normalised exactly as pretraining text was.

Features are written once to TFRecords under a cache directory, in files whose
name carries a fingerprint of everything that changes them (input files'
sizes and mtimes, SentencePiece model, lowercasing, lengths); a second run
with the same settings reads the cache. Each cache file has a JSON sidecar
`<file>.json` holding the record count and any metadata postprocessing needs
(SQuAD's token-to-character maps).
"""

import hashlib
import json
import os
import time

from absl import logging
import numpy as np
import tensorflow as tf

from albert_tf.modeling.networks.albert_encoder import INPUT_NAMES
from albert_toolkit import output_files


def truncate_pair(tokens_a, tokens_b, max_length):
  """Cuts the longer list first until len(a) + len(b) <= max_length.

  The original's rule (`_truncate_seq_pair`); returns new lists.
  """
  a, b = list(tokens_a), list(tokens_b)
  while len(a) + len(b) > max_length:
    if len(a) > len(b):
      a.pop()
    else:
      b.pop()
  return a, b


def pack_pair(tokenizer, ids_a, ids_b, max_seq_length):
  """`[CLS] a [SEP] (b [SEP])` padded to `max_seq_length`.

  `ids_b` may be None (single segment). The pair is truncated longest-first
  to fit. Returns dict of int lists `input_word_ids`, `input_mask`,
  `input_type_ids`, each of length max_seq_length.
  """
  if ids_b is None:
    return pack(tokenizer, list(ids_a)[:max_seq_length - 2], None,
                max_seq_length)
  ids_a, ids_b = truncate_pair(ids_a, ids_b, max_seq_length - 3)
  return pack(tokenizer, ids_a, ids_b or None, max_seq_length)


def pack(tokenizer, ids_a, ids_b, max_seq_length):
  """`[CLS] a [SEP]` (type 0), then `b [SEP]` (type 1) unless `ids_b` is
  None, padded to `max_seq_length` (no truncation)."""
  ids = [tokenizer.cls_id] + list(ids_a) + [tokenizer.sep_id]
  types = [0] * len(ids)
  if ids_b is not None:
    ids += list(ids_b) + [tokenizer.sep_id]
    types += [1] * (len(ids_b) + 1)
  return pad_features(ids, types, max_seq_length, tokenizer.pad_id)


def pad_features(ids, types, max_seq_length, pad_id=0):
  n = len(ids)
  if n > max_seq_length:
    raise ValueError(f"{n} tokens do not fit max_seq_length {max_seq_length}")
  pad = max_seq_length - n
  return {"input_word_ids": list(ids) + [pad_id] * pad,
          "input_mask": [1] * n + [0] * pad,
          "input_type_ids": list(types) + [0] * pad}


# --- Cache --------------------------------------------------------------------


def _file_fingerprint(path):
  if not path or not tf.io.gfile.exists(path):
    return (path, None)
  stat = tf.io.gfile.stat(path)
  return (os.path.abspath(path), stat.length, stat.mtime_nsec)


def fingerprint(input_files, tokenizer, **settings):
  """Short hash of inputs + tokenizer + settings (names a cache file)."""
  key = {
      "inputs": [_file_fingerprint(p) for p in sorted(input_files)],
      "spm": _file_fingerprint(tokenizer.vocab_path),  # either kind
      "lower": tokenizer.do_lower_case,
      "settings": sorted((k, repr(v)) for k, v in settings.items()),
  }
  return hashlib.sha1(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]


def to_example(features):
  """Dict name -> int or float (lists / arrays) -> tf.train.Example."""
  out = {}
  for name, value in features.items():
    arr = np.asarray(value).reshape(-1)
    if arr.dtype.kind == "f":
      out[name] = tf.train.Feature(float_list=tf.train.FloatList(
          value=arr.astype(np.float32)))
    else:
      out[name] = tf.train.Feature(int64_list=tf.train.Int64List(
          value=arr.astype(np.int64)))
  return tf.train.Example(features=tf.train.Features(feature=out))


def write_records(path, feature_iter, metadata=None, log_every=5000):
  """Writes feature dicts to `path` (atomically) + `path.json` sidecar.

  `metadata`: dict, or a callable returning one once all features are
  written (for metadata collected while converting). Returns the number of
  records. Logs progress (records/s).
  """
  tf.io.gfile.makedirs(os.path.dirname(path) or ".")
  tmp = path + ".tmp"
  count = 0
  start = time.time()
  with tf.io.TFRecordWriter(tmp) as writer:
    for features in feature_iter:
      writer.write(to_example(features).SerializeToString())
      count += 1
      if log_every and count % log_every == 0:
        rate = count / max(time.time() - start, 1e-6)
        logging.info("%s: %d features written (%.0f/s)", path, count, rate)
  meta = dict((metadata() if callable(metadata) else metadata) or {})
  meta["num_records"] = count
  tf.io.gfile.rename(tmp, path, overwrite=True)
  # The sidecar last: it marks the records complete.
  output_files.write_json(path + ".json", meta)
  return count


def cached_records(path, build_fn):
  """Returns (path, metadata), calling `build_fn(path)` unless cached.

  `build_fn` writes `path` with `write_records` (which writes the sidecar
  last, so an interrupted build is rebuilt).
  """
  if tf.io.gfile.exists(path) and tf.io.gfile.exists(path + ".json"):
    logging.info("Using cached features %s", path)
  else:
    build_fn(path)
  with tf.io.gfile.GFile(path + ".json") as f:
    return path, json.load(f)


# --- Datasets -----------------------------------------------------------------


def feature_spec(input_shape, **more):
  """name -> (shape, dtype) of the three inputs (int64, `input_shape`) and
  of `more` (each a task's labels or indices)."""
  spec = {name: (input_shape, tf.int64) for name in INPUT_NAMES}
  spec.update(more)
  return spec


def record_decoder(feature_spec):
  """A function: serialized tf.Example -> dict (int64 features as int32)."""
  spec = {name: tf.io.FixedLenFeature(shape, dtype)
          for name, (shape, dtype) in feature_spec.items()}

  def decode(record):
    example = tf.io.parse_single_example(record, spec)
    return {k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v
            for k, v in example.items()}
  return decode


def decoded_records(path, feature_spec):
  """Unbatched dataset of decoded records (int64 -> int32), in file order."""
  return tf.data.TFRecordDataset(path).map(record_decoder(feature_spec))


def record_dataset(path, feature_spec, batch_size, is_training,
                   input_context=None, shuffle_buffer=10000, seed=None,
                   drop_remainder=None):
  """TFRecords -> batched dicts of int32/float32 tensors.

  `feature_spec`: name -> (shape, dtype) with dtype tf.int64 or tf.float32
  (int64 features are cast to int32, what TPUs/XLA want). Training data is
  sharded per input pipeline, repeated and shuffled; eval data is read once
  in order and the last partial batch is kept.
  """
  decode = record_decoder(feature_spec)
  ds = tf.data.TFRecordDataset(path)
  if is_training:
    if input_context and input_context.num_input_pipelines > 1:
      ds = ds.shard(input_context.num_input_pipelines,
                    input_context.input_pipeline_id)
    ds = ds.repeat().shuffle(shuffle_buffer, seed=seed)
  ds = ds.map(decode, num_parallel_calls=tf.data.AUTOTUNE)
  if input_context is not None:
    batch_size = input_context.get_per_replica_batch_size(batch_size)
  ds = ds.batch(batch_size, drop_remainder=(
      is_training if drop_remainder is None else drop_remainder))
  return ds.prefetch(tf.data.AUTOTUNE)
