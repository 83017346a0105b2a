"""Checks on a set of output shards `PATH-SSSSS-of-NNNNN` (`PATH@N`), shared
by create_pretraining_data and the Beam pipeline.

  * Shards of another count beside the new set (`PATH-*-of-MMMMM` left by an
    earlier run) are refused before anything is written: a glob such as
    `PATH-*` would read both sets and train on the corpus twice. They are
    not deleted: the user did not name them.
  * A shard that would hold no record is refused after the run, before any
    output is renamed to its final name: the trainer refuses an empty input
    file, and fewer files than the name's `-of-NNNNN` would be a wrong set.
"""

import glob
import re

from albert_toolkit import output_files

_SHARD = re.compile(r"^(.*)-(\d{5,})-of-(\d{5,})$")
# A record goes to a Beam shard by hash: with at least this many records a
# shard on average, an empty shard is vanishingly unlikely (N * e**-20).
_RECORDS_PER_HASHED_SHARD = 20


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


def check_no_empty_shards(records_per_file, instances, hashed=False):
  """Raises ValueError (one line: how many files, the instance count and a
  shard count to use) if an output would hold no record.

  Args:
    records_per_file: final output path -> records written to it.
    instances: the run's instance count.
    hashed: records go to shards by hash (the Beam pipeline), not
      round-robin (create_pretraining_data).
  """
  paths = list(records_per_file)
  empty = [p for p in paths if not records_per_file[p]]
  if not empty:
    return
  found = shard_set(paths)
  if hashed:
    fit = max(1, instances // _RECORDS_PER_HASHED_SHARD)
    advice = (f"records go to files by hash: give about one per "
              f"{_RECORDS_PER_HASHED_SHARD} instances, {fit}")
  else:
    fit = instances
    advice = f"give at most {fit}"
  advice += (f" shards (--output_file={found[0]}@{fit})" if found else
             " output files")
  raise ValueError(
      f"{len(empty)} of the {len(paths)} output files would hold no record "
      f"(first: {empty[0]}): the run made {instances} instances, and the "
      f"trainer refuses an empty file; {advice}; nothing written")
