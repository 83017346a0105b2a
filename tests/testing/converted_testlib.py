"""What albert_tf made of a converted Hugging Face directory: the model
restored from it, its stored tensors, and the inputs both sides are fed."""

import os

import numpy as np
import tensorflow as tf

from albert_tf.checkpoints import paths
from albert_tf.checkpoints import restore as restore_lib
from albert_tf.core import run_record
from albert_tf.modeling.albert_config import AlbertConfig
from albert_tf.modeling.models.albert_pretrainer import AlbertPretrainer
from albert_tf.tasks import registry

BATCH, SEQ = 2, 7


def inputs(vocab, seed=3, shape=(BATCH, SEQ)):
  rng = np.random.default_rng(seed)
  ids = rng.integers(0, vocab, shape).astype(np.int32)
  mask = np.ones(shape, np.int32)
  mask[..., -2:] = 0
  types = np.zeros(shape, np.int32)
  types[..., 3:] = 1
  return ids, mask, types


def feed(ids, mask, types):
  return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}


def our_model(out_dir):
  """Our model of a converted directory, restored, and its task (or None)."""
  record = run_record.read(out_dir)
  if record is None:
    config = AlbertConfig.from_json_file(
        os.path.join(out_dir, "albert_config.json"))
    model = AlbertPretrainer(config)
    restore_lib.restore(model, out_dir, allow_missing_heads=True)
    return None, model
  task = registry.task_of_record(record)
  model = task.build_model()
  restore_lib.restore(model, out_dir)
  return task, model


def stored_tensors(directory):
  """The weights of a converted directory's checkpoint by key (not the
  identity, which names its source)."""
  reader = tf.train.load_checkpoint(paths.resolve_checkpoint(
      directory))
  return {k: reader.get_tensor(k) for k in reader.get_variable_to_shape_map()
          if not k.startswith(("identity", "_CHECKPOINTABLE"))}
