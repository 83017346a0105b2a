"""Safe output files for the data tools: no clobbered inputs, no half files.

Promises (see docs/reliability.md, "Data preparation"):
  * an output that is also an input (corpus, vocabulary), two outputs that
    are one file, and an output that exists but is not a regular file (a
    directory, a device) are refused before anything is opened or deleted;
  * our own outputs (summaries, temporary files) are never read as corpus text
    when a glob matches them;
  * a run claims each output with a lock file (`.name.lock`: pid, host)
    while it writes it, so a second run writing the same output at once is
    refused instead of sharing the temporary file;
  * outputs are written under temporary names and renamed only when the run
    has finished, and the summary (the "this run is complete" marker) is
    deleted first and written last. A killed run (SIGKILL, full disk) leaves
    no final-named file that looks complete.

`atomic_write` / `write_json` are the one write-to-a-temporary-name-then-
rename helper of the project: data_prep's tools, and albert_tf's run records,
best-checkpoint records, metrics, feature caches and converted configs (this
module imports nothing of albert_tf, so every layer above modeling/ and
optimization/ may use it).
"""

import contextlib
import functools
import hashlib
import json
import os
import sys

from albert_toolkit import owner_lock

SUMMARY_SUFFIX = ".summary.json"
_TEMP_PREFIX = "."
_TEMP_SUFFIX = ".incomplete"
_LOCK_SUFFIX = ".lock"


class OutputInUseError(OSError):
  """Another live run is writing the same output file."""


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
      base.startswith(_TEMP_PREFIX) and base.endswith((_TEMP_SUFFIX,
                                                       _LOCK_SUFFIX)))


def lock_path(path):
  """The hidden lock file a writer of `path` holds ('dir/.name.lock')."""
  d, base = os.path.split(path)
  return os.path.join(d, f"{_TEMP_PREFIX}{base}{_LOCK_SUFFIX}")


def _in_use(output, lock, owner):
  return (f"output {output} is being written by another run (pid "
          f"{owner.get('pid')} on host {owner.get('host')}, lock file "
          f"{lock}); wait for it or choose another output name (delete the "
          "lock file if that run is gone)")


def real_path(path):
  """`path` resolved (symlinks, relative parts), the key two spellings of
  one file share; URLs as given."""
  return path if "://" in path else os.path.realpath(path)


def check_not_inputs(outputs, inputs):
  """Raises ValueError (one line naming both flags) if an output is an
  input, compared as resolved real paths (symlinks, relative paths; URLs as
  given). Every tool that reads and writes files calls it before writing.

  Args:
    outputs: (flag, path) pairs the tool writes (a None path is skipped).
    inputs: (flag, path) pairs it reads.
  """
  given = {}
  for flag, path in inputs:
    if path:
      given.setdefault(real_path(path), (flag, path))
  for flag, path in outputs:
    if path and real_path(path) in given:
      in_flag, in_path = given[real_path(path)]
      raise ValueError(f"{flag} {path} is also an input ({in_flag} "
                       f"{in_path}); refusing to overwrite it")


def check_distinct(outputs):
  """Raises ValueError (one line naming the flags) if two outputs are one
  file (the same path twice, or two paths to it: relative, symlinked). A
  run writing one file twice took over its own claim and failed after all
  the work, half the records left under the final name.

  Args:
    outputs: (flag, path) pairs the tool writes (a None path is skipped).
  """
  seen = {}
  for flag, path in outputs:
    if not path:
      continue
    key = real_path(path)
    if key not in seen:
      seen[key] = (flag, path)
    else:
      first_flag, first_path = seen[key]
      if first_flag == flag:
        raise ValueError(f"{flag} names one file twice ({first_path} and "
                         f"{path}); give each output once")
      raise ValueError(f"{flag} {path} is the same file as {first_flag} "
                       f"{first_path}; give each output its own file")


def check_output_kind(flag, path):
  """Raises ValueError (one line naming `flag` and `path`) if `path` exists
  and is not a regular file (a directory, a device such as /dev/full, a
  FIFO): the run would rename its output over it (as root, a device node
  too) or fail after all its work. URLs are not checked."""
  if (not path or "://" in path or not os.path.exists(path) or
      os.path.isfile(path)):
    return  # missing: created; a file (or a symlink to one): replaced
  what = ("a directory" if os.path.isdir(path) else
          "not a regular file (a device, FIFO or socket)")
  raise ValueError(f"{flag} {path} is {what}; give a file path to write")


def check_outputs(outputs, inputs):
  """Raises ValueError (one line naming the flags and paths) before a tool
  opens or deletes anything: an output that is also an input
  (`check_not_inputs`), two outputs that are one file (`check_distinct`),
  or an output that exists and is not a regular file (`check_output_kind`).

  Args:
    outputs: (flag, path) pairs the tool writes, its summary included (a
      None path is skipped).
    inputs: (flag, path) pairs it reads: corpus files and vocabularies.
  """
  check_not_inputs(outputs, inputs)
  check_distinct(outputs)
  for flag, path in outputs:
    check_output_kind(flag, path)


def check_disjoint(input_files, output_files, input_flag="--input_file",
                   output_flag="--output_file", inputs=(), outputs=()):
  """Raises ValueError (one line, naming the file) if an output is an input,
  two outputs are one file, an output exists and is not a regular file
  (`check_outputs`), or an input is one of our own outputs (summary,
  temporary file).

  Args:
    input_files: the corpus files (`input_flag` matched them).
    output_files: the files `output_flag` names.
    input_flag: the flag of `input_files`, in errors.
    output_flag: the flag of `output_files`, in errors.
    inputs: more (flag, path) pairs read (a vocabulary).
    outputs: more (flag, path) pairs written (a summary).
  """
  check_outputs([(output_flag, p) for p in output_files] + list(outputs),
                [(f"{input_flag} matched", p) for p in input_files] +
                list(inputs))
  for p in input_files:
    if is_tool_output(p):
      raise ValueError(f"{input_flag} {p} is an output of a data_prep tool "
                       "(summary or temporary file), not corpus text")


