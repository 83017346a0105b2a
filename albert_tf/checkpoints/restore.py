"""`restore()`: the one way to load weights into an albert_tf model.

Every caller (pretraining and fine-tuning warm start, evaluation, export,
conversion) goes through it. Given a model (AlbertEncoder, AlbertPretrainer
or a downstream model with `.encoder` and heads) and a path, it detects the
source and loads what was asked:

  albert_tf     our object checkpoint (named parts, `object_layout`);
  tf1           the original google-research names (`bert/...`, `cls/...`,
                optional TF-Hub `module/` prefix), including the fine-tuned
                heads of run_classifier / run_squad / run_race
                (`output_weights`, `cls/squad/output_*`);
  model_garden  official.nlp.modeling AlbertEncoder / BertPretrainerV2;
  saved_model   an encoder export of `export_savedmodel` (its `.variables`).

`path` may be a checkpoint prefix, a directory (its latest checkpoint), a run
directory (`<model_dir>/checkpoints/`), a TF-Hub module or a SavedModel base
or version directory. Failures are CheckpointConversionError (a ValueError)
naming the path and what is missing, mis-shaped or has no place in the
model (more blocks than the config builds, an export of another config, a
Model Garden SOP head with an inner dense layer of its own).
"""

import dataclasses
from typing import Dict, List, Optional, Tuple

from absl import logging
import numpy as np
import tensorflow as tf

from albert_tf.checkpoints import canonical_weights as cw
from albert_tf.checkpoints import identity
from albert_tf.checkpoints import model_garden_checkpoint as mg
from albert_tf.checkpoints import object_layout
from albert_tf.checkpoints import paths
from albert_tf.checkpoints import tf1_checkpoint
from albert_tf.checkpoints.canonical_weights import CheckpointConversionError
from albert_tf.modeling import albert_config
from albert_tf.modeling.models.albert_pretrainer import AlbertPretrainer
from albert_tf.modeling.networks.albert_encoder import AlbertEncoder

LAYOUTS = ("tf1", "albert_tf", "model_garden")
HUB_PREFIX = "module/"
PARTS = ("all", "encoder")


@dataclasses.dataclass
class RestoreReport:
  """What `restore()` loaded.

  path: the resolved checkpoint prefix or SavedModel directory.
  layout: "albert_tf", "tf1", "model_garden" or "saved_model".
  restored: model parts loaded ("encoder", "mlm_head", "head", ...).
  fresh: model parts left at their initial values (allow_missing_heads or
    parts="encoder").
  conversion: the per-variable ConversionReport (tf1 / model_garden /
    init_from_group0), else None.
  """
  path: str
  layout: str
  restored: List[str]
  fresh: List[str] = dataclasses.field(default_factory=list)
  conversion: Optional[cw.ConversionReport] = None

  @property
  def mapped(self) -> Dict[str, str]:
    return self.conversion.mapped if self.conversion else {}

  @property
  def skipped(self) -> Dict[str, str]:
    return self.conversion.skipped if self.conversion else {}

  def summary(self) -> str:
    text = f"{', '.join(self.restored)} from {self.path} ({self.layout} layout)"
    if self.fresh:
      text += f"; head random: {', '.join(self.fresh)}"
    return text


# --- Layouts -----------------------------------------------------------------


def open_reader(path: str):
  """tf.train.load_checkpoint; a missing or damaged index is one line."""
  try:
    return tf.train.load_checkpoint(path)
  except (tf.errors.OpError, ValueError) as e:
    raise CheckpointConversionError(
        f"{path}: cannot open checkpoint (missing or damaged .index file?): "
        f"{cw.error_line(e)}") from e


def strip_hub_prefix(names) -> Tuple[str, List[str]]:
  """('module/' or '', the names inside it without it): a TF1 TF-Hub
  module holds the original names under `module/`."""
  names = list(names)
  if any(n.startswith(HUB_PREFIX + "bert/") for n in names):
    return HUB_PREFIX, [n[len(HUB_PREFIX):] for n in names
                        if n.startswith(HUB_PREFIX)]
  return "", names


