"""The files of a Hugging Face ALBERT directory: config.json read and
checked (`model_type`, `architectures`), the weights read (model.safetensors,
the shards of model.safetensors.index.json, or pytorch_model.bin when torch
is installed) and written (model.safetensors with transformers' metadata).
The names inside: hf_checkpoint.py.
"""

import dataclasses
import os
from typing import Any, Dict, Mapping, Tuple

import numpy as np
from safetensors import numpy as safetensors_numpy

from albert_tf.checkpoints import canonical_weights as cw
from albert_tf.checkpoints.canonical_weights import CheckpointConversionError
from albert_toolkit import output_files
from albert_toolkit import text_files

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
INDEX_NAME = "model.safetensors.index.json"
TORCH_WEIGHTS_NAME = "pytorch_model.bin"
# Its tokenizer files: AlbertTokenizer's SentencePiece model, BertTokenizer's
# WordPiece vocabulary, the fast tokenizers' json, and their settings.
SPIECE_MODEL = "spiece.model"
VOCAB_TXT = "vocab.txt"
TOKENIZER_JSON = "tokenizer.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
SPECIAL_TOKENS_MAP = "special_tokens_map.json"
TOKENIZER_FILES = (SPIECE_MODEL, VOCAB_TXT, TOKENIZER_JSON, TOKENIZER_CONFIG,
                   SPECIAL_TOKENS_MAP)
MODEL_TYPE = "albert"
# Architecture -> (its heads, whether its AlbertModel has the pooler).
ARCHITECTURES = {
    "AlbertModel": ((), True),
    "AlbertForPreTraining": (("mlm", "sop"), True),
    "AlbertForMaskedLM": (("mlm",), False),
    "AlbertForSequenceClassification": (("classifier",), True),
    "AlbertForMultipleChoice": (("classifier",), True),
    "AlbertForTokenClassification": (("classifier",), False),
    "AlbertForQuestionAnswering": (("qa_outputs",), False),
}


def refuse(path: str, field: str, value, why: str):
  """The one-line error of a config.json field we cannot take."""
  return CheckpointConversionError(f"{path}: {field}={value!r}: {why}")


def check_not_held(output_dir: str, held, overwrite: bool) -> None:
  """Refuses, without `overwrite`, an output directory that holds `held`
  (a model there, or files of a user's the conversion would write over)."""
  if held and not overwrite:
    raise CheckpointConversionError(
        f"--output_dir {output_dir} already holds a model or files the "
        f"conversion writes ({', '.join(held)}); use another directory, or "
        "pass --overwrite to replace them")


@dataclasses.dataclass
class HfModel:
  """A Hugging Face ALBERT directory read: its config.json (a dict), its
  architecture and its tensors by stored name."""
  directory: str
  config: Dict[str, Any]
  architecture: str
  tensors: Dict[str, np.ndarray]


def read_config(directory: str) -> Tuple[Dict[str, Any], str]:
  """(config.json as a dict, its architecture); one-line errors naming the
  file and field."""
  path = os.path.join(directory, CONFIG_NAME)
  if not os.path.isfile(path):
    raise CheckpointConversionError(f"{path}: no such file (not a Hugging "
                                    "Face model directory)")
  hf = text_files.read_json_object(path)
  if hf.get("model_type") != MODEL_TYPE:
    raise refuse(path, "model_type", hf.get("model_type"),
                 "not an ALBERT model (expected \"albert\")")
  archs = hf.get("architectures")
  if not archs:
    return hf, None
  if len(archs) != 1 or archs[0] not in ARCHITECTURES:
    raise refuse(path, "architectures", archs, "expected one of "
                 f"{', '.join(ARCHITECTURES)}")
  return hf, archs[0]


# The first name part of a head tensor (transformers' head modules).
_HEAD_PREFIXES = ("predictions.", "sop_classifier.", "classifier.",
                  "qa_outputs.")


def architecture_of_tensors(tensors, path: str) -> str:
  """The class a config.json without `architectures` (`path`) holds, from
  its head tensors; refused when two classes store the same ones (a head
  is never dropped for want of the field)."""
  names = [n[len("albert."):] if n.startswith("albert.") else n
           for n in tensors]
  heads = sorted(n for n in names if n.startswith(_HEAD_PREFIXES))
  kinds = {n.split(".")[0] for n in heads}
  pooler = "pooler.weight" in names
  if not kinds:
    return "AlbertModel"
  if kinds == {"predictions", "sop_classifier"}:
    return "AlbertForPreTraining"
  if kinds == {"predictions"}:
    return "AlbertForMaskedLM"
  if kinds == {"qa_outputs"}:
    return "AlbertForQuestionAnswering"
  if kinds == {"classifier"} and not pooler:
    return "AlbertForTokenClassification"
  candidates = ("AlbertForSequenceClassification or AlbertForMultipleChoice"
                if kinds == {"classifier"} else "no one class")
  raise CheckpointConversionError(
      f"{path}: no architectures field, and the stored head "
      f"{cw.summarize_names(heads, 4)} fits {candidates}; add "
      "\"architectures\" naming the model's class")


