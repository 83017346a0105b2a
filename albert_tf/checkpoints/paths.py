"""Where checkpoints and SavedModel exports live on disk, the one resolver of
each: checkpoint prefixes (`resolve_checkpoint`), the `checkpoint` state file
(`latest_checkpoint`, `checkpoint_candidates`, `write_checkpoint_state`: its
only readers and writer) and TF Serving's `<base>/<integer version>/`
layout (`resolve_saved_model`, `next_version`). Both live here (below
`serving/`) because `restore()` accepts SavedModel exports as well as
checkpoints. Errors are ValueErrors with one line naming the path.
"""

import os
import re
from typing import List, Optional

from absl import logging
import tensorflow as tf

from albert_tf.checkpoints.canonical_weights import CheckpointConversionError
from albert_toolkit import output_files

# A training run keeps its checkpoints in `<model_dir>/checkpoints/` (the
# one spelling: core.trainer writes there, restore() looks there).
RUN_CHECKPOINT_SUBDIR = "checkpoints"
# The released tarballs have no `checkpoint` state file, only this prefix.
RELEASED_PREFIX = "model.ckpt-best"
SAVED_MODEL_FILE = "saved_model.pb"
# The checkpoint state file of a directory (tf.train's name for it).
STATE_FILE = "checkpoint"

# --- Checkpoints -------------------------------------------------------------


def absolute(path: str) -> str:
  """`path` as an absolute local path; URLs (gs://, hdfs://) unchanged.

  Run and checkpoint directories are made absolute where they enter: a
  tf.train.CheckpointManager under a relative directory writes the relative
  path into its `checkpoint` state file, which TF then reads relative to
  that directory again (runs/a/checkpoints/runs/a/checkpoints/ckpt-10).
  """
  return path if "://" in path else os.path.abspath(path)


def latest_checkpoint(directory: str) -> Optional[str]:
  """The prefix the `checkpoint` state file of `directory` names as latest,
  or None (no state file, or the directory does not exist)."""
  return tf.train.latest_checkpoint(directory)


def checkpoint_state_text(prefix_basename: str) -> str:
  """What `write_checkpoint_state` writes for this checkpoint name."""
  return (f'model_checkpoint_path: "{prefix_basename}"\n'
          f'all_model_checkpoint_paths: "{prefix_basename}"\n')


def write_checkpoint_state(directory: str, prefix_basename: str) -> None:
  """Writes the `checkpoint` state file naming one checkpoint (relative), so
  `latest_checkpoint(directory)` finds it."""
  output_files.atomic_write(f"{directory}/{STATE_FILE}",
                            checkpoint_state_text(prefix_basename))


def checkpoint_candidates(directory: str) -> List[str]:
  """Checkpoint prefixes in `directory`, newest first."""
  state = tf.train.get_checkpoint_state(directory)
  if state is None:
    return []
  listed = list(state.all_model_checkpoint_paths) or [
      state.model_checkpoint_path]
  listed = [_in_directory(p, directory) for p in listed]
  return sorted(set(listed), key=_checkpoint_number, reverse=True)


def _in_directory(path: str, directory: str) -> str:
  """A state file's entry as a path: the checkpoint of that name in
  `directory` when there is one. A copied or moved run directory whose
  state file holds absolute paths (TF1's Saver writes them) then resumes
  from its own files, not the original's; and versions before
  paths.absolute wrote `runs/a/checkpoints/ckpt-10` for a relative run
  directory, which TF reads as `<directory>/runs/a/checkpoints/ckpt-10`."""
  if not os.path.isabs(path) and "://" not in path:
    path = os.path.join(directory, path)
  beside = os.path.join(directory, os.path.basename(path))
  if beside != path and tf.io.gfile.exists(beside + ".index"):
    return beside
  return path


def _checkpoint_number(path: str) -> int:
  tail = path.rsplit("-", 1)[-1]
  return int(tail) if tail.isdigit() else -1


def checkpoint_prefixes(directory: str) -> List[str]:
  """The checkpoint prefixes (`<prefix>.index`) in `directory`, sorted."""
  return sorted(p[:-len(".index")] for p in
                tf.io.gfile.glob(os.path.join(directory, "*.index")))


def same_directory(a: str, b: str) -> bool:
  """Whether two spellings name one directory (resolved; URLs compared as
  given, but for a trailing slash)."""
  if "://" in a or "://" in b:
    return a.rstrip("/") == b.rstrip("/")
  return os.path.realpath(a) == os.path.realpath(b)


def _latest_inside(directory: str) -> Optional[str]:
  """The state file's latest checkpoint, which must be in `directory`.

  A copied directory's state file (TF1's Saver writes absolute paths) names
  the original's checkpoint: the same-named checkpoint in `directory` is
  used instead, and without one the directory is refused, so that a
  directory never stands for another directory's checkpoint and config.
  """
  latest = latest_checkpoint(directory)
  if not latest or same_directory(os.path.dirname(latest), directory):
    return latest
  beside = os.path.join(directory, os.path.basename(latest))
  if tf.io.gfile.exists(beside + ".index"):
    return beside
  raise CheckpointConversionError(
      f"{directory}: its checkpoint state file names {latest}, a checkpoint "
      "in another directory, and there is no "
      f"{os.path.basename(latest)} here (a copied directory?); pass the "
      "checkpoint prefix")


