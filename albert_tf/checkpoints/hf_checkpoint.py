"""Hugging Face ALBERT model directories (transformers' layout): their
config.json and weights translated to and from the canonical weights
(`canonical_weights`: our names, our shapes).

A directory holds `config.json` (`model_type: "albert"`, `architectures`)
and `model.safetensors` (or `model.safetensors.index.json` and its shards;
older ones `pytorch_model.bin`, read only when torch is installed). Weight
names (transformers' `AlbertModel`, under `albert.` inside a head class):

  embeddings.{word,position,token_type}_embeddings.weight   [rows, E]
  embeddings.LayerNorm.{weight,bias}
  encoder.embedding_hidden_mapping_in.{weight,bias}         [H, E]
  encoder.albert_layer_groups.{g}.albert_layers.{i}.        (block i of group g)
      attention.{query,key,value,dense}.{weight,bias}      [H, H]
      attention.LayerNorm, ffn [I, H], ffn_output [H, I], full_layer_layer_norm
  pooler.{weight,bias}                                      [H, H]

`nn.Linear.weight` is [out, in]: our kernel is its transpose. Block i of
group g is our sublayer `g * inner_group_num + i` (sharing="all"), and
transformers' layer schedule (step l runs group `l // (L / G)`) is ours.
The heads (`_HEADS`): the MLM head `predictions.*` (its decoder tied to the
word embeddings), SOP `sop_classifier.classifier`, and the fine-tuning
heads `classifier` / `qa_outputs`, [outputs, H] like ours (no transpose).
"""

import os
import re
from typing import Any, Dict, Mapping, Optional, Tuple

import numpy as np

from albert_tf.checkpoints import canonical_weights as cw
from albert_tf.checkpoints import hf_files
from albert_tf.checkpoints.hf_files import ARCHITECTURES
from albert_tf.checkpoints.hf_files import CONFIG_NAME
from albert_tf.checkpoints.hf_files import HfModel
from albert_tf.checkpoints.hf_files import MODEL_TYPE
from albert_tf.checkpoints.hf_files import WEIGHTS_NAME
from albert_tf.checkpoints.canonical_weights import CheckpointConversionError
from albert_tf.modeling import albert_config

BASE_PREFIX = "albert."
# The canonical part of a fine-tuning head (our models' `head`).
HEAD = "head"


# HF activation name -> ours, by meaning (HF `gelu` is the erf GELU).
ACTIVATIONS_FROM_HF = {"gelu": "gelu_exact", "gelu_new": "gelu",
                       "gelu_pytorch_tanh": "gelu", "relu": "relu"}
ACTIVATIONS_TO_HF = {"gelu": "gelu_new", "gelu_exact": "gelu",
                     "relu": "relu"}
# Our LayerNorm's epsilon (modeling/layers/layer_utils.py).
LAYER_NORM_EPS = 1e-12
# config.json fields copied as they are (same name and meaning).
SIZE_FIELDS = ("vocab_size", "embedding_size", "hidden_size",
               "num_hidden_layers", "num_hidden_groups", "inner_group_num",
               "num_attention_heads", "intermediate_size",
               "max_position_embeddings", "type_vocab_size",
               "initializer_range", "hidden_dropout_prob",
               "attention_probs_dropout_prob")
# transformers' AlbertConfig defaults: what transformers takes for a field
# config.json leaves out, so the conversion takes them too.
HF_DEFAULTS = {
    "vocab_size": 30000, "embedding_size": 128, "hidden_size": 4096,
    "num_hidden_layers": 12, "num_hidden_groups": 1,
    "num_attention_heads": 64, "intermediate_size": 16384,
    "inner_group_num": 1, "hidden_act": "gelu_new",
    "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
    "max_position_embeddings": 512, "type_vocab_size": 2,
    "initializer_range": 0.02, "layer_norm_eps": 1e-12,
    "classifier_dropout_prob": 0.1, "position_embedding_type": "absolute"}
_INT_FIELDS = ("vocab_size", "embedding_size", "hidden_size",
               "num_hidden_layers", "num_hidden_groups", "inner_group_num",
               "num_attention_heads", "intermediate_size",
               "max_position_embeddings", "type_vocab_size")
# What transformers' AlbertConfig has for the special tokens.
TOKEN_IDS = {"pad_token_id": 0, "bos_token_id": 2, "eos_token_id": 3}