def _load_safetensors(path: str) -> Dict[str, np.ndarray]:
  try:
    return safetensors_numpy.load_file(path)
  except Exception as e:  # safetensors raises its own error types
    raise CheckpointConversionError(
        f"{path}: unreadable safetensors file ({cw.error_line(e)})") from None


def _load_torch(path: str) -> Dict[str, np.ndarray]:
  """pytorch_model.bin (a torch pickle): only with torch installed."""
  try:
    import torch  # pylint: disable=g-import-not-at-top (optional)
  except ImportError:
    raise CheckpointConversionError(
        f"{path}: a torch pickle, readable only with torch installed; "
        "convert it to model.safetensors (transformers: "
        "model.save_pretrained(dir, safe_serialization=True))") from None
  state = torch.load(path, map_location="cpu", weights_only=True)
  return {k: v.float().numpy() for k, v in state.items()}


def read_tensors(directory: str) -> Dict[str, np.ndarray]:
  """Every stored tensor: model.safetensors, the shards of its index, or
  pytorch_model.bin."""
  single = os.path.join(directory, WEIGHTS_NAME)
  index = os.path.join(directory, INDEX_NAME)
  if os.path.isfile(single):
    return _load_safetensors(single)
  if os.path.isfile(index):
    try:
      weight_map = text_files.read_json_object(
          index, " (a safetensors index)").get("weight_map")
    except ValueError as e:
      raise CheckpointConversionError(str(e)) from None
    if not isinstance(weight_map, dict):
      raise CheckpointConversionError(
          f"{index}: no weight_map object (tensor name -> shard file)")
    # Each tensor once, in the shard the index names: a second copy or a
    # misfiled one would otherwise be taken or dropped by file order.
    tensors, where = {}, {}
    for shard in sorted(set(weight_map.values())):
      for name, array in _load_safetensors(
          os.path.join(directory, shard)).items():
        if name in where:
          raise CheckpointConversionError(
              f"{index}: tensor {name} is stored twice, in {where[name]} and "
              f"{shard}")
        if weight_map.get(name) != shard:
          raise CheckpointConversionError(
              f"{index}: tensor {name} is stored in {shard} but the "
              f"weight_map assigns it to {weight_map.get(name) or 'no shard'}")
        tensors[name], where[name] = array, shard
    missing = sorted(set(weight_map) - set(tensors))
    if missing:
      raise CheckpointConversionError(
          f"{index}: {len(missing)} tensor(s) of its weight_map are in no "
          f"shard: {cw.summarize_names(missing, 4)}")
    return tensors
  torch_file = os.path.join(directory, TORCH_WEIGHTS_NAME)
  if os.path.isfile(torch_file):
    return _load_torch(torch_file)
  raise CheckpointConversionError(
      f"{directory}: no {WEIGHTS_NAME}, {INDEX_NAME} or {TORCH_WEIGHTS_NAME}")


def read_model(directory: str) -> HfModel:
  hf, arch = read_config(directory)
  tensors = read_tensors(directory)
  if arch is None:
    arch = architecture_of_tensors(tensors,
                                   os.path.join(directory, CONFIG_NAME))
  return HfModel(directory, hf, arch, tensors)


def write_model(directory: str, tensors: Mapping[str, np.ndarray],
                hf_config: Mapping[str, Any]) -> str:
  """model.safetensors (with the `{"format": "pt"}` metadata transformers
  expects) and config.json, each written whole; returns the weights path."""
  os.makedirs(directory, exist_ok=True)
  path = os.path.join(directory, WEIGHTS_NAME)
  data = safetensors_numpy.save(dict(tensors), metadata={"format": "pt"})
  output_files.atomic_write(path, data)
  output_files.write_json(os.path.join(directory, CONFIG_NAME),
                          dict(hf_config))
  return path


def is_hf_dir(path: str) -> bool:
  """Whether `path` is a directory with a config.json and HF weights."""
  return os.path.isdir(path) and os.path.isfile(
      os.path.join(path, CONFIG_NAME)) and any(
          os.path.isfile(os.path.join(path, n))
          for n in (WEIGHTS_NAME, INDEX_NAME, TORCH_WEIGHTS_NAME))
