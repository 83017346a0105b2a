"""Downstream heads and models: numbers against NumPy, original variable
layout, dropout only in training, config round trips, checkpoints."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from albert_tf.checkpoints import object_layout
from albert_tf.checkpoints.restore import restore
from albert_tf.modeling import albert_config
from albert_tf.modeling.layers import downstream_heads as heads
from albert_tf.modeling.models import downstream_models as dm
from albert_tf.modeling.networks.albert_encoder import AlbertEncoder
from albert_tf.modeling.models.albert_pretrainer import AlbertPretrainer

CONFIG = albert_config.AlbertConfig(vocab_size=60, embedding_size=8, hidden_size=16,
                              num_hidden_layers=2, num_attention_heads=2,
                              intermediate_size=32, max_position_embeddings=16)


def _inputs(batch=2, seq=7, seed=0, shape=None):
  rng = np.random.RandomState(seed)
  shape = shape or [batch, seq]
  ids = rng.randint(5, CONFIG.vocab_size, size=shape).astype(np.int32)
  mask = np.ones_like(ids)
  mask[..., -2:] = 0
  return {"input_word_ids": ids * mask, "input_mask": mask,
          "input_type_ids": np.zeros_like(ids)}


def test_classifier_matches_numpy_and_original_layout():
  tf_keras.utils.set_random_seed(0)
  model = dm.AlbertClassifier(AlbertEncoder(CONFIG), num_labels=3)
  x = _inputs()
  logits = model(x)["logits"].numpy()
  pooled = model.encoder(x)["pooled_output"].numpy()
  w = model.head.output_weights.numpy()
  b = model.head.output_bias.numpy()
  assert w.shape == (3, 16) and b.shape == (3,)
  np.testing.assert_allclose(logits, pooled @ w.T + b, atol=1e-6)
  assert [v.name for v in model.head.weights] == [
      "classification_head/output_weights:0",
      "classification_head/output_bias:0"]
  # Dropout 0.1 acts in training only.
  head = model.head
  pooled_t = tf.ones([4, 16])
  np.testing.assert_allclose(head(pooled_t, training=False),
                             head(pooled_t, training=False))
  assert not np.allclose(head(pooled_t, training=True),
                         head(pooled_t, training=False))


class _SubclassedEncoder(tf_keras.Model):
  """An encoder Model with no functional graph of its own to lend."""

  def __init__(self, encoder):
    super().__init__()
    self.inner = encoder

  def call(self, inputs, training=None):
    return self.inner(inputs, training=training)


def test_models_run_through_the_encoders_layers_or_call_any_other_encoder():
  tf_keras.utils.set_random_seed(2)
  encoder = AlbertEncoder(albert_config.AlbertConfig(
      **dict(CONFIG.as_dict(), hidden_dropout_prob=0.5)))
  # Our functional encoder lends its own inputs and layers: no second trace.
  model = dm.AlbertClassifier(encoder, num_labels=2, dropout_rate=0.0)
  assert all(model.input[k] is encoder.input[k] for k in encoder.input)
  assert encoder.transformer in model.layers
  # Dropout inside the encoder still follows the model's `training`.
  x = _inputs()
  ref = model.head(encoder(x, training=False)["pooled_output"]).numpy()
  np.testing.assert_allclose(model(x, training=False)["logits"], ref,
                             atol=1e-6)
  assert not np.allclose(model(x, training=True)["logits"], ref)
  # Any other encoder Model is called on new inputs.
  other = dm.AlbertClassifier(_SubclassedEncoder(encoder), num_labels=2,
                              dropout_rate=0.0)
  assert other.input["input_word_ids"] is not encoder.input["input_word_ids"]
  np.testing.assert_allclose(
      other(x)["logits"],
      other.head(encoder(x)["pooled_output"]), atol=1e-6)
  pretrainer = AlbertPretrainer(CONFIG)
  assert pretrainer.input["input_word_ids"] is (
      pretrainer.encoder.input["input_word_ids"])


def test_span_labeler_and_answerability():
  tf_keras.utils.set_random_seed(1)
  model = dm.AlbertSpanLabeler(CONFIG, with_answerability=True)
  x = _inputs()
  out = model(x)
  enc = model.encoder(x)
  seq = enc["sequence_output"].numpy()
  w, b = model.head.output_weights.numpy(), model.head.output_bias.numpy()
  assert w.shape == (2, 16)
  np.testing.assert_allclose(out["start_logits"], seq @ w[0] + b[0], atol=1e-6)
  np.testing.assert_allclose(out["end_logits"], seq @ w[1] + b[1], atol=1e-6)
  aw = model.answer_head.output_weights.numpy()
  ab = model.answer_head.output_bias.numpy()
  np.testing.assert_allclose(out["answerable_logits"],
                             enc["pooled_output"].numpy() @ aw[0] + ab[0],
                             atol=1e-6)
  assert set(dm.AlbertSpanLabeler(CONFIG)(x)) == {"start_logits",
                                                   "end_logits"}


def test_multiple_choice_scores_each_choice_independently():
  tf_keras.utils.set_random_seed(2)
  model = dm.AlbertMultipleChoice(CONFIG, num_choices=3)
  x = _inputs(shape=[2, 3, 6])
  logits = model(x)["logits"].numpy()
  assert logits.shape == (2, 3)
  w, b = model.head.output_weights.numpy(), model.head.output_bias.numpy()
  for c in range(3):
    pooled = model.encoder({k: v[:, c] for k, v in x.items()}
                           )["pooled_output"].numpy()
    np.testing.assert_allclose(logits[:, c], pooled @ w[0] + b[0], atol=1e-5)


@pytest.mark.parametrize("cls,kwargs", [
    (dm.AlbertClassifier, dict(num_labels=1)),
    (dm.AlbertSpanLabeler, dict(with_answerability=True)),
    (dm.AlbertMultipleChoice, dict(num_choices=2)),
])
def test_config_round_trip(cls, kwargs):
  model = cls(AlbertEncoder(CONFIG), **kwargs)
  clone = cls.from_config(model.get_config())
  assert clone.get_config() == model.get_config()
  assert len(clone.weights) == len(model.weights)
  head = model.head
  assert type(head).from_config(head.get_config()).get_config() == (
      head.get_config())


def test_checkpoint_round_trip_and_warm_start(tmp_path):
  tf_keras.utils.set_random_seed(3)
  pretrainer = AlbertPretrainer(CONFIG)
  pretrainer(dict(_inputs(), masked_lm_positions=np.zeros([2, 1], np.int32)))
  pre_path = object_layout.checkpoint_for(pretrainer).write(
      str(tmp_path / "pre"))
  model = dm.AlbertClassifier(AlbertEncoder(CONFIG), num_labels=2)
  restore(model.encoder, pre_path)
  x = _inputs()
  np.testing.assert_allclose(model.encoder(x)["pooled_output"],
                             pretrainer.encoder(x)["pooled_output"], atol=1e-6)
  path = object_layout.checkpoint_for(model).write(str(tmp_path / "clf"))
  other = dm.AlbertClassifier(AlbertEncoder(CONFIG), num_labels=2)
  restore(other, path)
  np.testing.assert_allclose(other(x)["logits"], model(x)["logits"],
                             atol=1e-6)


def test_heads_standalone_shapes():
  assert heads.MultipleChoiceHead(4)(tf.zeros([8, 16])).shape == (2, 4)
  start, end = heads.SpanLabelingHead()(tf.zeros([2, 5, 16]))
  assert start.shape == end.shape == (2, 5)
