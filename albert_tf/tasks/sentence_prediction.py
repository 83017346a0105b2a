"""Sentence (pair) prediction: GLUE classification and STS-B regression on
the pooled output (the task and its run family; the CLI is run_classifier)."""

import dataclasses
import os
from typing import List

import numpy as np
import tensorflow as tf

from albert_tf.core.settings import DATA_POSITION, setting
from albert_tf.data import glue_data
from albert_tf.data import label_names
from albert_tf.modeling.models import downstream_models
from albert_tf.serving import serving_params
from albert_tf.serving import task_modules
from albert_tf.tasks import finetuning as finetune_lib
from albert_tf.tasks import metrics as finetune_metrics
from albert_tf.tasks import registry


@dataclasses.dataclass
class GlueDataConfig(finetune_lib.FinetuningDataConfig):
  task_name: str = setting("", flag="GLUE task (data.task_name): "
                           f"{', '.join(glue_data.TASK_NAMES)}.")
  data_dir: str = setting("", resume=DATA_POSITION, flag="The task's GLUE "
                          "directory: train.tsv, dev*.tsv, test*.tsv "
                          "(data.data_dir).")
  # The classes' names in output order, replacing the GLUE task's (a
  # converted Hugging Face classifier's id2label); their number is the
  # model's. Training and evaluation read the data's labels by the task's.
  label_names: List[str] = setting(
      [], serving=True, export=True, flag="Classification: class names in "
      "output order (data.label_names; default: the GLUE task's; an "
      "export renames a run's in their order).")


@dataclasses.dataclass
class GlueExperimentConfig(finetune_lib.FinetuningExperimentConfig):
  data: GlueDataConfig = dataclasses.field(default_factory=GlueDataConfig)


@serving_params.view_of(GlueExperimentConfig)
class SentenceServingParams(serving_params.ServingParams):
  """Export settings of a classifier (num_labels > 1) or a regressor (1);
  `label_names` names label ids 0, 1, ... (empty: "0", "1", ...)."""
  num_labels: int = setting(2, flag="Classification: classes.")
  # 1: a `text` input; 2: `text_a`, `text_b`.
  num_text_fields: int = setting(1, flag="1 (`text`) or 2 text inputs.")

  @property
  def regression(self) -> bool:
    return self.num_labels == 1

  def validate(self):
    super().validate()
    task_modules.sentence_fields(self.num_text_fields)  # raises if not 1/2
    if self.num_labels < 1:
      raise ValueError(f"num_labels must be >= 1, got {self.num_labels}")
    if self.label_names:
      if self.regression:
        raise ValueError("label_names: a regression export has no labels")
      label_names.check_names(self.label_names)
      if len(self.label_names) != self.num_labels:
        raise ValueError(f"label_names has {len(self.label_names)} names "
                         f"for {self.num_labels} labels")

  def check_change(self, field, value):
    if field == "label_names" and self.label_names:
      label_names.check_renaming(value, self.label_names)