def _prefix_in_directory(path: str) -> Optional[str]:
  """The checkpoint a directory designates, or None if it holds none."""
  hub = os.path.join(path, "variables", "variables")
  if tf.io.gfile.exists(hub + ".index"):
    return hub
  latest = _latest_inside(path)
  if latest:
    return latest
  prefixes = checkpoint_prefixes(path)
  if len(prefixes) == 1:
    return prefixes[0]
  best = os.path.join(path, RELEASED_PREFIX)
  if best in prefixes:
    return best
  if prefixes:
    raise CheckpointConversionError(
        f"{path}: directory holds several checkpoints "
        f"{[os.path.basename(p) for p in prefixes]}; pass one prefix")
  return None


def resolve_checkpoint(path: str) -> str:
  """A checkpoint prefix from `path`.

  `path`: a prefix (`dir/ckpt-100`), its `.index` file, or a directory: its
  `checkpoint` state file's latest (the same-named one in the directory when
  the state file names another directory's; refused if there is none), a
  TF-Hub module's `variables/variables`, its only `*.index` prefix,
  `model.ckpt-best`, or (a run's model_dir) the same inside its
  `checkpoints/` subdirectory.
  """
  if not path:
    raise CheckpointConversionError("no checkpoint path given")
  if tf.io.gfile.isdir(path):
    found = _prefix_in_directory(path)
    run_dir = os.path.join(path, RUN_CHECKPOINT_SUBDIR)
    if found is None and tf.io.gfile.isdir(run_dir):
      found = _prefix_in_directory(run_dir)
    if found is None:
      raise CheckpointConversionError(
          f"{path}: directory holds no checkpoint (no *.index file, no "
          f"{RUN_CHECKPOINT_SUBDIR}/ with one)")
    return found
  if tf.io.gfile.exists(path + ".index"):
    return path
  if path.endswith(".index") and tf.io.gfile.exists(path):
    return path[:-len(".index")]
  raise CheckpointConversionError(
      f"{path}: no such checkpoint (missing {path}.index)")


def resolve_source(path: str):
  """What `restore()` reads at `path`: ("saved_model", its directory) for a
  SavedModel export (the directory or its base: the latest version), else
  ("checkpoint", resolve_checkpoint(path)). A TF1 TF-Hub module is also a
  SavedModel but is read as a checkpoint."""
  if tf.io.gfile.isdir(path):
    found = path if is_saved_model_dir(path) else latest_version_dir(path)
    if found is not None and not tf.io.gfile.exists(
        os.path.join(found, "tfhub_module.pb")):
      return "saved_model", found
  return "checkpoint", resolve_checkpoint(path)


# --- SavedModel versions -----------------------------------------------------


# TF Serving reads a version directory's name as an int64: a larger number
# is never loaded.
MAX_VERSION = 2**63 - 1


def _integer_names(export_dir: str) -> List[int]:
  """The numbers of the integer-named subdirectories of `export_dir`."""
  if not tf.io.gfile.isdir(export_dir):
    return []
  names = tf.io.gfile.listdir(export_dir)
  return [int(n.rstrip("/")) for n in names if re.fullmatch(r"\d+/?", n)]


def existing_versions(export_dir: str) -> List[int]:
  """Sorted integer version subdirectories of `export_dir` (complete or
  not), those TF Serving can read: numbers above MAX_VERSION are left out."""
  return sorted(v for v in _integer_names(export_dir) if v <= MAX_VERSION)


def next_version(export_dir: str) -> int:
  """1 + the largest existing version (1 for a new directory).

  Directories numbered above MAX_VERSION are passed over with a warning (TF
  Serving does not load them); after MAX_VERSION itself there is no next
  version: ValueError, one line.

  Args:
    export_dir: the directory holding the version directories.
  """
  too_large = sorted(v for v in _integer_names(export_dir) if v > MAX_VERSION)
  if too_large:
    logging.warning("%s: version directories %s are above %d, which TF "
                    "Serving does not read (int64); passed over", export_dir,
                    ", ".join(map(str, too_large)), MAX_VERSION)
  versions = existing_versions(export_dir)
  if versions and versions[-1] == MAX_VERSION:
    raise ValueError(f"{export_dir}: version {MAX_VERSION} exists, the "
                     "largest TF Serving reads (int64); pass a free --version")
  return versions[-1] + 1 if versions else 1


def is_saved_model_dir(path: str) -> bool:
  return tf.io.gfile.exists(os.path.join(path, SAVED_MODEL_FILE))


def latest_version_dir(export_dir: str) -> Optional[str]:
  """The largest version directory holding a saved_model.pb, or None."""
  for version in reversed(existing_versions(export_dir)):
    candidate = os.path.join(export_dir, str(version))
    if is_saved_model_dir(candidate):
      return candidate
  return None


def resolve_saved_model(path: str) -> str:
  """A SavedModel directory from itself or its base dir (latest version)."""
  if is_saved_model_dir(path):
    return path
  found = latest_version_dir(path)
  if found is None:
    raise ValueError(f"{path}: no SavedModel ({SAVED_MODEL_FILE} neither in "
                     "it nor in an integer version subdirectory)")
  return found
