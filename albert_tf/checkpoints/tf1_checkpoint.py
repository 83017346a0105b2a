"""The original (TF1, google-research/albert) checkpoint layout.

Maps the original's variable names to our canonical names (see
`checkpoint_weights`) and back, reads name-based TF1 checkpoints (released
`model.ckpt-best`, TF-Hub `module/` variables, fine-tuned runs) and writes them.

Original block variables live under
`bert/encoder/transformer/group_G/inner_group_I/`; with sharing="all" our
sublayer index is `k = G * inner_group_num + I` (`transformer.sublayer_indices`).
Shapes are the same on both sides (dense kernels [in, out], SOP
`output_weights` [2, H]), so only names change.
"""

import os
import re
from typing import Dict, Optional, Tuple

import numpy as np
import tensorflow as tf

from albert_tf.checkpoints import canonical_weights as cw
from albert_tf.checkpoints import paths

# Canonical name -> original name, outside the shared blocks.
_FIXED = {
    "embeddings/word_embeddings": "bert/embeddings/word_embeddings",
    "embeddings/position_embeddings": "bert/embeddings/position_embeddings",
    "embeddings/token_type_embeddings": "bert/embeddings/token_type_embeddings",
    "embeddings/layer_norm/gamma": "bert/embeddings/LayerNorm/gamma",
    "embeddings/layer_norm/beta": "bert/embeddings/LayerNorm/beta",
    "embeddings/embedding_hidden_mapping_in/kernel":
        "bert/encoder/embedding_hidden_mapping_in/kernel",
    "embeddings/embedding_hidden_mapping_in/bias":
        "bert/encoder/embedding_hidden_mapping_in/bias",
    "pooler/kernel": "bert/pooler/dense/kernel",
    "pooler/bias": "bert/pooler/dense/bias",
    "mlm_head/transform_dense/kernel": "cls/predictions/transform/dense/kernel",
    "mlm_head/transform_dense/bias": "cls/predictions/transform/dense/bias",
    "mlm_head/transform_layer_norm/gamma":
        "cls/predictions/transform/LayerNorm/gamma",
    "mlm_head/transform_layer_norm/beta":
        "cls/predictions/transform/LayerNorm/beta",
    "mlm_head/output_bias": "cls/predictions/output_bias",
    "sop_head/output_weights": "cls/seq_relationship/output_weights",
    "sop_head/output_bias": "cls/seq_relationship/output_bias",
}
_FIXED_REVERSE = {v: k for k, v in _FIXED.items()}

# The SQuAD 2.0 head of `run_squad_v2.py` (`squad_utils.create_v2_model`):
# top-level scopes, no `cls/` prefix. Our XLNetSquadHead sublayer/weight ->
# original name (dense kernels [in, out] on both sides).
SQUAD_V2_HEAD = {
    "start_dense/kernel": "start_logits/dense/kernel",
    "start_dense/bias": "start_logits/dense/bias",
    "end_dense_0/kernel": "end_logits/dense_0/kernel",
    "end_dense_0/bias": "end_logits/dense_0/bias",
    "end_layer_norm/gamma": "end_logits/LayerNorm/gamma",
    "end_layer_norm/beta": "end_logits/LayerNorm/beta",
    "end_dense_1/kernel": "end_logits/dense_1/kernel",
    "end_dense_1/bias": "end_logits/dense_1/bias",
    "answer_dense_0/kernel": "answer_class/dense_0/kernel",
    "answer_dense_0/bias": "answer_class/dense_0/bias",
    "answer_dense_1/kernel": "answer_class/dense_1/kernel",
}
SQUAD_V2_HEAD_SCOPES = ("start_logits/", "end_logits/", "answer_class/")

# (our sublayer kind, suffix) -> suffix under the original's inner_group_I/.
_BLOCK = {
    ("attention", "query/kernel"): "attention_1/self/query/kernel",
    ("attention", "query/bias"): "attention_1/self/query/bias",
    ("attention", "key/kernel"): "attention_1/self/key/kernel",
    ("attention", "key/bias"): "attention_1/self/key/bias",
    ("attention", "value/kernel"): "attention_1/self/value/kernel",
    ("attention", "value/bias"): "attention_1/self/value/bias",
    ("attention", "output_dense/kernel"): "attention_1/output/dense/kernel",
    ("attention", "output_dense/bias"): "attention_1/output/dense/bias",
    ("attention", "layer_norm/gamma"): "LayerNorm/gamma",
    ("attention", "layer_norm/beta"): "LayerNorm/beta",
    ("ffn", "intermediate/kernel"): "ffn_1/intermediate/dense/kernel",
    ("ffn", "intermediate/bias"): "ffn_1/intermediate/dense/bias",
    ("ffn", "output_dense/kernel"): "ffn_1/intermediate/output/dense/kernel",
    ("ffn", "output_dense/bias"): "ffn_1/intermediate/output/dense/bias",
    ("ffn", "layer_norm/gamma"): "LayerNorm_1/gamma",
    ("ffn", "layer_norm/beta"): "LayerNorm_1/beta",
}
_BLOCK_REVERSE = {v: k for k, v in _BLOCK.items()}

