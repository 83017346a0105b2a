"""Model weights as a flat dict under canonical names, for checkpoint conversion.

Every converter here goes through one intermediate form: a dict from a
canonical name to a NumPy array. The canonical names are our own variable
names without the ":0" (e.g. `embeddings/word_embeddings`,
`transformer/attention_0/query/kernel`, `mlm_head/output_bias`), and the
arrays have our shapes (dense kernels [in, out], SOP `output_weights` [2, H]).
Layout modules (`tf1_checkpoint`, `model_garden_checkpoint`) only translate
names and shapes to and from this form; `load` reads, checks and assigns a
translated checkpoint into a model's parts (`model_parts`) in one call.
"""

import collections
import dataclasses
from typing import Dict, List, Mapping, Optional, Tuple

from absl import logging
import numpy as np
import tensorflow as tf

HEAD_PREFIXES = ("mlm_head/", "sop_head/")
SOP_PREFIX = HEAD_PREFIXES[1]
# Marks an object checkpoint key as an optimizer slot of the variable before.
OPTIMIZER_SLOT = "/.OPTIMIZER_SLOT/"


class CheckpointConversionError(ValueError):
  """A checkpoint cannot be converted; the message lists every problem."""


def is_head(name: str) -> bool:
  return name.startswith(HEAD_PREFIXES)


def attention_prefix(index: int) -> str:
  return f"transformer/attention_{index}"


def ffn_prefix(index: int) -> str:
  return f"transformer/ffn_{index}"


def add_dense(add, prefix, layer):
  """`add(canonical name, variable)` of a dense layer's kernel and bias."""
  add(f"{prefix}/kernel", layer.kernel)
  add(f"{prefix}/bias", layer.bias)


def add_layer_norm(add, prefix, layer):
  add(f"{prefix}/gamma", layer.gamma)
  add(f"{prefix}/beta", layer.beta)


def encoder_variables(encoder) -> Dict[str, tf.Variable]:
  """Canonical name -> variable of an `AlbertEncoder` (walks its layers)."""
  out = collections.OrderedDict()
  add, emb = out.__setitem__, encoder.embeddings
  add("embeddings/word_embeddings", emb.word_embeddings)
  add("embeddings/position_embeddings", emb.position_embeddings)
  add("embeddings/token_type_embeddings", emb.token_type_embeddings)
  add_layer_norm(add, "embeddings/layer_norm", emb.layer_norm)
  if emb.projection is not None:
    add_dense(add, "embeddings/embedding_hidden_mapping_in", emb.projection)
  for k, layer in enumerate(encoder.transformer.attention_layers):
    for sub in ("query", "key", "value", "output_dense"):
      add_dense(add, f"{attention_prefix(k)}/{sub}", getattr(layer, sub))
    add_layer_norm(add, f"{attention_prefix(k)}/layer_norm", layer.layer_norm)
  for k, layer in enumerate(encoder.transformer.ffn_layers):
    add_dense(add, f"{ffn_prefix(k)}/intermediate", layer.intermediate)
    add_dense(add, f"{ffn_prefix(k)}/output_dense", layer.output_dense)
    add_layer_norm(add, f"{ffn_prefix(k)}/layer_norm", layer.layer_norm)
  add_dense(add, "pooler", encoder.pooler)
  return out


def head_variables(pretrainer) -> Dict[str, tf.Variable]:
  """Canonical name -> variable of an `AlbertPretrainer`'s MLM and SOP heads."""
  out = collections.OrderedDict()
  add, mlm = out.__setitem__, pretrainer.mlm_head
  add_dense(add, "mlm_head/transform_dense", mlm.dense)
  add_layer_norm(add, "mlm_head/transform_layer_norm", mlm.layer_norm)
  add("mlm_head/output_bias", mlm.output_bias)
  add("sop_head/output_weights", pretrainer.sop_head.output_weights)
  add("sop_head/output_bias", pretrainer.sop_head.output_bias)
  return out


def model_variables(model, with_heads: Optional[bool] = None,
                    mlm_only: bool = False) -> Dict[str, tf.Variable]:
  """Canonical name -> variable for an AlbertEncoder, an AlbertPretrainer or
  any model with an `encoder` attribute (then only the encoder's variables).

  `with_heads`: None = the pretraining heads when the model has them.
  `mlm_only`: of the heads, the MLM head's only (a masked-LM model).
  """
  encoder = getattr(model, "encoder", model)
  if not hasattr(encoder, "transformer") or not hasattr(encoder, "embeddings"):
    raise TypeError(f"{type(model).__name__} is not an albert_tf AlbertEncoder"
                    " or a model with one as its `encoder`")
  out = encoder_variables(encoder)
  has_heads = hasattr(model, "mlm_head") and hasattr(model, "sop_head")
  if with_heads is None:
    with_heads = has_heads
  if with_heads:
    if not has_heads:
      raise TypeError(f"{type(model).__name__} has no pretraining heads")
    out.update({n: v for n, v in head_variables(model).items()
                if not (mlm_only and n.startswith(SOP_PREFIX))})
  return out


