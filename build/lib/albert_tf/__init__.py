"""albert_tf: ALBERT (Lan et al., ICLR 2020) in TensorFlow 2 / tf_keras."""

from albert_tf.modeling.albert_config import AlbertConfig
from albert_tf.modeling.networks.albert_encoder import AlbertEncoder
from albert_tf.modeling.losses import pretraining_loss
from albert_tf.modeling.models.albert_pretrainer import AlbertPretrainer

__all__ = ["AlbertConfig", "AlbertEncoder", "AlbertPretrainer",
           "pretraining_loss"]