# Canonical name -> HF name (under `albert.` for the encoder) outside blocks.
_ENCODER = {
    "embeddings/word_embeddings": "embeddings.word_embeddings.weight",
    "embeddings/position_embeddings": "embeddings.position_embeddings.weight",
    "embeddings/token_type_embeddings":
        "embeddings.token_type_embeddings.weight",
    "embeddings/layer_norm/gamma": "embeddings.LayerNorm.weight",
    "embeddings/layer_norm/beta": "embeddings.LayerNorm.bias",
    "embeddings/embedding_hidden_mapping_in/kernel":
        "encoder.embedding_hidden_mapping_in.weight",
    "embeddings/embedding_hidden_mapping_in/bias":
        "encoder.embedding_hidden_mapping_in.bias",
    "pooler/kernel": "pooler.weight",
    "pooler/bias": "pooler.bias",
}
_HEADS = {
    "mlm": {"mlm_head/transform_dense/kernel": "predictions.dense.weight",
            "mlm_head/transform_dense/bias": "predictions.dense.bias",
            "mlm_head/transform_layer_norm/gamma":
                "predictions.LayerNorm.weight",
            "mlm_head/transform_layer_norm/beta": "predictions.LayerNorm.bias",
            "mlm_head/output_bias": "predictions.bias"},
    "sop": {"sop_head/output_weights": "sop_classifier.classifier.weight",
            "sop_head/output_bias": "sop_classifier.classifier.bias"},
    "classifier": {f"{HEAD}/output_weights": "classifier.weight",
                   f"{HEAD}/output_bias": "classifier.bias"},
    "qa_outputs": {f"{HEAD}/output_weights": "qa_outputs.weight",
                   f"{HEAD}/output_bias": "qa_outputs.bias"},
}
# (our sublayer kind, suffix) -> suffix under albert_layers.{i}.
_BLOCK = {
    ("attention", "query"): "attention.query",
    ("attention", "key"): "attention.key",
    ("attention", "value"): "attention.value",
    ("attention", "output_dense"): "attention.dense",
    ("attention", "layer_norm"): "attention.LayerNorm",
    ("ffn", "intermediate"): "ffn",
    ("ffn", "output_dense"): "ffn_output",
    ("ffn", "layer_norm"): "full_layer_layer_norm",
}
_PARAMS = {"kernel": "weight", "bias": "bias", "gamma": "weight",
           "beta": "bias"}
# The tied decoder: transformers may store it; we tie it.
DECODER_WEIGHT = "predictions.decoder.weight"
DECODER_BIAS = "predictions.decoder.bias"
_BLOCK_RE = re.compile(
    r"^encoder\.albert_layer_groups\.(\d+)\.albert_layers\.(\d+)\.(.+)\."
    r"(weight|bias)$")


def _is_kernel(name: str) -> bool:
  return name.endswith("/kernel")


def canonical_to_hf(config, architecture: str) -> Dict[str, str]:
  """Canonical name -> HF name of every weight `architecture` stores
  (encoder names under `albert.` for a head class)."""
  heads, pooler = ARCHITECTURES[architecture]
  prefix = "" if architecture == "AlbertModel" else BASE_PREFIX
  out = {k: prefix + v for k, v in _ENCODER.items()
         if pooler or not k.startswith("pooler/")}
  inner = config.inner_group_num
  for k in range(config.num_hidden_groups * inner):
    group, layer = divmod(k, inner)
    base = (f"{prefix}encoder.albert_layer_groups.{group}.albert_layers."
            f"{layer}.")
    for (kind, sub), hf in _BLOCK.items():
      for ours, theirs in _PARAMS.items():
        if (sub == "layer_norm") != (ours in ("gamma", "beta")):
          continue
        out[f"transformer/{kind}_{k}/{sub}/{ours}"] = f"{base}{hf}.{theirs}"
  for head in heads:
    out.update(_HEADS[head])
  return out


# --- config.json --------------------------------------------------------------


