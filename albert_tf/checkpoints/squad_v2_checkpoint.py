"""A `run_squad_v2.py` checkpoint (the original's fine-tuned SQuAD 2.0
model) into `AlbertSquadV2`: `restore.restore` reads the encoder through the
TF1 converter and the head by the original's names
(`tf1_checkpoint.SQUAD_V2_HEAD`).

A missing head variable or a shape that does not fit is an error naming
the variable; nothing is assigned until every value has been checked.
"""

from albert_tf.checkpoints import paths
from albert_tf.checkpoints import restore as restore_lib
from albert_tf.checkpoints import tf1_checkpoint


def has_squad_v2_head(path):
  """Whether the checkpoint at `path` holds (any of) the original's v2
  head; `restore` then insists on all of it."""
  prefix = paths.resolve_checkpoint(path)
  names = restore_lib.open_reader(prefix).get_variable_to_shape_map()
  return any(n in names for n in tf1_checkpoint.SQUAD_V2_HEAD.values())


def load_tf1_squad_v2(model, path):
  """Loads encoder and head of an `AlbertSquadV2` from the original's
  fine-tuned checkpoint; returns the ConversionReport (head names in
  `report.mapped`)."""
  return restore_lib.restore(model, path).conversion
