"""The layout of albert_tf's object-based (TF2) checkpoints.

A checkpoint holds a model as named parts: always `encoder`, then the model's
heads under their own names (`mlm_head` and `sop_head` for the pretrainer,
`head` (+ `answer_head`) for downstream models). Every model class lists its
parts in `checkpoint_items`. Names rather than Keras' positional
`layer_with_weights-N` keys mean a checkpoint of one model class can never
fill another class's head by accident, and any checkpoint warm-starts an
encoder the same way. Training adds `optimizer`, `step` and so on beside them.
"""

import collections
from typing import Dict, Mapping

import tensorflow as tf

from albert_tf.checkpoints import canonical_weights as cw
from albert_tf.checkpoints.canonical_weights import CheckpointConversionError

# The suffix of a variable's key in an object checkpoint.
_VALUE = "/.ATTRIBUTES/VARIABLE_VALUE"


def checkpoint_for(model, **extra):
  """A tf.train.Checkpoint over `model`'s parts plus `extra` objects."""
  return tf.train.Checkpoint(**cw.model_parts(model), **extra)


def object_checkpoint_keys(root_items: Mapping[str, object]
                           ) -> Dict[str, tf.Variable]:
  """Checkpoint key -> variable that `tf.train.Checkpoint(**root_items)` would
  write, without writing anything: the first path to each object in
  breadth-first order over the tracked children, as TensorFlow assigns them.
  """
  def escape(name):  # As tf.train.Checkpoint escapes object names in keys.
    return name.replace(".", "..").replace("/", ".S")
  root = tf.train.Checkpoint(**root_items)
  seen = {id(root)}
  out = {}
  queue = collections.deque([(root, "")])
  while queue:
    obj, path = queue.popleft()
    if isinstance(obj, tf.Variable):
      out[path + _VALUE] = obj
      continue
    for name, child in tf.train.TrackableView(obj).children(obj).items():
      if id(child) not in seen:
        seen.add(id(child))
        queue.append((child, f"{path}/{escape(name)}" if path
                      else escape(name)))
  return out


def best_root(candidates, stored):
  """(label, its keys) of the (label, root items) candidate whose
  `object_checkpoint_keys` explain the most `stored` keys (the first of
  equals)."""
  keys = [(label, object_checkpoint_keys(root)) for label, root in candidates]
  return max(keys, key=lambda c: len(set(stored) & set(c[1])))


def held_parts(stored: Mapping[str, list]):
  """The top-level names (parts) of a checkpoint of our layout, from its
  variable -> shape map."""
  return {name.split("/", 1)[0] for name in stored}


def restore_model_parts(model, prefix, stored, with_heads,
                        allow_missing_heads=False, step=None):
  """`restore()` of a checkpoint of our layout: the encoder, the heads when
  `with_heads`, `step` if given and saved. `stored`: the checkpoint's
  variable -> shape map. Returns (parts restored, heads left fresh)."""
  held = held_parts(stored)
  if "encoder" not in held:
    raise CheckpointConversionError(
        f"{prefix}: no encoder in this checkpoint (it holds {sorted(held)})")
  all_parts, fresh = cw.check_heads(model, prefix, with_heads, held,
                                    allow_missing_heads)
  parts = {name: part for name, part in all_parts.items()
           if name not in fresh}
  if step is not None and "step" in held:
    parts["step"] = step
  read_parts(parts, prefix, stored)
  return list(parts), fresh


def check_all_used(path, stored, keys, parts):
  """Refuses a checkpoint whose `parts` hold variables the model has no
  place for (`keys`: the model's checkpoint keys): more transformer blocks
  or another head's layers than the config builds, which a partial read
  would silently leave out. Optimizer slots are not model variables."""
  unused = sorted(key[:-len(_VALUE)] if key.endswith(_VALUE) else key
                  for key in stored
                  if key.split("/", 1)[0] in parts and key not in keys and
                  cw.OPTIMIZER_SLOT not in key)
  if unused:
    held = sorted({key.split("/", 1)[0] for key in unused})
    raise CheckpointConversionError(
        f"{path}: {len(unused)} variable(s) of its {', '.join(held)} are not "
        "in the model (wrong config for this checkpoint?): "
        f"{cw.summarize_names(unused, 3)}")


def read_parts(parts, path, stored):
  """Reads `parts` from prefix `path` once every one is held with the
  model's shapes and every variable they hold has its place in the model (a
  failing read would leave the model half-assigned)."""
  missing = sorted(set(parts) - held_parts(stored))
  if missing:
    raise CheckpointConversionError(
        f"{path}: checkpoint has no {missing} (it holds "
        f"{sorted(held_parts(stored))})")
  keys = object_checkpoint_keys(parts)
  mismatched = [f"{key} {stored[key]} in the checkpoint vs "
                f"{var.shape.as_list()} in the model"
                for key, var in keys.items()
                if key in stored and list(stored[key]) != var.shape.as_list()]
  if mismatched:
    raise CheckpointConversionError(
        f"{path}: {len(mismatched)} shape mismatch(es) (wrong config for "
        f"this checkpoint?): {cw.summarize_names(mismatched, 4)}")
  check_all_used(path, stored, keys, parts)
  try:
    status = tf.train.Checkpoint(**parts).read(path)
    status.expect_partial().assert_existing_objects_matched()
  # A mis-shaped variable (wrong config) or an unmatched object: one line.
  except (AssertionError, ValueError, tf.errors.OpError) as e:
    first = (str(e).strip().splitlines() or [type(e).__name__])[0]
    raise CheckpointConversionError(
        f"{path}: cannot restore {sorted(parts)} (wrong config for this "
        f"checkpoint?): {first}") from e