def model_config(model):
  return getattr(getattr(model, "encoder", model), "config")


def model_parts(model):
  """Named trackables of `model` (an AlbertEncoder, or any model with an
  `encoder` and `checkpoint_items`)."""
  encoder = getattr(model, "encoder", model)
  if model is encoder:
    return {"encoder": encoder}
  items = getattr(model, "checkpoint_items", None)
  if items is None:
    raise TypeError(f"{type(model).__name__} has an encoder but no "
                    "checkpoint_items naming its heads")
  items = dict(items)
  if items.get("encoder") is not encoder:
    raise ValueError(f"{type(model).__name__}.checkpoint_items must hold its "
                     "encoder under 'encoder'")
  return items


def check_heads(model, path, want_heads, held, allow_missing_heads,
                lost=None):
  """(model_parts(model), its heads left fresh): every head unless
  `want_heads`, else those `path` lacks (`held`: the parts it holds), which
  is an error unless allowed. `lost`: part -> why the source's cannot be
  represented (named in the error and the warning)."""
  all_parts = model_parts(model)
  heads = [p for p in all_parts if p != "encoder"]
  missing = [h for h in heads if h not in held] if want_heads else []
  why = "; ".join(f"{h}: {lost[h]}" for h in missing if h in (lost or {}))
  if missing and not allow_missing_heads:
    problem = (f"cannot restore {why}" if why else
               f"holds an encoder but not the {type(model).__name__} head "
               f"({', '.join(missing)}): not a checkpoint of this model")
    raise CheckpointConversionError(
        f"{path}: {problem}; restore parts='encoder', or allow_missing_heads "
        "(--allow_random_head) to keep fresh heads")
  if missing:
    logging.warning("%s has no %s; keeping their initial values%s", path,
                    ", ".join(missing), f" ({why})" if why else "")
  return all_parts, missing if want_heads else heads


@dataclasses.dataclass
class ConversionReport:
  """What a conversion did with each source variable.

  mapped: target canonical name -> source variable name it came from.
  skipped: source variable name -> reason it was not used.
  extras: arrays of known non-model variables kept aside (fine-tuned heads),
    by source name.
  tied: a mapped source variable our model has no place for -> the
    canonical name it must equal (else its part cannot be represented), each
    with the reason it may be left out; read, then moved to `skipped`.
  lost: part (e.g. sop_head) -> why the source's cannot be represented
    (a `tied` variable differed); none of its variables is read.
  """
  layout: str
  source: str
  mapped: Dict[str, str] = dataclasses.field(default_factory=dict)
  skipped: Dict[str, str] = dataclasses.field(default_factory=dict)
  extras: Dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
  tied: Dict[str, Tuple[str, str, str]] = dataclasses.field(
      default_factory=dict)
  lost: Dict[str, str] = dataclasses.field(default_factory=dict)

  def summary(self) -> str:
    lines = [f"{self.source}: layout {self.layout}, {len(self.mapped)} "
             f"variable(s) mapped, {len(self.skipped)} skipped"]
    by_reason = collections.defaultdict(list)
    for name, reason in sorted(self.skipped.items()):
      by_reason[reason].append(name)
    for reason, names in by_reason.items():
      lines.append(f"  skipped ({reason}): {summarize_names(names, 4)}")
    return "\n".join(lines)


def fill_from_group0(values: Dict[str, np.ndarray],
                     sources: Dict[str, str], config) -> None:
  """The original's `init_from_group0`: every group starts as group_0.

  Block `inner` of group g (sublayer index g * inner_group_num + inner, see
  `transformer.sublayer_indices`) takes group 0's block `inner`, whatever the
  checkpoint holds for group g.
  """
  if config.sharing != "all":
    raise CheckpointConversionError(
        f"init_from_group0 needs sharing='all', the config has "
        f"sharing={config.sharing!r}")
  inner_num = config.inner_group_num
  for k in range(inner_num, config.num_hidden_groups * inner_num):
    for prefix_fn in (attention_prefix, ffn_prefix):
      src, dst = prefix_fn(k % inner_num), prefix_fn(k)
      for name in [n for n in values if n.startswith(src + "/")]:
        target = dst + name[len(src):]
        values[target] = values[name]
        sources[target] = sources.get(name, name) + " (init_from_group0)"


