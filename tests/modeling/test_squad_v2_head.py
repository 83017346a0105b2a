"""The original SQuAD 2.0 head (`squad_utils.create_v2_model`) and loss
against a NumPy transcription of the original's equations."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from albert_tf.modeling.albert_config import AlbertConfig
from albert_tf.modeling.layers import squad_v2_head
from albert_tf.modeling.models import albert_squad_v2
from albert_tf.modeling.networks.albert_encoder import AlbertEncoder

H, SEQ = 8, 10


def _features(rng, batch=3):
  """Original-style windows: [CLS] q [SEP] context [SEP] pad, with the
  original's p_mask built the way convert_examples_to_features builds it."""
  ids, mask, types, p_mask = [], [], [], []
  for b in range(batch):
    q_len, c_len = 1 + b % 2, 3 + b
    row_p = [0] + [1] * q_len + [1] + [0] * c_len + [1]
    row_t = [0] * (q_len + 2) + [1] * (c_len + 1)
    pad = SEQ - len(row_p)
    ids.append(list(rng.randint(5, 50, size=SEQ - pad)) + [0] * pad)
    mask.append([1] * (SEQ - pad) + [0] * pad)
    types.append(row_t + [0] * pad)
    p_mask.append(row_p + [1] * pad)
  return (np.array(ids, np.int32), np.array(mask, np.int32),
          np.array(types, np.int32), np.array(p_mask, np.float64))


def _log_softmax(x):
  x = x - x.max(-1, keepdims=True)
  return x - np.log(np.exp(x).sum(-1, keepdims=True))


def _layer_norm(x, gamma, beta):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + 1e-12) * gamma + beta


def reference_v2_head(w, seq, p_mask, start_positions=None, start_n_top=5,
                      end_n_top=5):
  """create_v2_model's head in NumPy (float64), original variable names."""
  def dense(x, name, act=None):
    y = x @ w[name + "/kernel"]
    if name + "/bias" in w:
      y = y + w[name + "/bias"]
    return np.tanh(y) if act == "tanh" else y

  def masked(logits, pm):
    return logits * (1 - pm) - 1e30 * pm

  def end_logits_for(start_feat):  # start_feat [b, H] -> [b, s]
    x = np.concatenate([seq, np.repeat(start_feat[:, None], seq.shape[1],
                                       1)], -1)
    x = dense(x, "end_logits/dense_0", "tanh")
    x = _layer_norm(x, w["end_logits/LayerNorm/gamma"],
                    w["end_logits/LayerNorm/beta"])
    return dense(x, "end_logits/dense_1")[..., 0]

  start_masked = masked(dense(seq, "start_logits/dense")[..., 0], p_mask)
  start_log_probs = _log_softmax(start_masked)
  start_p = np.exp(start_log_probs)
  ans = np.concatenate([np.einsum("bsh,bs->bh", seq, start_p), seq[:, 0]], -1)
  ans = dense(ans, "answer_class/dense_0", "tanh")
  out = {"cls_logits": dense(ans, "answer_class/dense_1")[:, 0]}
  batch = np.arange(seq.shape[0])
  if start_positions is not None:
    end = end_logits_for(seq[batch, start_positions])
    out.update(start_log_probs=start_log_probs,
               end_log_probs=_log_softmax(masked(end, p_mask)))
    return out
  top_start = np.argsort(-start_log_probs, -1, kind="stable")[:, :start_n_top]
  end_idx, end_lp = [], []
  for i in range(start_n_top):
    end = _log_softmax(masked(end_logits_for(seq[batch, top_start[:, i]]),
                              p_mask))
    order = np.argsort(-end, -1, kind="stable")[:, :end_n_top]
    end_idx.append(order)
    end_lp.append(np.take_along_axis(end, order, -1))
  out.update(
      start_top_index=top_start,
      start_top_log_probs=np.take_along_axis(start_log_probs, top_start, -1),
      end_top_index=np.concatenate(end_idx, -1),
      end_top_log_probs=np.concatenate(end_lp, -1))
  return out


def random_head_weights(rng, hidden):
  def rand(*shape):
    return (0.5 * rng.standard_normal(shape)).astype(np.float32)
  return {"start_logits/dense/kernel": rand(hidden, 1),
          "start_logits/dense/bias": rand(1),
          "end_logits/dense_0/kernel": rand(2 * hidden, hidden),
          "end_logits/dense_0/bias": rand(hidden),
          "end_logits/LayerNorm/gamma": 1 + rand(hidden),
          "end_logits/LayerNorm/beta": rand(hidden),
          "end_logits/dense_1/kernel": rand(hidden, 1),
          "end_logits/dense_1/bias": rand(1),
          "answer_class/dense_0/kernel": rand(2 * hidden, hidden),
          "answer_class/dense_0/bias": rand(hidden),
          "answer_class/dense_1/kernel": rand(hidden, 1)}


