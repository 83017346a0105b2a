"""Fine-tuning models: the ALBERT encoder plus a downstream head.

Each model is a functional `tf_keras.Model` that keeps the encoder as
`.encoder`, so `albert_tf.checkpoints.object_layout` warm-starts it from any pretraining
checkpoint and saves it in our layout. Outputs are dicts of float32 logits.

Example:

>>> import numpy as np
>>> from albert_tf import AlbertConfig, AlbertEncoder
>>> config = AlbertConfig(vocab_size=100, embedding_size=8, hidden_size=16,
...                       num_hidden_layers=2, num_attention_heads=2,
...                       intermediate_size=32, max_position_embeddings=16)
>>> model = AlbertClassifier(AlbertEncoder(config), num_labels=3)
>>> ids = np.array([[2, 10, 11, 3, 0]], dtype=np.int32)
>>> model({"input_word_ids": ids, "input_mask": (ids > 0).astype(np.int32),
...        "input_type_ids": np.zeros_like(ids)})["logits"].shape
TensorShape([1, 3])
"""

import tensorflow as tf
import tf_keras

from albert_tf.modeling.layers.downstream_heads import AnswerabilityHead
from albert_tf.modeling.layers.downstream_heads import ClassificationHead
from albert_tf.modeling.layers.downstream_heads import MultipleChoiceHead
from albert_tf.modeling.layers.downstream_heads import SpanLabelingHead
from albert_tf.modeling.networks.albert_encoder import AlbertEncoder, wired_encoder
from albert_tf.modeling.networks.albert_encoder import INPUT_NAMES


def _as_encoder(encoder):
  """An AlbertEncoder (or any encoder Model) as is; a config builds one."""
  if isinstance(encoder, tf_keras.Model):
    return encoder
  return AlbertEncoder(encoder, name="albert_encoder")


def _initializer_range(encoder, value):
  if value is not None:
    return value
  config = getattr(encoder, "config", None)
  return getattr(config, "initializer_range", 0.02)


def _encoder_config(encoder):
  return tf_keras.saving.serialize_keras_object(encoder)


def _encoder_from_config(value):
  if isinstance(value, dict) and "class_name" in value:
    return tf_keras.saving.deserialize_keras_object(value)
  return value


