"""The layout of albert_tf's object-based (TF2) checkpoints.

Every checkpoint we write holds the encoder under the key `encoder`, so any of
them (pretraining, fine-tuning, converted) warm-starts an encoder the same way.
A pretraining checkpoint also holds the `AlbertPretrainer` under `model`
(heads included); training adds `optimizer`, `step` and so on beside them.
"""

import tensorflow as tf


def checkpoint_for(model, **extra):
  """A tf.train.Checkpoint over `model` (an AlbertEncoder, AlbertPretrainer or
  any model with an `encoder` attribute) in our layout, plus `extra` objects."""
  encoder = getattr(model, "encoder", model)
  items = dict(encoder=encoder)
  if model is not encoder:
    items["model"] = model
  items.update(extra)
  return tf.train.Checkpoint(**items)


def resolve_checkpoint_path(path):
  """A checkpoint prefix from a prefix or a directory (its latest checkpoint)."""
  if tf.io.gfile.isdir(path):
    latest = tf.train.latest_checkpoint(path)
    if latest is None:
      raise ValueError(f"{path}: directory holds no checkpoint")
    return latest
  if not tf.io.gfile.exists(path + ".index"):
    raise ValueError(f"{path}: no such checkpoint (missing {path}.index)")
  return path


def restore_encoder(encoder, path):
  """Loads only the encoder's weights from any albert_tf checkpoint.

  Fails when an encoder variable is missing from the checkpoint.
  """
  path = resolve_checkpoint_path(path)
  status = tf.train.Checkpoint(encoder=encoder).read(path)
  status.expect_partial().assert_existing_objects_matched()
  return path


def restore_model(model, path):
  """Loads a whole model (encoder + heads) written by `checkpoint_for`."""
  path = resolve_checkpoint_path(path)
  status = checkpoint_for(model).read(path)
  status.expect_partial().assert_existing_objects_matched()
  return path
