"""`output_range`: the last layer computes only the first positions, and what
it computes equals the whole model's (the reference: the same encoder
without it), in float32 and under mixed_bfloat16, for every sharing and
inner-group layout; the classifier and multiple-choice exports use it."""

import numpy as np
import pytest
import tf_keras

from albert_tf.modeling import albert_config
from albert_tf.modeling.networks.albert_encoder import AlbertEncoder
from albert_tf.tasks import multiple_choice
from albert_tf.tasks import sentence_prediction
from albert_tf.tasks import tagging

CONFIG = dict(vocab_size=60, embedding_size=8, hidden_size=16,
              num_hidden_layers=3, num_attention_heads=2, intermediate_size=32,
              max_position_embeddings=16)


def _inputs(batch=3, seq=9, seed=0):
  rng = np.random.RandomState(seed)
  ids = rng.randint(5, CONFIG["vocab_size"], size=[batch, seq]).astype(np.int32)
  mask = np.ones_like(ids)
  mask[1, -4:] = 0
  return {"input_word_ids": ids * mask, "input_mask": mask,
          "input_type_ids": (np.arange(seq) > 4).astype(np.int32)[None]
                            .repeat(batch, 0)}


def _pair(**overrides):
  config = albert_config.AlbertConfig(**{**CONFIG, **overrides})
  tf_keras.utils.set_random_seed(1)
  full = AlbertEncoder(config)
  short = AlbertEncoder(config, output_range=2)
  short.set_weights(full.get_weights())
  return full, short


@pytest.mark.parametrize("overrides", [
    {}, {"num_hidden_groups": 3}, {"inner_group_num": 2},
    {"sharing": "ffn", "num_hidden_groups": 1}])
def test_first_positions_equal_the_whole_models(overrides):
  full, short = _pair(**overrides)
  x = _inputs()
  want, got = full(x), short(x)
  assert got["sequence_output"].shape == (3, 2, 16)
  np.testing.assert_allclose(got["pooled_output"], want["pooled_output"],
                             atol=1e-6)
  np.testing.assert_allclose(got["sequence_output"],
                             want["sequence_output"][:, :2], atol=1e-6)
  for a, b in zip(got["encoder_outputs"][:-1], want["encoder_outputs"][:-1]):
    np.testing.assert_array_equal(a, b)
  assert short.get_config()["output_range"] == 2
  assert AlbertEncoder.from_config(short.get_config()).output_range == 2


def test_bfloat16_inference_path_equal_too():
  tf_keras.mixed_precision.set_global_policy("mixed_bfloat16")
  try:
    full, short = _pair()
    x = _inputs()
    np.testing.assert_allclose(short(x, training=False)["pooled_output"],
                               full(x, training=False)["pooled_output"],
                               atol=1e-2)
  finally:
    tf_keras.mixed_precision.set_global_policy("float32")


def test_pooled_output_exports_compute_one_row_and_training_all():
  config = albert_config.AlbertConfig(**CONFIG)
  for task_cls, params in (
      (sentence_prediction.ClassifierTask,
       sentence_prediction.ClassifierTask.serving_params_cls(num_labels=3)),
      (multiple_choice.RaceTask,
       multiple_choice.RaceTask.serving_params_cls(num_choices=2))):
    assert task_cls.model_for("x", config, params).encoder.output_range == 1
    assert task_cls.model_for(None, config, params).encoder.output_range is None
  tagger = tagging.TaggingTask.model_for(
      "tagging", config, tagging.TaggingTask.serving_params_cls(
          label_names=("O", "B-X", "I-X")))
  assert tagger.encoder.output_range is None
