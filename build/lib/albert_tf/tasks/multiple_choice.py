"""RACE multiple choice: a softmax over one [CLS] score per choice (the task
and its run family; the CLI is run_race)."""

import os

import numpy as np
import tensorflow as tf

from albert_tf.modeling.models import downstream_models
from albert_tf.data import finetune_features
from albert_tf.tasks import finetuning as finetune_lib
from albert_tf.tasks import metrics as finetune_metrics
from albert_tf.data import race_data
from albert_tf.serving import export_lib

class RaceTask(finetune_lib.FinetuneTask):
  """Softmax over one [CLS] score per choice."""

  def build_model(self):
    return downstream_models.AlbertMultipleChoice(
        self.encoder(), num_choices=race_data.NUM_CHOICES,
        dropout_rate=self.config.task.classifier_dropout)

  def feature_spec(self):
    return race_data.feature_spec(self.data.max_seq_length)

  def examples(self, split):
    return race_data.read_examples(
        self.data.data_dir, split,
        skip_malformed=self.data.skip_malformed_rows)

  def records(self, split, examples=None):
    d = self.data
    files = []
    for level in race_data.LEVELS:
      directory = os.path.join(d.data_dir, split, level)
      if os.path.isdir(directory):
        files.extend(os.path.join(directory, n)
                     for n in sorted(os.listdir(directory)))
    fp = finetune_features.fingerprint(
        files, self.tokenizer, max_seq_length=d.max_seq_length,
        max_qa_length=d.max_qa_length, skip=d.skip_malformed_rows)
    path = os.path.join(self.cache_dir, f"race_{split}_{fp}.tf_record")

    def build(out):
      exs = examples if examples is not None else self.examples(split)
      finetune_features.write_records(
          out, race_data.convert_examples(exs, self.tokenizer,
                                          d.max_seq_length, d.max_qa_length))
    return finetune_features.cached_records(path, build)

  def train_records(self):
    return self.records("train")

  def eval_records(self):
    return self.records("dev")

  def validate_inputs(self, training=True):
    split = "train" if training else "dev"
    if not os.path.isdir(os.path.join(self.data.data_dir, split)):
      raise FileNotFoundError(f"RACE {split} directory not found under "
                              f"data.data_dir={self.data.data_dir!r}")

  def _inputs(self, features):
    return {k: features[k] for k in finetune_features.INPUT_NAMES}

  def compute_sums(self, model, features, training):
    logits = model(self._inputs(features), training=training)["logits"]
    labels = features["label_ids"]
    w = self.valid(features)
    ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
    hit = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32),
                           labels), tf.float32)
    return {"loss_sum": tf.reduce_sum(w * ce), "count": tf.reduce_sum(w),
            "correct": tf.reduce_sum(w * hit)}

  def loss_from_sums(self, sums, normalizers):
    return sums["loss_sum"] / tf.maximum(normalizers["count"], 1.0)

  def metrics_from_sums(self, sums):
    count = tf.maximum(sums["count"], 1.0)
    return {"loss": sums["loss_sum"] / count,
            "accuracy": sums["correct"] / count}

  def predict_split(self, trainer, split):
    examples, logits = self.predict_logits(trainer, split)
    return examples, np.argmax(logits, axis=-1)


def _accuracy(examples, predictions):
  return finetune_metrics.race_accuracy(
      [e.level for e in examples], [e.label for e in examples], predictions)


class RaceFamily(finetune_lib.Family):
  name = "race"

  def make_task(self, config, model_dir):
    if not config.data.data_dir:
      raise ValueError("data.data_dir (--data_dir) is required")
    return RaceTask(config, model_dir)

  def evaluate(self, trainer, task, output_dir):
    examples, preds = task.predict_split(trainer, "dev")
    metrics = _accuracy(examples, preds)
    metrics["step"] = int(trainer.global_step.numpy())
    return metrics

  def predict(self, trainer, task, output_dir):
    examples, preds = task.predict_split(trainer, "test")
    os.makedirs(output_dir, exist_ok=True)
    path = os.path.join(output_dir, "race_predictions.json")
    race_data.write_predictions(path, examples, preds)
    files = [path, os.path.splitext(path)[0] + ".tsv"]
    if all(e.label is not None for e in examples):
      finetune_lib.write_eval_results(
          os.path.join(output_dir, "test"), _accuracy(examples, preds))
    return files

  def export(self, model, task, export_dir):
    return export_lib.export_serving(
        model, export_dir, task.data.spm_model_file,
        seq_length=task.data.max_seq_length,
        do_lower_case=task.data.do_lower_case)

