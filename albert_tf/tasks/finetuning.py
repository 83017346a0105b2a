"""What run_classifier, run_squad and run_race share: config, warm start,
the task base class on the generic trainer, prediction, export, the CLI.

Training runs on `albert_tf.core.trainer.Trainer` (the pretraining loop: strategy,
mixed precision, XLA, checkpoints, summaries, best checkpoint). Each family
defines a `FinetuneTask` (model, cached TFRecord inputs, loss as additive
sums) and a `Family` (how to read/convert data, evaluate and write
predictions); `run()` dispatches `--mode`:

  train           train to trainer.train_steps (resumes from model_dir)
  eval            the latest (or --checkpoint) model on the dev data, with
                  the benchmark's metrics -> <output_dir>/eval_results.json
  predict         test data -> submission files in <output_dir>
  train_and_eval  train (with periodic in-loop evaluation where the family
                  supports it), then eval
  export          a serving SavedModel (albert_tf.export_savedmodel)

A run warm-starts, when it has no checkpoint of its own yet, from
`trainer.init_checkpoint` (ours, the original TF1 release or Model Garden) or
`task.init_saved_model` (an encoder SavedModel from export_savedmodel), both
through `checkpoints.restore.restore`.
"""

import dataclasses
import json
import os
from typing import Optional

from absl import logging
import numpy as np
import tensorflow as tf
from official.modeling.hyperparams import base_config

from albert_tf.checkpoints import paths
from albert_tf.checkpoints import restore as restore_lib
from albert_tf.core import distribute_utils
from albert_tf.core import experiment_config
from albert_tf.data import finetune_features
from albert_tf.core import trainer as trainer_lib
from albert_tf.modeling.networks.albert_encoder import AlbertEncoder
from data_prep import tokenization

MODES = ("train", "eval", "predict", "train_and_eval", "export")
EVAL_RESULTS_FILE = "eval_results.json"


# --- Config ------------------------------------------------------------------------


@dataclasses.dataclass
class FinetuningDataConfig(base_config.Config):
  """Inputs of a fine-tuning run (fields a family does not use are ignored)."""
  # GLUE task name (cola, sst-2, mrpc, sts-b, qqp, mnli, qnli, rte, wnli).
  task_name: str = ""
  # GLUE task directory / RACE directory (holding train/ dev/ test/).
  data_dir: str = ""
  # SQuAD JSON files.
  train_file: str = ""
  predict_file: str = ""
  spm_model_file: str = ""
  do_lower_case: bool = True
  max_seq_length: int = 512
  global_batch_size: int = 32
  # 0: same as global_batch_size.
  eval_batch_size: int = 8
  # Feature cache (TFRecords); "": <model_dir>/features.
  cache_dir: str = ""
  # Malformed rows/files: skip and count instead of failing.
  skip_malformed_rows: bool = False
  shuffle_buffer_size: int = 10000
  seed: Optional[int] = None
  # SQuAD.
  version_2_with_negative: bool = False
  doc_stride: int = 128
  max_query_length: int = 64
  n_best_size: int = 20
  max_answer_length: int = 30
  null_score_diff_threshold: float = 0.0
  # RACE: tokens kept of question+option.
  max_qa_length: int = 128


@dataclasses.dataclass
class FinetuningTaskConfig(base_config.Config):
  """The downstream model and its warm start."""
  # Dropout on the pooled output before the head (the original's 0.1).
  classifier_dropout: float = 0.1
  # SQuAD 2.0: add an answerability head on [CLS] (squad_head "simple").
  with_answerability: bool = False
  # SQuAD span head: "simple" (start/end dense) or "xlnet" (the original
  # run_squad_v2.py head: end conditioned on the start, beam of
  # start_n_top x end_n_top, answer class; SQuAD 2.0 only).
  squad_head: str = "simple"
  start_n_top: int = 5
  end_n_top: int = 5
  # Warm start from an encoder SavedModel (export_savedmodel encoder
  # export; a version dir or its parent) instead of trainer.init_checkpoint.
  init_saved_model: str = ""


@dataclasses.dataclass
class FinetuningExperimentConfig(experiment_config.ExperimentConfig):
  data: FinetuningDataConfig = dataclasses.field(
      default_factory=FinetuningDataConfig)
  task: FinetuningTaskConfig = dataclasses.field(
      default_factory=FinetuningTaskConfig)