def check_and_assign(variables: Mapping[str, tf.Variable],
                     values: Mapping[str, np.ndarray],
                     sources: Mapping[str, str],
                     source_path: str) -> None:
  """Assigns `values` to `variables`; fails in one line naming the path and
  the missing or mis-shaped variables (target and source names) before
  anything is assigned."""
  missing = [n for n in variables if n not in values]
  mismatched = [f"{sources.get(name, name)} {list(np.shape(values[name]))} in "
                f"the checkpoint vs {name} {var.shape.as_list()} in the model"
                for name, var in variables.items() if name in values and
                tuple(np.shape(values[name])) != tuple(var.shape)]
  problems = []
  if mismatched:
    problems.append(f"{len(mismatched)} shape mismatch(es) (wrong config for "
                    "this checkpoint?): " + summarize_names(mismatched, 4))
  if missing:
    problems.append(f"{len(missing)} model variable(s) not in the "
                    "checkpoint: " + summarize_names(missing))
  if problems:
    raise CheckpointConversionError(
        f"cannot load {source_path}: " + "; ".join(problems))
  for name, var in variables.items():
    var.assign(np.asarray(values[name], dtype=var.dtype.as_numpy_dtype))


def error_line(error: Exception) -> str:
  """`Type: first line of the message`, for a one-line error about a
  checkpoint file."""
  return f"{type(error).__name__}: {(str(error).splitlines() or [''])[0]}"


def read_tensor(reader, name: str, path: str) -> np.ndarray:
  """One tensor of a checkpoint; a damaged file is a clear error."""
  try:
    return reader.get_tensor(name)
  # A short data file raises IndexError ("Read less bytes than requested").
  except (tf.errors.OpError, ValueError, IndexError, RuntimeError) as e:
    raise CheckpointConversionError(
        f"{path}: cannot read variable {name!r} (truncated or corrupt "
        f"checkpoint data file?): {error_line(e)}") from e


# --- Object-based (TF2) checkpoints ----------------------------------------


def object_training_state_reason(key: str) -> Optional[str]:
  """Why an object-checkpoint key is not a model weight, or None."""
  if key == "_CHECKPOINTABLE_OBJECT_GRAPH":
    return "checkpoint metadata"
  if OPTIMIZER_SLOT in key or key.startswith("optimizer/"):
    return "optimizer state"
  if key.split("/", 1)[0] in ("step", "global_step", "save_counter", "epoch"):
    return "training counter"
  return None


def read_mapped(reader, report: ConversionReport, transforms=None
                ) -> Dict[str, np.ndarray]:
  """The arrays of `report.mapped` (canonical name -> stored key) and of
  `report.extras`' keys, read from `reader` in one pass; every other stored
  key is skipped with a reason. `transforms`: canonical name -> function
  turning the stored array into our shape."""
  stored_keys = set(report.mapped.values())
  for key in sorted(reader.get_variable_to_shape_map()):
    if key not in stored_keys and key not in report.skipped:
      report.skipped[key] = (object_training_state_reason(key) or
                             f"not a variable of the {report.layout} model")
  for key in report.extras:
    report.extras[key] = read_tensor(reader, key, report.source)
  values = {name: read_tensor(reader, key, report.source)
            for name, key in report.mapped.items()}
  for name, transform in (transforms or {}).items():
    if name in values:
      values[name] = transform(values[name])
  _settle_tied(values, report)
  return values


def _settle_tied(values, report: ConversionReport) -> None:
  """Takes `report.tied` out of `values`: each equal to its target is left
  out (with its reason); one that differs makes its whole part `lost`."""
  for name, (target, same, differs) in report.tied.items():
    value, key = values.pop(name), report.mapped.pop(name)
    if np.array_equal(value, values.get(target)):
      report.skipped[key] = same
    else:
      report.skipped[key] = differs
      report.lost[name.split("/", 1)[0]] = differs
  for part, reason in report.lost.items():
    for name in [n for n in values if n.startswith(part + "/")]:
      report.skipped[report.mapped.pop(name)] = reason
      del values[name]


def load(model, reader, report: ConversionReport, with_heads: bool,
         want_heads: bool, allow_missing_heads: bool,
         init_from_group0: bool = False, transforms=None,
         head_variables: Mapping[str, tf.Variable] = None, held=None):
  """Reads `report.mapped` from `reader` into `model`: the canonical
  variables (pretraining heads when `with_heads`) and `head_variables`
  (`part/name`, e.g. a fine-tuned TF1 head), once every value is checked.

  held: the parts the source holds (default: those all of whose variables
  were read). Returns (model_parts(model), its heads left fresh).
  """
  values = read_mapped(reader, report, transforms)
  if init_from_group0:
    fill_from_group0(values, report.mapped, model_config(model))
  variables = {**model_variables(model, with_heads=with_heads),
               **(head_variables or {})}
  if held is None:
    held = {n.split("/", 1)[0] for n in variables} - {
        n.split("/", 1)[0] for n in variables if n not in values}
  all_parts, fresh = check_heads(model, report.source, want_heads, held,
                                 allow_missing_heads, report.lost)
  check_and_assign({n: v for n, v in variables.items()
                    if n.split("/", 1)[0] not in fresh}, values,
                   report.mapped, report.source)
  return all_parts, fresh


def summarize_names(names: List[str], limit: int = 8) -> str:
  shown = ", ".join(names[:limit])
  return shown + (f", ... ({len(names)} in all)" if len(names) > limit else "")
