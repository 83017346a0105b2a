"""Pretraining input files checked before training.

`validate_pretraining_files` reads each file's first record (present,
non-empty, the config's lengths, token ids below the vocabulary);
`check_summaries` checks each file against the summary data_prep wrote
beside it (`data_prep/pretraining_summary.py`) and reads it once in full
(`pretraining_checks.scan_file`).
"""

import os
from typing import Optional

from absl import logging
import tensorflow as tf

from albert_tf.data import pretraining_checks
from albert_tf.data import pretraining_dataloader
from albert_toolkit import output_files
from albert_toolkit import tfrecord_io
from data_prep import pretraining_summary
from data_prep import summary_checks

# Record counts are checked against the summary up to this much data (a
# full read of larger inputs would delay every start).
_COUNT_CHECK_MAX_BYTES = 1 << 30


def validate_pretraining_files(pattern: str, seq_length: int,
                               max_predictions_per_seq: int, what: str,
                               vocab_size: Optional[int] = None):
  """Checks that the files exist, are non-empty and match the config (and,
  cheaply, that the first record's token ids are < vocab_size), and that
  they have one compression and one set of features: the input pipeline
  reads every file as it reads the first.

  Args:
    pattern: comma-separated files or globs.
    seq_length: the data config's sequence length.
    max_predictions_per_seq: the data config's.
    what: the config field the pattern comes from, for errors.
    vocab_size: the model's, or None (not checked).

  Returns the files. Raises ValueError/FileNotFoundError naming the file
  and the field.
  """
  if not pattern:
    raise ValueError(f"{what} is empty: give the pretraining TFRecord files "
                     "(comma-separated files or globs)")
  files = pretraining_dataloader.list_files(pattern)
  first = None
  for path in files:
    feats = _first_record(path, what)
    _check_first_record(path, feats, seq_length, max_predictions_per_seq,
                        vocab_size)
    kind = (tfrecord_io.detect_compression(path) or "NONE", set(feats))
    if first is None:
      first = (path, kind)
    elif kind != first[1]:
      raise _mixed_kinds(what, first, (path, kind))
  return files


def _first_record(path, what):
  """The features of `path`'s first record."""
  try:
    first = next(tfrecord_io.read_records(path), None)
  except OSError as e:  # names the file and the record
    raise ValueError(str(e)) from e
  if first is None:
    raise ValueError(f"{path}: empty input file (no records) in {what}")
  return tf.train.Example.FromString(first).features.feature


def _check_first_record(path, feats, seq_length, max_predictions_per_seq,
                        vocab_size):
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


def _mixed_kinds(what, first, other):
  """The error for two files of one input that differ in compression or
  features: (path, (compression, feature names)) each."""
  (path_a, (zip_a, names_a)), (path_b, (zip_b, names_b)) = first, other
  if zip_a != zip_b:
    differ = f"{path_a} has compression {zip_a} but {path_b} {zip_b}"
  elif names_a - names_b:
    differ = (f"{path_a} has features {sorted(names_a - names_b)} that "
              f"{path_b} lacks (it has {sorted(names_b - names_a)})")
  else:
    differ = (f"{path_b} has features {sorted(names_b - names_a)} that "
              f"{path_a} lacks")
  return ValueError(
      f"{what} mixes files the input pipeline cannot read together: "
      f"{differ}; make them with the same create_pretraining_data flags "
      "(--compression, --v2_feature_names) or use one kind")


# The way out of every summary check, in its error.
_OVERRIDE = "or set data.allow_unverified_input=true"


def check_summaries(files, config, what: str):
  """Each file against its data_prep summary: present, the file's instance
  count, vocab_size vs model.vocab_size, the lengths vs the data config,
  and the vocabulary file the summary names (still the one the data was
  made with: `summary_checks.tokenizer_files`).

  Args:
    files: the input files (`validate_pretraining_files`).
    config: the experiment config (model.vocab_size, the data lengths).
    what: the config field the files come from, for errors.

  Returns [(file, summary path, summary)]. Raises ValueError naming the
  file and the field; data.allow_unverified_input=true skips this check.
  """
  described, vocabularies_checked = [], set()
  for path in files:
    summary_path, summary = pretraining_summary.find(path)
    if summary is None:
      raise ValueError(
          f"{path}: no {os.path.basename(path)}{output_files.SUMMARY_SUFFIX}"
          f" (data_prep's record of the file) in {what}; regenerate with "
          f"create_pretraining_data {_OVERRIDE}")
    _check_size(path, summary_path, summary, config.model.vocab_size)
    _check_settings(path, summary_path, summary, config)
    if summary_path not in vocabularies_checked:
      try:
        summary_checks.tokenizer_files(summary, summary_path)
      except ValueError as e:
        raise ValueError(f"{e} ({_OVERRIDE})") from None
      vocabularies_checked.add(summary_path)
    _check_count(path, summary_path, summary, config.model.vocab_size)
    described.append((path, summary_path, summary))
  return described


