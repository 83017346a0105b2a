"""The fine-tuning task base: config, warm start, cached inputs, prediction,
serving export.

Training runs on `albert_tf.core.trainer.Trainer` through
`albert_tf.core.train_lib.run_experiment` (modes, run record). Each family
(sentence_prediction, question_answering, multiple_choice, tagging)
subclasses `FinetuneTask`, its data config and its serving params, registers
itself (`tasks/registry.py`) and declares the abstract methods of both
(examples, cached records, their features, its serving module)."""

import abc
import dataclasses
import functools
import os
from typing import Any, Dict, Optional

from absl import logging
import numpy as np
import tensorflow as tf
from official.modeling.hyperparams import base_config

from albert_tf.checkpoints import identity
from albert_tf.core import base_task
from albert_tf.core import experiment_config
from albert_tf.core.settings import DATA_POSITION, SAFE, setting
from albert_tf.data import finetune_features
from albert_tf.modeling.networks.albert_encoder import AlbertEncoder
from albert_tf.modeling.networks.albert_encoder import INPUT_NAMES
from albert_tf.serving import serving_params
from data_prep import tokenization
from albert_toolkit import output_files


# --- Config -------------------------------------------------------------------


@dataclasses.dataclass
class FinetuningDataConfig(serving_params.TextInputConfig):
  """Inputs every fine-tuning family has (families add their own fields);
  the text settings (`TextInputConfig`) are also its exports'."""
  global_batch_size: int = setting(32, resume=DATA_POSITION)
  # 0: same as global_batch_size.
  eval_batch_size: int = setting(8, resume=SAFE)
  # Feature cache (TFRecords); "": <model_dir>/features.
  cache_dir: str = setting("", resume=SAFE)
  skip_malformed_rows: bool = setting(
      False, resume=SAFE, flag="Skip and count malformed input rows instead "
      "of failing (data.skip_malformed_rows).")
  shuffle_buffer_size: int = setting(10000, resume=DATA_POSITION)
  seed: Optional[int] = setting(None, resume=DATA_POSITION)


@dataclasses.dataclass
class FinetuningTaskConfig(base_config.Config):
  """The downstream model and its warm start."""
  # Dropout on the pooled output before the head (the original's 0.1).
  classifier_dropout: float = 0.1
  # Warm start from an encoder SavedModel (export_savedmodel encoder
  # export; a version dir or its parent) instead of trainer.init_checkpoint.
  init_saved_model: str = setting(
      "", resume=SAFE, flag="Warm start from an exported encoder SavedModel "
      "(task.init_saved_model).")


@dataclasses.dataclass
class FinetuningTrainerConfig(experiment_config.TrainerConfig):
  best_metric: str = setting("accuracy", resume=SAFE)


@dataclasses.dataclass
class FinetuningExperimentConfig(experiment_config.ExperimentConfig):
  data: FinetuningDataConfig = dataclasses.field(
      default_factory=FinetuningDataConfig)
  task: FinetuningTaskConfig = dataclasses.field(
      default_factory=FinetuningTaskConfig)
  trainer: FinetuningTrainerConfig = dataclasses.field(
      default_factory=FinetuningTrainerConfig)

  def validate_data(self):
    """Raises ValueError naming the first bad data field."""
    d = self.data
    if d.max_seq_length > self.model.max_position_embeddings:
      raise ValueError(f"data.max_seq_length ({d.max_seq_length}) exceeds "
                       "model.max_position_embeddings "
                       f"({self.model.max_position_embeddings})")
    for name in ("max_seq_length", "global_batch_size"):
      if getattr(d, name) <= 0:
        raise ValueError(f"data.{name} must be > 0, got {getattr(d, name)}")
    if d.eval_batch_size < 0:
      raise ValueError(f"data.eval_batch_size must be >= 0, got "
                       f"{d.eval_batch_size}")


# The two vocabulary settings, as errors name them.
VOCAB_SETTINGS = ("data.spm_model_file (--spm_model_file)",
                  "data.vocab_file (--vocab_file)")


def vocab_path(data):
  """The data's vocabulary file, of either kind ("" if none)."""
  return data.spm_model_file or data.vocab_file


# --- Warm start ---------------------------------------------------------------


def initialize_model(model, config):
  """Warm start of a fresh run (no checkpoint in model_dir yet): the encoder
  from trainer.init_checkpoint (ours, the original TF1 release or Model
  Garden's) or task.init_saved_model (an encoder SavedModel of
  export_savedmodel), through `checkpoints.restore.restore`; heads stay
  fresh."""
  tc, task = config.trainer, config.task
  if tc.init_checkpoint and task.init_saved_model:
    raise ValueError("set only one of trainer.init_checkpoint and "
                     "task.init_saved_model")
  source = tc.init_checkpoint or task.init_saved_model
  if not source:
    logging.warning("no init checkpoint: fine-tuning from random weights")
    return
  # A checkpoint of ours says which model and vocabulary it holds, an
  # encoder export which vocabulary and casing (its assets).
  setting = ("trainer.init_checkpoint" if tc.init_checkpoint else
             "task.init_saved_model")
  base_task.warm_start(
      model, source, config, setting, parts="encoder",
      facts={identity.VOCAB_SHA256: output_files.file_sha256(
          vocab_path(config.data)),
             "do_lower_case": config.data.do_lower_case})


