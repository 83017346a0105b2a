"""Which training files a checkpoint's saved data position belongs to.

The saved input position (`trainer.save_data_position`) is an offset into
the training files: restored into data regenerated under the same names
(same config, so the run record sees no change) it would point into other
data. Each training start appends the files it reads (size, modification
time) and the step it starts from to `<model_dir>/data_position_inputs.jsonl`;
the checkpoint a run resumes from, of step N, was saved by the last start
from a step below N, so its files are that entry's. When they differ from
today's, the position is not restored (the input pipeline starts over),
with a one-line warning.
"""

import json
import os
import time
from typing import Dict, List

INPUTS_FILE = "data_position_inputs.jsonl"


def fingerprint(files: List[str]) -> Dict[str, List[int]]:
  """file -> [size, modification time in ns] (URLs: not checked)."""
  stats = {p: os.stat(p) for p in files
           if "://" not in p and os.path.exists(p)}
  return {p: [st.st_size, st.st_mtime_ns] for p, st in stats.items()}


def _entries(model_dir: str) -> List[dict]:
  try:
    with open(os.path.join(model_dir, INPUTS_FILE), encoding="utf-8") as f:
      lines = f.read().splitlines()
  except FileNotFoundError:
    return []
  entries = []
  for line in lines:
    try:
      entries.append(json.loads(line))
    except ValueError:
      continue  # a line cut by kill -9
  return entries


def _difference(old: Dict[str, list], new: Dict[str, list]) -> str:
  for path in sorted(set(old) | set(new)):
    if path not in new:
      return f"{path} is gone"
    if path not in old:
      return f"{path} is new"
    if old[path] != new[path]:
      if old[path][0] != new[path][0]:
        return f"{path}: {old[path][0]} -> {new[path][0]} bytes"
      return f"{path} was rewritten (same size, modified later)"
  return ""


def input_changed(model_dir: str, files: List[str], step: int,
                  record: bool = True) -> str:
  """How the training files differ from those the data position of the
  checkpoint of `step` (the one a run resumes from; 0: a fresh start)
  belongs to ("" when they do not, or when that is unknown: no checkpoint,
  or one saved before this record existed or before its task named its
  files). Appends this start's files
  when `record` (the chief)."""
  now = fingerprint(files)
  changed = ""
  if step:
    earlier = [e for e in _entries(model_dir) if e.get("from_step", 0) < step]
    if earlier and earlier[-1].get("inputs"):  # {}: files not known then
      changed = _difference(earlier[-1].get("inputs", {}), now)
  if record:
    line = {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "from_step": step or 0, "inputs": now}
    with open(os.path.join(model_dir, INPUTS_FILE), "a",
              encoding="utf-8") as f:
      f.write(json.dumps(line, sort_keys=True) + "\n")
  return changed