def _check_size(path, summary_path, summary, vocab_size):
  """A summary of the file as it was is not the file's. A cut or corrupt
  file is named by its first bad record (or token id) first."""
  try:
    pretraining_summary.check_size(summary, summary_path, path)
  except ValueError:
    if os.path.getsize(path) <= _COUNT_CHECK_MAX_BYTES:
      pretraining_checks.scan_file(path, vocab_size)
    raise


def _check_settings(path, summary_path, summary, config):
  """The summary's vocab_size and lengths against the config; masks and
  sentence pairs to learn from."""
  if pretraining_summary.value(summary, "sentence_pair_task") == "none":
    raise ValueError(
        f"{summary_path}: {path} was made with --sentence_pair_task=none "
        "(single segments, pair label always 0): the sentence-order head "
        "would learn a constant; regenerate it with "
        "--sentence_pair_task=sop (or nsp)")
  for key, want in (
      ("vocab_size", ("model.vocab_size", config.model.vocab_size)),
      ("max_seq_length", ("data.seq_length", config.data.seq_length)),
      ("max_predictions_per_seq", ("data.max_predictions_per_seq",
                                   config.data.max_predictions_per_seq))):
    got = pretraining_summary.value(summary, key)
    if got is not None and got != want[1]:
      raise ValueError(f"{summary_path}: {key} is {got} but {want[0]} is "
                       f"{want[1]}; use matching data {_OVERRIDE}")
  if (summary.get("masked_tokens") == 0 and summary.get("instances")
      and not config.data.dynamic_masking):
    raise ValueError(f"{summary_path}: {path} holds no masked token (made "
                     "with masked_lm_prob=0?): the masked LM would learn "
                     f"nothing; regenerate the data {_OVERRIDE}")


def _check_count(path, summary_path, summary, vocab_size):
  """The file's records against the summary's count (one full read, which
  also names an unreadable record or a token id >= vocab_size)."""
  count = pretraining_summary.record_count(summary, summary_path, path)
  if not count:
    raise ValueError(f"{summary_path}: lists no instances for {path} "
                     f"{_OVERRIDE}")
  if os.path.getsize(path) <= _COUNT_CHECK_MAX_BYTES:
    actual = pretraining_checks.scan_file(path, vocab_size)
    if actual != count:
      raise ValueError(f"{path}: {actual} records but {summary_path} "
                       f"says {count} (truncated or replaced file?) "
                       f"{_OVERRIDE}")


def check_alike(described_by):
  """Raises ValueError (one line naming two files, their summaries and
  values) when the checked inputs mix vocabularies or lower-casing, or
  sentence-pair tasks (training and evaluation together), or when the
  files of one input were masked differently; warns when the evaluation
  files were masked otherwise than the training files.

  Args:
    described_by: {config field ("input_path", "eval_input_path"):
      [(file, summary path, summary)]} of the inputs checked so far.
  """
  every = [d for described in described_by.values() for d in described]
  what = " and ".join(f"data.{k}" for k in sorted(described_by))
  pretraining_summary.check_one_tokenizer(every, what)
  summary_checks.check_same(
      every, summary_checks.PAIR_TASK_KEYS, what,
      "the sentence-pair head would learn (or be judged on) other labels "
      "in each: use one kind's files (move the others away)")
  for key, described in described_by.items():
    summary_checks.check_same(
        described, summary_checks.MASKING_KEYS, f"data.{key}",
        "the masked tokens were chosen differently in each: use files "
        "masked alike (move the others away)")
  train = described_by.get("input_path")
  held_out = described_by.get("eval_input_path")
  found = train and held_out and summary_checks.first_difference(
      [train[0], held_out[0]], summary_checks.MASKING_KEYS)
  if found:
    logging.warning(summary_checks.mixed_message(
        "data.input_path and data.eval_input_path", found,
        "the evaluation's masked-LM metrics measure another masking than "
        "training's"))


def data_facts(described_by):
  """The run record's facts of the data's objective: the sentence-pair
  task (of any checked input) and the masking settings (of the training
  files; none without them)."""
  every = [d for described in described_by.values() for d in described]
  facts = summary_checks.data_facts(every[0][2],
                                    summary_checks.PAIR_TASK_KEYS)
  for _, _, summary in described_by.get("input_path", [])[:1]:
    facts.update(summary_checks.data_facts(summary,
                                           summary_checks.MASKING_KEYS))
  return facts


def warn_if_held_out_is_trained_on(files_by_field):
  """Warns when evaluation files are also training files: the evaluation
  then measures memorisation, not held-out data.

  Args:
    files_by_field: {config field ("input_path", "eval_input_path"): the
      files it matched}.
  """
  train = files_by_field.get("input_path")
  held_out = files_by_field.get("eval_input_path")
  if not (train and held_out):
    return
  trained = {output_files.real_path(p) for p in train}
  shared = [p for p in held_out if output_files.real_path(p) in trained]
  if shared:
    logging.warning("data.eval_input_path shares %d of its %d files with "
                    "data.input_path (e.g. %s): the evaluation measures data "
                    "the model trains on, not held-out data", len(shared),
                    len(held_out), shared[0])
