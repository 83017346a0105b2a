"""The layout of albert_tf's object-based (TF2) checkpoints.

A checkpoint holds a model as named parts: always `encoder`, then the model's
heads under their own names (`mlm_head` and `sop_head` for the pretrainer,
`head` (+ `answer_head`) for downstream models). Every model class lists its
parts in `checkpoint_items`. Names rather than Keras' positional
`layer_with_weights-N` keys mean a checkpoint of one model class can never
fill another class's head by accident, and any checkpoint warm-starts an
encoder the same way. Training adds `optimizer`, `step` and so on beside them.
"""

import tensorflow as tf

from albert_tf.checkpoints import canonical_weights as cw
from albert_tf.checkpoints import paths
from albert_tf.checkpoints.canonical_weights import CheckpointConversionError


def model_parts(model):
  """Named trackables of `model` (an AlbertEncoder, or any model with an
  `encoder` and `checkpoint_items`)."""
  encoder = getattr(model, "encoder", model)
  if model is encoder:
    return {"encoder": encoder}
  items = getattr(model, "checkpoint_items", None)
  if items is None:
    raise TypeError(f"{type(model).__name__} has an encoder but no "
                    "checkpoint_items naming its heads")
  items = dict(items)
  if items.get("encoder") is not encoder:
    raise ValueError(f"{type(model).__name__}.checkpoint_items must hold its "
                     "encoder under 'encoder'")
  return items


def checkpoint_for(model, **extra):
  """A tf.train.Checkpoint over `model`'s parts plus `extra` objects."""
  return tf.train.Checkpoint(**model_parts(model), **extra)


def parts_in_checkpoint(path):
  """The top-level names (parts) a checkpoint of our layout holds."""
  return {name.split("/", 1)[0] for name, _ in tf.train.list_variables(path)}


# The primitives of our layout; `restore.restore` is what callers use (it
# detects the layout, resolves the path and reports what it loaded).


def restore_encoder(encoder, path):
  """Loads only the encoder's weights from any albert_tf checkpoint.

  Fails when an encoder variable is missing from the checkpoint.
  """
  return restore_parts({"encoder": encoder}, path)


def restore_model(model, path):
  """Loads a whole model (encoder + heads) from a checkpoint of its class.

  Fails naming the parts the checkpoint does not hold (e.g. a classifier's
  head when the checkpoint comes from pretraining: use `restore_encoder`).
  """
  return restore_parts(model_parts(model), path)


def restore_parts(parts, path):
  """Loads the named `parts` (name -> trackable); returns the prefix."""
  path = paths.resolve_checkpoint(path)
  missing = sorted(set(parts) - parts_in_checkpoint(path))
  if missing:
    raise CheckpointConversionError(
        f"{path}: checkpoint has no {missing} (it holds "
        f"{sorted(parts_in_checkpoint(path))})")
  # Shapes first: a failing read would leave the model half-assigned.
  stored = dict(tf.train.list_variables(path))
  mismatched = [f"{key} {stored[key]} in the checkpoint vs "
                f"{var.shape.as_list()} in the model"
                for key, var in cw.object_checkpoint_keys(parts).items()
                if key in stored and list(stored[key]) != var.shape.as_list()]
  if mismatched:
    raise CheckpointConversionError(
        f"{path}: {len(mismatched)} shape mismatch(es) (wrong config for "
        f"this checkpoint?): {cw.summarize_names(mismatched, 4)}")
  try:
    status = tf.train.Checkpoint(**parts).read(path)
    status.expect_partial().assert_existing_objects_matched()
  # A mis-shaped variable (wrong config) or an unmatched object: one line.
  except (AssertionError, ValueError, tf.errors.OpError) as e:
    first = (str(e).strip().splitlines() or [type(e).__name__])[0]
    raise CheckpointConversionError(
        f"{path}: cannot restore {sorted(parts)} (wrong config for this "
        f"checkpoint?): {first}") from e
  return path
