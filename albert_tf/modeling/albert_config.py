"""ALBERT model configuration: the fields of the original `albert_config.json`.

`AlbertConfig` is a Model Garden `hyperparams.Config` dataclass, so it nests
into experiment configs and takes YAML files and `a.b=c` overrides. It reads
the released `albert_config.json` files as they are (their extra keys such as
`net_structure_type` or `gap_size` are accepted and ignored).

Example:

>>> config = AlbertConfig.from_preset("albert_base_v2")
>>> config.hidden_size, config.embedding_size
(768, 128)
"""

import dataclasses
import json
import os
from typing import Any, Dict, Mapping, Optional

import yaml
from official.modeling.hyperparams import base_config

# Activations the original's `hidden_act` may name, mapped to what we compute.
# "gelu" is the tanh approximation, as in the original `modeling.gelu`.
ACTIVATIONS = ("gelu", "gelu_new", "gelu_exact", "relu", "tanh", "swish",
               "silu", "linear")

# Ablation of the paper's Table 4: which sublayers are shared across layers.
SHARING_MODES = ("all", "attention", "ffn", "none")

# Package data: albert_tf/configs/models/*.yaml (the repo's top-level
# official_configs/ is a link to albert_tf/configs/).
CONFIG_DIR = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")
PRESET_DIR = os.path.join(CONFIG_DIR, "models")
# The model config beside a released or converted checkpoint.
CONFIG_JSON_NAME = "albert_config.json"

# Keys of released `albert_config.json` files that do not change the model we
# build (they configure variants the release never used).
RELEASE_ONLY_KEYS = ("net_structure_type", "gap_size", "num_memory_blocks",
                      "layers_to_keep", "down_scale_factor")


@dataclasses.dataclass
class AlbertConfig(base_config.Config):
  """Hyperparameters of an ALBERT encoder.

  Field names and meanings are the original's; `sharing` and
  `gradient_checkpointing` are ours.
  """
  vocab_size: int = 30000
  embedding_size: int = 128
  hidden_size: int = 768
  num_hidden_layers: int = 12
  num_hidden_groups: int = 1
  inner_group_num: int = 1
  num_attention_heads: int = 12
  intermediate_size: int = 3072
  hidden_act: str = "gelu"
  hidden_dropout_prob: float = 0.0
  attention_probs_dropout_prob: float = 0.0
  max_position_embeddings: int = 512
  type_vocab_size: int = 2
  initializer_range: float = 0.02
  # "all" (ALBERT), "attention" (attention shared, FFN per layer),
  # "ffn" (FFN shared, attention per layer), "none" (BERT-style).
  sharing: str = "all"
  # Recompute each layer's activations in the backward pass (less memory).
  gradient_checkpointing: bool = False

  def validate(self) -> "AlbertConfig":
    """Raises ValueError naming the first invalid field; returns self."""
    for name in ("vocab_size", "embedding_size", "hidden_size",
                 "num_hidden_layers", "num_hidden_groups", "inner_group_num",
                 "num_attention_heads", "intermediate_size",
                 "max_position_embeddings", "type_vocab_size"):
      value = getattr(self, name)
      if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(
            f"AlbertConfig.{name} must be a positive integer, got {value!r}")
    if self.hidden_size % self.num_attention_heads:
      raise ValueError(
          f"AlbertConfig.hidden_size ({self.hidden_size}) must be divisible by "
          f"num_attention_heads ({self.num_attention_heads})")
    if self.num_hidden_layers % self.num_hidden_groups:
      raise ValueError(
          f"AlbertConfig.num_hidden_layers ({self.num_hidden_layers}) must be "
          f"divisible by num_hidden_groups ({self.num_hidden_groups})")
    if self.hidden_act not in ACTIVATIONS:
      raise ValueError(
          f"AlbertConfig.hidden_act: unknown activation {self.hidden_act!r}; "
          f"expected one of {ACTIVATIONS}")
    if self.sharing not in SHARING_MODES:
      raise ValueError(
          f"AlbertConfig.sharing: unknown mode {self.sharing!r}; expected one "
          f"of {SHARING_MODES}")
    for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
      value = getattr(self, name)
      if not 0.0 <= value < 1.0:
        raise ValueError(f"AlbertConfig.{name} must be in [0, 1), got {value}")
    if self.initializer_range <= 0:
      raise ValueError("AlbertConfig.initializer_range must be positive, got "
                       f"{self.initializer_range}")
    return self

  @classmethod
  def from_dict(cls, values: Mapping[str, Any],
                source: str = "config") -> "AlbertConfig":
    """Builds a validated config from a dict; unknown keys are an error."""
    values = {k: v for k, v in values.items() if k not in RELEASE_ONLY_KEYS}
    known = {f.name for f in dataclasses.fields(cls)
             } - {"default_params", "restrictions"}
    unknown = sorted(set(values) - known)
    if unknown:
      raise ValueError(f"{source}: unknown AlbertConfig field(s) {unknown}")
    return cls(**values).validate()

  @classmethod
  def from_json_file(cls, path: str) -> "AlbertConfig":
    """Reads an original `albert_config.json` (extra release keys allowed)."""
    with open(path, encoding="utf-8") as f:
      try:
        values = json.load(f)
      except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON: {e}") from e
    return cls.from_dict(values, source=path)

  @classmethod
  def from_yaml(cls, path: str) -> "AlbertConfig":
    """Reads a YAML file holding the fields (optionally under `model:`)."""
    with open(path, encoding="utf-8") as f:
      values = yaml.safe_load(f) or {}
    if "model" in values and isinstance(values["model"], dict):
      values = values["model"]
    return cls.from_dict(values, source=path)

  @classmethod
  def from_preset(cls, name: str) -> "AlbertConfig":
    """Loads `albert_tf/configs/models/<name>.yaml`, e.g. "albert_base_v2"."""
    path = os.path.join(PRESET_DIR, f"{name}.yaml")
    if not os.path.exists(path):
      raise ValueError(f"unknown preset {name!r}; available: {list_presets()}")
    return cls.from_yaml(path)

  def to_json_dict(self) -> Dict[str, Any]:
    """The fields as plain JSON types, in the original's key names."""
    return {k: v for k, v in self.as_dict().items()}

  def to_json_file(self, path: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
      json.dump(self.to_json_dict(), f, indent=2, sort_keys=True)


def list_presets():
  return sorted(name[:-5] for name in os.listdir(PRESET_DIR)
                if name.endswith(".yaml"))


def as_albert_config(config: Optional[Any]) -> AlbertConfig:
  """Accepts an AlbertConfig, a dict of its fields, or a preset name."""
  if isinstance(config, AlbertConfig):
    return config.validate()
  if isinstance(config, str):
    return AlbertConfig.from_preset(config)
  if isinstance(config, Mapping):
    return AlbertConfig.from_dict(dict(config))
  raise TypeError(f"expected an AlbertConfig, dict or preset name, got "
                  f"{type(config).__name__}")