def defaults_note(hf: Mapping[str, Any], path: str) -> str:
  """What an error a default may have caused adds: the size fields `path`
  leaves out and transformers' defaults they took ("" when none is)."""
  missing = [name for name in _INT_FIELDS if name not in hf]
  if not missing:
    return ""
  taken = ", ".join(f"{name}={HF_DEFAULTS[name]}" for name in missing)
  return (f" ({path} leaves out {', '.join(missing)}: transformers' "
          f"default(s) {taken} taken)")


def albert_config_from_hf(hf: Mapping[str, Any], path: str
                          ) -> albert_config.AlbertConfig:
  """Our AlbertConfig of a config.json (`path`, for errors); a field we
  cannot represent is refused naming it. A field it leaves out takes
  transformers' default (HF_DEFAULTS), as loading it in transformers does;
  an error then names the fields left out."""
  if hf.get("model_type") != MODEL_TYPE:
    raise hf_files.refuse(path, "model_type", hf.get("model_type"),
                          "not an ALBERT model (expected \"albert\")")
  note = defaults_note(hf, path)
  act = hf.get("hidden_act", HF_DEFAULTS["hidden_act"])
  if act not in ACTIVATIONS_FROM_HF:
    raise hf_files.refuse(path, "hidden_act", act,
                          "an activation albert_tf does not have (it takes "
                          f"{', '.join(ACTIVATIONS_FROM_HF)})")
  eps = hf.get("layer_norm_eps", HF_DEFAULTS["layer_norm_eps"])
  if not np.isclose(float(eps), LAYER_NORM_EPS, rtol=1e-6, atol=0):
    raise hf_files.refuse(path, "layer_norm_eps", eps,
                          "albert_tf's LayerNorm epsilon is fixed at "
                          f"{LAYER_NORM_EPS}")
  position = hf.get("position_embedding_type",
                    HF_DEFAULTS["position_embedding_type"])
  if position != "absolute":
    raise hf_files.refuse(path, "position_embedding_type", position,
                          "albert_tf has absolute position embeddings only")
  values = {"hidden_act": ACTIVATIONS_FROM_HF[act]}
  for name in SIZE_FIELDS:
    values[name] = hf.get(name, HF_DEFAULTS[name])
  for name in _INT_FIELDS:
    # Sizes are JSON integers: 2.0, "2" and true are not.
    if type(values[name]) is not int:  # pylint: disable=unidiomatic-typecheck
      raise hf_files.refuse(path, name, values[name], "must be an integer")
  try:
    return albert_config.as_albert_config(values).validate()
  except (TypeError, ValueError) as e:
    raise CheckpointConversionError(f"{path}: {e}{note}") from None


def hf_config_from_albert(config, architecture: str,
                          extra: Optional[Mapping[str, Any]] = None
                          ) -> Dict[str, Any]:
  """config.json of `config` as `architecture` (+ `extra`: id2label, ...)."""
  act = ACTIVATIONS_TO_HF.get(config.hidden_act)
  if act is None:
    raise CheckpointConversionError(
        f"hidden_act={config.hidden_act!r} has no transformers name (it "
        f"takes {', '.join(ACTIVATIONS_TO_HF)} of ours)")
  if config.sharing != "all":
    raise CheckpointConversionError(
        f"sharing={config.sharing!r}: transformers' ALBERT shares every "
        "sublayer of a group (sharing='all')")
  out = {"architectures": [architecture], "model_type": MODEL_TYPE,
         "hidden_act": act, "layer_norm_eps": LAYER_NORM_EPS,
         "tie_word_embeddings": True, "classifier_dropout_prob": 0.1,
         **TOKEN_IDS}
  out.update({name: getattr(config, name) for name in SIZE_FIELDS})
  out.update(extra or {})
  return dict(sorted(out.items()))


# --- Reading ------------------------------------------------------------------


def _normalized(name: str, architecture: str) -> str:
  """`name` as `canonical_to_hf` spells it: AlbertModel saved alone has
  no `albert.` prefix, inside a head class it has (loaders accept both)."""
  if architecture == "AlbertModel":
    return name[len(BASE_PREFIX):] if name.startswith(BASE_PREFIX) else name
  if name.startswith(("embeddings.", "encoder.", "pooler.")):
    return BASE_PREFIX + name
  return name


def _skip_reason(name: str) -> Optional[str]:
  if name.endswith(("position_ids", "token_type_ids")):
    return "buffer (not a weight)"
  if name in (DECODER_WEIGHT, DECODER_BIAS):
    return "tied MLM decoder (our MLM head ties it)"
  return None


