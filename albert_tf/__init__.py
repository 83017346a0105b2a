"""albert_tf: ALBERT (Lan et al., ICLR 2020) in TensorFlow 2 / tf_keras."""

from albert_tf.configs import AlbertConfig
from albert_tf.encoder import AlbertEncoder
from albert_tf.losses import pretraining_loss
from albert_tf.pretrainer import AlbertPretrainer

__all__ = ["AlbertConfig", "AlbertEncoder", "AlbertPretrainer",
           "pretraining_loss"]
