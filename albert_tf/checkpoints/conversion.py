r"""Converts ALBERT checkpoints between the original TF1 layout, ours and Model
Garden's, and loads any of them into our models.

Layouts:
  tf1           the original google-research/albert names (`bert/...`,
                `cls/...`, optional TF-Hub `module/` prefix); released
                `model.ckpt-best` files and TF1 pretraining/fine-tuning runs.
  albert_tf     our object-based checkpoint (`object_layout.checkpoint_for`).
  model_garden  `official.nlp.modeling` AlbertEncoder / BertPretrainerV2.

Usage:

  python -m albert_tf.convert_checkpoint --from=tf1 --to=albert_tf \
      --input_checkpoint=albert_base/model.ckpt-best --output_dir=albert_base_tf2
  python -m albert_tf.convert_checkpoint --from=albert_tf --to=tf1 \
      --input_checkpoint=albert_base_tf2 --output_dir=albert_base_tf1

Without --config_file the config is `albert_config.json` next to the
checkpoint; the SentencePiece model (`*.model`, `*.vocab`) next to it is copied
to the output directory with the config.

From Python, training and fine-tuning scripts call
`load_any_checkpoint(model, path)`, which detects the layout.
"""

import glob
import json
import os
import shutil
from typing import Dict, Optional, Tuple

from absl import logging
import numpy as np
import tensorflow as tf

from albert_tf.checkpoints import canonical_weights as cw
from albert_tf.checkpoints import object_layout
from albert_tf.modeling import albert_config
from albert_tf.checkpoints import model_garden_checkpoint as mg
from albert_tf.checkpoints import tf1_checkpoint
from albert_tf.checkpoints.canonical_weights import CheckpointConversionError
from albert_tf.modeling.networks.albert_encoder import AlbertEncoder
from albert_tf.modeling.models.albert_pretrainer import AlbertPretrainer

LAYOUTS = ("tf1", "albert_tf", "model_garden")
CONFIG_FILE_NAME = "albert_config.json"
DEFAULT_OUTPUT_NAMES = {"tf1": "model.ckpt", "albert_tf": "ckpt",
                        "model_garden": "ckpt"}
# Fields of the original's albert_config.json (what we write for --to=tf1).
ORIGINAL_CONFIG_FIELDS = (
    "vocab_size", "embedding_size", "hidden_size", "num_hidden_layers",
    "num_hidden_groups", "inner_group_num", "num_attention_heads",
    "intermediate_size", "hidden_act", "hidden_dropout_prob",
    "attention_probs_dropout_prob", "max_position_embeddings",
    "type_vocab_size", "initializer_range")

__all__ = ["CheckpointConversionError", "convert", "detect_layout",
           "find_config_file", "load_any_checkpoint", "resolve_config",
           "read_weights", "resolve_source_path", "write_weights"]


# --- Paths and config --------------------------------------------------------


def resolve_source_path(path: str) -> str:
  """A checkpoint prefix from a prefix, a directory or a TF-Hub module dir.

  A directory resolves to its `checkpoint` state file's latest checkpoint, a
  TF-Hub module's `variables/variables`, its only `*.index` prefix, or
  `model.ckpt-best` (the released tarballs have no state file).
  """
  if tf.io.gfile.isdir(path):
    hub = os.path.join(path, "variables", "variables")
    if tf.io.gfile.exists(hub + ".index"):
      return hub
    latest = tf.train.latest_checkpoint(path)
    if latest:
      return latest
    prefixes = sorted(p[:-len(".index")]
                      for p in glob.glob(os.path.join(path, "*.index")))
    if len(prefixes) == 1:
      return prefixes[0]
    best = os.path.join(path, "model.ckpt-best")
    if best in prefixes:
      return best
    if not prefixes:
      raise CheckpointConversionError(f"{path}: directory holds no checkpoint "
                                      "(no *.index file)")
    raise CheckpointConversionError(
        f"{path}: directory holds several checkpoints {prefixes}; pass one "
        "prefix")
  if tf.io.gfile.exists(path + ".index"):
    return path
  if path.endswith(".index") and tf.io.gfile.exists(path):
    return path[:-len(".index")]
  raise CheckpointConversionError(f"{path}: no such checkpoint (missing "
                                  f"{path}.index)")


def _source_dirs(prefix: str):
  directory = os.path.dirname(os.path.abspath(prefix))
  dirs = [directory]
  if os.path.basename(directory) == "variables":  # TF-Hub module.
    module = os.path.dirname(directory)
    dirs += [module, os.path.join(module, "assets")]
  return dirs


def find_config_file(prefix: str) -> Optional[str]:
  """`albert_config.json` next to the checkpoint (or its TF-Hub module)."""
  for directory in _source_dirs(prefix):
    candidate = os.path.join(directory, CONFIG_FILE_NAME)
    if tf.io.gfile.exists(candidate):
      return candidate
  return None


