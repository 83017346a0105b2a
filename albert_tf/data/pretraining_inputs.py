"""Pretraining input files checked before training.

`validate_pretraining_files` reads each file's first record (present,
non-empty, the config's lengths, token ids below the vocabulary);
`check_summaries` checks each file against the summary data_prep wrote
beside it (`data_prep/pretraining_summary.py`) and reads it once in full
(`pretraining_checks.scan_file`).
"""

import os
from typing import Optional

import tensorflow as tf

from albert_tf.data import pretraining_checks
from albert_tf.data import pretraining_dataloader
from albert_toolkit import output_files
from albert_toolkit import tfrecord_io
from data_prep import pretraining_summary

# Record counts are checked against the summary up to this much data (a
# full read of larger inputs would delay every start).
_COUNT_CHECK_MAX_BYTES = 1 << 30



def validate_pretraining_files(pattern: str, seq_length: int,
                               max_predictions_per_seq: int, what: str,
                               vocab_size: Optional[int] = None):
  """Checks that the files exist, are non-empty and match the config (and,
  cheaply, that the first record's token ids are < vocab_size).

  Raises ValueError/FileNotFoundError naming the file and the field.
  """
  if not pattern:
    raise ValueError(f"{what} is empty: give the pretraining TFRecord files "
                     "(comma-separated files or globs)")
  files = pretraining_dataloader.list_files(pattern)
  for path in files:
    try:
      first = next(tfrecord_io.read_records(path), None)
    except OSError as e:  # names the file and the record
      raise ValueError(str(e)) from e
    if first is None:
      raise ValueError(f"{path}: empty input file (no records) in {what}")
    feats = tf.train.Example.FromString(first).features.feature
    ids_key = "input_word_ids" if "input_word_ids" in feats else "input_ids"
    for key, want, field in (
        (ids_key, seq_length, "data.seq_length"),
        ("masked_lm_positions", max_predictions_per_seq,
         "data.max_predictions_per_seq")):
      if key not in feats:
        raise ValueError(f"{path}: not a pretraining file (no feature "
                         f"{key!r}; has {sorted(feats)})")
      got = len(feats[key].int64_list.value)
      if got != want:
        raise ValueError(
            f"{path}: feature {key!r} has length {got} but {field} is "
            f"{want}; regenerate the data or set {field}={got}")
    ids = feats[ids_key].int64_list.value
    if vocab_size is not None and ids and max(ids) >= vocab_size:
      raise ValueError(
          f"{path}: token id {max(ids)} in the first record but "
          f"model.vocab_size is {vocab_size}; the data was made with a "
          "larger SentencePiece model")
  return files


def check_summaries(files, config, what: str):
  """Each file against its data_prep summary: present, the file's instance
  count, vocab_size vs model.vocab_size, the lengths vs the data config.

  Returns [(file, summary path, summary)]. Raises ValueError naming the
  file and the field; data.allow_unverified_input=true skips this check.
  """
  described = []
  override = "or set data.allow_unverified_input=true"
  for path in files:
    summary_path, summary = pretraining_summary.find(path)
    if summary is None:
      raise ValueError(f"{path}: no {os.path.basename(path)}{output_files.SUMMARY_SUFFIX}"
                       " (data_prep's record of the file) in " + what +
                       f"; regenerate with create_pretraining_data {override}")
    for key, want in (
        ("vocab_size", ("model.vocab_size", config.model.vocab_size)),
        ("max_seq_length", ("data.seq_length", config.data.seq_length)),
        ("max_predictions_per_seq", ("data.max_predictions_per_seq",
                                     config.data.max_predictions_per_seq))):
      got = pretraining_summary.value(summary, key)
      if got is not None and got != want[1]:
        raise ValueError(f"{summary_path}: {key} is {got} but {want[0]} is "
                         f"{want[1]}; use matching data {override}")
    if (summary.get("masked_tokens") == 0 and summary.get("instances")
        and not config.data.dynamic_masking):
      raise ValueError(f"{summary_path}: {path} holds no masked token (made "
                       "with masked_lm_prob=0?): the masked LM would learn "
                       f"nothing; regenerate the data {override}")
    count = pretraining_summary.record_count(summary, summary_path,
                                             path)
    if not count:
      raise ValueError(f"{summary_path}: lists no instances for {path} "
                       f"{override}")
    if os.path.getsize(path) <= _COUNT_CHECK_MAX_BYTES:
      # One read: the count, unreadable records and token ids, named.
      actual = pretraining_checks.scan_file(path, config.model.vocab_size)
      if actual != count:
        raise ValueError(f"{path}: {actual} records but {summary_path} "
                         f"says {count} (truncated or replaced file?) "
                         f"{override}")
    described.append((path, summary_path, summary))
  return described
