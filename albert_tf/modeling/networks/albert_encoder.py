"""AlbertEncoder: factorized embedding -> shared Transformer stack -> pooler.

Example:

>>> import numpy as np
>>> from albert_tf import AlbertConfig, AlbertEncoder
>>> config = AlbertConfig(vocab_size=100, embedding_size=8, hidden_size=16,
...                       num_hidden_layers=2, num_attention_heads=2,
...                       intermediate_size=32, max_position_embeddings=16)
>>> encoder = AlbertEncoder(config)
>>> ids = np.array([[2, 10, 11, 3, 0]], dtype=np.int32)
>>> outputs = encoder({"input_word_ids": ids,
...                    "input_mask": (ids > 0).astype(np.int32),
...                    "input_type_ids": np.zeros_like(ids)})
>>> outputs["sequence_output"].shape, outputs["pooled_output"].shape
(TensorShape([1, 5, 16]), TensorShape([1, 16]))
"""

import tensorflow as tf
import tf_keras

from albert_tf.modeling import albert_config
from albert_tf.modeling.layers import layer_utils
from albert_tf.modeling.layers.embedding import FactorizedEmbedding
from albert_tf.modeling.layers.transformer import SharedTransformerStack


# The model inputs (Model Garden v2 names), shared by every model and task.
INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")


def encoder_inputs(seq_length=None):
  """The encoder's three int32 [batch, seq] Keras inputs, by name."""
  return {
      name: tf_keras.Input(shape=(seq_length,), dtype=tf.int32, name=name)
      for name in INPUT_NAMES
  }


def wired_encoder(encoder):
  """The Keras inputs of a model built on `encoder`, and the encoder's outputs
  on them.

  A functional encoder on the three named inputs (an `AlbertEncoder`) lends
  its own input and output tensors, so the model runs through the encoder's
  layers without calling the encoder on new inputs, which would trace all of
  it again (about half the time of building a classifier). Any other encoder
  Model is called on new inputs.

  Args:
    encoder: a `tf_keras.Model` taking the dict of `INPUT_NAMES`.

  Returns:
    (inputs, outputs): a new dict of the three int32 [batch, seq] Keras
    inputs, and the dict of the encoder's outputs on them.
  """
  if encoder.inputs is not None:  # None: a subclassed model
    inputs, outputs = encoder.input, encoder.output
    if (isinstance(inputs, dict) and set(inputs) == set(INPUT_NAMES) and
        isinstance(outputs, dict)):
      return dict(inputs), dict(outputs)
  inputs = encoder_inputs()
  return inputs, encoder(inputs)


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class AlbertEncoder(tf_keras.Model):
  """The ALBERT encoder as a functional `tf_keras.Model`.

  Inputs: dict of int32 [batch, seq] `input_word_ids`, `input_mask`,
  `input_type_ids`, seq up to `max_position_embeddings`.
  Outputs: dict with `sequence_output` [batch, seq, H], `pooled_output`
  [batch, H] and `encoder_outputs` (a list, one [batch, seq, H] per layer).

  Args:
    config: an `AlbertConfig`, a dict of its fields, or a preset name such as
      "albert_base_v2".
    output_range: None, or n: the last layer computes only the first n
      positions (Model Garden's `output_range`); `sequence_output` and the
      last of `encoder_outputs` are then [batch, n, H] and `pooled_output` is
      unchanged. With 1, a classifier's export skips most of a layer.
  """

  def __init__(self, config, output_range=None, **kwargs):
    config = albert_config.as_albert_config(config)

    # === Layers ===
    embeddings = FactorizedEmbedding(
        vocab_size=config.vocab_size,
        embedding_size=config.embedding_size,
        hidden_size=config.hidden_size,
        max_position_embeddings=config.max_position_embeddings,
        type_vocab_size=config.type_vocab_size,
        initializer_range=config.initializer_range,
        dropout_rate=config.hidden_dropout_prob,
        name="embeddings")
    transformer = SharedTransformerStack(
        hidden_size=config.hidden_size,
        num_hidden_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads,
        intermediate_size=config.intermediate_size,
        num_hidden_groups=config.num_hidden_groups,
        inner_group_num=config.inner_group_num,
        hidden_act=config.hidden_act,
        initializer_range=config.initializer_range,
        hidden_dropout_prob=config.hidden_dropout_prob,
        attention_probs_dropout_prob=config.attention_probs_dropout_prob,
        sharing=config.sharing,
        gradient_checkpointing=config.gradient_checkpointing,
        name="transformer")
    pooler = layer_utils.dense(config.hidden_size, config.initializer_range,
                               "pooler", activation="tanh")

    # === Functional wiring ===
    inputs = encoder_inputs()
    x = embeddings(inputs["input_word_ids"], inputs["input_type_ids"])
    # L x [batch, seq, H]
    encoder_outputs = transformer(x, inputs["input_mask"],
                                  output_range=output_range)
    sequence_output = encoder_outputs[-1]
    pooled_output = pooler(sequence_output[:, 0, :])  # [batch, H]
    # Outputs in float32 whatever the compute policy.
    outputs = {
        "sequence_output": tf.cast(sequence_output, tf.float32),
        "pooled_output": tf.cast(pooled_output, tf.float32),
        "encoder_outputs": [tf.cast(t, tf.float32) for t in encoder_outputs],
    }
    super().__init__(inputs=inputs, outputs=outputs, **kwargs)

    # === Config ===
    self.config = config
    self.output_range = output_range
    self.embeddings = embeddings
    self.transformer = transformer
    self.pooler = pooler

  @property
  def word_embeddings(self):
    """The E-wide input word table, tied to the MLM output."""
    return self.embeddings.word_embeddings

  def get_config(self):
    return {"config": self.config.as_dict(),
            "output_range": self.output_range, "name": self.name}

  @classmethod
  def from_config(cls, config, custom_objects=None):
    return cls(**config)
