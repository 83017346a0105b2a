"""RACE multiple choice: a softmax over one [CLS] score per choice (the task
and its run family; the CLI is run_race)."""

import dataclasses
import os

import numpy as np

from albert_tf.core import train_lib
from albert_tf.core.settings import DATA_POSITION, setting
from albert_tf.data import race_data
from albert_tf.modeling.models import downstream_models
from albert_tf.serving import serving_params
from albert_tf.serving import task_modules
from albert_tf.tasks import finetuning as finetune_lib
from albert_tf.tasks import metrics as finetune_metrics
from albert_tf.tasks import registry


@dataclasses.dataclass
class RaceDataConfig(finetune_lib.FinetuningDataConfig):
  data_dir: str = setting("", resume=DATA_POSITION, flag="The RACE "
                          "directory (train/ dev/ test/ with middle/ and "
                          "high/; data.data_dir).")
  # Tokens kept of question + option.
  max_qa_length: int = 128


@dataclasses.dataclass
class RaceExperimentConfig(finetune_lib.FinetuningExperimentConfig):
  data: RaceDataConfig = dataclasses.field(default_factory=RaceDataConfig)

  def validate_data(self):
    super().validate_data()
    if self.data.max_qa_length < 1:
      raise ValueError("data.max_qa_length must be >= 1, got "
                       f"{self.data.max_qa_length}")


@serving_params.view_of(RaceExperimentConfig)
class MultipleChoiceServingParams(serving_params.ServingParams):
  """Export settings: `choices` [batch, num_choices] per `context`."""
  # The head scores each choice alone: any count serves the same weights.
  num_choices: int = setting(race_data.NUM_CHOICES, export=True,
                            flag="Multiple choice: choices.")

  def validate(self):
    super().validate()
    if self.num_choices < 2:
      raise ValueError(f"num_choices must be >= 2, got {self.num_choices}")


@registry.register_task
class RaceTask(finetune_lib.FinetuneTask):
  """Softmax over one [CLS] score per choice."""

  name = "multiple_choice"
  config_cls = RaceExperimentConfig
  serving_params_cls = MultipleChoiceServingParams
  serving_tasks = {"multiple_choice": {}}

  @classmethod
  def model_for(cls, kind, model_config, params, dropout_rate=0.0):
    return downstream_models.AlbertMultipleChoice(
        finetune_lib.encoder(model_config, pooled_export=bool(kind)),
        num_choices=params.num_choices,
        dropout_rate=dropout_rate)

  def feature_spec(self):
    return race_data.feature_spec(self.data.max_seq_length)

  def read_examples(self, split):
    # Training and evaluation need answers; predictions do not.
    return race_data.read_examples(
        self.data.data_dir, split,
        skip_malformed=self.data.skip_malformed_rows,
        require_answers=split in (self.train_split, self.eval_split))

  def cached_records(self, split, examples=None):
    d = self.data
    return self.cached_features(
        f"race_{split}", split, self.source_files(split),
        lambda exs: race_data.convert_examples(
            exs, self.tokenizer, d.max_seq_length, d.max_qa_length),
        examples, max_qa_length=d.max_qa_length, skip=d.skip_malformed_rows)

  def source_files(self, split):
    return [path for _, path in race_data.split_files(self.data.data_dir,
                                                      split)]

  def check_data_files(self, training):
    split = self.train_split if training else self.eval_split
    if not os.path.isdir(os.path.join(self.data.data_dir, split)):
      raise FileNotFoundError(f"RACE {split} directory not found under "
                              f"data.data_dir={self.data.data_dir!r}")

  def compute_sums(self, model, features, training):
    logits = model(self.model_inputs(features), training=training)["logits"]
    return finetune_lib.softmax_sums(logits, features["label_ids"],
                                     self.valid(features))

  def evaluate(self, trainer, output_dir):
    examples, logits = self.predict_logits(trainer, "dev")
    return dict(_accuracy(examples, np.argmax(logits, axis=-1)),
                step=int(trainer.global_step.numpy()))

  def predict(self, trainer, output_dir):
    examples, logits = self.predict_logits(trainer, "test")
    preds = np.argmax(logits, axis=-1)
    os.makedirs(output_dir, exist_ok=True)
    path = os.path.join(output_dir, "race_predictions.json")
    race_data.write_predictions(path, examples, preds)
    files = [path, os.path.splitext(path)[0] + ".tsv"]
    if all(e.label is not None for e in examples):
      train_lib.write_eval_results(
          os.path.join(output_dir, "test"), _accuracy(examples, preds))
    return files

  # --- Export ---

  @classmethod
  def module_for(cls, params):
    return task_modules.MultipleChoiceModule


def _accuracy(examples, predictions):
  return finetune_metrics.race_accuracy(
      [e.level for e in examples], [e.label for e in examples], predictions)
