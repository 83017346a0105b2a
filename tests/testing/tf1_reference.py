"""The original ALBERT's checkpoints and equations, for tests.

`save_original` writes checkpoints the way the original TF1 code does:
`tf.compat.v1.get_variable` under `variable_scope`s with the original names,
saved by `tf.compat.v1.train.Saver`, never by our own writer.
`reference_forward` is an independent NumPy forward pass of the original
equations on the same TF1 arrays, to compare converted weights' outputs with.
"""

import contextlib
import json
import math
import os

import numpy as np
import tensorflow as tf

from albert_tf.modeling.models.albert_pretrainer import AlbertPretrainer

TINY = dict(vocab_size=40, embedding_size=8, hidden_size=16,
            num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2,
            num_attention_heads=2, intermediate_size=24, hidden_act="gelu",
            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
            max_position_embeddings=12, type_vocab_size=2,
            initializer_range=0.02)
# Released checkpoints: one group, one inner block.
SINGLE = dict(TINY, num_hidden_layers=3, num_hidden_groups=1,
              inner_group_num=1)


# --- The original layout, written by TF1 code --------------------------------


def original_weights(cfg, seed, heads=True):
  """Original TF1 name -> random array for an `albert_config.json` dict."""
  rng = np.random.RandomState(seed)
  h, e, i = cfg["hidden_size"], cfg["embedding_size"], cfg["intermediate_size"]

  def rand(*shape):
    return (0.3 * rng.standard_normal(shape)).astype(np.float32)

  def norm(prefix, width):
    w[prefix + "/gamma"] = 1.0 + rand(width)
    w[prefix + "/beta"] = rand(width)

  w = {"bert/embeddings/word_embeddings": rand(cfg["vocab_size"], e),
       "bert/embeddings/position_embeddings":
           rand(cfg["max_position_embeddings"], e),
       "bert/embeddings/token_type_embeddings":
           rand(cfg["type_vocab_size"], e)}
  norm("bert/embeddings/LayerNorm", e)
  if e != h:  # The original has no projection when E == H.
    w["bert/encoder/embedding_hidden_mapping_in/kernel"] = rand(e, h)
    w["bert/encoder/embedding_hidden_mapping_in/bias"] = rand(h)
  for g in range(cfg["num_hidden_groups"]):
    for j in range(cfg["inner_group_num"]):
      p = f"bert/encoder/transformer/group_{g}/inner_group_{j}/"
      for part in ("query", "key", "value"):
        w[p + f"attention_1/self/{part}/kernel"] = rand(h, h)
        w[p + f"attention_1/self/{part}/bias"] = rand(h)
      w[p + "attention_1/output/dense/kernel"] = rand(h, h)
      w[p + "attention_1/output/dense/bias"] = rand(h)
      norm(p + "LayerNorm", h)
      w[p + "ffn_1/intermediate/dense/kernel"] = rand(h, i)
      w[p + "ffn_1/intermediate/dense/bias"] = rand(i)
      w[p + "ffn_1/intermediate/output/dense/kernel"] = rand(i, h)
      w[p + "ffn_1/intermediate/output/dense/bias"] = rand(h)
      norm(p + "LayerNorm_1", h)
  w["bert/pooler/dense/kernel"] = rand(h, h)
  w["bert/pooler/dense/bias"] = rand(h)
  if heads:
    w["cls/predictions/transform/dense/kernel"] = rand(h, e)
    w["cls/predictions/transform/dense/bias"] = rand(e)
    norm("cls/predictions/transform/LayerNorm", e)
    w["cls/predictions/output_bias"] = rand(cfg["vocab_size"])
    w["cls/seq_relationship/output_weights"] = rand(2, h)
    w["cls/seq_relationship/output_bias"] = rand(2)
  return w


def _get_variable_in_scopes(full_name, value):
  """tf.compat.v1.get_variable under one variable_scope per name component."""
  *scopes, leaf = full_name.split("/")
  with contextlib.ExitStack() as stack:
    for scope in scopes:
      stack.enter_context(tf.compat.v1.variable_scope(scope))
    return tf.compat.v1.get_variable(leaf, initializer=tf.constant(value))


