"""The ALBERT pretraining task (MLM + SOP) for `albert_tf.core.trainer.Trainer`.

Loss over a global batch, as the original computes it per batch:
  sum_i w_i CE(mlm_i) / (sum_i w_i + 1e-5) + sum_b CE(sop_b) / B
Each replica divides its local sums by the *global* sum of MLM weights and
the global example count (`loss_normalizers`, summed across replicas by the
trainer), so the replicas' gradients add up to the single-device gradient.
"""

import dataclasses
from typing import Any, Dict, Optional

from absl import logging
from official.modeling.hyperparams import base_config
import tensorflow as tf

from albert_tf.checkpoints import identity
from albert_tf.core import base_task
from albert_tf.core import experiment_config
from albert_tf.core import run_record
from albert_tf.core.settings import DATA_POSITION, SAFE, setting
from albert_tf.data import dynamic_masking
from albert_tf.data import pretraining_dataloader
from albert_tf.data import pretraining_inputs
from albert_tf.modeling import losses
from albert_tf.modeling.models.albert_pretrainer import AlbertPretrainer
from albert_tf.modeling.networks.albert_encoder import AlbertEncoder
from albert_tf.modeling.networks.albert_encoder import INPUT_NAMES
from albert_tf.serving import serving_modules
from albert_tf.serving import serving_params
from albert_tf.serving import task_modules
from albert_tf.tasks import registry
from data_prep import pretraining_summary
from data_prep import summary_checks

_MODEL_INPUTS = INPUT_NAMES + ("masked_lm_positions",)


# --- Config ----------------------------------------------------------------


@dataclasses.dataclass
class PretrainingDataConfig(base_config.Config):
  """Pretraining TFRecords (data_prep/create_pretraining_data.py output)."""
  # Comma-separated files or globs.
  input_path: str = setting("", resume=DATA_POSITION)
  # Held-out files for evaluation (the `eval` modes).
  eval_input_path: str = setting("", resume=SAFE)
  seq_length: int = 512
  max_predictions_per_seq: int = 20
  global_batch_size: int = setting(4096, resume=DATA_POSITION)
  # 0: same as global_batch_size.
  eval_batch_size: int = setting(0, resume=SAFE)
  # Re-mask every example on the fly (needs token_boundary in the files),
  # with the masking settings and ids the data was made with (its summary).
  dynamic_masking: bool = False
  # None: the data's. A value other than the data's is refused, and any
  # value without dynamic_masking (the static masks are the data's).
  masked_lm_prob: Optional[float] = None
  mask_id: Optional[int] = None
  shuffle_buffer_size: int = setting(10000, resume=DATA_POSITION)
  cycle_length: int = setting(8, resume=DATA_POSITION)
  # Seed of file/record shuffling; None: from runtime.seed.
  seed: Optional[int] = setting(None, resume=DATA_POSITION)
  # Train on files without a matching <file>.summary.json (data_prep's
  # record of counts, vocab_size and lengths); see tasks/pretraining.py.
  allow_unverified_input: bool = setting(False, resume=SAFE)


@dataclasses.dataclass
class PretrainingTrainerConfig(experiment_config.TrainerConfig):
  best_metric: str = setting("masked_lm_accuracy", resume=SAFE)


