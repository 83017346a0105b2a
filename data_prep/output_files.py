"""Safe output files for the data tools: no clobbered inputs, no half files.

Promises (see docs/reliability.md, "Data preparation"):
  * an output that is also an input is refused before anything is opened;
  * our own outputs (summaries, temporary files) are never read as corpus text
    when a glob matches them;
  * outputs are written under temporary names and renamed only when the run
    has finished, and the summary (the "this run is complete" marker) is
    deleted first and written last. A killed run (SIGKILL, full disk) leaves
    no final-named file that looks complete.
"""

import json
import os

SUMMARY_SUFFIX = ".summary.json"
_TEMP_PREFIX = "."
_TEMP_SUFFIX = ".incomplete"


def temp_path(path):
  """Hidden temporary name next to `path` ('dir/.name.incomplete').

  Hidden, so patterns like 'train.tfrecord-*' (or 'dir/*' in a shell) do not
  match it, and in the same directory, so the final rename is atomic.
  """
  d, base = os.path.split(path)
  return os.path.join(d, f"{_TEMP_PREFIX}{base}{_TEMP_SUFFIX}")


def is_tool_output(path):
  """True for files only our tools write (summaries, temporary files)."""
  base = os.path.basename(path)
  return base.endswith(SUMMARY_SUFFIX) or (
      base.startswith(_TEMP_PREFIX) and base.endswith(_TEMP_SUFFIX))


def check_disjoint(input_files, output_files, input_flag="--input_file",
                   output_flag="--output_file"):
  """Raises ValueError (one line, naming the file) if an output is an input."""
  inputs = {os.path.realpath(p): p for p in input_files}
  for out in output_files:
    real = os.path.realpath(out)
    if real in inputs:
      raise ValueError(f"{output_flag} {out} is also an input "
                       f"({input_flag} matched {inputs[real]}); refusing to "
                       "overwrite it")
  for p in input_files:
    if is_tool_output(p):
      raise ValueError(f"{input_flag} {p} is an output of a data_prep tool "
                       "(summary or temporary file), not corpus text")


def _remove(path):
  try:
    os.remove(path)
  except FileNotFoundError:
    pass


def write_json(path, obj):
  """Writes JSON atomically (temporary name, then rename)."""
  d = os.path.dirname(path)
  if d:
    os.makedirs(d, exist_ok=True)
  tmp = temp_path(path)
  try:
    with open(tmp, "w", encoding="utf-8") as f:
      json.dump(obj, f, indent=2, sort_keys=True)
  except OSError as e:  # e.g. a full disk: the message names no file
    _remove(tmp)
    raise OSError(e.errno, f"Cannot write {path}: {e.strerror or e}") from e
  os.replace(tmp, path)


class StagedOutputs:
  """Final paths -> temporary paths; commit() renames, abort() deletes.

  Creating it deletes a stale `summary_file`, so outputs of an earlier run
  are never described by a summary that is not theirs.
  """

  def __init__(self, final_paths, summary_file=None):
    self.final_paths = list(final_paths)
    self.temp_paths = [temp_path(p) for p in self.final_paths]
    self.summary_file = summary_file
    if summary_file:
      _remove(summary_file)
    for p in self.final_paths:
      d = os.path.dirname(p)
      if d:
        os.makedirs(d, exist_ok=True)

  def commit(self, summary=None):
    """Renames every temporary file to its final name, then the summary."""
    for tmp, final in zip(self.temp_paths, self.final_paths):
      os.replace(tmp, final)
    if self.summary_file and summary is not None:
      write_json(self.summary_file, summary)

  def abort(self):
    for tmp in self.temp_paths:
      _remove(tmp)
