"""tf.data reader for ALBERT pretraining TFRecords (data_prep output).

Reads files written by `data_prep/create_pretraining_data.py`, the original
release or Model Garden: the original feature names (input_ids, segment_ids)
or Model Garden's v2 names (input_word_ids, input_type_ids), plain or GZIP.
Yields dicts with the Model Garden keys, int32 except masked_lm_weights:

  input_word_ids, input_mask, input_type_ids: [batch, seq_length]
  masked_lm_positions, masked_lm_ids, masked_lm_weights: [batch, max_predictions]
  next_sentence_labels: [batch]
  token_boundary: [batch, seq_length] (when the files have it)

Optional dynamic masking re-masks every example each time it is read (so every
epoch differs) from `token_boundary`, with the data tool's rule and the
settings the data was made with (`dynamic_masking.py`).

Usage with a distribution strategy:
  strategy.distribute_datasets_from_function(
      lambda ctx: pretraining_dataset(pattern, 128, 20, global_batch, True, ctx))
"""

import itertools
from typing import Optional

import numpy as np
import tensorflow as tf

from albert_tf.data import dynamic_masking as dynamic_masking_lib
from albert_toolkit import output_files
from albert_toolkit import tfrecord_io

# Starts the in-pipeline error of a token id >= vocab_size (one line: file,
# record, id); core/actions.py finds it in the training loop's error.
TOKEN_ID_ERROR = "Token id out of range"


def list_files(file_pattern):
  """Comma-separated files/globs -> sorted file list; error if none match,
  or if one file is matched twice (by two globs, or two paths to it), which
  would train on it twice."""
  if isinstance(file_pattern, (list, tuple)):
    patterns = list(file_pattern)
  else:
    patterns = [p.strip() for p in file_pattern.split(",") if p.strip()]
  if not patterns:
    raise ValueError(f"No pretraining data file pattern given ({file_pattern!r})")
  files = []
  for p in patterns:
    # `train.tfrecord-*` also matches data_prep's summary and temporary
    # files: not records (data_prep's input globs skip them the same way).
    is_glob = any(c in p for c in "*?[")
    matched = sorted(f for f in tf.io.gfile.glob(p)
                     if not (is_glob and output_files.is_tool_output(f)))
    if not matched:
      raise FileNotFoundError(f"No pretraining data files match {p}")
    files.extend(matched)
  seen = {}
  for path in files:
    key = output_files.real_path(path)
    if key in seen:
      raise ValueError(f"pretraining data file {path} is matched more than "
                       f"once (also as {seen[key]}) by {file_pattern!r}; "
                       "give each file once")
    seen[key] = path
  return files


def _first_example_keys(path, compression):
  for record in tfrecord_io.read_records(path, compression):
    return set(tf.train.Example.FromString(record).features.feature.keys())
  return set()


def checked_records(path, compression, chunk=256):
  """Yields [<=chunk] string arrays of records (tfrecord_io.read_records:
  errors name the file and the first record that could not be read)."""
  records = tfrecord_io.read_records(path, compression)
  while batch := list(itertools.islice(records, chunk)):
    yield np.array(batch, dtype=object)


def _name_to_features(seq_length, max_predictions_per_seq, v2_names,
                      has_token_boundary, has_label):
  ids = "input_word_ids" if v2_names else "input_ids"
  seg = "input_type_ids" if v2_names else "segment_ids"
  per_token = tf.io.FixedLenFeature([seq_length], tf.int64)
  per_prediction = tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64)
  feats = {ids: per_token, "input_mask": per_token, seg: per_token,
           "masked_lm_positions": per_prediction,
           "masked_lm_ids": per_prediction,
           "masked_lm_weights": tf.io.FixedLenFeature(
               [max_predictions_per_seq], tf.float32)}
  if has_label:
    feats["next_sentence_labels"] = tf.io.FixedLenFeature([1], tf.int64)
  if has_token_boundary:
    feats["token_boundary"] = per_token
  return feats


def _decode(record, name_to_features, v2_names):
  ex = tf.io.parse_single_example(record, name_to_features)
  out = {name: tf.cast(t, tf.int32) if t.dtype == tf.int64 else t  # for TPUs
         for name, t in ex.items()}
  if not v2_names:
    out["input_word_ids"] = out.pop("input_ids")
    out["input_type_ids"] = out.pop("segment_ids")
  if "next_sentence_labels" in out:
    out["next_sentence_labels"] = tf.reshape(out["next_sentence_labels"], [])
  else:
    out["next_sentence_labels"] = tf.zeros([], tf.int32)
  return out


def _with_origin(read):
  """read(path) -> records, as read(path) -> (path, index in file, record)."""
  return lambda path: read(path).enumerate().map(lambda i, r: (path, i, r))


def assert_ids_in_vocab(ex, path, index, vocab_size):
  """`ex`, failing (in-graph) with a message naming the file and record when
  a token id is >= vocab_size: else the embedding lookup fails later with
  `indices[7,5] = 1500 is not in [0, 1000)` on CPU (no file, no record),
  and reads zeros silently on GPU."""
  top = tf.maximum(tf.reduce_max(ex["input_word_ids"]),
                   tf.reduce_max(ex["masked_lm_ids"]))
  message = tf.strings.join([
      TOKEN_ID_ERROR, ": ", path, ": record ", tf.strings.as_string(index),
      " holds token id ", tf.strings.as_string(top),
      f" but model.vocab_size is {vocab_size}"])
  check = tf.debugging.Assert(top < vocab_size, [message])
  with tf.control_dependencies([check]):
    return {k: tf.identity(v) for k, v in ex.items()}