# Heads of the original fine-tuning scripts (run_classifier, run_squad v1,
# run_race), by our head layer's name: (weights [labels, H], bias [labels]).
FINETUNED_HEAD_NAMES = {
    "classification_head": ("output_weights", "output_bias"),
    "span_labeling_head": ("cls/squad/output_weights", "cls/squad/output_bias"),
    "multiple_choice_head": ("output_weights", "output_bias"),
}
SQUAD_V2_HEAD_NAME = "squad_v2_head"


def finetuned_head_variables(head) -> Dict[str, tf.Variable]:
  """Original name -> variable of one of our downstream heads (the original
  fine-tuning scripts' names; {} for a head they do not have)."""
  if getattr(head, "name", None) == SQUAD_V2_HEAD_NAME:  # XLNetSquadHead
    out = {}
    for ours, original in SQUAD_V2_HEAD.items():
      layer, weight = ours.split("/")
      out[original] = getattr(getattr(head, layer), weight)
    return out
  names = FINETUNED_HEAD_NAMES.get(getattr(head, "name", None))
  if not names:
    return {}
  return dict(zip(names, (head.output_weights, head.output_bias)))


_OURS_BLOCK_RE = re.compile(r"^transformer/(attention|ffn)_(\d+)/(.+)$")
_TF1_BLOCK_RE = re.compile(
    r"^bert/encoder/transformer/group_(\d+)/inner_group_(\d+)/(.+)$")
_OPTIMIZER_SUFFIXES = ("/adam_m", "/adam_v", "/Adam", "/Adam_1", "/Momentum",
                       "/lamb_m", "/lamb_v")


def _check_sharing(config):
  if config.sharing != "all":
    raise cw.CheckpointConversionError(
        f"the original layout shares every sublayer; config has "
        f"sharing={config.sharing!r} (only 'all' converts)")


def to_tf1_name(name: str, inner_group_num: int) -> str:
  """Canonical name -> original name (no `module/` prefix)."""
  if name in _FIXED:
    return _FIXED[name]
  match = _OURS_BLOCK_RE.match(name)
  if match and (match.group(1), match.group(3)) in _BLOCK:
    k = int(match.group(2))
    group, inner = divmod(k, inner_group_num)
    return (f"bert/encoder/transformer/group_{group}/inner_group_{inner}/"
            f"{_BLOCK[(match.group(1), match.group(3))]}")
  raise cw.CheckpointConversionError(f"{name}: no original (TF1) name for "
                                     "this variable")


def from_tf1_name(name: str, config) -> Tuple[Optional[str], Optional[str]]:
  """Original name (no prefix) -> (canonical name, None) or (None, problem).

  The problem (`group_G/inner_group_I`) is set for block variables whose
  group or inner group does not exist in `config` (a wrong config), else
  unknown names give (None, None).
  """
  if name in _FIXED_REVERSE:
    return _FIXED_REVERSE[name], None
  match = _TF1_BLOCK_RE.match(name)
  if not match or match.group(3) not in _BLOCK_REVERSE:
    return None, None
  group, inner = int(match.group(1)), int(match.group(2))
  if group >= config.num_hidden_groups or inner >= config.inner_group_num:
    return None, f"group_{group}/inner_group_{inner}"
  kind, suffix = _BLOCK_REVERSE[match.group(3)]
  k = group * config.inner_group_num + inner
  return f"transformer/{kind}_{k}/{suffix}", None


def skip_reason(name: str) -> Tuple[Optional[str], bool]:
  """(why an original variable is not a model weight, keep it as an extra).

  (None, False) means: a model weight (or unknown).
  """
  if name == "global_step" or name.endswith("/global_step"):
    return "training step counter", False
  if name.endswith(_OPTIMIZER_SUFFIXES) or name in ("beta1_power",
                                                    "beta2_power"):
    return "optimizer slot", False
  if name in ("output_weights", "output_bias"):
    return "fine-tuned classifier head (not part of the encoder)", True
  if name.startswith("cls/squad/"):
    return "fine-tuned SQuAD head (not part of the encoder)", True
  if name.startswith(SQUAD_V2_HEAD_SCOPES):
    return "fine-tuned SQuAD 2.0 head (not part of the encoder)", True
  if name.startswith("cls/") and name not in _FIXED_REVERSE:
    return "fine-tuned task head (not part of the encoder)", True
  return None, False