def validate(config):
  experiment_config.validate(config)
  d = config.data
  if d.max_seq_length > config.model.max_position_embeddings:
    raise ValueError(f"data.max_seq_length ({d.max_seq_length}) exceeds "
                     "model.max_position_embeddings "
                     f"({config.model.max_position_embeddings})")
  for name in ("max_seq_length", "global_batch_size"):
    if getattr(d, name) <= 0:
      raise ValueError(f"data.{name} must be > 0, got {getattr(d, name)}")
  if d.eval_batch_size < 0:
    raise ValueError(f"data.eval_batch_size must be >= 0, got "
                     f"{d.eval_batch_size}")
  if config.trainer.best_metric == "masked_lm_accuracy":
    config.trainer.best_metric = "accuracy"
  return config


def load_config(config_files=(), params_override=""):
  config = experiment_config.load_config(FinetuningExperimentConfig,
                                         config_files, params_override)
  return validate(config)


# --- Warm start ------------------------------------------------------------------------


def initialize_model(model, config):
  """Warm start of a fresh run (no checkpoint in model_dir yet): the encoder
  from trainer.init_checkpoint or task.init_saved_model; heads stay fresh."""
  tc, task = config.trainer, config.task
  if tc.init_checkpoint and task.init_saved_model:
    raise ValueError("set only one of trainer.init_checkpoint and "
                     "task.init_saved_model")
  source = tc.init_checkpoint or task.init_saved_model
  if not source:
    logging.warning("no init checkpoint: fine-tuning from random weights")
    return
  report = restore_lib.restore(model, source, parts="encoder",
                               init_from_group0=tc.init_from_group0)
  logging.info("warm-started the encoder: %s", report.summary())


# --- The task base -------------------------------------------------------------------------


class FinetuneTask(trainer_lib.Task):
  """Base: cached features in, additive sums out.

  Subclasses set `label_names`, implement `build_model`, `train_records()` /
  `eval_records()` (-> (path, metadata)), `feature_spec()`, `compute_sums`,
  `loss_from_sums`, `metrics_from_sums`; `predict_logits` needs `examples`,
  `records` and `_inputs`.
  """

  index_key = "example_index"

  def __init__(self, config, model_dir):
    self.config = config
    self.data = config.data
    self.model_dir = model_dir
    self.global_batch_size = self.data.global_batch_size
    self.eval_batch_size = self.data.eval_batch_size or self.global_batch_size
    self.cache_dir = self.data.cache_dir or os.path.join(model_dir,
                                                         "features")
    self._tokenizer = None

  @property
  def tokenizer(self):
    if self._tokenizer is None:
      if not self.data.spm_model_file:
        raise ValueError("data.spm_model_file (--spm_model_file) is required")
      self._tokenizer = tokenization.FullTokenizer(
          self.data.spm_model_file, do_lower_case=self.data.do_lower_case)
    return self._tokenizer

  def encoder(self):
    return AlbertEncoder(self.config.model, name="albert_encoder")

  def initialize(self, model):
    initialize_model(model, self.config)

  def restore_for_inference(self, trainer, path):
    """Loads checkpoint `path` into trainer.model (eval, predict, export)."""
    restore_lib.restore(trainer.model, path, step=trainer.global_step)

  def loss_normalizers(self, features):
    return {"count": tf.reduce_sum(self.valid(features))}

  def predict_logits(self, trainer, split):
    """(examples, logits [num_examples, ...]) of the model on `split`, for
    tasks whose model outputs `logits` from `self._inputs(features)`."""
    examples = self.examples(split)
    path, meta = self.records(split, examples)

    def output_fn(model, features):
      return {"logits": model(self._inputs(features),
                              training=False)["logits"]}

    results = predict_records(
        trainer, path, self.feature_spec(), meta["num_records"],
        self.eval_batch_size, self.index_key, output_fn)
    return examples, np.stack([results[i]["logits"]
                               for i in range(len(examples))])

  def valid(self, features):
    """1.0 for real examples, 0.0 for eval padding."""
    return tf.cast(features[self.index_key] >= 0, tf.float32)

  def build_inputs(self, input_context, training):
    if training:
      path, _ = self.train_records()
      return finetune_features.record_dataset(
          path, self.feature_spec(), self.global_batch_size, True,
          input_context, self.data.shuffle_buffer_size,
          seed=self.data.seed if self.data.seed is not None
          else self.config.runtime.seed)
    path, meta = self.eval_records()
    return padded_eval_dataset(path, self.feature_spec(),
                               self.eval_batch_size, meta["num_records"],
                               self.index_key, input_context)