# --- The task base ------------------------------------------------------------


class FinetuneTask(base_task.Task):
  """Base: cached features in, additive sums out (see the module docstring)."""

  index_key = "example_index"
  evaluate_after_training = True
  train_split = "train"
  eval_split = "dev"
  # What the data is called in messages ("CoNLL", a GLUE task's name).
  data_name = ""
  # The `<x>correct` sums of compute_sums (`softmax_sums`: "correct").
  correct_sums = ("correct",)

  def __init__(self, config, model_dir):
    super().__init__(config, model_dir)
    self.data = config.data
    self.global_batch_size = self.data.global_batch_size
    self.eval_batch_size = self.data.eval_batch_size or self.global_batch_size
    self.head_dropout = config.task.classifier_dropout
    self.cache_dir = self.data.cache_dir or os.path.join(model_dir,
                                                         "features")
    self._eval_checked = False
    # Every family that reads a directory has data.data_dir.
    if getattr(self.data, "data_dir", None) == "":
      raise ValueError("data.data_dir (--data_dir) is required")

  # --- What each family declares ---

  @abc.abstractmethod
  def read_examples(self, split: str):
    """The examples of `split`."""

  @abc.abstractmethod
  def cached_records(self, split: str, examples=None):
    """Cached TFRecords of `split` -> (path, metadata with num_records)."""

  @abc.abstractmethod
  def feature_spec(self):
    """name -> (shape, dtype) of the cached records."""

  @abc.abstractmethod
  def evaluate(self, trainer, output_dir: str) -> Dict[str, Any]:
    """Full dev evaluation with the benchmark's metrics."""

  @abc.abstractmethod
  def predict(self, trainer, output_dir: str):
    """Test predictions -> list of files written."""

  @classmethod
  @abc.abstractmethod
  def module_for(cls, params):
    """The serving module class (serving/task_modules.py) of `params`."""

  # --- Shared ---

  @functools.cached_property
  def tokenizer(self):
    """The data's tokenizer: data.spm_model_file (SentencePiece) or
    data.vocab_file (BERT WordPiece), exactly one."""
    d = self.data
    tokenization.check_one_vocabulary(d.spm_model_file, d.vocab_file,
                                      VOCAB_SETTINGS)
    field = "spm_model_file" if d.spm_model_file else "vocab_file"
    path = getattr(d, field)
    if not os.path.isfile(path):
      raise FileNotFoundError(f"data.{field}: {path} does not exist")
    tokenizer = tokenization.load_tokenizer(
        d.spm_model_file, d.vocab_file, do_lower_case=d.do_lower_case)
    tokenization.check_vocab_size(path, tokenizer.vocab_size,
                                  self.config.model.vocab_size,
                                  "model.vocab_size")
    return tokenizer

  def cached_features(self, stem, split, files, convert, examples=None,
                      metadata=None, **settings):
    """(path, metadata) of `split`'s cached records, named `stem` and a
    fingerprint of `files`, the tokenizer, data.max_seq_length and
    `settings`; unless cached, built from `convert(examples)` (default: the
    split's) with `metadata(examples)`."""
    fp = finetune_features.fingerprint(
        files, self.tokenizer, max_seq_length=self.data.max_seq_length,
        **settings)
    path = os.path.join(self.cache_dir, f"{stem}_{fp}.tf_record")

    def build(out):
      exs = examples if examples is not None else self.read_examples(split)
      finetune_features.write_records(
          out, convert(exs), metadata and (lambda: metadata(exs)))
    return finetune_features.cached_records(path, build)

  def split_path(self, split: str) -> str:
    """Where `split`'s examples are read from, for messages (default: the
    split's directory under data.data_dir)."""
    return os.path.join(self.data.data_dir, split)

  def eval_data(self):
    return [os.path.abspath(self.split_path(self.eval_split))]

  def check_data_files(self, training: bool) -> None:
    """Raises FileNotFoundError naming the missing input of the split
    (default: its `split_path` file, named in `data_name`'s words)."""
    split = self.train_split if training else self.eval_split
    path = self.split_path(split)
    if not os.path.isfile(path):
      raise FileNotFoundError(f"{self.data_name} {split} file not found: "
                              f"{path} (data.data_dir / --data_dir)")

  def validate_inputs(self, training=True):
    self.check_data_files(training)
    self.tokenizer  # pylint: disable=pointless-statement
    if not training and not self._eval_checked:
      # Read before the first step: an empty file or a bad label was found
      # only after the whole training run.
      if not self.read_examples(self.eval_split):
        raise ValueError(f"{self.split_path(self.eval_split)}: no "
                         f"{self.eval_split} example to evaluate on")
      self._eval_checked = True

  def initialize(self, model):
    initialize_model(model, self.config)

  # --- Export ---

  def serving_params(self, recorded_facts):
    """The config's serving fields (families add what they derive)."""
    del recorded_facts
    return self.serving_params_cls.from_config(self.config)

  @classmethod
  def serving_module(cls, kind, model, params, assets):
    del kind
    config = model.encoder.config
    params.check_text_in(f"a {cls.name} export", config)
    return cls.module_for(params)(model, params, config, **assets)

  def model_inputs(self, features):
    return {k: features[k] for k in INPUT_NAMES}

  def loss_normalizers(self, features):
    return {"count": tf.reduce_sum(self.valid(features))}

  def valid(self, features):
    """1.0 for real examples, 0.0 for eval padding."""
    return tf.cast(features[self.index_key] >= 0, tf.float32)

  def loss_from_sums(self, sums, normalizers):
    return sums["loss_sum"] / tf.maximum(normalizers["count"], 1.0)

  def metrics_from_sums(self, sums):
    """The loss, and each `<x>correct` sum as `<x>accuracy` (`softmax_sums`:
    accuracy; the SQuAD heads: start_ and end_accuracy)."""
    count = tf.maximum(sums["count"], 1.0)
    return dict({"loss": sums["loss_sum"] / count},
                **{k[:-len("correct")] + "accuracy": v / count
                   for k, v in sums.items() if k.endswith("correct")})

  def eval_metric_names(self):
    return ("loss",) + tuple(k[:-len("correct")] + "accuracy"
                             for k in self.correct_sums)

  def predict_outputs(self, trainer, split, keys):
    """(examples, metadata, index -> the model's outputs `keys` (those it
    has) in numpy) on `split`'s cached records (padding dropped)."""
    examples = self.read_examples(split)
    path, meta = self.cached_records(split, examples)
    num_records = meta["num_records"]

    def dataset_fn(ctx):
      return padded_eval_dataset(path, self.feature_spec(),
                                 self.eval_batch_size, num_records,
                                 self.index_key, ctx)

    def outputs(model, features):
      out = model(self.model_inputs(features), training=False)
      return dict({k: out[k] for k in keys if k in out},
                  _index=features[self.index_key])

    results = {}
    for batch in trainer.predict(dataset_fn, outputs):
      for row, idx in enumerate(batch["_index"]):
        if idx >= 0:
          results[int(idx)] = {k: v[row] for k, v in batch.items()
                               if k != "_index"}
    if len(results) != num_records:
      raise RuntimeError(f"predicted {len(results)} of {num_records} records")
    return examples, meta, results

  def predict_logits(self, trainer, split):
    """(examples, logits [num_examples, ...]) of the model on `split`, for
    tasks whose model outputs `logits`."""
    examples, _, results = self.predict_outputs(trainer, split, ("logits",))
    return examples, np.stack([results[i]["logits"]
                               for i in range(len(examples))])

  def build_inputs(self, input_context, training):
    if training:
      path, _ = self.cached_records(self.train_split)
      return finetune_features.record_dataset(
          path, self.feature_spec(), self.global_batch_size, True,
          input_context, self.data.shuffle_buffer_size,
          seed=self.data.seed if self.data.seed is not None
          else self.config.runtime.seed)
    path, meta = self.cached_records(self.eval_split)
    return padded_eval_dataset(path, self.feature_spec(),
                               self.eval_batch_size, meta["num_records"],
                               self.index_key, input_context)