@dataclasses.dataclass
class PretrainingExperimentConfig(experiment_config.ExperimentConfig):
  data: PretrainingDataConfig = dataclasses.field(
      default_factory=PretrainingDataConfig)
  trainer: PretrainingTrainerConfig = dataclasses.field(
      default_factory=PretrainingTrainerConfig)

  def validate_data(self):
    """Raises ValueError naming the first bad data field."""
    data, t = self.data, self.trainer
    if data.seq_length > self.model.max_position_embeddings:
      raise ValueError(
          f"data.seq_length ({data.seq_length}) exceeds "
          f"model.max_position_embeddings "
          f"({self.model.max_position_embeddings})")
    for name in ("seq_length", "max_predictions_per_seq", "global_batch_size",
                 "cycle_length"):
      if getattr(data, name) <= 0:
        raise ValueError(f"data.{name} must be > 0, got {getattr(data, name)}")
    # 0: the global batch size; no shuffling.
    for name in ("eval_batch_size", "shuffle_buffer_size"):
      if getattr(data, name) < 0:
        raise ValueError(f"data.{name} must be >= 0, got "
                         f"{getattr(data, name)}")
    for name in ("masked_lm_prob", "mask_id"):
      if getattr(data, name) is not None and not data.dynamic_masking:
        raise ValueError(
            f"data.{name} is {getattr(data, name)!r} but applies only with "
            "data.dynamic_masking=true: the static masks are the data's "
            "(made by create_pretraining_data); omit it")
    if data.global_batch_size % t.gradient_accumulation_steps:
      raise ValueError(
          f"data.global_batch_size ({data.global_batch_size}) must be "
          "divisible by trainer.gradient_accumulation_steps "
          f"({t.gradient_accumulation_steps})")


@dataclasses.dataclass
class PretrainingServingParams(serving_params.ServingParams):
  """Export settings: the `serving` export is the encoder with text in."""
  # 1: a `text` input; 2: `text_a`, `text_b`.
  num_text_fields: int = setting(1, export=True, flag="1 (`text`) or 2 "
                                "text inputs.")

  def validate(self):
    super().validate()
    task_modules.sentence_fields(self.num_text_fields)  # raises if not 1/2


# --- The task ---------------------------------------------------------------

PRETRAINING_EXPORT = "pretraining"