def _assign(head, w):
  pairs = [(head.start_dense, "start_logits/dense"),
           (head.end_dense_0, "end_logits/dense_0"),
           (head.end_dense_1, "end_logits/dense_1"),
           (head.answer_dense_0, "answer_class/dense_0")]
  for layer, name in pairs:
    layer.kernel.assign(w[name + "/kernel"])
    layer.bias.assign(w[name + "/bias"])
  head.end_layer_norm.gamma.assign(w["end_logits/LayerNorm/gamma"])
  head.end_layer_norm.beta.assign(w["end_logits/LayerNorm/beta"])
  head.answer_dense_1.kernel.assign(w["answer_class/dense_1/kernel"])


def test_p_mask_is_the_originals():
  _, mask, types, p_mask = _features(np.random.RandomState(0))
  np.testing.assert_array_equal(
      squad_v2_head.answer_position_mask(mask, types).numpy(), p_mask)


@pytest.mark.parametrize("training", [True, False])
def test_head_matches_numpy_reference(training):
  rng = np.random.RandomState(1)
  _, mask, types, p_mask = _features(rng)
  seq = rng.standard_normal([3, SEQ, H]).astype(np.float32)
  w = random_head_weights(rng, H)
  head = squad_v2_head.XLNetSquadHead(start_n_top=3, end_n_top=2)
  head.build(tf.TensorShape([None, None, H]))
  _assign(head, w)
  starts = np.array([0, 4, 5]) if training else None
  ours = head(seq, mask, types, start_positions=starts, training=False)
  ref = reference_v2_head({k: v.astype(np.float64) for k, v in w.items()},
                          seq.astype(np.float64), p_mask, starts, 3, 2)
  assert set(ours) == set(ref)
  for key, value in ref.items():
    value = np.maximum(value, -1e29) if "log_probs" in key else value
    np.testing.assert_allclose(np.maximum(ours[key].numpy(), -1e29), value,
                               rtol=1e-4, atol=1e-4, err_msg=key)


def test_loss_is_the_originals():
  rng = np.random.RandomState(2)
  outputs = {"start_log_probs": _log_softmax(rng.standard_normal([4, SEQ])),
             "end_log_probs": _log_softmax(rng.standard_normal([4, SEQ])),
             "cls_logits": rng.standard_normal([4])}
  start, end = np.array([0, 3, 4, 9]), np.array([0, 5, 4, 9])
  impossible = np.array([1, 0, 0, 0])
  loss = albert_squad_v2.squad_v2_loss(
      {k: tf.constant(v, tf.float32) for k, v in outputs.items()},
      start, end, impossible)
  # run_squad_v2's total_loss: batch means of each term.
  onehot = np.eye(SEQ)
  start_loss = np.mean(-np.sum(onehot[start] * outputs["start_log_probs"], -1))
  end_loss = np.mean(-np.sum(onehot[end] * outputs["end_log_probs"], -1))
  z = outputs["cls_logits"]
  bce = np.mean(np.maximum(z, 0) - z * impossible + np.log1p(np.exp(-abs(z))))
  expected = (start_loss + end_loss) * 0.5 + 0.5 * bce
  assert float(tf.reduce_mean(loss)) == pytest.approx(expected, rel=1e-5)


def test_model_outputs_and_serialization():
  config = AlbertConfig(vocab_size=60, embedding_size=8, hidden_size=H,
                        num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=16, max_position_embeddings=SEQ)
  model = albert_squad_v2.AlbertSquadV2(AlbertEncoder(config), start_n_top=3,
                                        end_n_top=4)
  ids, mask, types, _ = _features(np.random.RandomState(3))
  inputs = {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}
  out = model(inputs)
  assert out["end_top_index"].shape == (3, 12)
  assert out["start_top_index"].dtype == tf.int32
  clone = tf_keras.saving.deserialize_keras_object(
      tf_keras.saving.serialize_keras_object(model))
  assert isinstance(clone, albert_squad_v2.AlbertSquadV2)
  assert (clone.start_n_top, clone.end_n_top) == (3, 4)
  clone.set_weights(model.get_weights())
  np.testing.assert_allclose(clone(inputs)["cls_logits"], out["cls_logits"],
                             rtol=1e-5, atol=1e-6)
  train = model.training_outputs(inputs, np.array([0, 4, 5]), training=False)
  # The beam's best start is the argmax of the training start distribution.
  np.testing.assert_array_equal(
      np.argmax(train["start_log_probs"], -1), out["start_top_index"][:, 0])
