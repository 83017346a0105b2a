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
import math
import os
import typing
from typing import Any, Dict, Mapping, Optional, Sequence, Union

import yaml
from official.modeling.hyperparams import base_config

from albert_tf.modeling import activations
from albert_tf.modeling import config_overrides

# Ablation of the paper's Table 4: which sublayers are shared across layers.
SHARING_MODES = ("all", "attention", "ffn", "none")

# Package data: albert_tf/configs/models/*.yaml (the repo's top-level
# official_configs/ is a link to albert_tf/configs/).
CONFIG_DIR = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")
PRESET_DIR = os.path.join(CONFIG_DIR, "models")
# The model config beside a released or converted checkpoint.
CONFIG_JSON_NAME = "albert_config.json"
# The resolved experiment config of a run directory (core/run_record.py).
RUN_CONFIG_NAME = "experiment_config.yaml"

# Keys of released `albert_config.json` files that do not change the model we
# build (they configure variants the release never used).
RELEASE_ONLY_KEYS = ("net_structure_type", "gap_size", "num_memory_blocks",
                      "layers_to_keep", "down_scale_factor")


@dataclasses.dataclass
class AlbertConfig(base_config.Config):
  """Hyperparameters of an ALBERT encoder.

  Field names and meanings are the original `albert_config.json`'s;
  `sharing` and `gradient_checkpointing` are ours. Build one with
  `from_preset`, `from_json_file`, `from_yaml` or `from_dict` (validated),
  or with keyword arguments and then `validate()`.

  Args:
    vocab_size: rows of the word-embedding table (SentencePiece pieces).
    embedding_size: E, the width of the embeddings (factorized: E < H).
    hidden_size: H, the width of the Transformer layers.
    num_hidden_layers: L, the number of layers applied.
    num_hidden_groups: G, groups of distinct weights; layer l uses group
      `l * G // L` (1 in every release: all layers share one group).
    inner_group_num: blocks (attention + FFN) in a group, run in sequence.
    num_attention_heads: heads per attention layer (divides H).
    intermediate_size: the FFN's inner width.
    hidden_act: the FFN's activation, a name of `activations.ACTIVATIONS`
      (`gelu` is the tanh approximation, as the original).
    hidden_dropout_prob: dropout on embeddings and sublayer outputs.
    attention_probs_dropout_prob: dropout on the attention probabilities.
    max_position_embeddings: rows of the position table (longest sequence).
    type_vocab_size: rows of the segment (token type) table.
    initializer_range: stddev of the truncated-normal initializer.
    sharing: which sublayers layers share: "all" (ALBERT), "attention",
      "ffn" or "none" (BERT-style), the paper's Table 4.
    gradient_checkpointing: recompute each layer in the backward pass
      (less activation memory, same gradients).

  Example:

  >>> config = AlbertConfig(hidden_size=64, num_attention_heads=4,
  ...                       intermediate_size=128).validate()
  >>> config.num_hidden_layers
  12
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
  sharing: str = "all"
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
    if self.hidden_act not in activations.ACTIVATIONS:
      raise ValueError(
          f"AlbertConfig.hidden_act: unknown activation {self.hidden_act!r}; "
          f"expected one of {tuple(activations.ACTIVATIONS)}")
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
    """Builds a validated config from a dict of fields (release-only keys
    dropped); unknown keys and wrong types are errors naming `source`."""
    return apply_values(cls(), model_fields(values, source), source).validate()

  @classmethod
  def from_json_file(cls, path: str) -> "AlbertConfig":
    """Reads an original `albert_config.json` (extra release keys allowed),
    or a YAML file holding the fields (or an experiment config: its `model:`
    section), with the one reader, `load_model_config`."""
    return load_model_config([path])

  from_yaml = from_json_file

  @classmethod
  def from_preset(cls, name: str) -> "AlbertConfig":
    """Loads `albert_tf/configs/models/<name>.yaml`, e.g. "albert_base_v2"."""
    return cls.from_yaml(_preset_path(name))

  def to_json_dict(self) -> Dict[str, Any]:
    """The fields as plain JSON types, in the original's key names."""
    return self.as_dict()

  def to_json_file(self, path: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
      json.dump(self.to_json_dict(), f, indent=2, sort_keys=True)


def list_presets():
  return sorted(name[:-5] for name in os.listdir(PRESET_DIR)
                if name.endswith(".yaml"))


def _preset_path(name: str) -> str:
  """albert_tf/configs/models/<name>.yaml; ValueError for an unknown name."""
  path = os.path.join(PRESET_DIR, f"{name}.yaml")
  if not os.path.isfile(path):
    raise ValueError(f"unknown model preset {name!r}; available: "
                     f"{list_presets()}")
  return path


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


# --- Loading configs: files, overrides, typed values --------------------------
# The one reader of config files and `a.b=c` overrides (experiment configs in
# core/experiment_config.py build on it) and the one model config loader of
# export and convert (`load_model_config`).

_MODEL_FIELDS = {f.name for f in dataclasses.fields(AlbertConfig)} - {
    "default_params", "restrictions"}


def resolve_config_path(path: str) -> str:
  """`path` itself, else a packaged config (albert_tf/configs/<path>).

  So `pretraining/albert_tiny_cpu.yaml` or `models/albert_base_v2.yaml` work
  for installed users without a checkout of the repository.
  """
  if os.path.exists(path):
    return path
  relative = path.split("official_configs/", 1)[-1]
  packaged = os.path.join(CONFIG_DIR, relative)
  if not os.path.isabs(path) and os.path.isfile(packaged):
    return packaged
  raise FileNotFoundError(f"config file {path} does not exist (nor as a "
                          f"packaged config under {CONFIG_DIR})")


def read_config_file(path: str) -> Dict[str, Any]:
  """A YAML/JSON file as a dict of sections; a flat model file -> `model`."""
  path = resolve_config_path(path)
  try:
    # Bytes: YAML decodes them (UTF-8, a byte-order mark, UTF-16) and a
    # byte that is not UTF-8 is a YAMLError here, not a codec error that
    # names no file.
    with open(path, "rb") as f:
      # Model Garden's loader: reads `1e-6` as a float (YAML 1.1 does not).
      values = yaml.load(f, Loader=config_overrides.YAML_LOADER)
  except yaml.reader.ReaderError as e:  # bytes that are not UTF-8
    raise ValueError(f"{path}: not UTF-8 (byte 0x{e.character:02x} at "
                     f"offset {e.position}); save it as UTF-8") from None
  except yaml.YAMLError as e:
    mark = getattr(e, "problem_mark", None)
    where = f"{path}:{mark.line + 1}" if mark else path
    problem = getattr(e, "problem", None) or str(e).splitlines()[0]
    if isinstance(e, config_overrides.DuplicateKeyError):
      raise ValueError(f"{where}: {problem}") from None
    what = "not valid JSON" if path.endswith(".json") else "YAML syntax error"
    raise ValueError(f"{where}: {what}: {problem}") from None
  # Model Garden's reader fails on a list with a 38-line AttributeError.
  if values is not None and not isinstance(values, dict):
    raise ValueError(f"{path}: expected a mapping of sections or fields "
                     f"(name: value) at the top level, got a "
                     f"{type(values).__name__}")
  values = values or {}
  # A flat model file (configs/models/*.yaml, or a released albert_config.json
  # with its extra keys) configures `model`: a file without a `model` section
  # naming any model field is one, and its other keys are errors (not
  # experiment sections that would leave the model at its defaults).
  if "model" not in values and set(values) & _MODEL_FIELDS:
    values = {"model": model_fields(values, path)}
  return values


def model_fields(values: Mapping[str, Any], source: str) -> Dict[str, Any]:
  """A flat dict of AlbertConfig fields without the release-only keys;
  ValueError naming `source` and the keys that are neither."""
  unknown = sorted(set(values) - _MODEL_FIELDS - set(RELEASE_ONLY_KEYS))
  if unknown:
    raise ValueError(f"{source}: unknown AlbertConfig field(s) {unknown}")
  return {k: v for k, v in values.items() if k not in RELEASE_ONLY_KEYS}


def _check_value(value, annotation, name, source):
  """`value` converted to `annotation` or ValueError naming field + source."""
  def bad(what):
    return ValueError(f"{source}: {name} must be {what}, got {value!r}")
  if typing.get_origin(annotation) is Union:  # Optional[X]
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if value is None:
      return None
    annotation = args[0]
  if annotation is bool:
    if not isinstance(value, bool):
      raise bad("true or false")
    return value
  if annotation is int:
    if isinstance(value, float) and value.is_integer():
      return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
      raise bad("an integer")
    return value
  if annotation is float:
    return _finite_float(value, bad)
  if annotation is str:
    if value is None:  # `a.b=` in an override
      return ""
    if not isinstance(value, str):
      raise bad("a string")
    return value
  return value


def _finite_float(value, bad):
  """A float field's value; NaN and infinities (`nan`, `.inf`, `1e400`) are
  refused: they pass every range check (`nan <= 0` is false)."""
  if isinstance(value, str):
    try:
      value = float(value)  # `1e-6` in an override string
    except ValueError:
      raise bad("a number") from None
  if isinstance(value, bool) or not isinstance(value, (int, float)):
    raise bad("a number")
  if not math.isfinite(value):
    raise bad("a finite number")
  return float(value)


def check_types(config_cls, values: Mapping[str, Any], source: str,
                prefix: str = "") -> Dict[str, Any]:
  """`values` checked (and converted) against `config_cls`'s annotations.

  Unknown keys, wrong types (an int field given 20.7 or "abc", a bool field
  given "no") raise one-line ValueErrors naming the field and `source`.
  """
  hints = typing.get_type_hints(config_cls)
  known = {f.name for f in dataclasses.fields(config_cls)} - {
      "default_params", "restrictions"}
  out = {}
  for key, value in values.items():
    name = prefix + key
    if key not in known:
      raise ValueError(f"{source}: unknown field {name} (expected one of "
                       f"{sorted(known)})")
    annotation = hints[key]
    if dataclasses.is_dataclass(annotation):
      if not isinstance(value, Mapping):
        raise ValueError(f"{source}: {name} must be a mapping of fields, got "
                         f"{value!r}")
      out[key] = check_types(annotation, value, source, name + ".")
    else:
      out[key] = _check_value(value, annotation, name, source)
  return out


def apply_values(config, values: Mapping[str, Any], source: str):
  """Type-checks `values` and overrides `config` with them (strict)."""
  checked = check_types(type(config), values, source)
  try:
    config.override(checked, is_strict=True)
  except (KeyError, ValueError, TypeError) as e:
    raise ValueError(f"{source}: {e}") from None
  return config


@dataclasses.dataclass
class _ModelOnly(base_config.Config):
  model: AlbertConfig = dataclasses.field(
      default_factory=AlbertConfig)


def _model_source_values(source: str) -> Dict[str, Any]:
  """{"model": {...}} of one model source (see `load_model_config`)."""
  if os.path.isdir(source):
    for name in (RUN_CONFIG_NAME, CONFIG_JSON_NAME):
      if os.path.isfile(os.path.join(source, name)):
        source = os.path.join(source, name)
        break
    else:
      raise FileNotFoundError(f"{source}: holds neither {RUN_CONFIG_NAME}"
                              f" nor {CONFIG_JSON_NAME}")
  elif not os.path.isfile(source) and not source.endswith(
      (".json", ".yaml", ".yml")):
    source = _preset_path(source)
  values = read_config_file(source)
  return {"model": values.get("model", {})}


def load_model_config(sources: Sequence[str] = (),
                      params_override: str = "",
                      base: Optional[Mapping[str, Any]] = None
                      ) -> AlbertConfig:
  """The model config of export and convert, from sources applied in order.

  A source is an albert_config.json, a YAML file (flat model file or an
  experiment config: its `model` section), a preset name
  (`albert_base_v2`) or a run directory (its experiment_config.yaml).
  `params_override` sets `model.*` fields. `base`: a model config dict
  applied first.
  """
  holder = _ModelOnly()
  if base:  # a model config dict (e.g. a checkpoint's identity)
    apply_values(holder, {"model": dict(base)}, "the checkpoint's identity")
  for source in sources:
    apply_values(holder, _model_source_values(source), source)
  apply_values(holder, config_overrides.parse_override(params_override),
               config_overrides.describe(params_override))
  try:
    return holder.model.validate()
  except ValueError as e:
    raise ValueError(f"{', '.join(sources) or 'defaults'}: {e}") from None
