"""Token classification (named entities and other IOB2 tagging) on CoNLL
files, registered as `tagging` (Model Garden's name): `run_finetuning
--task=tagging --data_dir=DIR` with DIR/train.txt, dev.txt and optionally
test.txt (albert_tf/data/conll_data.py). Its labels, evaluation (conlleval's
entity scores, tagging_metrics.py), predictions.txt and export (a label per
word, serving/token_module.py): docs/finetuning.md, "Token classification
(`tagging`)".
"""

import dataclasses
import functools
import os
from typing import List

import numpy as np
import tensorflow as tf
import tf_keras

from albert_tf.core.settings import DATA_POSITION, setting
from albert_tf.data import conll_data
from albert_tf.data import label_names as label_names_lib
from albert_tf.modeling.layers.downstream_heads import ClassificationHead
from albert_tf.modeling.networks.albert_encoder import wired_encoder
from albert_tf.serving import serving_params
from albert_tf.serving import token_module
from albert_tf.tasks import finetuning as finetune_lib
from albert_tf.tasks import registry
from albert_tf.tasks import tagging_metrics

FILES = {"train": "train.txt", "dev": "dev.txt", "test": "test.txt"}
PREDICTIONS_FILE = "predictions.txt"


@dataclasses.dataclass
class TaggingDataConfig(finetune_lib.FinetuningDataConfig):
  data_dir: str = setting("", resume=DATA_POSITION, flag="The CoNLL "
                          "directory: train.txt, dev.txt, optional test.txt "
                          "(data.data_dir).")
  label_names: List[str] = setting(
      [], serving=True, flag="The IOB2 labels in output order "
      "(data.label_names; default: those of train.txt, O first).")


@dataclasses.dataclass
class TaggingExperimentConfig(finetune_lib.FinetuningExperimentConfig):
  data: TaggingDataConfig = dataclasses.field(
      default_factory=TaggingDataConfig)


@serving_params.view_of(TaggingExperimentConfig)
class TaggingServingParams(serving_params.ServingParams):
  """Export settings: the labels of the model's outputs."""

  def validate(self):
    super().validate()
    if not self.label_names:
      raise ValueError("label_names: a tagging export needs the labels "
                       "(--label_names)")
    label_names_lib.check_names(self.label_names)


class TokenClassifier(tf_keras.Model):
  """Encoder + a label per position: {"logits": [batch, seq, labels]}."""

  def __init__(self, encoder, num_labels, dropout_rate=0.1, **kwargs):
    head = ClassificationHead(
        num_labels, initializer_range=encoder.config.initializer_range,
        dropout_rate=dropout_rate, name="token_classification_head")
    inputs, encoded = wired_encoder(encoder)
    sequence = encoded["sequence_output"]  # [batch, seq, H]
    super().__init__(inputs=inputs, outputs={"logits": head(sequence)},
                     **kwargs)
    self.encoder, self.head, self.num_labels = encoder, head, num_labels

  @property
  def checkpoint_items(self):
    return dict(encoder=self.encoder, head=self.head)