def resolve_config(config, prefix: str) -> albert_config.AlbertConfig:
  """`config`: an AlbertConfig, a dict, a source of
  `albert_config.load_model_config` (.json/.yaml path, preset name, run dir)
  or None (then `albert_config.json` next to the checkpoint)."""
  if config is None:
    path = find_config_file(prefix)
    if path is None:
      raise CheckpointConversionError(
          f"no config given and no {CONFIG_FILE_NAME} next to {prefix}; pass "
          "--config_file")
    return albert_config.load_model_config([path])
  if isinstance(config, str):
    return albert_config.load_model_config([config])
  return albert_config.as_albert_config(config)


def find_vocab_files(prefix: str):
  """SentencePiece model/vocab files next to the checkpoint."""
  for directory in _source_dirs(prefix):
    found = sorted(glob.glob(os.path.join(directory, "*.model")))
    if found:
      vocab = [p[:-len(".model")] + ".vocab" for p in found]
      return found + [v for v in vocab if os.path.exists(v)]
  return []


# --- Layout detection and reading --------------------------------------------


def detect_layout(prefix: str) -> str:
  """'tf1', 'albert_tf' or 'model_garden' from the variable names."""
  names = list(cw.open_reader(prefix).get_variable_to_shape_map())
  if tf1_checkpoint.looks_like_tf1_albert(names):
    return "tf1"
  if any("/attention_layers/" in n for n in names):
    return "albert_tf"
  if mg.has_model_garden_keys(names):
    return "model_garden"
  if tf1_checkpoint.looks_like_tf1_bert(names):
    raise CheckpointConversionError(
        f"{prefix}: a BERT checkpoint (bert/encoder/layer_N), not ALBERT "
        "(bert/encoder/transformer/group_N)")
  sample = cw.summarize_names(sorted(names), limit=6)
  raise CheckpointConversionError(
      f"{prefix}: unknown checkpoint layout; expected the original TF1 "
      "ALBERT names (bert/embeddings/..., bert/encoder/transformer/group_0/"
      "...), albert_tf's or Model Garden's object-based layout. Variables: "
      f"{sample}")


def _read_albert_tf(prefix, config, with_heads, model=None):
  """Reads our layout; `model` (built from `config` when None) gives the
  object-graph keys."""
  if model is None:
    model = AlbertPretrainer(config) if with_heads else AlbertEncoder(config)
  variables = cw.model_variables(model, with_heads=with_heads)
  names_by_id = {id(v): n for n, v in variables.items()}
  keys = cw.object_checkpoint_keys(object_layout.model_parts(model))
  key_to_name = {k: names_by_id[id(v)] for k, v in keys.items()
                 if id(v) in names_by_id}
  return cw.read_object_checkpoint(prefix, key_to_name, "albert_tf")


def read_weights(prefix: str, config, layout: Optional[str] = None,
                 with_heads: bool = True, init_from_group0: bool = False,
                 model=None
                 ) -> Tuple[Dict[str, np.ndarray], cw.ConversionReport]:
  """Reads any supported checkpoint into canonical arrays (our names/shapes).

  Does not check completeness; `check_and_assign` does that against a model.
  `model`: optional albert_tf model of `config` (saves building one when
  reading our own layout).
  """
  layout = layout or detect_layout(prefix)
  if layout == "tf1":
    values, report = tf1_checkpoint.read_tf1_checkpoint(prefix, config,
                                                        with_heads)
  elif layout == "albert_tf":
    values, report = _read_albert_tf(prefix, config, with_heads, model)
  elif layout == "model_garden":
    values, report = mg.read_model_garden_checkpoint(prefix, config,
                                                     with_heads)
  else:
    raise CheckpointConversionError(f"unknown layout {layout!r}; expected one "
                                    f"of {LAYOUTS}")
  if init_from_group0:
    cw.fill_from_group0(values, report.mapped, config)
  return values, report


def load_any_checkpoint(model, path: str, init_from_group0: bool = False,
                        allow_missing_heads: bool = False
                        ) -> cw.ConversionReport:
  """Loads a checkpoint of any supported layout into `model` in memory.

  `model`: an AlbertPretrainer (encoder + heads are loaded), an AlbertEncoder
  or any model whose `encoder` is one (only the encoder is loaded).
  `path`: prefix or directory of a TF1 original, albert_tf or Model Garden
  checkpoint; the layout is detected from the variable names.
  `init_from_group0`: every group starts from group_0's weights (the
  original's option for growing the number of groups).
  `allow_missing_heads`: pretraining-head variables the checkpoint lacks
  keep their initial values instead of failing (e.g. Model Garden
  checkpoints without the SOP head).

  Raises CheckpointConversionError listing missing or mis-shaped variables,
  or naming the unknown layout. Returns the ConversionReport.
  """
  prefix = resolve_source_path(path)
  config = cw.model_config(model)
  variables = cw.model_variables(model)
  with_heads = any(cw.is_head(n) for n in variables)
  values, report = read_weights(prefix, config, with_heads=with_heads,
                                init_from_group0=init_from_group0,
                                model=model)
  if allow_missing_heads:
    fresh = [n for n in variables if cw.is_head(n) and n not in values]
    if fresh:
      logging.warning("%s has no %s; keeping their initial values", prefix,
                      cw.summarize_names(fresh))
    variables = {n: v for n, v in variables.items() if n not in fresh}
  cw.check_and_assign(variables, values, report.mapped, prefix)
  logging.info("%s", report.summary())
  return report


