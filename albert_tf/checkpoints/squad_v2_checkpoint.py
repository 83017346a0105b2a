"""A `run_squad_v2.py` checkpoint (the original's fine-tuned SQuAD 2.0
model) into `AlbertSquadV2`: the encoder through the TF1 converter, the
head by the original's names (`tf1_checkpoint.SQUAD_V2_HEAD`).

A missing head variable or a shape that does not fit is an error naming
the variable; nothing is assigned until every value has been checked.
"""

from albert_tf.checkpoints import canonical_weights as cw
from albert_tf.checkpoints import conversion
from albert_tf.checkpoints import tf1_checkpoint


def head_variables(head):
  """Original name -> variable of an `XLNetSquadHead`."""
  out = {}
  for ours, original in tf1_checkpoint.SQUAD_V2_HEAD.items():
    layer, weight = ours.split("/")
    out[original] = getattr(getattr(head, layer), weight)
  return out


def has_squad_v2_head(path):
  """Whether the checkpoint at `path` holds (any of) the original's v2
  head; `read_head` then insists on all of it."""
  prefix = conversion.resolve_source_path(path)
  names = cw.open_reader(prefix).get_variable_to_shape_map()
  return any(n in names for n in tf1_checkpoint.SQUAD_V2_HEAD.values())


def global_step(path):
  """The checkpoint's global_step, or None."""
  prefix = conversion.resolve_source_path(path)
  reader = cw.open_reader(prefix)
  if "global_step" not in reader.get_variable_to_shape_map():
    return None
  return int(reader.get_tensor("global_step"))


def read_head(prefix, head):
  """Checked arrays for `head` (original name -> array)."""
  reader = cw.open_reader(prefix)
  stored = reader.get_variable_to_shape_map()
  variables = head_variables(head)
  missing = [n for n in variables if n not in stored]
  if missing:
    raise cw.CheckpointConversionError(
        f"{prefix}: no SQuAD 2.0 head variable(s) {', '.join(missing)} (not "
        "a run_squad_v2.py checkpoint?)")
  values = {}
  for name, variable in variables.items():
    if tuple(stored[name]) != tuple(variable.shape):
      raise cw.CheckpointConversionError(
          f"{prefix}: {name} has shape {tuple(stored[name])}, the model "
          f"expects {tuple(variable.shape)} (wrong albert_config.json?)")
    values[name] = cw.read_tensor(reader, name, prefix)
  return values


def load_tf1_squad_v2(model, path):
  """Loads encoder and head of an `AlbertSquadV2` from the original's
  fine-tuned checkpoint; returns the ConversionReport (head names added to
  `report.mapped`)."""
  prefix = conversion.resolve_source_path(path)
  values = read_head(prefix, model.head)  # checked before anything changes
  report = conversion.load_any_checkpoint(model, prefix)
  for name, variable in head_variables(model.head).items():
    variable.assign(values[name])
    report.mapped["squad_v2_head/" + name] = name
    report.skipped.pop(name, None)
    report.extras.pop(name, None)
  return report
