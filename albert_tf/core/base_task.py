"""What a task gives the training loop (`albert_tf.core.trainer.Trainer`).

A task supplies the model, the input pipeline and its loss as additive sums,
so replicas and micro-batches can be summed before normalising:

  class MyTask(base_task.Task):
    def build_model(self): ...                      # tf_keras.Model
    def build_inputs(self, input_context, training):
      ...  # tf.data.Dataset of per-replica batches (dicts of tensors)
    def loss_normalizers(self, features):           # from the features only
      return {"count": tf.cast(tf.shape(features["label"])[0], tf.float32)}
    def compute_sums(self, model, features, training):
      ...  # additive float32 scalars: {"loss_sum":..., "correct":..., ...}
    def loss_from_sums(self, sums, normalizers):    # linear in `sums`
      return sums["loss_sum"] / normalizers["count"]
    def metrics_from_sums(self, sums):              # includes "loss"
      return {"loss": ..., "accuracy": ...}
"""

from typing import Any, Dict, List, Optional

import tensorflow as tf
import tf_keras

from albert_tf.data import pretraining_dataloader


class Task:
  """What the trainer needs from a task (see the module docstring)."""

  # Global batch sizes (examples per optimizer step / per eval step).
  global_batch_size: int = 0
  eval_batch_size: int = 0

  def build_model(self) -> tf_keras.Model:
    raise NotImplementedError

  def build_inputs(self, input_context: Optional[tf.distribute.InputContext],
                   training: bool) -> tf.data.Dataset:
    """Per-replica batches (batch = global // num_replicas)."""
    raise NotImplementedError

  def loss_normalizers(self, features) -> Dict[str, tf.Tensor]:
    """Additive denominators of the loss, computed from the features only.

    The trainer sums them over replicas (and micro-batches) before the
    forward pass, so each replica's loss is already normalised globally.
    """
    raise NotImplementedError

  def compute_sums(self, model, features, training: bool
                   ) -> Dict[str, tf.Tensor]:
    """Runs the model; additive float32 scalar sums (losses, hits, counts)."""
    raise NotImplementedError

  def loss_from_sums(self, sums, normalizers) -> tf.Tensor:
    """The loss, linear in `sums` (so per-replica losses add up)."""
    raise NotImplementedError

  def metrics_from_sums(self, sums) -> Dict[str, Any]:
    """Metrics (must include "loss") from sums added over batches."""
    raise NotImplementedError

  def validate_inputs(self, training: bool = True) -> None:
    """Raises a clear error before training on bad/missing input files."""

  def initialize(self, model) -> None:
    """Warm start of a fresh run (e.g. from an init checkpoint)."""

  def checkpoint_items(self, model) -> Dict[str, Any]:
    """Objects saved with the model (default: our layout, encoder + model)."""
    return {}

  def input_files(self, training: bool) -> List[str]:
    """The input files, to name a corrupt one after a data error.

    Default: the files of `config.data.input_path` (or `eval_input_path`)
    when the task's config has them (the pretraining task's does).
    """
    data = getattr(getattr(self, "config", None), "data", None)
    pattern = getattr(data, "input_path" if training else "eval_input_path",
                      "")
    return pretraining_dataloader.list_files(pattern) if pattern else []