def save_original(directory, weights, cfg, module=False, adam=False,
                  classifier_labels=0, squad=False, name="model.ckpt-best"):
  """Writes `weights` as the original's Estimator run would; returns prefix."""
  os.makedirs(directory, exist_ok=True)
  prefix = os.path.join(directory, name)
  with tf.Graph().as_default():
    model_vars = []
    with contextlib.ExitStack() as stack:
      if module:  # TF-Hub modules scope every variable under module/.
        stack.enter_context(tf.compat.v1.variable_scope("module"))
      for full_name, value in sorted(weights.items()):
        model_vars.append(_get_variable_in_scopes(full_name, value))
      if classifier_labels:  # run_classifier's head, at the top level.
        h = cfg["hidden_size"]
        tf.compat.v1.get_variable(
            "output_weights", [classifier_labels, h],
            initializer=tf.compat.v1.truncated_normal_initializer(0.02))
        tf.compat.v1.get_variable(
            "output_bias", [classifier_labels],
            initializer=tf.compat.v1.zeros_initializer())
      if squad:  # run_squad_v2's head scope.
        with tf.compat.v1.variable_scope("cls/squad"):
          tf.compat.v1.get_variable("output_weights", [2, cfg["hidden_size"]])
          tf.compat.v1.get_variable("output_bias", [2])
    if adam:  # The original's AdamW/LAMB slots and the global step.
      for var in model_vars:
        for slot in ("adam_m", "adam_v"):
          tf.compat.v1.get_variable(
              var.op.name + "/" + slot, var.shape, trainable=False,
              initializer=tf.compat.v1.zeros_initializer())
      tf.compat.v1.train.get_or_create_global_step()
    saver = tf.compat.v1.train.Saver()
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      saver.save(sess, prefix, write_meta_graph=False)
  with open(os.path.join(directory, "albert_config.json"), "w") as f:
    json.dump(dict(cfg, net_structure_type=0, gap_size=0), f)
  with open(os.path.join(directory, "30k-clean.model"), "wb") as f:
    f.write(b"\x0a\x05fake-spm")
  return prefix


def restore_with_original_code(prefix, names_and_shapes):
  """Restores `prefix` into tf.compat.v1 variables made under the original's
  scope names, with a Saver (what the original's code does); returns arrays."""
  with tf.Graph().as_default():
    variables = {}
    for full_name, shape in names_and_shapes.items():
      *scopes, leaf = full_name.split("/")
      with contextlib.ExitStack() as stack:
        for scope in scopes:
          stack.enter_context(tf.compat.v1.variable_scope(scope))
        variables[full_name] = tf.compat.v1.get_variable(leaf, shape)
    saver = tf.compat.v1.train.Saver(variables)
    with tf.compat.v1.Session() as sess:
      saver.restore(sess, prefix)
      return sess.run(variables)


# --- An independent NumPy forward pass of the original equations --------------


def _gelu(x):
  return 0.5 * x * (1.0 + np.tanh(math.sqrt(2 / math.pi) *
                                  (x + 0.044715 * x ** 3)))


def _layer_norm(x, w, prefix):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return ((x - mean) / np.sqrt(var + 1e-12) * w[prefix + "/gamma"] +
          w[prefix + "/beta"])


def _dense(x, w, prefix):
  return x @ w[prefix + "/kernel"] + w[prefix + "/bias"]