def padded_eval_dataset(path, spec, global_batch, num_records, index_key,
                        input_context=None):
  """Records in order, padded with dummy examples (index -1) to whole global
  batches so every batch has a static shape (TPU/XLA) on every replica."""
  ds = finetune_features.decoded_records(path, spec)
  pad = (-num_records) % global_batch
  if pad:
    dummy = {}
    for name, (shape, dtype) in spec.items():
      dt = tf.int32 if dtype == tf.int64 else dtype
      dummy[name] = tf.zeros(shape, dt)
    dummy[index_key] = tf.constant(-1, tf.int32)
    ds = ds.concatenate(tf.data.Dataset.from_tensors(dummy).repeat(pad))
  batch = global_batch
  if input_context is not None:
    if input_context.num_input_pipelines > 1:
      ds = ds.shard(input_context.num_input_pipelines,
                    input_context.input_pipeline_id)
    batch = input_context.get_per_replica_batch_size(global_batch)
  return ds.batch(batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE)


def predict_records(trainer, path, spec, num_records, batch_size, index_key,
                    output_fn):
  """Runs `output_fn(model, features)` over cached records.

  Returns a dict index -> dict of numpy outputs (padding dropped).
  `output_fn` must return a dict; the index is added to it.
  """
  def dataset_fn(ctx):
    return padded_eval_dataset(path, spec, batch_size, num_records,
                               index_key, ctx)

  def outputs(model, features):
    out = dict(output_fn(model, features))
    out["_index"] = features[index_key]
    return out

  results = {}
  for batch in trainer.predict(dataset_fn, outputs):
    for row, idx in enumerate(batch["_index"]):
      if idx < 0:
        continue
      results[int(idx)] = {k: v[row] for k, v in batch.items()
                           if k != "_index"}
  if len(results) != num_records:
    raise RuntimeError(f"predicted {len(results)} of {num_records} records")
  return results


# --- Runs -------------------------------------------------------------------------------


class Family:
  """What a run script plugs into `run()`."""

  name = ""

  def make_task(self, config, model_dir):
    raise NotImplementedError

  def in_loop_eval(self):
    """Whether the trainer's periodic evaluation applies (dev has labels)."""
    return True

  def evaluate(self, trainer, task, output_dir):
    """Full dev evaluation with the benchmark's metrics -> dict."""
    raise NotImplementedError

  def predict(self, trainer, task, output_dir):
    """Test predictions -> list of files written."""
    raise NotImplementedError

  def export(self, model, task, export_dir):
    raise NotImplementedError


def _restore_for_inference(trainer, task, checkpoint):
  """The model (and step) from --checkpoint, else the run's latest."""
  if not checkpoint and not tf.train.latest_checkpoint(trainer.checkpoint_dir):
    raise ValueError(f"no checkpoint in {trainer.checkpoint_dir}; train "
                     "first or pass --checkpoint")
  path = paths.resolve_checkpoint(checkpoint or trainer.checkpoint_dir)
  task.restore_for_inference(trainer, path)
  logging.info("restored %s (step %d)", path, int(trainer.global_step.numpy()))
  return path


def write_eval_results(output_dir, results):
  os.makedirs(output_dir, exist_ok=True)
  path = os.path.join(output_dir, EVAL_RESULTS_FILE)
  with open(path, "w", encoding="utf-8") as f:
    json.dump(results, f, indent=2, sort_keys=True, default=float)
  logging.info("eval results: %s -> %s", results, path)
  return path


def run(family, config, model_dir, mode="train", output_dir=None,
        checkpoint=None, export_dir=None):
  """Runs `mode` for `family`; returns a dict of what it produced."""
  if mode not in MODES:
    raise ValueError(f"unknown mode {mode!r}; expected one of {MODES}")
  output_dir = output_dir or model_dir
  rt = config.runtime
  strategy = distribute_utils.get_strategy(
      rt.distribution_strategy, tpu=rt.tpu or None,
      num_cpu_devices=rt.num_cpu_devices)
  task = family.make_task(config, model_dir)
  trainer = trainer_lib.Trainer(task, config, model_dir, strategy)
  if trainer.is_chief:
    experiment_config.save_config(config, model_dir)
  result = {}
  if mode in ("train", "train_and_eval"):
    if mode == "train_and_eval" and family.in_loop_eval():
      result["train"] = trainer.train_and_evaluate()
    else:
      result["train"] = trainer.train()
  else:
    result["checkpoint"] = _restore_for_inference(trainer, task, checkpoint)
  if mode in ("eval", "train_and_eval"):
    metrics = family.evaluate(trainer, task, output_dir)
    result["eval"] = metrics
    if trainer.is_chief:
      write_eval_results(output_dir, metrics)
  if mode == "predict":
    result["predict"] = family.predict(trainer, task, output_dir)
  if mode == "export":
    if not export_dir:
      raise ValueError("--export_dir is required with --mode=export")
    result["export"] = family.export(trainer.model, task, export_dir)
  return result


__all__ = ["FinetuningExperimentConfig", "FinetuneTask", "Family", "run",
           "load_config", "initialize_model", "predict_records",
           "padded_eval_dataset"]