def read_once(files):
  """`files` with each real path once (first place kept), saying which were
  given more than once (the same file twice in --input_file, or matched by
  two overlapping globs, was read each time)."""
  seen = {}
  unique = []
  for path in files:
    key = real_path(path)
    if key in seen:
      sys.stderr.write(f"warning: input file {path} is given more than once "
                       f"(also as {seen[key]}); reading it once\n")
      continue
    seen[key] = path
    unique.append(path)
  return unique


def _remove(path):
  with contextlib.suppress(FileNotFoundError):
    os.remove(path)


def _writer_temp_path(path):
  """Like temp_path, but one per process: two writers of one file (e.g. two
  workers) never write into each other's temporary file."""
  d, base = os.path.split(path)
  return os.path.join(d, f"{_TEMP_PREFIX}{base}.{os.getpid()}{_TEMP_SUFFIX}")


def _atomic_write_gfile(path, data):
  """atomic_write for URLs (gs://, hdfs://): through tf.io.gfile."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tf.io.gfile.makedirs(os.path.dirname(path) or ".")
  tmp = _writer_temp_path(path)
  with tf.io.gfile.GFile(tmp, "wb" if isinstance(data, bytes) else "w") as f:
    f.write(data)
  tf.io.gfile.rename(tmp, path, overwrite=True)
  return path


def atomic_write(path, data):
  """Writes `data` (str: UTF-8 text, or bytes) to `path`: to a temporary name
  beside it, flushed to disk, then renamed over `path`. A reader sees the old
  file or the whole new one, never a part; a killed writer leaves only a
  hidden `.<name>.<pid>.incomplete`. Creates the directory; returns `path`.
  """
  if "://" in path:
    return _atomic_write_gfile(path, data)
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  tmp = _writer_temp_path(path)
  binary = isinstance(data, bytes)
  try:
    with open(tmp, "wb" if binary else "w",
              encoding=None if binary else "utf-8") as f:
      f.write(data)
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)
  except OSError as e:  # e.g. a full disk: the message names no file
    _remove(tmp)
    raise OSError(e.errno, f"Cannot write {path}: {e.strerror or e}") from e
  except BaseException:
    _remove(tmp)
    raise
  return path


def write_json(path, obj, indent=2, **json_kwargs):
  """Writes `obj` as JSON (sorted keys unless sort_keys=False) atomically."""
  json_kwargs.setdefault("sort_keys", True)
  return atomic_write(path, json.dumps(obj, indent=indent, **json_kwargs))


class OutputClaim:
  """The claim on outputs: each one's hidden lock file (`lock_path`) held
  from creation to release(). OutputInUseError (one line naming the output
  and the owner's pid and host) while another live run holds one; a dead
  owner's claim is taken over with a warning. URLs (gs://) cannot hold a
  lock file and are not claimed.

  Args:
    final_paths: the outputs (local paths; their directories are created).
  """

  def __init__(self, final_paths):
    self._locks = []
    local = [p for p in final_paths if "://" not in p]
    for p in local:
      os.makedirs(os.path.dirname(p) or ".", exist_ok=True)
    try:
      for p in local:
        lock = owner_lock.OwnerLock(lock_path(p), OutputInUseError,
                                    functools.partial(_in_use, p))
        lock.acquire()
        self._locks.append(lock)
    except BaseException:
      self.release()
      raise

  def release(self):
    for lock in self._locks:
      lock.release()
    self._locks = []

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.release()


class StagedOutputs:
  """Final paths -> temporary paths; commit() renames, abort() deletes.

  Creating it claims every output (its lock file; OutputInUseError while
  another live run holds one) and then deletes a stale `summary_file`, so
  outputs of an earlier run are never described by a summary that is not
  theirs. commit() and abort() release the claim.
  """

  def __init__(self, final_paths, summary_file=None):
    self.final_paths = list(final_paths)
    self.temp_paths = [temp_path(p) for p in self.final_paths]
    self.summary_file = summary_file
    self._claim = OutputClaim(self.final_paths)
    replaced = [p for p in self.final_paths if os.path.exists(p)]
    if replaced:  # said, as any other change to what is on disk
      more = f" and {len(replaced) - 1} more" if len(replaced) > 1 else ""
      sys.stderr.write(f"note: replacing the existing {replaced[0]}{more}\n")
    if summary_file:
      _remove(summary_file)

  def _release(self):
    self._claim.release()

  def commit(self, summary=None, stale=()):
    """Renames every temporary file to its final name, then writes the
    summary. `stale`: files removed first (summaries of an earlier run that
    describe the outputs replaced now): a run killed in between leaves
    files without a summary, never a summary of other files."""
    try:
      for path in stale:
        _remove(path)
      for tmp, final in zip(self.temp_paths, self.final_paths):
        os.replace(tmp, final)
      if self.summary_file and summary is not None:
        write_json(self.summary_file, summary)
    finally:
      self._release()

  def abort(self):
    for tmp in self.temp_paths:
      _remove(tmp)
    self._release()


def file_sha256(path):
  """Hex SHA-256 of a local file's content; None when there is no local
  file (an empty path, a URL such as gs://)."""
  if not path or not os.path.isfile(path):
    return None
  digest = hashlib.sha256()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      digest.update(block)
  return digest.hexdigest()
