"""Checks on a set of output shards `PATH-SSSSS-of-NNNNN` (`PATH@N`), shared
by create_pretraining_data and the Beam pipeline.

  * Shards of another count beside the new set (`PATH-*-of-MMMMM` left by an
    earlier run) are refused before anything is written: a glob such as
    `PATH-*` would read both sets and train on the corpus twice. They are
    not deleted: the user did not name them.
"""

import glob
import re

from albert_toolkit import output_files

_SHARD = re.compile(r"^(.*)-(\d{5,})-of-(\d{5,})$")


def shard_set(output_paths):
  """(PATH, N) if `output_paths` are exactly `PATH@N`'s shards, else None."""
  m = _SHARD.match(output_paths[0]) if output_paths else None
  if not m:
    return None
  base, count = m.group(1), len(output_paths)
  expected = [f"{base}-{i:05d}-of-{count:05d}" for i in range(count)]
  return (base, count) if list(output_paths) == expected else None


def _shard_name(path):
  """The shard a path is (a summary file: the shard it is named after)."""
  suffix = output_files.SUMMARY_SUFFIX
  return path[:-len(suffix)] if path.endswith(suffix) else path


def _describe(paths, shown=2):
  more = f" and {len(paths) - shown} more" if len(paths) > shown else ""
  return ", ".join(paths[:shown]) + more


def other_shard_counts(output_paths, match=None):
  """The files of other shard sets of the same PATH (shards of another count
  and their summaries), sorted; [] if `output_paths` is no shard set.

  Args:
    output_paths: the shards a run writes.
    match: pattern -> paths on the outputs' filesystem (the Beam launcher's
      for gs:// and others); default: local glob.
  """
  found = shard_set(output_paths)
  if not found:
    return []
  base, count = found
  pattern = glob.escape(base) + "-*-of-*"
  paths = match(pattern) if match else glob.glob(pattern)
  others = []
  for path in paths:
    m = _SHARD.match(_shard_name(path))
    if m and m.group(1) == base and int(m.group(3)) != count:
      others.append(path)
  return sorted(others)


def check_no_other_shard_counts(output_paths, match=None):
  """Raises ValueError (one line naming the files, the glob they would
  poison and what to do) if shards of another count of the same PATH exist.

  Args:
    output_paths: the shards a run writes.
    match: as in other_shard_counts.
  """
  others = other_shard_counts(output_paths, match)
  if not others:
    return
  base, count = shard_set(output_paths)
  counts = sorted({_SHARD.match(_shard_name(p)).group(3) for p in others})
  remove = " ".join(f"{base}-*-of-{c}*" for c in counts)
  raise ValueError(
      f"--output_file {base}@{count}: {len(others)} file(s) of another "
      f"shard count are there ({_describe(others)}); a glob such as "
      f"{base}-* would read both sets, every instance twice; delete them "
      f"(rm {remove}) or choose another --output_file; nothing written")
