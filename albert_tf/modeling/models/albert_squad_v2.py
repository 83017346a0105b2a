"""SQuAD 2.0 as the original release fine-tuned it: the encoder plus the
XLNet-style head (`run_squad_v2.py`), and the original's joint loss.

The functional model's outputs are the inference beam (what serving and
prediction use); training calls `training_outputs`, which conditions the
end logits on the gold start.

Example:

>>> import numpy as np
>>> from albert_tf import AlbertConfig, AlbertEncoder
>>> config = AlbertConfig(vocab_size=100, embedding_size=8, hidden_size=16,
...                       num_hidden_layers=2, num_attention_heads=2,
...                       intermediate_size=32, max_position_embeddings=16)
>>> model = AlbertSquadV2(AlbertEncoder(config), start_n_top=2, end_n_top=2)
>>> ids = np.array([[2, 10, 3, 11, 12, 3, 0]], dtype=np.int32)
>>> types = np.array([[0, 0, 0, 1, 1, 1, 0]], dtype=np.int32)
>>> model({"input_word_ids": ids, "input_mask": (ids > 0).astype(np.int32),
...        "input_type_ids": types})["end_top_index"].shape
TensorShape([1, 4])
"""

import tensorflow as tf
import tf_keras

from albert_tf.modeling.layers.squad_v2_head import XLNetSquadHead
from albert_tf.modeling.models import downstream_models
from albert_tf.modeling.networks.albert_encoder import wired_encoder

# The original weighs the answer-class BCE by 0.5 "so that the scale is
# comparable to start_loss and end_loss".
ANSWER_CLASS_LOSS_WEIGHT = 0.5


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class AlbertSquadV2(downstream_models._DownstreamModel):  # pylint: disable=protected-access
  """Encoder + `XLNetSquadHead`.

  Inputs: the encoder's three int32 [batch, seq] inputs. Outputs (float32 /
  int32): `start_top_log_probs`, `start_top_index` [batch, start_n_top],
  `end_top_log_probs`, `end_top_index` [batch, start_n_top * end_n_top],
  `cls_logits` [batch] (> 0: no answer).

  Args:
    encoder: an `AlbertEncoder` (or a config / preset to build one).
    start_n_top, end_n_top: the beam (the original's 5 and 5).
    dropout_rate: dropout in the answer-class branch (the original's 0.1).
    initializer_range: stddev of the head's init; default the encoder's.
  """

  _CONFIG_KEYS = ("start_n_top", "end_n_top", "dropout_rate",
                  "initializer_range")

  def __init__(self, encoder, start_n_top=5, end_n_top=5, dropout_rate=0.1,
               initializer_range=None, **kwargs):
    encoder = downstream_models._as_encoder(encoder)  # pylint: disable=protected-access
    initializer_range = downstream_models._initializer_range(  # pylint: disable=protected-access
        encoder, initializer_range)
    head = XLNetSquadHead(start_n_top=start_n_top, end_n_top=end_n_top,
                          initializer_range=initializer_range,
                          dropout_rate=dropout_rate, name="squad_v2_head")
    inputs, encoded = wired_encoder(encoder)
    sequence = encoded["sequence_output"]  # [batch, seq, H]
    outputs = head(sequence, inputs["input_mask"], inputs["input_type_ids"])
    super().__init__(inputs=inputs, outputs=outputs, **kwargs)
    self.encoder = encoder
    self.head = head
    self.start_n_top = start_n_top
    self.end_n_top = end_n_top
    self.dropout_rate = dropout_rate
    self.initializer_range = initializer_range

  def training_outputs(self, inputs, start_positions, training=True):
    """`start_log_probs`, `end_log_probs` [batch, seq] (the end conditioned
    on the gold start) and `cls_logits` [batch]."""
    sequence = self.encoder(inputs, training=training)["sequence_output"]
    return self.head(sequence, inputs["input_mask"], inputs["input_type_ids"],
                     start_positions=start_positions, training=training)


def squad_v2_loss(outputs, start_positions, end_positions, is_impossible):
  """Per-example loss [batch] of `run_squad_v2.py`:
  (CE(start) + CE(end)) / 2 + 0.5 * BCE(cls_logits, is_impossible).

  `outputs` are `training_outputs`; the batch mean of this is the original's
  total loss.
  """
  def nll(log_probs, positions):
    positions = tf.reshape(tf.cast(positions, tf.int32), [-1])
    return -tf.gather(log_probs, positions, batch_dims=1)  # [batch]

  span = 0.5 * (nll(outputs["start_log_probs"], start_positions) +
                nll(outputs["end_log_probs"], end_positions))
  labels = tf.reshape(tf.cast(is_impossible, tf.float32), [-1])
  answer_class = tf.nn.sigmoid_cross_entropy_with_logits(
      labels=labels, logits=outputs["cls_logits"])  # [batch]
  return span + ANSWER_CLASS_LOSS_WEIGHT * answer_class
