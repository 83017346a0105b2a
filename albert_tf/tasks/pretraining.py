"""The ALBERT pretraining task (MLM + SOP) for `albert_tf.core.trainer.Trainer`.

Loss over a global batch, as the original computes it per batch:
  sum_i w_i CE(mlm_i) / (sum_i w_i + 1e-5) + sum_b CE(sop_b) / B
Each replica divides its local sums by the *global* sum of MLM weights and
the global example count (`loss_normalizers`, summed across replicas by the
trainer), so the replicas' gradients add up to the single-device gradient.
"""

from typing import Dict

from absl import logging
import tensorflow as tf

from albert_tf.checkpoints import restore as restore_lib
from albert_tf.data import pretraining_dataloader
from albert_tf.modeling import losses
from albert_tf.core import trainer as trainer_lib
from albert_tf.modeling.models.albert_pretrainer import AlbertPretrainer

_MODEL_INPUTS = ("input_word_ids", "input_mask", "input_type_ids",
                 "masked_lm_positions")


def validate_pretraining_files(pattern: str, seq_length: int,
                               max_predictions_per_seq: int, what: str):
  """Checks that the files exist, are non-empty and match the config.

  Raises ValueError/FileNotFoundError naming the file and the field.
  """
  if not pattern:
    raise ValueError(f"{what} is empty: give the pretraining TFRecord files "
                     "(comma-separated files or globs)")
  files = pretraining_dataloader.list_files(pattern)
  for path in files:
    compression = pretraining_dataloader.detect_compression(path)
    records = tf.data.TFRecordDataset(path, compression_type=compression)
    try:
      first = next(iter(records.take(1)), None)
    except tf.errors.OpError as e:
      raise ValueError(f"{path}: unreadable TFRecord file ({e.message})") from e
    if first is None:
      raise ValueError(f"{path}: empty input file (no records) in {what}")
    feats = tf.train.Example.FromString(first.numpy()).features.feature
    ids_key = "input_word_ids" if "input_word_ids" in feats else "input_ids"
    for key, want, field in (
        (ids_key, seq_length, "data.seq_length"),
        ("masked_lm_positions", max_predictions_per_seq,
         "data.max_predictions_per_seq")):
      if key not in feats:
        raise ValueError(f"{path}: not a pretraining file (no feature "
                         f"{key!r}; has {sorted(feats)})")
      got = len(feats[key].int64_list.value)
      if got != want:
        raise ValueError(
            f"{path}: feature {key!r} has length {got} but {field} is "
            f"{want}; regenerate the data or set {field}={got}")
  return files


class PretrainingTask(trainer_lib.Task):
  """MLM + SOP pretraining over data_prep TFRecords.

  Args:
    config: a PretrainingExperimentConfig (uses model, data, trainer).
  """

  def __init__(self, config):
    self.config = config
    self.data = config.data
    self.global_batch_size = self.data.global_batch_size
    self.eval_batch_size = self.data.eval_batch_size or self.global_batch_size
    self._validated = set()
    seed = self.data.seed
    self.seed = config.runtime.seed if seed is None else seed

  def build_model(self):
    return AlbertPretrainer(self.config.model)

  def validate_inputs(self, training=True):
    key = "input_path" if training else "eval_input_path"
    if key in self._validated:
      return
    validate_pretraining_files(getattr(self.data, key),
                               self.data.seq_length,
                               self.data.max_predictions_per_seq,
                               f"data.{key}")
    self._validated.add(key)

  def build_inputs(self, input_context, training):
    data = self.data
    batch = self.global_batch_size if training else self.eval_batch_size
    ds = pretraining_dataloader.pretraining_dataset(
        data.input_path if training else data.eval_input_path,
        data.seq_length, data.max_predictions_per_seq, batch,
        is_training=training, input_context=input_context,
        dynamic_masking=data.dynamic_masking and training,
        vocab_size=self.config.model.vocab_size, mask_id=data.mask_id,
        masked_lm_prob=data.masked_lm_prob,
        shuffle_buffer_size=data.shuffle_buffer_size,
        cycle_length=data.cycle_length,
        # The native reader's iterator can be checkpointed (data position);
        # the checked reader (python generator) cannot.
        checked_reader=not (training and
                            self.config.trainer.save_data_position),
        seed=self.seed)
    if not training and self.config.runtime.jit_compile:
      # XLA/TPU want static shapes: drop the last partial eval batch.
      per_replica = (input_context.get_per_replica_batch_size(batch)
                     if input_context else batch)
      ds = ds.unbatch().batch(per_replica, drop_remainder=True)
    return ds

  def loss_normalizers(self, features) -> Dict[str, tf.Tensor]:
    weights = tf.cast(features["masked_lm_weights"], tf.float32)
    count = tf.cast(tf.shape(features["next_sentence_labels"])[0], tf.float32)
    return {"mlm_weight": tf.reduce_sum(weights), "sop_count": count}

  def compute_sums(self, model, features, training):
    outputs = model({k: features[k] for k in _MODEL_INPUTS},
                    training=training)
    return losses.pretraining_sums(outputs, features)

  def loss_from_sums(self, sums, normalizers):
    # losses.metrics_from_sums with global denominators (linear in sums).
    return (sums["mlm_loss_sum"] / (normalizers["mlm_weight"] + 1e-5) +
            sums["sop_loss_sum"] / tf.maximum(normalizers["sop_count"], 1.0))

  def metrics_from_sums(self, sums):
    return losses.metrics_from_sums(sums)

  def initialize(self, model):
    tc = self.config.trainer
    if not tc.init_checkpoint:
      return
    report = restore_lib.restore(
        model, tc.init_checkpoint, init_from_group0=tc.init_from_group0,
        allow_missing_heads=True)
    logging.info("warm-started the model: %s", report.summary())
