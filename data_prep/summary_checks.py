"""What a reader of pretraining data checks with the data's summaries.

The vocabulary (`tokenizer_files`): the SentencePiece model or WordPiece
vocabulary a summary names must still be the file the data was made with
(the summary's sha256 of it), else the ids would mean other pieces in
training, in the run record and in every export.

The objective (`check_same`, `data_facts`): the files a run trains and
evaluates on must share the sentence-pair task (the labels its head
learns), and the files of one input their masking settings.
"""

import os

from albert_toolkit import output_files
from data_prep import pretraining_summary

# The summary keys naming the vocabulary file, one per kind.
VOCAB_KEYS = ("spm_model_file", "vocab_file")


def _places(recorded, summary_path):
  """Where a recorded vocabulary path may be now. Summaries record it
  absolute; older ones as given to data prep, relative to a directory they
  do not record: beside the summary (a data directory that holds its
  model), then the working directory."""
  if "://" in recorded or os.path.isabs(recorded):
    return [recorded]
  beside = os.path.join(os.path.dirname(os.path.abspath(summary_path)),
                        recorded)
  return list(dict.fromkeys([beside, os.path.abspath(recorded)]))


def _kind(summary):
  return ("WordPiece vocabulary"
          if pretraining_summary.value(summary, "vocab_kind") == "wordpiece"
          else "SentencePiece model")


def _locate(recorded, summary, summary_path):
  """The vocabulary file `recorded` in a summary, where it is now."""
  places = _places(recorded, summary_path)
  if "://" in places[0]:
    return places[0]  # no local file to hash: not checked
  kind = _kind(summary)
  found = [p for p in places if os.path.isfile(p)]
  if not found:
    looked = " or ".join(places)
    raise ValueError(f"{summary_path}: the data was made with the {kind} "
                     f"{recorded}, but there is no file {looked}; restore "
                     "it or regenerate the data")
  want = pretraining_summary.vocab_sha256(summary)
  for path in found:
    if want is None or output_files.file_sha256(path) == want:
      return path
  got = output_files.file_sha256(found[0])
  raise ValueError(f"{found[0]} is not the {kind} the data was made with: "
                   f"its sha256 is {got[:12]}... but {summary_path} records "
                   f"{want[:12]}... (the file was replaced; the same token "
                   "id means another piece); restore it or regenerate the "
                   "data")


def tokenizer_files(summary, summary_path):
  """{"spm_model_file": path, "vocab_file": path} of the data a summary
  describes: the vocabulary file it names, as an absolute path ("" for the
  other kind, or when the summary names none). URLs are returned as they
  are.

  Args:
    summary: the summary dict (`pretraining_summary.find`).
    summary_path: its path; an older summary's relative path is looked for
      beside it, then in the working directory.

  Raises:
    ValueError: one line naming the summary and the file, when the file is
      missing or its sha256 is not the one the summary records.
  """
  out = dict.fromkeys(VOCAB_KEYS, "")
  for key in VOCAB_KEYS:
    recorded = pretraining_summary.value(summary, key)
    if recorded:
      out[key] = _locate(recorded, summary, summary_path)
  return out


# What the files of a training run must agree on besides the tokenizer
# (pretraining_summary.check_one_tokenizer): the labels the sentence-pair
# head learns, and how the masked tokens were chosen.
PAIR_TASK_KEYS = ("sentence_pair_task",)
MASKING_KEYS = ("masked_lm_prob", "ngram", "favor_shorter_ngram",
                "do_whole_word_mask", "do_permutation")


def first_difference(described, keys):
  """(key, (file, summary path, value), (file, summary path, value)) of
  the first setting in `keys` on which a file differs from the first one,
  or None. A summary without the key (an older data_prep) is not compared.

  Args:
    described: [(file, summary path, summary)].
    keys: summary keys (top level or under `config`).
  """
  if not described:
    return None
  path, summary_path, summary = described[0]
  for key in keys:
    mine = pretraining_summary.value(summary, key)
    for other, other_summary_path, other_summary in described[1:]:
      theirs = pretraining_summary.value(other_summary, key)
      if None not in (mine, theirs) and mine != theirs:
        return (key, (path, summary_path, mine),
                (other, other_summary_path, theirs))
  return None


def check_same(described, keys, what, why):
  """Raises ValueError (one line naming both files, both summaries and
  both values) when the files differ in a setting of `keys`.

  Args:
    described: [(file, summary path, summary)].
    keys: the settings compared (PAIR_TASK_KEYS, MASKING_KEYS).
    what: the input, for the error ("data.input_path").
    why: what goes wrong with such a mix, for the error.
  """
  found = first_difference(described, keys)
  if found:
    raise ValueError(mixed_message(what, found, why))


def mixed_message(what, found, why):
  """The one line saying two files differ in a setting (`found`:
  `first_difference`'s)."""
  key, (a, a_summary, mine), (b, b_summary, theirs) = found
  return (f"{what} mixes data made with different {key}: {a} has {mine!r} "
          f"({a_summary}) but {b} has {theirs!r} ({b_summary}); {why}")


def data_facts(summary, keys):
  """{key: value} of the settings in `keys` a summary records."""
  out = {}
  for key in keys:
    value = pretraining_summary.value(summary, key)
    if value is not None:
      out[key] = value
  return out