class _DownstreamModel(tf_keras.Model):
  """Shared config plumbing: `get_config` stores the encoder's own config."""

  _CONFIG_KEYS = ()

  def get_config(self):
    config = {"encoder": _encoder_config(self.encoder), "name": self.name}
    config.update({k: getattr(self, k) for k in self._CONFIG_KEYS})
    return config

  @classmethod
  def from_config(cls, config, custom_objects=None):
    config = dict(config)
    config["encoder"] = _encoder_from_config(config["encoder"])
    return cls(**config)

  @property
  def checkpoint_items(self):
    """Objects to put in a tf.train.Checkpoint (encoder restorable alone)."""
    return dict(encoder=self.encoder, head=self.head)


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class AlbertClassifier(_DownstreamModel):
  """Sentence(-pair) classification or regression on the pooled output.

  Inputs: the encoder's int32 [batch, seq] `input_word_ids`, `input_mask`,
  `input_type_ids`. Output: `{"logits": [batch, num_labels]}` (for
  regression, `num_labels=1` and the logit is the prediction).

  Args:
    encoder: an `AlbertEncoder` (or an AlbertConfig / dict / preset name to
      build one).
    num_labels: number of classes (1 for regression).
    dropout_rate: dropout on the pooled output before the dense layer.
    initializer_range: stddev of the head's init; default the encoder's.
  """

  _CONFIG_KEYS = ("num_labels", "dropout_rate", "initializer_range")

  def __init__(self, encoder, num_labels, dropout_rate=0.1,
               initializer_range=None, **kwargs):
    encoder = _as_encoder(encoder)
    initializer_range = _initializer_range(encoder, initializer_range)
    head = ClassificationHead(num_labels, initializer_range=initializer_range,
                              dropout_rate=dropout_rate,
                              name="classification_head")
    inputs, encoded = wired_encoder(encoder)
    pooled = encoded["pooled_output"]  # [batch, H]
    outputs = {"logits": head(pooled)}  # [batch, num_labels]
    super().__init__(inputs=inputs, outputs=outputs, **kwargs)
    self.encoder = encoder
    self.head = head
    self.num_labels = num_labels
    self.dropout_rate = dropout_rate
    self.initializer_range = initializer_range


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class AlbertSpanLabeler(_DownstreamModel):
  """SQuAD: start/end logits per token, optionally an answerability logit.

  Inputs: the encoder's three int32 [batch, seq] inputs. Outputs:
  `start_logits`, `end_logits` [batch, seq] and, with
  `with_answerability=True` (SQuAD 2.0), `answerable_logits` [batch] (> 0
  means the question has an answer in the passage).
  """

  _CONFIG_KEYS = ("with_answerability", "dropout_rate", "initializer_range")

  def __init__(self, encoder, with_answerability=False, dropout_rate=0.1,
               initializer_range=None, **kwargs):
    encoder = _as_encoder(encoder)
    initializer_range = _initializer_range(encoder, initializer_range)
    head = SpanLabelingHead(initializer_range=initializer_range,
                            name="span_labeling_head")
    answer_head = None
    if with_answerability:
      answer_head = AnswerabilityHead(initializer_range=initializer_range,
                                      dropout_rate=dropout_rate,
                                      name="answerability_head")
    inputs, encoded = wired_encoder(encoder)
    start_logits, end_logits = head(encoded["sequence_output"])
    outputs = {"start_logits": start_logits, "end_logits": end_logits}
    if answer_head is not None:
      outputs["answerable_logits"] = answer_head(encoded["pooled_output"])
    super().__init__(inputs=inputs, outputs=outputs, **kwargs)
    self.encoder = encoder
    self.head = head
    self.answer_head = answer_head
    self.with_answerability = with_answerability
    self.dropout_rate = dropout_rate
    self.initializer_range = initializer_range

  @property
  def checkpoint_items(self):
    items = dict(encoder=self.encoder, head=self.head)
    if self.answer_head is not None:
      items["answer_head"] = self.answer_head
    return items


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class AlbertMultipleChoice(_DownstreamModel):
  """RACE-style multiple choice: one score per choice, softmax over choices.

  Inputs: int32 [batch, num_choices, seq] `input_word_ids`, `input_mask`,
  `input_type_ids` (choice c of example b is `[CLS] article [SEP]
  question+option_c [SEP]`). Output: `{"logits": [batch, num_choices]}`.
  """

  _CONFIG_KEYS = ("num_choices", "dropout_rate", "initializer_range")

  def __init__(self, encoder, num_choices=4, dropout_rate=0.1,
               initializer_range=None, **kwargs):
    encoder = _as_encoder(encoder)
    initializer_range = _initializer_range(encoder, initializer_range)
    head = MultipleChoiceHead(num_choices, initializer_range=initializer_range,
                              dropout_rate=dropout_rate,
                              name="multiple_choice_head")
    inputs = {
        name: tf_keras.Input(shape=(num_choices, None), dtype=tf.int32,
                             name=name) for name in INPUT_NAMES
    }
    # Each choice is an independent sequence for the encoder.
    flat = {name: tf.reshape(x, [-1, tf.shape(x)[-1]])  # [b*choices, seq]
            for name, x in inputs.items()}
    pooled = encoder(flat)["pooled_output"]  # [b*choices, H]
    outputs = {"logits": head(pooled)}  # [batch, num_choices]
    super().__init__(inputs=inputs, outputs=outputs, **kwargs)
    self.encoder = encoder
    self.head = head
    self.num_choices = num_choices
    self.dropout_rate = dropout_rate
    self.initializer_range = initializer_range
