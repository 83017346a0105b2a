"""Which model config a checkpoint is used with (export, convert:
`model_config_for`; a warm start from a checkpoint without an identity:
`check_beside`), and where conversion outputs may not go.
"""

import os
from typing import Any, Optional

from albert_tf.checkpoints import canonical_weights
from albert_tf.checkpoints import conversion
from albert_tf.checkpoints import identity
from albert_tf.checkpoints import paths
from albert_tf.core import run_record
from albert_tf.modeling import albert_config


def _beside_checkpoint(checkpoint: str) -> Optional[str]:
  """albert_config.json beside a checkpoint (release / conversion output)."""
  try:
    prefix = paths.resolve_checkpoint(checkpoint)
  except canonical_weights.CheckpointConversionError:
    return None
  return conversion.find_config_file(prefix)


def recorded_beside(checkpoint: str):
  """(model config dict, where it is) of a checkpoint without an identity:
  the record of the run it belongs to, else the albert_config.json beside
  it; None when neither is there."""
  record = run_record.find_for_checkpoint(checkpoint)
  if record is not None:
    return (albert_config.load_model_config([record.model_dir]).as_dict(),
            f"the run record of {record.model_dir}")
  path = _beside_checkpoint(checkpoint)
  if path is None:
    return None
  return (albert_config.load_model_config([path]).as_dict(),
          f"{path} beside it")


def check_beside(checkpoint: str, model, what: str,
                 ignored=frozenset()) -> bool:
  """Refuses a model config `model` (a dict; fields in `ignored` aside)
  that differs from the one recorded beside `checkpoint` (a checkpoint
  without an identity: `recorded_beside`), in one line naming the field,
  both values and the file. False when nothing is recorded beside it."""
  found = recorded_beside(checkpoint)
  if found is None:
    return False
  recorded, where = found
  for field, saved, given in identity.model_differences(recorded, model,
                                                        ignored):
    raise ValueError(
        f"model.{field} is {given!r} in {what} but checkpoint {checkpoint} "
        f"was trained with {saved!r} ({where}); use that config")
  return True


def model_config_for(sources, params_override: str = "",
                     checkpoint: Optional[str] = None,
                     record: Any = run_record.UNREAD):
  """(AlbertConfig or None, RunRecord or None) of export / convert.

  The base is the model of the run `record` (default: of the run
  `checkpoint` belongs to), else of the checkpoint's own identity, else of
  the albert_config.json beside `checkpoint`; `sources` and
  `params_override` apply on top, and any difference that changes the model
  is refused naming the field. A checkpoint whose identity disagrees with
  the run record it is paired with is refused. With no base, the config is
  `sources` + `params_override` alone (None if nothing given).
  """
  if record is run_record.UNREAD:
    record = (run_record.find_for_checkpoint(checkpoint) if checkpoint
              else None)
  saved = None
  if checkpoint:
    saved = identity.check(
        checkpoint, model=record.model if record else None,
        facts=record.facts if record else None,
        what=f"the run record of {record.model_dir}" if record else "")
  sources = list(sources or ())
  if record is None and saved is not None and "model" in saved:
    where = f"checkpoint {checkpoint}'s own record"
    config = albert_config.load_model_config(sources, params_override,
                                             base=saved["model"])
    run_record.check_model(saved["model"], config, where)
    return config, None
  base = record.model_dir if record else (
      _beside_checkpoint(checkpoint) if checkpoint else None)
  if base is None:
    if not sources and not params_override:
      return None, None
    return albert_config.load_model_config(sources, params_override), None
  recorded = albert_config.load_model_config([base])
  config = albert_config.load_model_config([base] + sources, params_override)
  run_record.check_model(recorded.as_dict(), config, base)
  return config, record


def check_not_in_run(output_dir: str, what: str = "--output_dir") -> None:
  """Refuses an output directory that is a run directory or one of its
  checkpoint directories: writing there replaces the run's `checkpoint`
  state file (its next resume would find no checkpoint it knows)."""
  record = run_record.find_for_checkpoint(output_dir)
  if record is None:
    return
  run = os.path.abspath(record.model_dir)
  owned = {run, os.path.join(run, paths.RUN_CHECKPOINT_SUBDIR),
           os.path.join(run, run_record.BEST_SUBDIR)}
  if os.path.abspath(output_dir) in owned:
    raise ValueError(f"{what} {output_dir} is the run directory {run} or its "
                     "checkpoint directory: writing there would replace the "
                     "run's checkpoint state; use another directory")