def reference_forward(w, cfg, ids, mask, types, positions=None):
  """The original modeling.py / run_pretraining.py equations, float64."""
  w = {k: v.astype(np.float64) for k, v in w.items()}
  act = {"gelu": _gelu, "relu": lambda t: np.maximum(t, 0.0)}[cfg["hidden_act"]]
  batch, seq = ids.shape
  heads = cfg["num_attention_heads"]
  h = cfg["hidden_size"]
  d = h // heads
  x = (w["bert/embeddings/word_embeddings"][ids] +
       w["bert/embeddings/token_type_embeddings"][types] +
       w["bert/embeddings/position_embeddings"][:seq][None])
  x = _layer_norm(x, w, "bert/embeddings/LayerNorm")
  if "bert/encoder/embedding_hidden_mapping_in/kernel" in w:
    x = _dense(x, w, "bert/encoder/embedding_hidden_mapping_in")
  adder = (1.0 - mask[:, None, None, :]) * -10000.0
  num_layers, groups = cfg["num_hidden_layers"], cfg["num_hidden_groups"]
  for layer in range(num_layers):
    group = int(layer / num_layers * groups)
    for inner in range(cfg["inner_group_num"]):
      p = f"bert/encoder/transformer/group_{group}/inner_group_{inner}/"

      def split(t):
        return t.reshape(batch, seq, heads, d).transpose(0, 2, 1, 3)
      q = split(_dense(x, w, p + "attention_1/self/query"))
      k = split(_dense(x, w, p + "attention_1/self/key"))
      v = split(_dense(x, w, p + "attention_1/self/value"))
      scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) + adder
      probs = np.exp(scores - scores.max(-1, keepdims=True))
      probs /= probs.sum(-1, keepdims=True)
      context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, h)
      attn = _dense(context, w, p + "attention_1/output/dense")
      x = _layer_norm(x + attn, w, p + "LayerNorm")
      ffn = _dense(act(_dense(x, w, p + "ffn_1/intermediate/dense")), w,
                   p + "ffn_1/intermediate/output/dense")
      x = _layer_norm(x + ffn, w, p + "LayerNorm_1")
  out = {"sequence_output": x,
         "pooled_output": np.tanh(_dense(x[:, 0], w, "bert/pooler/dense"))}
  if positions is not None and "cls/predictions/output_bias" in w:
    t = np.take_along_axis(x, positions[:, :, None], axis=1)
    t = act(_dense(t, w, "cls/predictions/transform/dense"))
    t = _layer_norm(t, w, "cls/predictions/transform/LayerNorm")
    out["mlm_logits"] = (t @ w["bert/embeddings/word_embeddings"].T +
                         w["cls/predictions/output_bias"])
    out["sop_logits"] = (out["pooled_output"] @
                         w["cls/seq_relationship/output_weights"].T +
                         w["cls/seq_relationship/output_bias"])
  return out


def inputs_for(cfg, seed=7):
  rng = np.random.RandomState(seed)
  ids = rng.randint(5, cfg["vocab_size"], size=(2, 7)).astype(np.int32)
  mask = np.ones_like(ids)
  mask[1, 5:] = 0  # padding exercises the attention mask
  types = np.zeros_like(ids)
  types[:, 4:] = 1
  positions = np.array([[1, 3], [2, 4]], dtype=np.int32)
  return dict(input_word_ids=ids, input_mask=mask, input_type_ids=types,
              masked_lm_positions=positions)


def run_model(model, inputs):
  if isinstance(model, AlbertPretrainer):
    out = model(inputs)
    enc = model.encoder({k: inputs[k] for k in
                         ("input_word_ids", "input_mask", "input_type_ids")})
    out = dict(out, sequence_output=enc["sequence_output"],
               pooled_output=enc["pooled_output"])
  else:
    out = model({k: inputs[k] for k in
                 ("input_word_ids", "input_mask", "input_type_ids")})
  return {k: np.asarray(v) for k, v in out.items() if k != "encoder_outputs"}


def assert_matches_reference(model, weights, cfg, atol=2e-4):
  inputs = inputs_for(cfg)
  ours = run_model(model, inputs)
  ref = reference_forward(weights, cfg, inputs["input_word_ids"],
                          inputs["input_mask"], inputs["input_type_ids"],
                          inputs["masked_lm_positions"])
  for key in ours:
    np.testing.assert_allclose(ours[key], ref[key], atol=atol, rtol=1e-4,
                               err_msg=key)
  assert set(ours) <= set(ref)
  return ours