@registry.register_task
class ClassifierTask(finetune_lib.FinetuneTask):
  """GLUE classification / regression on the pooled output."""

  name = "sentence_prediction"
  config_cls = GlueExperimentConfig
  serving_params_cls = SentenceServingParams
  serving_tasks = {"classification": {}, "regression": {"num_labels": 1}}

  def __init__(self, config, model_dir):
    super().__init__(config, model_dir)
    if not self.data.task_name:
      raise ValueError("data.task_name (--task_name) is required: one of "
                       f"{glue_data.TASK_NAMES}")
    self.spec = glue_data.get_task(self.data.task_name)
    self.data_name = self.spec.name
    self.regression = self.spec.labels is None
    self.labels = tuple(self.data.label_names) or self.spec.labels
    if self.data.label_names:
      if self.regression:
        raise ValueError(f"data.label_names: {self.spec.name} is a "
                         "regression task (no labels)")
      label_names.check_names(self.labels, "data.label_names")
    self.num_labels = len(self.labels) if self.labels else 1
    self.eval_split = glue_data.task_splits(self.spec.name)[0][0]

  @classmethod
  def model_for(cls, kind, model_config, params, dropout_rate=0.0):
    return downstream_models.AlbertClassifier(
        finetune_lib.encoder(model_config, pooled_export=bool(kind)),
        num_labels=params.num_labels,
        dropout_rate=dropout_rate)

  def validate_inputs(self, training=True):
    if len(self.labels or ()) != len(self.spec.labels or ()):
      raise ValueError(
          f"data.label_names has {len(self.labels)} names but {self.spec.name}"
          f"'s data has {len(self.spec.labels)} labels: train and evaluate "
          "on data of the same labels")
    super().validate_inputs(training)

  def feature_spec(self):
    return glue_data.feature_spec(self.spec.name, self.data.max_seq_length)

  def read_examples(self, split):
    return glue_data.read_examples(
        self.spec.name, self.data.data_dir, split,
        skip_malformed=self.data.skip_malformed_rows,
        stats=glue_data.ReadStats())

  def cached_records(self, split, examples=None):
    return self.cached_features(
        f"{self.spec.name}_{split}", split, self.source_files(split),
        lambda exs: glue_data.convert_examples(
            exs, self.spec.name, self.tokenizer, self.data.max_seq_length),
        examples, skip=self.data.skip_malformed_rows)

  def split_path(self, split):
    return os.path.join(self.data.data_dir, self.spec.files[split])

  def compute_sums(self, model, features, training):
    logits = model(self.model_inputs(features), training=training)["logits"]
    w = self.valid(features)  # [batch]
    if self.regression:
      pred = logits[:, 0]  # [batch]
      y = features["label_values"]
      return {"loss_sum": tf.reduce_sum(w * tf.square(pred - y)),
              "count": tf.reduce_sum(w), "sx": tf.reduce_sum(w * pred),
              "sy": tf.reduce_sum(w * y), "sxx": tf.reduce_sum(w * pred * pred),
              "syy": tf.reduce_sum(w * y * y),
              "sxy": tf.reduce_sum(w * pred * y)}
    labels = features["label_ids"]
    sums = finetune_lib.softmax_sums(logits, labels, w)
    if self.num_labels == 2:  # confusion counts give F1 and Matthews corr.
      p = tf.cast(tf.argmax(logits, -1, output_type=tf.int32), tf.float32)
      y = tf.cast(labels, tf.float32)
      sums.update(tp=tf.reduce_sum(w * p * y), fp=tf.reduce_sum(w * p * (1 - y)),
                  fn=tf.reduce_sum(w * (1 - p) * y),
                  tn=tf.reduce_sum(w * (1 - p) * (1 - y)))
    return sums

  def metrics_from_sums(self, sums):
    # Called on tensors inside the train loop and on NumPy sums in eval.
    count = tf.maximum(sums["count"], 1.0)
    out = {"loss": sums["loss_sum"] / count}
    if self.regression:
      out["pearson"] = finetune_metrics.pearson_from_moments(
          count, *(sums[k] for k in ("sx", "sy", "sxx", "syy", "sxy")),
          xp=tf.math)
      # Best-checkpoint key (trainer.best_metric) for STS-B.
      out["accuracy"] = out["pearson"]
      return out
    out["accuracy"] = sums["correct"] / count
    if "tp" in sums:
      tp, fp, fn, tn = sums["tp"], sums["fp"], sums["fn"], sums["tn"]
      out["f1"] = finetune_metrics.f1_from_counts(tp, fp, fn, xp=tf.math)
      out["mcc"] = finetune_metrics.mcc_from_counts(tp, fp, fn, tn, xp=tf.math)
    return out

  def eval_metric_names(self):
    if self.regression:
      return ("loss", "pearson", "accuracy")
    return ("loss", "accuracy") + (("f1", "mcc") if self.num_labels == 2
                                   else ())

  def predict_split(self, trainer, split):
    """(examples, predictions): label ids, or scores for regression."""
    examples, logits = self.predict_logits(trainer, split)
    return examples, (logits[:, 0] if self.regression
                      else np.argmax(logits, axis=-1))

  def evaluate(self, trainer, output_dir):
    results = {"step": int(trainer.global_step.numpy())}
    for split in glue_data.task_splits(self.spec.name)[0]:
      if not os.path.isfile(self.split_path(split)):
        continue
      examples, preds = self.predict_split(trainer, split)
      if self.regression:
        labels = [e.label for e in examples]
      else:
        index = {l: i for i, l in enumerate(self.spec.labels)}
        labels = [index[e.label] for e in examples]
      metrics = finetune_metrics.classification_metrics(
          self.spec.metric, labels, preds)
      prefix = "" if split == "dev" else f"{split}_"
      results.update({prefix + k: v for k, v in metrics.items()})
      results[prefix + "num_examples"] = len(examples)
    return results

  def predict(self, trainer, output_dir):
    written = []
    for split in glue_data.task_splits(self.spec.name)[1]:
      if not os.path.isfile(self.split_path(split)):
        continue
      examples, preds = self.predict_split(trainer, split)
      written.append(glue_data.write_submission(self.spec.name, split,
                                                examples, preds, output_dir))
    if not written:
      raise FileNotFoundError(f"no test file of {self.spec.name} in "
                              f"{self.data.data_dir}")
    return written

  # --- Export ---

  def serving_params(self, recorded_facts):
    del recorded_facts
    return SentenceServingParams.from_config(
        self.config, num_labels=self.num_labels,
        label_names=list(self.labels or ()),
        num_text_fields=2 if self.spec.text_b else 1)

  @classmethod
  def module_for(cls, params):
    return (task_modules.RegressionModule if params.regression
            else task_modules.ClassificationModule)
