"""Tiny Hugging Face ALBERT directories written with NumPy and safetensors
(names and orientations as transformers stores them, no torch), and an
independent NumPy forward pass of that layout (transformers' equations:
embeddings, E->H mapping, post-LN blocks by group schedule, pooler, heads).
"""

import json
import math
import os
import shutil

import numpy as np
from safetensors import numpy as safetensors_numpy
from scipy import special

HEAD_ROWS = {"AlbertForQuestionAnswering": 2, "AlbertForMultipleChoice": 1}
NO_POOLER = ("AlbertForMaskedLM", "AlbertForTokenClassification",
             "AlbertForQuestionAnswering")


def hf_config(arch, vocab_size, hidden_act="gelu_new", num_labels=None,
              **overrides):
  """A tiny config.json (2 layer steps, each its own group of 1 layer)."""
  config = dict(architectures=[arch], model_type="albert",
                vocab_size=vocab_size, embedding_size=8, hidden_size=16,
                num_hidden_layers=2, num_hidden_groups=2, inner_group_num=1,
                num_attention_heads=2, intermediate_size=32,
                hidden_act=hidden_act, hidden_dropout_prob=0.0,
                attention_probs_dropout_prob=0.0, max_position_embeddings=32,
                type_vocab_size=2, initializer_range=0.02,
                layer_norm_eps=1e-12, pad_token_id=0, bos_token_id=2,
                eos_token_id=3)
  if num_labels:
    names = [f"class_{i}" for i in range(num_labels)]
    config["id2label"] = {str(i): n for i, n in enumerate(names)}
    config["label2id"] = {n: i for i, n in enumerate(names)}
  config.update(overrides)
  return config


def hf_weights(config, seed=0):
  """transformers' state dict of `config["architectures"][0]` (random)."""
  arch = config["architectures"][0]
  rng = np.random.default_rng(seed)
  v, e, h, i = (config[k] for k in ("vocab_size", "embedding_size",
                                    "hidden_size", "intermediate_size"))

  def r(*shape, scale=0.2):
    return (rng.standard_normal(shape) * scale).astype(np.float32)

  base = "" if arch == "AlbertModel" else "albert."
  w = {f"{base}embeddings.word_embeddings.weight": r(v, e),
       f"{base}embeddings.position_embeddings.weight":
           r(config["max_position_embeddings"], e),
       f"{base}embeddings.token_type_embeddings.weight":
           r(config["type_vocab_size"], e),
       f"{base}embeddings.LayerNorm.weight": 1 + r(e),
       f"{base}embeddings.LayerNorm.bias": r(e),
       f"{base}encoder.embedding_hidden_mapping_in.weight": r(h, e),
       f"{base}encoder.embedding_hidden_mapping_in.bias": r(h)}
  for g in range(config["num_hidden_groups"]):
    for j in range(config["inner_group_num"]):
      p = f"{base}encoder.albert_layer_groups.{g}.albert_layers.{j}."
      for name in ("query", "key", "value", "dense"):
        w[f"{p}attention.{name}.weight"] = r(h, h)
        w[f"{p}attention.{name}.bias"] = r(h)
      w[f"{p}attention.LayerNorm.weight"] = 1 + r(h)
      w[f"{p}attention.LayerNorm.bias"] = r(h)
      w[f"{p}ffn.weight"], w[f"{p}ffn.bias"] = r(i, h), r(i)
      w[f"{p}ffn_output.weight"], w[f"{p}ffn_output.bias"] = r(h, i), r(h)
      w[f"{p}full_layer_layer_norm.weight"] = 1 + r(h)
      w[f"{p}full_layer_layer_norm.bias"] = r(h)
  if arch not in NO_POOLER:
    w[f"{base}pooler.weight"], w[f"{base}pooler.bias"] = r(h, h), r(h)
  if arch in ("AlbertForPreTraining", "AlbertForMaskedLM"):
    w.update({"predictions.dense.weight": r(e, h),
              "predictions.dense.bias": r(e),
              "predictions.LayerNorm.weight": 1 + r(e),
              "predictions.LayerNorm.bias": r(e), "predictions.bias": r(v)})
  if arch == "AlbertForPreTraining":
    w["sop_classifier.classifier.weight"] = r(2, h)
    w["sop_classifier.classifier.bias"] = r(2)
  rows = HEAD_ROWS.get(arch, len(config.get("id2label") or {}) or 2)
  if arch == "AlbertForQuestionAnswering":
    w["qa_outputs.weight"], w["qa_outputs.bias"] = r(rows, h), r(rows)
  elif arch.endswith(("Classification", "MultipleChoice")):
    w["classifier.weight"], w["classifier.bias"] = r(rows, h), r(rows)
  return w


