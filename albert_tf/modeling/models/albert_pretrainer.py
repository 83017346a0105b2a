"""AlbertPretrainer: the encoder with the masked-LM and sentence-order heads.

Example:

>>> import numpy as np
>>> from albert_tf import AlbertConfig, AlbertPretrainer
>>> config = AlbertConfig(vocab_size=100, embedding_size=8, hidden_size=16,
...                       num_hidden_layers=2, num_attention_heads=2,
...                       intermediate_size=32, max_position_embeddings=16)
>>> model = AlbertPretrainer(config)
>>> ids = np.array([[2, 10, 4, 3, 0]], dtype=np.int32)
>>> out = model({"input_word_ids": ids,
...              "input_mask": (ids > 0).astype(np.int32),
...              "input_type_ids": np.zeros_like(ids),
...              "masked_lm_positions": np.array([[2]], dtype=np.int32)})
>>> out["mlm_logits"].shape, out["sop_logits"].shape
(TensorShape([1, 1, 100]), TensorShape([1, 2]))
"""

import tensorflow as tf
import tf_keras

from albert_tf.modeling import albert_config
from albert_tf.modeling.networks.albert_encoder import AlbertEncoder, wired_encoder
from albert_tf.modeling.layers.pretraining_heads import MaskedLMHead, SentenceOrderHead


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class AlbertPretrainer(tf_keras.Model):
  """Encoder + MLM head (tied embedding) + SOP head.

  Inputs: the encoder's three inputs plus int32 `masked_lm_positions`
  [batch, P]. Outputs: `mlm_logits` [batch, P, V] and `sop_logits`
  [batch, 2] (1 = the segments are swapped), both float32. The named parts
  `encoder`, `mlm_head` and `sop_head` are what checkpoints save.

  Args:
    config: an `AlbertConfig`, a dict of its fields, or a preset name such as
      "albert_base_v2".
    **kwargs: passed to `tf_keras.Model` (e.g. `name`).
  """

  def __init__(self, config, **kwargs):
    config = albert_config.as_albert_config(config)

    # === Layers ===
    encoder = AlbertEncoder(config, name="albert_encoder")
    mlm_head = MaskedLMHead(encoder.word_embeddings,
                            hidden_act=config.hidden_act,
                            initializer_range=config.initializer_range,
                            name="mlm_head")
    sop_head = SentenceOrderHead(initializer_range=config.initializer_range,
                                 name="sop_head")

    # === Functional wiring ===
    inputs, encoder_outputs = wired_encoder(encoder)
    inputs["masked_lm_positions"] = tf_keras.Input(
        shape=(None,), dtype=tf.int32, name="masked_lm_positions")
    outputs = {
        "mlm_logits": mlm_head(encoder_outputs["sequence_output"],
                               inputs["masked_lm_positions"]),
        "sop_logits": sop_head(encoder_outputs["pooled_output"]),
    }
    super().__init__(inputs=inputs, outputs=outputs, **kwargs)

    # === Config ===
    self.config = config
    self.encoder = encoder
    self.mlm_head = mlm_head
    self.sop_head = sop_head

  @property
  def checkpoint_items(self):
    """Named parts for tf.train.Checkpoint (see albert_tf.checkpoints.object_layout)."""
    return dict(encoder=self.encoder, mlm_head=self.mlm_head,
                sop_head=self.sop_head)

  def get_config(self):
    return {"config": self.config.as_dict(), "name": self.name}

  @classmethod
  def from_config(cls, config, custom_objects=None):
    return cls(**config)
