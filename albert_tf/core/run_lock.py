"""`<model_dir>/train.lock`: one training run at a time on a model_dir.

Two runs on one model_dir would interleave checkpoints and metrics.jsonl
silently; the chief holds this lock for the duration of `Trainer.train()`.
The lock itself is data_prep's (`owner_lock`), the one the data tools hold
on their outputs.
"""

import os

from absl import logging

from albert_tf.core import actions
from albert_toolkit import owner_lock

LOCK_FILE = "train.lock"


def _refused(path, owner):
  return (f"{path}: model_dir is in use by pid {owner.get('pid')} on host "
          f"{owner.get('host')}; stop that run, or delete the lock file if "
          "it is stale")


class RunLock(owner_lock.OwnerLock):
  """`<model_dir>/train.lock` (pid + host) held for a training run.

  A lock of a dead process on this host (or of this process) is taken over
  with a warning; a live one, or one from another host, is refused.
  """

  def __init__(self, model_dir: str):
    super().__init__(os.path.join(model_dir, LOCK_FILE),
                     actions.RunLockedError, _refused, log=logging.warning)