def write_hf_dir(directory, config, spm_file, seed=0, tensors=None):
  """config.json, model.safetensors and spiece.model; returns the tensors."""
  os.makedirs(directory, exist_ok=True)
  tensors = hf_weights(config, seed) if tensors is None else tensors
  safetensors_numpy.save_file(tensors, os.path.join(directory,
                                                    "model.safetensors"),
                              metadata={"format": "pt"})
  with open(os.path.join(directory, "config.json"), "w") as f:
    json.dump(config, f)
  shutil.copyfile(spm_file, os.path.join(directory, "spiece.model"))
  return tensors


# --- The reference forward pass (float64) -------------------------------------


def _layer_norm(x, gamma, beta, eps):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + eps) * gamma + beta


ACTIVATIONS = {
    "gelu": lambda x: 0.5 * x * (1 + special.erf(x / math.sqrt(2))),
    "gelu_new": lambda x: 0.5 * x * (1 + np.tanh(
        math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))),
    "relu": lambda x: np.maximum(x, 0),
}


def forward(tensors, config, ids, mask, types):
  """transformers' ALBERT on int arrays [batch, seq]: {"sequence",
  "pooled" (if the architecture has the pooler), "mlm", "sop", "logits"}."""
  arch = config["architectures"][0]
  base = "" if arch == "AlbertModel" else "albert."
  t = {k: v.astype(np.float64) for k, v in tensors.items()}
  eps, act = config["layer_norm_eps"], ACTIVATIONS[config["hidden_act"]]

  def lin(x, name):  # nn.Linear: x @ W^T + b
    return x @ t[name + ".weight"].T + t[name + ".bias"]

  def ln(x, name):
    return _layer_norm(x, t[name + ".weight"], t[name + ".bias"], eps)

  seq = ids.shape[1]
  x = (t[f"{base}embeddings.word_embeddings.weight"][ids] +
       t[f"{base}embeddings.token_type_embeddings.weight"][types] +
       t[f"{base}embeddings.position_embeddings.weight"][:seq][None])
  x = ln(x, f"{base}embeddings.LayerNorm")  # [b, s, E]
  x = lin(x, f"{base}encoder.embedding_hidden_mapping_in")  # [b, s, H]
  heads = config["num_attention_heads"]
  d = config["hidden_size"] // heads
  bias = (1.0 - mask[:, None, None, :]) * -10000.0  # [b, 1, 1, s]
  layers, groups = config["num_hidden_layers"], config["num_hidden_groups"]
  for step in range(layers):
    g = int(step / (layers / groups))
    for j in range(config["inner_group_num"]):
      p = f"{base}encoder.albert_layer_groups.{g}.albert_layers.{j}."

      def split(y):  # [b, s, H] -> [b, heads, s, d]
        return y.reshape(y.shape[0], seq, heads, d).transpose(0, 2, 1, 3)
      q, k, v = (split(lin(x, p + "attention." + n))
                 for n in ("query", "key", "value"))
      scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) + bias
      probs = np.exp(scores - scores.max(-1, keepdims=True))
      probs /= probs.sum(-1, keepdims=True)
      context = (probs @ v).transpose(0, 2, 1, 3).reshape(x.shape)
      x = ln(x + lin(context, p + "attention.dense"), p + "attention.LayerNorm")
      ffn = lin(act(lin(x, p + "ffn")), p + "ffn_output")
      x = ln(x + ffn, p + "full_layer_layer_norm")
  out = {"sequence": x}
  if f"{base}pooler.weight" in t:
    out["pooled"] = np.tanh(lin(x[:, 0], f"{base}pooler"))
  if "predictions.dense.weight" in t:
    y = ln(act(lin(x, "predictions.dense")), "predictions.LayerNorm")
    out["mlm"] = (y @ t[f"{base}embeddings.word_embeddings.weight"].T +
                  t["predictions.bias"])  # [b, s, V]
  if "sop_classifier.classifier.weight" in t:
    out["sop"] = lin(out["pooled"], "sop_classifier.classifier")
  if "qa_outputs.weight" in t:
    out["logits"] = lin(x, "qa_outputs")  # [b, s, 2]: start, end
  elif arch == "AlbertForTokenClassification":
    out["logits"] = lin(x, "classifier")
  elif "classifier.weight" in t:
    out["logits"] = lin(out["pooled"], "classifier")  # MC: [b * choices, 1]
  return out