def encoder(model_config, pooled_export=False):
  """The encoder of every fine-tuning model (its variables' names).
  `pooled_export`: the export of a model that reads only the pooled output
  computes only the [CLS] row of the last layer (`output_range=1`); its
  training model keeps the whole layer (its dropout draws stay those of the
  whole model)."""
  return AlbertEncoder(model_config, output_range=1 if pooled_export else None,
                       name="albert_encoder")


def softmax_sums(logits, labels, weights):
  """The additive sums of a softmax classifier (any rank: logits [..., C],
  labels and weights [...]; weight 0 for padding): loss_sum, count,
  correct."""
  ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
  hit = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32),
                         labels), tf.float32)
  return {"loss_sum": tf.reduce_sum(weights * ce),
          "count": tf.reduce_sum(weights),
          "correct": tf.reduce_sum(weights * hit)}


def padded_eval_dataset(path, spec, global_batch, num_records, index_key,
                        input_context=None):
  """Records in order, padded with dummy examples (index -1) to whole global
  batches so every batch has a static shape (TPU/XLA) on every replica."""
  ds = finetune_features.decoded_records(path, spec)
  pad = (-num_records) % global_batch
  if pad:
    dummy = {name: tf.zeros(shape, tf.int32 if dtype == tf.int64 else dtype)
             for name, (shape, dtype) in spec.items()}
    dummy[index_key] = tf.constant(-1, tf.int32)
    ds = ds.concatenate(tf.data.Dataset.from_tensors(dummy).repeat(pad))
  batch = global_batch
  if input_context is not None:
    if input_context.num_input_pipelines > 1:
      ds = ds.shard(input_context.num_input_pipelines,
                    input_context.input_pipeline_id)
    batch = input_context.get_per_replica_batch_size(global_batch)
  return ds.batch(batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