def map_hf(model: HfModel, config
           ) -> Tuple[cw.ConversionReport, Dict[str, np.ndarray]]:
  """The tensors of `model` as canonical arrays in one pass: (report:
  canonical name -> stored name, and the stored names skipped with the
  reason; the arrays, kernels transposed). Fails in one line on a stored
  decoder that is not the word embeddings (we tie them), or on a tensor
  that does not fit `config`."""
  wanted = canonical_to_hf(config, model.architecture)
  tensors = {_normalized(k, model.architecture): v
             for k, v in model.tensors.items()}
  source = os.path.join(model.directory, WEIGHTS_NAME)
  report = cw.ConversionReport("hf", model.directory)
  by_hf = {h: c for c, h in wanted.items()}
  values, misfits = {}, []
  for name in sorted(tensors):
    if name in by_hf:
      canonical = by_hf[name]
      array = np.asarray(tensors[name], dtype=np.float32)
      values[canonical] = array.T if _is_kernel(canonical) else array
      report.mapped[canonical] = name
      continue
    block = _BLOCK_RE.match(name[len(BASE_PREFIX):] if name.startswith(
        BASE_PREFIX) else name)
    if block and (int(block.group(1)) >= config.num_hidden_groups or
                  int(block.group(2)) >= config.inner_group_num):
      misfits.append(name)
    report.skipped[name] = (_skip_reason(name) or
                            f"not a weight of {model.architecture}")
  if misfits:
    raise CheckpointConversionError(
        f"{source}: {cw.summarize_names(misfits, 4)} do(es) not fit "
        f"num_hidden_groups={config.num_hidden_groups}, inner_group_num="
        f"{config.inner_group_num} of {CONFIG_NAME}")
  missing = sorted(h for c, h in wanted.items() if c not in values)
  if missing:
    raise CheckpointConversionError(
        f"{source}: {len(missing)} weight(s) of {model.architecture} missing: "
        f"{cw.summarize_names(missing, 4)}")
  _check_tied(tensors, values, source)
  _check_untied_config(model, tensors, values)
  return report, values


def _check_untied_config(model, tensors, values):
  """An MLM head whose config.json unties the decoder (`tie_word_embeddings:
  false`) but stores none: transformers starts that decoder from random
  weights, our tied one would be another model, silently."""
  if (model.config.get("tie_word_embeddings") is False and
      DECODER_WEIGHT not in tensors and
      any(name.startswith("mlm_head/") for name in values)):
    raise hf_files.refuse(
        os.path.join(model.directory, CONFIG_NAME), "tie_word_embeddings",
        False, f"{WEIGHTS_NAME} holds no {DECODER_WEIGHT}, so transformers "
        "would start the MLM decoder from random weights (albert_tf ties it "
        "to the word embeddings)")


def _check_tied(tensors, values, source):
  """A stored MLM decoder must be the word embeddings (and its bias the MLM
  bias): we tie them, a different one would be dropped silently."""
  for name, canonical in ((DECODER_WEIGHT, "embeddings/word_embeddings"),
                          (DECODER_BIAS, "mlm_head/output_bias")):
    if name in tensors and canonical in values and not np.array_equal(
        np.asarray(tensors[name], np.float32), values[canonical]):
      raise CheckpointConversionError(
          f"{source}: {name} differs from {canonical.split('/')[-1]} "
          "(untied): albert_tf ties the MLM decoder to the word embeddings")


# --- Writing ------------------------------------------------------------------


def to_hf(values: Mapping[str, np.ndarray], config, architecture: str
          ) -> Dict[str, np.ndarray]:
  """HF name -> array of every weight `architecture` stores, from canonical
  `values` (a missing one is an error naming it; tied tensors omitted, as
  transformers saves them)."""
  names = canonical_to_hf(config, architecture)
  missing = [c for c in names if c not in values]
  if missing:
    raise CheckpointConversionError(
        f"{architecture} needs {cw.summarize_names(missing, 4)}, which the "
        "checkpoint does not hold")
  out = {}
  for canonical, name in names.items():
    array = np.asarray(values[canonical], dtype=np.float32)
    out[name] = np.ascontiguousarray(array.T if _is_kernel(canonical)
                                     else array)
  return out