def detect_layout(prefix: str, names=None) -> str:
  """'tf1', 'albert_tf' or 'model_garden' from the variable names (read from
  `prefix` unless given)."""
  if names is None:
    names = open_reader(prefix).get_variable_to_shape_map()
  names = list(names)
  _, tf1_names = strip_hub_prefix(names)
  if "bert/embeddings/word_embeddings" in tf1_names and any(
      n.startswith("bert/encoder/transformer/group_") for n in tf1_names):
    return "tf1"
  if any("/attention_layers/" in n for n in names):
    return "albert_tf"
  if any("/_attention_layer/" in n for n in names):
    return "model_garden"
  if any(n.startswith("bert/encoder/layer_") for n in tf1_names):
    raise CheckpointConversionError(
        f"{prefix}: a BERT checkpoint (bert/encoder/layer_N), not ALBERT "
        "(bert/encoder/transformer/group_N)")
  sample = cw.summarize_names(sorted(names), limit=6)
  raise CheckpointConversionError(
      f"{prefix}: unknown checkpoint layout; expected the original TF1 "
      "ALBERT names (bert/embeddings/..., bert/encoder/transformer/group_0/"
      "...), albert_tf's or Model Garden's object-based layout. Variables: "
      f"{sample}")


def _map_names(reader, prefix, layout, config, with_heads, model=None,
               heads=None):
  """The layout's names of the checkpoint mapped to canonical names, in one
  call (nothing read): (ConversionReport, transforms to our shapes, the
  fine-tuned TF1 head variables of `heads`). `model`: an albert_tf model of
  `config`, for our layout's object-graph keys (else one is built)."""
  stored = reader.get_variable_to_shape_map()
  if layout == "tf1":
    hub_prefix, _ = strip_hub_prefix(stored)
    report, found = tf1_checkpoint.map_tf1_names(prefix, stored, hub_prefix,
                                                 config, with_heads, heads)
    return report, None, found
  if layout == "model_garden":
    report, transforms = mg.map_model_garden_keys(prefix, stored, config,
                                                  with_heads)
    return report, transforms, None
  if layout != "albert_tf":
    raise CheckpointConversionError(f"unknown layout {layout!r}; expected one "
                                    f"of {LAYOUTS}")
  if model is None:
    model = AlbertPretrainer(config) if with_heads else AlbertEncoder(config)
  names_by_id = {id(v): n for n, v in
                 cw.model_variables(model, with_heads=with_heads).items()}
  parts = cw.model_parts(model)
  keys = object_layout.object_checkpoint_keys(parts)
  # The encoder (and pretraining heads) read here: all of them or nothing.
  object_layout.check_all_used(prefix, stored, keys,
                               set(parts) if with_heads else {"encoder"})
  return cw.ConversionReport("albert_tf", prefix, mapped={
      names_by_id[id(v)]: k for k, v in sorted(keys.items())
      if id(v) in names_by_id and k in stored}), None, None


def read_weights(prefix: str, config, layout: Optional[str] = None,
                 with_heads: bool = True, init_from_group0: bool = False,
                 model=None
                 ) -> Tuple[Dict[str, np.ndarray], cw.ConversionReport]:
  """Reads any supported checkpoint into canonical arrays (our names/shapes).

  Does not check completeness; `check_and_assign` does that against a model.
  `model`: optional albert_tf model of `config` (saves building one when
  reading our own layout).
  """
  reader = open_reader(prefix)
  layout = layout or detect_layout(prefix, reader.get_variable_to_shape_map())
  report, transforms, _ = _map_names(reader, prefix, layout, config,
                                     with_heads, model)
  values = cw.read_mapped(reader, report, transforms)
  for part, why in report.lost.items():  # a head asked for, not representable
    raise CheckpointConversionError(
        f"{prefix}: cannot read its {part}: {why}; take the encoder alone "
        "(convert_checkpoint --model=encoder)")
  if init_from_group0:
    cw.fill_from_group0(values, report.mapped, config)
  return values, report


# --- Sources -----------------------------------------------------------------


def _check_exported_config(loaded, directory, config):
  """Refuses an export whose config asset (`albert_config_file`) builds
  another model than `config`: its variables would be copied by position
  into a model that computes something else (same shapes, e.g. another
  hidden_act or number of layers). An export without one is not checked."""
  asset = getattr(loaded, identity.CONFIG_ASSET, None)
  if asset is None:
    return
  path = asset.asset_path.numpy().decode("utf-8")
  exported = albert_config.load_model_config([path]).as_dict()
  for field, saved, given in identity.model_differences(exported,
                                                        config.as_dict()):
    raise CheckpointConversionError(
        f"{directory}: model.{field} is {saved!r} in the export ({path}) "
        f"but {given!r} in the model; not an encoder export of this config")