@registry.register_task
class PretrainingTask(base_task.Task):
  """MLM + SOP pretraining over data_prep TFRecords (a
  PretrainingExperimentConfig; model_dir is unused: nothing is cached)."""

  name = "pretraining"
  config_cls = PretrainingExperimentConfig
  serving_params_cls = PretrainingServingParams
  export_kinds = (base_task.SERVING_EXPORT, PRETRAINING_EXPORT)
  default_export_kind = base_task.ENCODER_EXPORT
  serving_tasks = {"encoder": {}}

  def __init__(self, config, model_dir=None):
    super().__init__(config, model_dir)
    self.data = config.data
    self.global_batch_size = self.data.global_batch_size
    self.eval_batch_size = self.data.eval_batch_size or self.global_batch_size
    self._validated = set()
    # Config field -> [(file, summary path, summary)] of the checked inputs.
    self._described_by = {}
    self._files_by = {}  # config field -> the files it matched
    seed = self.data.seed
    self.seed = config.runtime.seed if seed is None else seed

  def validate_inputs(self, training=True):
    key = "input_path" if training else "eval_input_path"
    if key in self._validated:
      return
    files = pretraining_inputs.validate_pretraining_files(
        getattr(self.data, key), self.data.seq_length,
        self.data.max_predictions_per_seq, f"data.{key}",
        vocab_size=self.config.model.vocab_size)
    if self.data.allow_unverified_input:
      logging.warning("data.allow_unverified_input: %s not checked against "
                      "data_prep summaries", key)
    else:
      self._described_by[key] = pretraining_inputs.check_summaries(
          files, self.config, f"data.{key}")
    self._validated.add(key)
    self._files_by[key] = files
    pretraining_inputs.check_alike(self._described_by)
    pretraining_inputs.warn_if_held_out_is_trained_on(self._files_by)

  @property
  def _described(self):
    """(file, summary path, summary) of every checked input file."""
    return [d for described in self._described_by.values()
            for d in described]

  def input_files(self, training):
    pattern = self.data.input_path if training else self.data.eval_input_path
    return pretraining_dataloader.list_files(pattern) if pattern else []

  def bad_input(self, error):
    return pretraining_dataloader.bad_input(error)

  def data_tokenizer(self) -> Dict[str, Any]:
    """The tokenizer of the data (spm_model_file or vocab_file,
    do_lower_case) from its summary, once validate_inputs has read it; else
    {}."""
    for _, summary_path, summary in self._described[:1]:
      return {"do_lower_case": pretraining_summary.value(summary,
                                                         "do_lower_case"),
              **summary_checks.tokenizer_files(summary, summary_path)}
    return {}

  def record_facts(self) -> Dict[str, Any]:
    """The task, without a tokenizer the data has not told yet, and the
    data's objective (its sentence-pair task and masking: a later start on
    data made otherwise is refused)."""
    facts = super().record_facts()
    if not self._described:
      for key in ("spm_model_file", "vocab_file", "do_lower_case"):
        del facts[key]
      return facts
    facts[run_record.DATA_FACTS] = pretraining_inputs.data_facts(
        self._described_by)
    facts[run_record.DATA_SOURCE] = self._described[0][1]
    return facts

  def masking_settings(self):
    """Dynamic masking's settings: the training data's (its summaries)."""
    data = self.data
    if not data.dynamic_masking:
      return None
    return dynamic_masking.settings_for_files(
        pretraining_dataloader.list_files(data.input_path),
        {"data.mask_id": data.mask_id,
         "data.masked_lm_prob": data.masked_lm_prob})

  def build_inputs(self, input_context, training):
    data = self.data
    batch = self.global_batch_size if training else self.eval_batch_size
    ds = pretraining_dataloader.pretraining_dataset(
        data.input_path if training else data.eval_input_path,
        data.seq_length, data.max_predictions_per_seq, batch,
        is_training=training, input_context=input_context,
        dynamic_masking=data.dynamic_masking and training,
        vocab_size=self.config.model.vocab_size,
        masking=self.masking_settings() if training else None,
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

  def eval_metric_names(self):
    return tuple(losses.metrics_from_sums(dict.fromkeys(
        ("mlm_loss_sum", "mlm_weight", "mlm_correct", "sop_loss_sum",
         "sop_correct", "sop_count"), 0.0)))

  def initialize(self, model):
    tc = self.config.trainer
    if not tc.init_checkpoint:
      return
    base_task.warm_start(
        model, tc.init_checkpoint, self.config, "trainer.init_checkpoint",
        facts={identity.VOCAB_SHA256: run_record.with_fingerprints(
            self.data_tokenizer())[identity.VOCAB_SHA256]},
        allow_missing_heads=True)

  # --- Export ---

  def serving_params(self, recorded_facts):
    """The tokenizer is the data's (its summary's, else recorded from it)."""
    tokenizer = self.data_tokenizer() or recorded_facts
    lower = tokenizer.get("do_lower_case")
    return PretrainingServingParams(
        max_seq_length=self.data.seq_length,
        spm_model_file=tokenizer.get("spm_model_file") or "",
        vocab_file=tokenizer.get("vocab_file") or "",
        do_lower_case=True if lower is None else bool(lower))

  @classmethod
  def model_for(cls, kind, model_config, params, dropout_rate=0.0):
    """Training and the pretraining export: the encoder with its MLM and
    SOP heads; the other exports: the encoder."""
    del params, dropout_rate
    if kind in (None, PRETRAINING_EXPORT):
      return AlbertPretrainer(model_config)
    return AlbertEncoder(model_config)

  @classmethod
  def serving_module(cls, kind, model, params, assets):
    config = getattr(model, "encoder", model).config
    if kind == PRETRAINING_EXPORT:
      if not isinstance(model, AlbertPretrainer):
        raise TypeError("the pretraining export needs an AlbertPretrainer, "
                        f"got {type(model).__name__}")
      module = serving_modules.PretrainingModule(model, config, **assets)
      module.trace()
      return module
    params.check_text_in("a serving export", config)
    model = getattr(model, "encoder", model)  # text in -> the encoder's outputs
    return task_modules.EncoderServingModule(model, params, config, **assets)