# --- Writing ------------------------------------------------------------------


def write_weights(model, output_prefix: str, layout: str,
                  global_step: Optional[int] = None) -> str:
  """Writes `model`'s weights (an AlbertEncoder or AlbertPretrainer) in
  `layout`; returns the checkpoint path."""
  config = cw.model_config(model)
  variables = cw.model_variables(model)
  with_heads = any(cw.is_head(n) for n in variables)
  directory = os.path.dirname(os.path.abspath(output_prefix))
  tf.io.gfile.makedirs(directory)
  if layout == "albert_tf":
    path = object_layout.checkpoint_for(model).write(output_prefix)
    cw.write_checkpoint_state(directory, os.path.basename(path))
    return path
  values = {n: v.numpy() for n, v in variables.items()}
  if layout == "tf1":
    return tf1_checkpoint.write_tf1_checkpoint(values, output_prefix, config,
                                               global_step=global_step)
  if layout == "model_garden":
    return mg.write_model_garden_checkpoint(values, output_prefix, config,
                                            with_heads=with_heads)
  raise CheckpointConversionError(f"unknown layout {layout!r}; expected one "
                                  f"of {LAYOUTS}")


def _write_config(config, directory, layout):
  values = config.to_json_dict()
  if layout == "tf1":  # Only the original's fields.
    values = {k: values[k] for k in ORIGINAL_CONFIG_FIELDS}
  path = os.path.join(directory, CONFIG_FILE_NAME)
  with open(path, "w", encoding="utf-8") as f:
    json.dump(values, f, indent=2, sort_keys=True)
  return path


def convert(input_checkpoint: str, output_dir: str, from_layout: str,
            to_layout: str, config=None, model: str = "auto",
            init_from_group0: bool = False,
            spm_model_file: Optional[str] = None,
            output_name: Optional[str] = None,
            global_step: Optional[int] = None
            ) -> Tuple[str, cw.ConversionReport]:
  """Converts one checkpoint; returns (output checkpoint path, report).

  `model`: "pretrainer" (encoder + MLM/SOP heads; fails when the source has
  no heads), "encoder", or "auto" (pretrainer when the source has the heads).
  Writes `albert_config.json` and copies the SentencePiece model into
  `output_dir`.
  """
  for name, value in (("from", from_layout), ("to", to_layout)):
    if value not in LAYOUTS:
      raise CheckpointConversionError(f"--{name}={value!r}: expected one of "
                                      f"{LAYOUTS}")
  if model not in ("auto", "pretrainer", "encoder"):
    raise CheckpointConversionError(f"model={model!r}: expected auto, "
                                    "pretrainer or encoder")
  prefix = resolve_source_path(input_checkpoint)
  detected = detect_layout(prefix)
  if detected != from_layout:
    raise CheckpointConversionError(
        f"{prefix}: --from={from_layout} but the variable names are of the "
        f"{detected} layout")
  config = resolve_config(config, prefix)
  def build_target():
    return (AlbertEncoder(config) if model == "encoder" else
            AlbertPretrainer(config))
  # Reading our layout needs the model for its keys; otherwise build it only
  # after reading, so that a bad checkpoint fails before a large model is built.
  target = build_target() if from_layout == "albert_tf" else None
  values, report = read_weights(prefix, config, from_layout,
                                with_heads=model != "encoder",
                                init_from_group0=init_from_group0,
                                model=target)
  target = target or build_target()
  with_heads = model == "pretrainer" or (
      model == "auto" and any(cw.is_head(n) for n in values))
  if not with_heads:
    for name in [n for n in values if cw.is_head(n)]:
      report.skipped[report.mapped.pop(name)] = (
          "pretraining head (target is the encoder only)")
      del values[name]
    target = getattr(target, "encoder", target)
  # Checks every target variable is filled with the right shape.
  cw.check_and_assign(cw.model_variables(target), values, report.mapped,
                      prefix)
  output_prefix = os.path.join(
      output_dir, output_name or DEFAULT_OUTPUT_NAMES[to_layout])
  path = write_weights(target, output_prefix, to_layout,
                       global_step=global_step)
  _write_config(config, output_dir, to_layout)
  vocab = ([spm_model_file] if spm_model_file else find_vocab_files(prefix))
  for source in vocab:
    if os.path.abspath(os.path.dirname(source)) != os.path.abspath(output_dir):
      shutil.copy(source, output_dir)
  return path, report