def _restore_saved_model(model, directory: str, want_heads: bool,
                         allow_missing_heads: bool) -> RestoreReport:
  """Copies an encoder export's `.variables` (the encoder's, in order)."""
  # An encoder export holds no head.
  all_parts, fresh = cw.check_heads(model, directory, want_heads, (),
                                    allow_missing_heads)
  loaded = tf.saved_model.load(directory)
  _check_exported_config(loaded, directory, all_parts["encoder"].config)
  source = list(getattr(loaded, "variables", None) or [])
  target = list(all_parts["encoder"].variables)
  if len(source) != len(target):
    raise CheckpointConversionError(
        f"{directory}: SavedModel has {len(source)} encoder variables, the "
        f"model has {len(target)}; not an encoder export of this config")
  for s, t in zip(source, target):
    if tuple(s.shape) != tuple(t.shape):
      raise CheckpointConversionError(
          f"{directory}: variable {s.name} has shape {s.shape.as_list()}, "
          f"the model's {t.name} has {t.shape.as_list()} (wrong config?)")
  for s, t in zip(source, target):
    t.assign(s)
  return RestoreReport(directory, "saved_model", ["encoder"], fresh)


def _restore_converted(model, prefix, reader, layout, want_heads,
                       allow_missing_heads, init_from_group0, step):
  """tf1 / model_garden / group-0 init: the names mapped in one call, then
  read, checked and assigned in one."""
  stored = reader.get_variable_to_shape_map()
  is_pretrainer = isinstance(model, AlbertPretrainer)
  with_heads = is_pretrainer and want_heads
  # The fine-tuning scripts' heads, by their original names.
  heads = (getattr(model, "checkpoint_items", {}) if layout == "tf1" and
           want_heads and not is_pretrainer else None)
  report, transforms, found = _map_names(
      reader, prefix, layout, getattr(model, "encoder", model).config,
      with_heads, model, heads)
  # Our layout (only reached with init_from_group0) reads its heads below.
  held = (object_layout.held_parts(stored) if layout == "albert_tf" and
          not is_pretrainer else None)
  all_parts, fresh = cw.load(model, reader, report, with_heads, want_heads,
                             allow_missing_heads, init_from_group0,
                             transforms, found, held)
  restored = [p for p in all_parts if p not in fresh]
  if layout == "albert_tf" and len(restored) > 1:
    object_layout.read_parts({h: all_parts[h] for h in restored[1:]},
                             prefix, stored)
  if step is not None and layout == "tf1" and "global_step" in stored:
    step.assign(int(reader.get_tensor("global_step")))
    restored.append("step")
  return RestoreReport(prefix, report.layout, restored, fresh, report)


def restore(model, path: str, parts: str = "all",
            allow_missing_heads: bool = False, init_from_group0: bool = False,
            step: Optional[tf.Variable] = None) -> RestoreReport:
  """Loads `path` into `model` in memory; returns a RestoreReport.

  parts: "all" (the encoder and every head of `model`) or "encoder" (warm
    start of a new task: heads keep their initial values).
  allow_missing_heads: heads the source lacks keep their initial values
    instead of failing (e.g. Model Garden checkpoints without the SOP head,
    or a smoke-test export of a pretraining checkpoint as a classifier).
  init_from_group0: every group starts from group_0's weights (the
    original's option for growing the number of groups).
  step: a variable to restore the training step into (albert_tf layout;
    a TF1 checkpoint's `global_step`).
  """
  if parts not in PARTS:
    raise ValueError(f"parts={parts!r}: expected one of {PARTS}")
  # One pass: the source resolved once, its variable list read once, the
  # layout picked once, one load.
  want_heads = parts == "all"
  kind, source = paths.resolve_source(path)
  if kind == "saved_model":
    report = _restore_saved_model(model, source, want_heads,
                                  allow_missing_heads)
  else:
    reader = open_reader(source)
    stored = reader.get_variable_to_shape_map()
    layout = detect_layout(source, stored)
    if layout == "albert_tf" and not init_from_group0:
      restored, fresh = object_layout.restore_model_parts(
          model, source, stored, want_heads, allow_missing_heads, step)
      report = RestoreReport(source, "albert_tf", restored, fresh)
    else:
      report = _restore_converted(model, source, reader, layout, want_heads,
                                  allow_missing_heads, init_from_group0, step)
  logging.info("restored %s", report.summary())
  return report