def map_tf1_names(path: str, stored, hub_prefix: str, config,
                  with_heads: bool = True, heads=None
                  ) -> Tuple[cw.ConversionReport, Dict[str, tf.Variable]]:
  """The original-layout checkpoint at `path` mapped to canonical names in
  one pass (nothing read): a ConversionReport whose `mapped` holds the
  stored name of each canonical name, and the fine-tuned head variables
  found (`part/name` -> variable) of `heads` (part -> our head layer).

  `stored`: the variable -> shape map; `hub_prefix`: 'module/' or ''.
  Optimizer slots and global_step are skipped (never loaded); task heads
  are skipped and listed in `report.extras` (read with the rest); head
  variables are skipped when `with_heads` is False. Variables that do not
  fit `config` are an error. A fine-tuned head is all or nothing: some but
  not all of its variables, or one of another shape, is an error naming it.
  """
  _check_sharing(config)
  report = cw.ConversionReport(layout="tf1" + (" (TF-Hub module/)"
                                               if hub_prefix else ""),
                               source=path)
  misfits = {}  # stored name -> the block it needs
  for source in sorted(stored):
    if not source.startswith(hub_prefix):
      report.skipped[source] = "outside the TF-Hub module/ scope"
      continue
    name = source[len(hub_prefix):]
    reason, keep = skip_reason(name)
    if reason:
      report.skipped[source] = reason
      if keep:
        report.extras[source] = None
      continue
    canonical, problem = from_tf1_name(name, config)
    if problem:
      misfits[source] = problem
    elif canonical is None:
      report.skipped[source] = "not an ALBERT model variable"
    elif canonical.startswith(cw.HEAD_PREFIXES) and not with_heads:
      report.skipped[source] = "pretraining head (target is the encoder only)"
    else:
      report.mapped[canonical] = source
  if misfits:
    blocks = sorted(set(misfits.values()))
    raise cw.CheckpointConversionError(
        f"{path}: {len(misfits)} variable(s) do not fit the config (wrong "
        f"albert_config.json?): {cw.summarize_names(blocks, 4)} "
        f"{'does' if len(blocks) == 1 else 'do'} not exist with "
        f"num_hidden_groups={config.num_hidden_groups}, "
        f"inner_group_num={config.inner_group_num} "
        f"({cw.summarize_names(sorted(misfits), 2)})")
  found = {}
  for part, head in (heads or {}).items():
    variables = finetuned_head_variables(head)
    if part == "encoder" or not any(n in stored for n in variables):
      continue
    missing = [name for name in variables if name not in stored]
    if missing:
      raise cw.CheckpointConversionError(
          f"{path}: no {part} variable(s) {', '.join(missing)} (it has the "
          "rest of that head; not a checkpoint of this model?)")
    for name, var in variables.items():
      if tuple(stored[name]) != tuple(var.shape):
        raise cw.CheckpointConversionError(
            f"{path}: {name} has shape {tuple(stored[name])}, the model's "
            f"{part} expects {tuple(var.shape)} (wrong num_labels or "
            "config?)")
      found[f"{part}/{name}"] = var
      report.mapped[f"{part}/{name}"] = name
      report.skipped.pop(name, None)
      report.extras.pop(name, None)
  return report, found


def write_tf1_checkpoint(values: Dict[str, np.ndarray], prefix: str, config,
                         global_step: Optional[int] = None,
                         finetuned: Optional[Dict[str, np.ndarray]] = None
                         ) -> str:
  """Writes canonical arrays under the original names; returns the prefix.
  `finetuned`: a fine-tuning head's arrays under their original names
  (`FINETUNED_HEAD_NAMES`), written as they are.

  The result is a plain name-based V2 checkpoint (`prefix.index` +
  `prefix.data-*`, plus a `checkpoint` state file), which the original's
  `init_from_checkpoint`, `tf.compat.v1.train.Saver` and
  `tf.train.load_checkpoint` read.
  """
  _check_sharing(config)
  names, tensors = [], []
  for name in sorted(values):
    names.append(to_tf1_name(name, config.inner_group_num))
    tensors.append(tf.constant(np.asarray(values[name], dtype=np.float32)))
  for name, value in sorted((finetuned or {}).items()):
    names.append(name)
    tensors.append(tf.constant(np.asarray(value, dtype=np.float32)))
  if global_step is not None:
    names.append("global_step")
    tensors.append(tf.constant(global_step, dtype=tf.int64))
  directory = os.path.dirname(os.path.abspath(prefix))
  tf.io.gfile.makedirs(directory)
  tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names,
                    shape_and_slices=[""] * len(names), tensors=tensors)
  paths.write_checkpoint_state(directory, os.path.basename(prefix))
  return prefix
