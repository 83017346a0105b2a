"""What a reader of pretraining data checks with the data's summaries.

The vocabulary (`tokenizer_files`): the SentencePiece model or WordPiece
vocabulary a summary names must still be the file the data was made with
(the summary's sha256 of it), else the ids would mean other pieces in
training, in the run record and in every export.
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
