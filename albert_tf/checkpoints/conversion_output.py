"""Where a checkpoint conversion writes (conversion.convert).

Before the checkpoint is read: --output_name is a name (no directory part),
--output_dir is or can be made a directory, every vocabulary file to copy is
a readable file, and (without --overwrite) no file the conversion writes is
in --output_dir already, unless it holds the same bytes.

Then `Staging` makes the write all or nothing: every output goes into a
hidden directory inside --output_dir and is moved in only once all of them
are written, the checkpoint state file last; a checkpoint being replaced is
deleted after that. A failed conversion leaves --output_dir as it was.
"""

import glob
import os
import uuid
from typing import Dict, List, Optional, Union

import tensorflow as tf

from albert_tf.checkpoints import canonical_weights as cw
from albert_tf.checkpoints import paths
from albert_tf.checkpoints.canonical_weights import CheckpointConversionError

_STAGING_SUFFIX = ".incomplete"


def check_output_name(name: Optional[str]) -> None:
  """--output_name is a checkpoint name inside --output_dir: one with a
  directory part (`../other/model.ckpt`, an absolute path) would write, and
  replace, checkpoints outside it."""
  if name is None:
    return
  if (not name or name in (".", "..") or os.path.isabs(name) or "/" in name
      or os.sep in name):
    raise CheckpointConversionError(
        f"--output_name {name!r}: give a checkpoint name without a "
        "directory part (e.g. ckpt); --output_dir says where it goes")


def check_output_dir_usable(output_dir: str) -> None:
  """Refuses an --output_dir that is a file (or below one) or that cannot be
  written; a missing one is fine (it is created)."""
  if not output_dir:
    raise CheckpointConversionError("--output_dir: no directory given")
  if "://" in output_dir:
    return
  path = os.path.abspath(output_dir)
  while not os.path.lexists(path):
    path = os.path.dirname(path)
  if not os.path.isdir(path):
    raise CheckpointConversionError(
        f"--output_dir {output_dir}: {path} exists and is not a directory")
  if not os.access(path, os.W_OK | os.X_OK):
    raise CheckpointConversionError(
        f"--output_dir {output_dir}: {path} is not writable")


def check_vocab_file(path: str, what: str) -> None:
  """`path` is a file we can read (`what`: the flag or source naming it)."""
  if not tf.io.gfile.exists(path):
    raise CheckpointConversionError(f"{what} {path}: no such file")
  if tf.io.gfile.isdir(path):
    raise CheckpointConversionError(f"{what} {path} is a directory, not a "
                                    "vocabulary file")
  try:
    with tf.io.gfile.GFile(path, "rb") as f:
      f.read(1)
  except (OSError, tf.errors.OpError) as e:
    raise CheckpointConversionError(
        f"{what} {path}: cannot read it ({type(e).__name__})") from e


def _read(path: str) -> bytes:
  with tf.io.gfile.GFile(path, "rb") as f:
    return f.read()


def check_not_replacing(output_dir: str, prefix_name: str,
                        files: Dict[str, Union[bytes, str]]) -> None:
  """Without --overwrite: refuses when a file the conversion writes is in
  `output_dir` already with other contents (the same bytes are fine).

  Args:
    output_dir: the output directory.
    prefix_name: the checkpoint's name (its `.data-*` files).
    files: name -> the bytes to be written there, or the path of the file
      to be copied there (a vocabulary file).
  """
  if not tf.io.gfile.isdir(output_dir):
    return
  there = tf.io.gfile.glob(
      os.path.join(glob.escape(output_dir), glob.escape(prefix_name) +
                   ".data-*"))
  clashes = [os.path.basename(p) for p in there]
  for name, data in files.items():
    path = os.path.join(output_dir, name)
    if not tf.io.gfile.exists(path):
      continue
    if tf.io.gfile.isdir(path) or _read(path) != (
        data if isinstance(data, bytes) else _read(data)):
      clashes.append(name)
  if clashes:
    raise CheckpointConversionError(
        f"--output_dir {output_dir} already holds "
        f"{cw.summarize_names(sorted(clashes))}, which the conversion would "
        "replace; use another directory, or pass --overwrite to replace it")


def _move_order(name: str):
  """Checkpoint data first, then its index, other files, the state file
  last (what makes a loader see the new checkpoint)."""
  if name == paths.STATE_FILE:
    return (3, name)
  if name.endswith(".index"):
    return (1, name)
  return (0 if ".data-" in name else 2, name)


class Staging:
  """A hidden directory inside `output_dir` the outputs are written to;
  `commit` moves them in, `discard` (also on an exception in a `with`
  block) removes it, and `output_dir` too if this created it."""

  def __init__(self, output_dir: str):
    self.output_dir = output_dir
    self._created = not tf.io.gfile.isdir(output_dir)
    tf.io.gfile.makedirs(output_dir)
    self.directory = os.path.join(
        output_dir, f".convert-{uuid.uuid4().hex[:12]}{_STAGING_SUFFIX}")
    tf.io.gfile.makedirs(self.directory)

  def __enter__(self):
    return self

  def __exit__(self, kind, value, traceback):
    if kind is not None:
      self.discard()
    return False

  def discard(self) -> None:
    if tf.io.gfile.exists(self.directory):
      tf.io.gfile.rmtree(self.directory)
    if self._created and not tf.io.gfile.listdir(self.output_dir):
      tf.io.gfile.rmtree(self.output_dir)

  def commit(self, replaced: List[str]) -> None:
    """Moves every staged file into `output_dir`, then deletes the files of
    the `replaced` checkpoint prefixes the move did not replace: index,
    data and a TF1 `.meta` graph, which would not describe the new weights."""
    old = [p for prefix in replaced
           for p in tf.io.gfile.glob(glob.escape(prefix) + ".*")
           if p in (prefix + ".index", prefix + ".meta") or
           ".data-" in p[len(prefix):]]
    names = sorted(tf.io.gfile.listdir(self.directory), key=_move_order)
    for name in names:
      tf.io.gfile.rename(os.path.join(self.directory, name),
                         os.path.join(self.output_dir, name), overwrite=True)
    tf.io.gfile.rmtree(self.directory)
    for path in old:
      if os.path.basename(path) not in names:
        tf.io.gfile.remove(path)

