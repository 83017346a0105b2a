"""ALBERT's factorized embedding: V x E tables, then an E -> H projection.

The paper's first parameter reduction: tokens live in a small E-wide space
(E=128) and are projected to the hidden width H, so the vocabulary costs
V*E + E*H parameters instead of V*H.
"""

import tensorflow as tf
import tf_keras

from albert_tf.modeling.layers import layer_utils


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class FactorizedEmbedding(layer_utils.UnconvertedLayer):
  """Word + position + token-type embeddings (E wide), LayerNorm, dropout, E->H.

  The E->H projection exists only when E != H, as in the original.
  `word_embeddings` is the E-wide word table the MLM head ties its output to.

  Call: `layer(input_word_ids, input_type_ids, training=None)` with int32
  [batch, seq] ids; returns [batch, seq, hidden_size].
  """

  def __init__(self,
               vocab_size,
               embedding_size,
               hidden_size,
               max_position_embeddings,
               type_vocab_size,
               initializer_range=0.02,
               dropout_rate=0.0,
               **kwargs):
    super().__init__(**kwargs)
    self.vocab_size = vocab_size
    self.embedding_size = embedding_size
    self.hidden_size = hidden_size
    self.max_position_embeddings = max_position_embeddings
    self.type_vocab_size = type_vocab_size
    self.initializer_range = initializer_range
    self.dropout_rate = dropout_rate

    self.layer_norm = layer_utils.layer_norm("layer_norm")
    self.dropout = tf_keras.layers.Dropout(dropout_rate)
    self.projection = None
    if embedding_size != hidden_size:
      self.projection = layer_utils.dense(hidden_size, initializer_range,
                                          "embedding_hidden_mapping_in")

  def build(self, input_shape):
    self.word_embeddings = self.add_weight(
        "word_embeddings", shape=[self.vocab_size, self.embedding_size],
        initializer=layer_utils.initializer(self.initializer_range))
    self.position_embeddings = self.add_weight(
        "position_embeddings",
        shape=[self.max_position_embeddings, self.embedding_size],
        initializer=layer_utils.initializer(self.initializer_range))
    self.token_type_embeddings = self.add_weight(
        "token_type_embeddings",
        shape=[self.type_vocab_size, self.embedding_size],
        initializer=layer_utils.initializer(self.initializer_range))
    layer_utils.build_in_scope(self.layer_norm,
                               [None, None, self.embedding_size])
    if self.projection is not None:
      layer_utils.build_in_scope(self.projection,
                                 [None, None, self.embedding_size])
    super().build(input_shape)

  def call(self, input_word_ids, input_type_ids, training=None):
    seq_length = check_seq_length(input_word_ids, self.max_position_embeddings)
    words = tf.gather(self.word_embeddings, input_word_ids)  # [batch, seq, E]
    types = tf.gather(self.token_type_embeddings, input_type_ids)
    positions = self.position_embeddings[:seq_length]  # [seq, E]
    x = words + types + tf.cast(positions, words.dtype)[tf.newaxis]
    x = self.layer_norm(x)
    x = tf.cast(x, self.compute_dtype)
    x = self.dropout(x, training=training)
    if self.projection is not None:
      x = self.projection(x)  # [batch, seq, H]
    return x

  def get_config(self):
    return dict(super().get_config(), **{k: getattr(self, k) for k in (
        "vocab_size", "embedding_size", "hidden_size",
        "max_position_embeddings", "type_vocab_size", "initializer_range",
        "dropout_rate")})


def check_seq_length(input_word_ids, max_position_embeddings):
  """Returns the sequence length, failing clearly when it exceeds the table."""
  static = input_word_ids.shape[1]
  if static is not None:
    if static > max_position_embeddings:
      raise ValueError(
          f"input_word_ids has sequence length {static}, longer than "
          f"max_position_embeddings={max_position_embeddings}")
    return static
  seq_length = tf.shape(input_word_ids)[1]
  with tf.control_dependencies([
      tf.debugging.assert_less_equal(
          seq_length, max_position_embeddings,
          message=("input_word_ids: sequence length is longer than "
                   f"max_position_embeddings={max_position_embeddings}"))
  ]):
    return tf.identity(seq_length)