@registry.register_task
class TaggingTask(finetune_lib.FinetuneTask):
  """IOB2 tagging of each word's first piece."""

  name = "tagging"
  config_cls = TaggingExperimentConfig
  recipe = "finetuning/conll2003.yaml"
  serving_params_cls = TaggingServingParams
  serving_tasks = {"tagging": {}}
  data_name = "CoNLL"

  def __init__(self, config, model_dir):
    super().__init__(config, model_dir)
    self._sentences = {}

  @functools.cached_property
  def labels(self) -> List[str]:
    """data.label_names, else train.txt's, which are then kept there: the
    run record holds them with the config, and the run's later commands
    restore them with it (as a classifier's come with its config)."""
    if not self.data.label_names:
      self.data.label_names = conll_data.label_list(
          self.read_examples("train"))
    return label_names_lib.check_names(self.data.label_names)

  @classmethod
  def model_for(cls, kind, model_config, params, dropout_rate=0.0):
    del kind
    return TokenClassifier(finetune_lib.encoder(model_config),
                           len(params.label_names), dropout_rate)

  def feature_spec(self):
    return conll_data.feature_spec(self.data.max_seq_length)

  def split_path(self, split):
    return os.path.join(self.data.data_dir, FILES[split])

  def read_examples(self, split):
    if split not in self._sentences:
      sentences = conll_data.read_sentences(self.split_path(split),
                                            labelled=split != "test")
      # Labels outside the run's are refused before training; train.txt's
      # are the run's unless the config (a run's: recorded) gave them first.
      if sentences and sentences[0].labels is not None and (
          split != "train" or self.data.label_names):
        conll_data.check_labels(sentences, self.labels,
                                "data.label_names, the run record or "
                                "train.txt")
      if not sentences:
        raise ValueError(f"{self.split_path(split)}: {FILES[split]} has no "
                         "sentences (a word a line, a blank line between "
                         "sentences)")
      self._sentences[split] = sentences
    return self._sentences[split]

  def cached_records(self, split, examples=None):
    return self.cached_features(
        f"tagging_{split}", split, self.source_files(split),
        lambda exs: conll_data.convert_sentences(
            exs, self.tokenizer, {l: i for i, l in enumerate(self.labels)},
            self.data.max_seq_length),
        examples, labels=self.labels, layout="windows")

  def loss_normalizers(self, features):
    return {"count": tf.reduce_sum(self._weights(features))}

  def _weights(self, features):
    """1.0 at each real word's first piece, else 0.0 ([batch, seq])."""
    labelled = tf.cast(features["label_ids"] >= 0, tf.float32)
    return labelled * self.valid(features)[:, None]

  def compute_sums(self, model, features, training):
    logits = model(self.model_inputs(features), training=training)["logits"]
    # Ignored positions (label -1) weigh 0; any class id stands in for them.
    return finetune_lib.softmax_sums(
        logits, tf.maximum(features["label_ids"], 0), self._weights(features))

  def predict_split(self, trainer, split):
    """(sentences, the predicted label of each word): each word's label is
    its first piece's in the window that owns it (conll_data.word_positions),
    so a long sentence's windows merge back into one label per word."""
    sentences, meta, results = self.predict_outputs(trainer, split,
                                                    ("logits",))
    piece_labels = np.stack([
        np.argmax(results[i]["logits"], axis=-1)
        for i in range(meta["num_records"])])  # [windows, seq]
    budget, row, predicted = self.data.max_seq_length - 2, 0, []
    for words in conll_data.word_pieces(self.tokenizer, sentences):
      spans, positions = conll_data.word_positions(words, budget)
      predicted.append([self.labels[piece_labels[row + w, p]]
                        for w, p in positions])
      row += len(spans)
    if row != len(piece_labels):
      raise RuntimeError(f"{split}: {len(piece_labels)} predicted windows, "
                         f"{row} expected (stale cached records?)")
    return sentences, predicted

  def evaluate(self, trainer, output_dir):
    sentences, predicted = self.predict_split(trainer, self.eval_split)
    return dict(
        tagging_metrics.entity_scores([s.labels for s in sentences],
                                      predicted),
        step=int(trainer.global_step.numpy()), num_sentences=len(sentences))

  def predict(self, trainer, output_dir):
    split = "test" if os.path.isfile(self.split_path("test")) else "dev"
    sentences, predicted = self.predict_split(trainer, split)
    return [conll_data.write_predictions(
        os.path.join(output_dir, PREDICTIONS_FILE), sentences, predicted)]

  # --- Export ---

  def serving_params(self, recorded_facts):
    del recorded_facts
    return TaggingServingParams.from_config(self.config,
                                            label_names=list(self.labels))

  @classmethod
  def module_for(cls, params):
    return token_module.TokenClassificationModule
