"""Downstream heads: classification/regression, SQuAD span labeling, RACE.

Each head mirrors the original fine-tuning scripts' variables: an
`output_weights` matrix stored [num_outputs, H] (the original's layout, so a
converted checkpoint maps one to one) and an `output_bias`. All heads return
float32 logits whatever the compute policy.

Example:

>>> import numpy as np
>>> head = ClassificationHead(num_labels=3)
>>> head(np.zeros([2, 16], np.float32)).shape
TensorShape([2, 3])
"""

import tensorflow as tf
import tf_keras

from albert_tf.modeling.layers import layer_utils


class _OutputProjection(layer_utils.UnconvertedLayer):
  """x [..., H] -> x @ output_weights^T + output_bias, [..., num_outputs].

  Base for the heads below; keeps the original's [num_outputs, H] layout.
  """

  def __init__(self, num_outputs, initializer_range=0.02, dropout_rate=0.0,
               **kwargs):
    super().__init__(**kwargs)
    self.num_outputs = num_outputs
    self.initializer_range = initializer_range
    self.dropout_rate = dropout_rate
    self.dropout = tf_keras.layers.Dropout(dropout_rate)

  def build(self, input_shape):
    hidden_size = int(input_shape[-1])
    self.output_weights = self.add_weight(
        "output_weights", shape=[self.num_outputs, hidden_size],
        initializer=layer_utils.initializer(self.initializer_range))
    self.output_bias = self.add_weight(
        "output_bias", shape=[self.num_outputs], initializer="zeros")
    super().build(input_shape)

  def project(self, x, training=None):
    x = self.dropout(x, training=training)
    weights = tf.cast(self.output_weights, x.dtype)
    logits = tf.tensordot(x, weights, axes=[[-1], [1]])  # [..., num_outputs]
    return tf.cast(logits, tf.float32) + tf.cast(self.output_bias, tf.float32)

  def get_config(self):
    config = super().get_config()
    config.update(initializer_range=self.initializer_range,
                  dropout_rate=self.dropout_rate)
    return config


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class ClassificationHead(_OutputProjection):
  """Pooled output [batch, H] -> dropout -> logits [batch, num_labels].

  As the original `run_classifier.py`: dropout 0.1 (training only), then
  `output_weights` [num_labels, H] and `output_bias` [num_labels]. Regression
  (STS-B) is `num_labels=1`, the single logit being the prediction.
  """

  def __init__(self, num_labels, initializer_range=0.02, dropout_rate=0.1,
               **kwargs):
    super().__init__(num_labels, initializer_range, dropout_rate, **kwargs)
    self.num_labels = num_labels

  def call(self, pooled_output, training=None):
    return self.project(pooled_output, training=training)  # [batch, labels]

  def get_config(self):
    config = super().get_config()
    config.update(num_labels=self.num_labels)
    return config


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class SpanLabelingHead(_OutputProjection):
  """Sequence output [batch, seq, H] -> start and end logits [batch, seq].

  As the original SQuAD v1 head (`cls/squad/output_weights` [2, H] and
  `output_bias` [2]); no dropout. Returns `(start_logits, end_logits)`.
  """

  def __init__(self, initializer_range=0.02, dropout_rate=0.0, **kwargs):
    super().__init__(2, initializer_range, dropout_rate, **kwargs)

  def call(self, sequence_output, training=None):
    logits = self.project(sequence_output, training=training)  # [b, seq, 2]
    return logits[..., 0], logits[..., 1]  # 2 x [batch, seq]


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class AnswerabilityHead(_OutputProjection):
  """Pooled output [batch, H] -> one "has an answer" logit [batch] (SQuAD 2.0).

  A plain binary classifier on [CLS] (`output_weights` [1, H]); simpler than
  the original v2 head, which conditions the end logits on the start.
  """

  def __init__(self, initializer_range=0.02, dropout_rate=0.1, **kwargs):
    super().__init__(1, initializer_range, dropout_rate, **kwargs)

  def call(self, pooled_output, training=None):
    return self.project(pooled_output, training=training)[:, 0]  # [batch]


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class MultipleChoiceHead(_OutputProjection):
  """Pooled outputs [batch * num_choices, H] -> choice logits [batch, num_choices].

  As the original `run_race.py`: dropout, one score per choice's [CLS]
  (`output_weights` [1, H], `output_bias` [1]), reshaped so a softmax over the
  last axis picks the answer.
  """

  def __init__(self, num_choices, initializer_range=0.02, dropout_rate=0.1,
               **kwargs):
    super().__init__(1, initializer_range, dropout_rate, **kwargs)
    self.num_choices = num_choices

  def call(self, pooled_output, training=None):
    scores = self.project(pooled_output, training=training)  # [b*c, 1]
    return tf.reshape(scores, [-1, self.num_choices])  # [batch, choices]

  def get_config(self):
    config = super().get_config()
    config.update(num_choices=self.num_choices)
    return config