def pretraining_dataset(file_pattern, seq_length, max_predictions_per_seq,
                        batch_size, is_training, input_context=None,
                        dynamic_masking=False, vocab_size=None, masking=None,
                        compression="auto", v2_feature_names="auto",
                        repeat=None, shuffle_buffer_size=10000,
                        cycle_length=8, checked_reader=True, seed=None):
  """Returns a batched `tf.data.Dataset` of pretraining features.

  Args:
    file_pattern: comma-separated files/globs (or a list).
    seq_length, max_predictions_per_seq: as written by the data tool.
    batch_size: global batch size; divided per replica with `input_context`.
    is_training: shuffle files and records, repeat by default.
    input_context: `tf.distribute.InputContext`; files (or, with fewer files
      than pipelines, records) are sharded per input pipeline.
    dynamic_masking: re-mask every example on the fly (needs token_boundary,
      vocab_size and `masking`).
    masking: with dynamic_masking, the DynamicMasker settings the data was
      made with (`dynamic_masking.settings_for_files(files)`).
    vocab_size: when given, every record's token ids must be below it (an
      error naming the file and record, `assert_ids_in_vocab`).
    compression: "auto" (gzip magic of the first file), "GZIP" or "NONE".
    v2_feature_names: "auto" (from the first record), True or False.
    repeat: repeat forever; defaults to `is_training`.
    checked_reader: read records through a reader that names the file in
      corrupt/truncated-file errors (a little slower than the native reader,
      whose errors do not say which file failed).
    seed: optional seed for file/record shuffling and dynamic masking.
  """
  files = list_files(file_pattern)
  if compression == "auto":
    compression = tfrecord_io.detect_compression(files[0])
  compression = "" if compression in (None, "NONE") else compression
  keys = _first_example_keys(files[0], compression)
  if v2_feature_names == "auto":
    v2_feature_names = "input_word_ids" in keys
  has_tb = "token_boundary" in keys
  has_label = "next_sentence_labels" in keys or not keys
  if dynamic_masking and not has_tb:
    raise ValueError(f"dynamic_masking needs token_boundary, missing in {files[0]}")

  ds = tf.data.Dataset.from_tensor_slices(files)
  # Sharded per input pipeline: files, or records if there are fewer files.
  pipelines = input_context.num_input_pipelines if input_context else 1
  shard_files = len(files) >= pipelines
  if pipelines > 1 and shard_files:
    ds = ds.shard(pipelines, input_context.input_pipeline_id)
  if is_training:
    ds = ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
  if repeat or (repeat is None and is_training):
    ds = ds.repeat()

  if checked_reader:
    def read(path):
      return tf.data.Dataset.from_generator(
          checked_records, args=(path, compression),
          output_signature=tf.TensorSpec([None], tf.string)).unbatch()
  else:
    def read(path):
      return tf.data.TFRecordDataset(path, compression_type=compression)
  if vocab_size is not None:  # each record with its file and index
    read = _with_origin(read)
  ds = ds.interleave(read, cycle_length=min(cycle_length, len(files)),
                     num_parallel_calls=tf.data.AUTOTUNE,
                     deterministic=not is_training)
  if pipelines > 1 and not shard_files:
    ds = ds.shard(pipelines, input_context.input_pipeline_id)
  if is_training and shuffle_buffer_size:
    ds = ds.shuffle(shuffle_buffer_size, seed=seed)
  name_to_features = _name_to_features(seq_length, max_predictions_per_seq,
                                       v2_feature_names, has_tb, has_label)
  if vocab_size is not None:
    ds = ds.map(lambda path, index, r: assert_ids_in_vocab(
        _decode(r, name_to_features, v2_feature_names), path, index,
        vocab_size), num_parallel_calls=tf.data.AUTOTUNE)
  else:
    ds = ds.map(lambda r: _decode(r, name_to_features, v2_feature_names),
                num_parallel_calls=tf.data.AUTOTUNE)
  if dynamic_masking:
    if not masking:
      raise ValueError("dynamic_masking needs the data's masking settings "
                       "(masking=dynamic_masking.settings_for_files(files))")
    masker = dynamic_masking_lib.DynamicMasker(
        vocab_size, max_predictions_per_seq=max_predictions_per_seq,
        seed=seed, **masking)
    ds = ds.map(masker, num_parallel_calls=tf.data.AUTOTUNE)
    # A saved data position holds no random stream (TF refuses to save one:
    # "RandomUniformInt is stateful"): a resumed run draws new masks.
    options = tf.data.Options()
    options.experimental_external_state_policy = (
        tf.data.experimental.ExternalStatePolicy.IGNORE)
    ds = ds.with_options(options)
  per_replica = (input_context.get_per_replica_batch_size(batch_size)
                 if input_context else batch_size)
  ds = ds.batch(per_replica, drop_remainder=is_training)
  return ds.prefetch(tf.data.AUTOTUNE)


def bad_input(error) -> Optional[str]:
  """The file and record the token id check's error (a tf.errors.OpError
  from `pretraining_dataset(vocab_size=...)`) names, as one line; None for
  another error."""
  message = error.message
  if TOKEN_ID_ERROR not in message:
    return None
  found = message[message.index(TOKEN_ID_ERROR):]
  return found.splitlines()[0].split("]")[0]  # the message ends at the "]"
