"""Converts ALBERT checkpoints between the original TF1 layout (`tf1`), ours
(`albert_tf`) and Model Garden's (`model_garden`; the layouts: restore.py).

The command line is albert_tf/convert_checkpoint.py; loading any of them
into a model in memory is `restore.restore(model, path)`.
"""

import glob
import json
import os
from typing import Optional, Tuple

import tensorflow as tf

from albert_tf.checkpoints import canonical_weights as cw
from albert_tf.checkpoints import conversion_output as output
from albert_tf.checkpoints import model_garden_checkpoint as mg
from albert_tf.checkpoints import paths
from albert_tf.checkpoints import tf1_checkpoint
from albert_tf.checkpoints.canonical_weights import CheckpointConversionError
from albert_tf.checkpoints.restore import detect_layout
from albert_tf.checkpoints.restore import LAYOUTS
from albert_tf.checkpoints.restore import read_weights
from albert_tf.modeling import activations
from albert_tf.modeling import albert_config
from albert_tf.modeling.networks.albert_encoder import AlbertEncoder
from albert_tf.modeling.models.albert_pretrainer import AlbertPretrainer
from albert_toolkit import output_files

DEFAULT_OUTPUT_NAMES = {"tf1": "model.ckpt", "albert_tf": "ckpt",
                        "model_garden": "ckpt"}
# Fields of the original's albert_config.json (what we write for --to=tf1).
ORIGINAL_CONFIG_FIELDS = (
    "vocab_size", "embedding_size", "hidden_size", "num_hidden_layers",
    "num_hidden_groups", "inner_group_num", "num_attention_heads",
    "intermediate_size", "hidden_act", "hidden_dropout_prob",
    "attention_probs_dropout_prob", "max_position_embeddings",
    "type_vocab_size", "initializer_range")

# --- Paths and config --------------------------------------------------------


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
    candidate = os.path.join(directory, albert_config.CONFIG_JSON_NAME)
    if tf.io.gfile.exists(candidate):
      return candidate
  return None


def resolve_config(config, prefix: Optional[str] = None
                   ) -> albert_config.AlbertConfig:
  """`config`: an AlbertConfig, a dict, a source of
  `albert_config.load_model_config` (.json/.yaml path, preset name, run dir)
  or None (then `albert_config.json` next to the checkpoint `prefix`)."""
  if config is None:
    path = find_config_file(prefix)
    if path is None:
      raise CheckpointConversionError(
          f"no config given and no {albert_config.CONFIG_JSON_NAME} next to {prefix}; pass "
          "--config_file")
    return albert_config.load_model_config([path])
  if isinstance(config, str):
    return albert_config.load_model_config([config])
  return albert_config.as_albert_config(config)


def find_vocab_files(prefix: str):
  """The vocabulary next to the checkpoint: SentencePiece model/vocab files,
  else a BERT WordPiece vocabulary (vocab*.txt: the original's Chinese
  models ship vocab_chinese.txt)."""
  for directory in _source_dirs(prefix):
    found = sorted(glob.glob(os.path.join(directory, "*.model")))
    if found:
      vocab = [p[:-len(".model")] + ".vocab" for p in found]
      return found + [v for v in vocab if os.path.exists(v)]
    found = sorted(glob.glob(os.path.join(directory, "vocab*.txt")))
    if found:
      return found
  return []


def tokenizer_files(prefix: str):
  """Every tokenizer file next to the checkpoint: SentencePiece models
  (*.model) and WordPiece vocabularies (vocab*.txt), sorted, from the first
  directory holding any."""
  for directory in _source_dirs(prefix):
    found = sorted(glob.glob(os.path.join(directory, "*.model")) +
                   glob.glob(os.path.join(directory, "vocab*.txt")))
    if found:
      return found
  return []


# --- Writing ------------------------------------------------------------------


def check_mlm_only_layout(layout: str) -> None:
  """A masked-LM model (MLM head, no SOP head) fits every layout but Model
  Garden's, whose pretraining layout holds the two heads together."""
  if layout == "model_garden":
    raise CheckpointConversionError(
        "--to=model_garden: its pretraining layout holds the MLM and SOP "
        "heads together, and this model has no SOP head (a masked-LM model; "
        "use --to=albert_tf or tf1)")


def write_weights(model, output_prefix: str, layout: str,
                  global_step: Optional[int] = None,
                  extra: Optional[dict] = None, mlm_only: bool = False) -> str:
  """Writes `model`'s weights (an AlbertEncoder or AlbertPretrainer) in
  `layout`; returns the checkpoint path.

  Args:
    model: the model.
    output_prefix: the checkpoint's path prefix.
    layout: one of LAYOUTS.
    global_step: the step a tf1 checkpoint records.
    extra: more objects of an albert_tf checkpoint (its identity).
    mlm_only: an AlbertPretrainer written without its SOP head (a
      masked-LM model's weights).
  """
  if mlm_only:
    check_mlm_only_layout(layout)
  config = cw.model_config(model)
  variables = cw.model_variables(model, mlm_only=mlm_only)
  with_heads = any(cw.is_head(n) for n in variables)
  directory = os.path.dirname(os.path.abspath(output_prefix))
  tf.io.gfile.makedirs(directory)
  if layout == "albert_tf":
    parts = cw.model_parts(model)
    if mlm_only:
      del parts["sop_head"]
    path = tf.train.Checkpoint(**parts, **(extra or {})).write(output_prefix)
    paths.write_checkpoint_state(directory, os.path.basename(path))
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


def check_config_for(config, layout) -> None:
  """Refuses a model the `layout`'s own code could not run: for tf1, an
  activation the original's code does not have."""
  if layout == "tf1" and config.hidden_act not in activations.ORIGINAL_NAMES:
    known = ", ".join(sorted(set(activations.ORIGINAL_NAMES.values())))
    raise CheckpointConversionError(
        f"--to=tf1: hidden_act {config.hidden_act!r} is not in the original's "
        f"code, which has {known} (its gelu is the tanh approximation); keep "
        "this model in albert_tf or hf")


def config_text(config, layout) -> str:
  """The albert_config.json written with a `layout` checkpoint."""
  check_config_for(config, layout)
  values = config.to_json_dict()
  if layout == "tf1":  # Only the original's fields, under its names.
    values = {k: values[k] for k in ORIGINAL_CONFIG_FIELDS}
    values["hidden_act"] = activations.ORIGINAL_NAMES[values["hidden_act"]]
  return json.dumps(values, indent=2, sort_keys=True)


def write_config(config, directory, layout):
  return output_files.atomic_write(
      os.path.join(directory, albert_config.CONFIG_JSON_NAME),
      config_text(config, layout))


def check_output_dir(prefix: str, output_dir: str, overwrite: bool):
  """The checkpoints in `output_dir` a conversion would replace.

  Refuses (one line) the input checkpoint's own directory: the conversion
  writes its `albert_config.json` and checkpoint state there (and, with the
  same name, the checkpoint itself), so the input would be replaced. Refuses
  a directory that holds another checkpoint unless `overwrite`.
  """
  out = os.path.realpath(output_dir)
  if out in {os.path.realpath(d) for d in _source_dirs(prefix)}:
    raise CheckpointConversionError(
        f"--output_dir {output_dir} holds the input checkpoint {prefix}: the "
        "conversion would overwrite it (its checkpoint files, "
        f"{albert_config.CONFIG_JSON_NAME}); use another directory")
  existing = paths.checkpoint_prefixes(output_dir)
  if existing and not overwrite:
    raise CheckpointConversionError(
        f"--output_dir {output_dir} already holds checkpoint "
        f"{', '.join(existing)}; use another directory, or pass --overwrite "
        "to replace it")
  return existing


def _check_request(output_dir, from_layout, to_layout, model, output_name,
                   global_step):
  """The checks of the arguments alone (nothing read)."""
  for name, value in (("from", from_layout), ("to", to_layout)):
    if value not in LAYOUTS:
      raise CheckpointConversionError(f"--{name}={value!r}: expected one of "
                                      f"{LAYOUTS}")
  if model not in ("auto", "pretrainer", "encoder"):
    raise CheckpointConversionError(f"model={model!r}: expected auto, "
                                    "pretrainer or encoder")
  if global_step is not None and to_layout != "tf1":
    raise CheckpointConversionError(
        f"--global_step={global_step}: only --to=tf1 records a step; "
        f"--to={to_layout} has no place for it")
  output.check_output_name(output_name)
  output.check_output_dir_usable(output_dir)


def _vocab_files(prefix, spm_model_file, vocab_flag):
  """The vocabulary files to copy, each checked to be a readable file."""
  if spm_model_file:
    output.check_vocab_file(spm_model_file, vocab_flag)
    return [spm_model_file]
  found = find_vocab_files(prefix)
  for path in found:
    output.check_vocab_file(path, "vocabulary file")
  return found


def _check_outputs_free(output_dir, name, to_layout, config, vocab,
                        overwrite):
  """Refuses, without `overwrite`, a file written beside the checkpoint
  `name` (config, state file, vocabulary) that would replace another."""
  files = {albert_config.CONFIG_JSON_NAME: config_text(config, to_layout),
           paths.STATE_FILE: paths.checkpoint_state_text(name)}
  files = {n: text.encode("utf-8") for n, text in files.items()}
  for source in vocab:
    if os.path.basename(source) in files:
      raise CheckpointConversionError(
          f"vocabulary file {source}: its name is that of a file the "
          "conversion writes; rename it")
    files[os.path.basename(source)] = source
  if not overwrite:
    output.check_not_replacing(output_dir, name, files)


def convert(input_checkpoint: str, output_dir: str, from_layout: str,
            to_layout: str, config=None, model: str = "auto",
            init_from_group0: bool = False,
            spm_model_file: Optional[str] = None,
            output_name: Optional[str] = None,
            global_step: Optional[int] = None,
            overwrite: bool = False, log=print,
            vocab_flag: str = "--spm_model_file"
            ) -> Tuple[str, cw.ConversionReport]:
  """Converts one checkpoint; returns (output checkpoint path, report).

  `model`: "pretrainer" (encoder + MLM/SOP heads; fails when the source has
  no heads), "encoder", or "auto" (pretrainer when the source has the heads).
  Writes `albert_config.json` and copies the vocabulary (`spm_model_file`:
  a SentencePiece model or WordPiece vocabulary, named `vocab_flag` in
  errors; default: the one next to the checkpoint) into `output_dir`, which
  may not hold the input; a checkpoint or another file already there is
  replaced only with `overwrite` (said through `log`). Everything is
  checked before anything is written, and the outputs are moved in together
  at the end (conversion_output.py): a failure leaves `output_dir` as it was.
  """
  _check_request(output_dir, from_layout, to_layout, model, output_name,
                 global_step)
  prefix = paths.resolve_checkpoint(input_checkpoint)
  replaced = check_output_dir(prefix, output_dir, overwrite)
  detected = detect_layout(prefix)
  if detected != from_layout:
    raise CheckpointConversionError(
        f"{prefix}: --from={from_layout} but the variable names are of the "
        f"{detected} layout")
  config = resolve_config(config, prefix)
  name = output_name or DEFAULT_OUTPUT_NAMES[to_layout]
  vocab = _vocab_files(prefix, spm_model_file, vocab_flag)
  _check_outputs_free(output_dir, name, to_layout, config, vocab, overwrite)
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
  # A masked-LM model's checkpoint: the MLM head without the SOP head.
  mlm_only = model == "auto" and with_heads and not any(
      n.startswith(cw.SOP_PREFIX) for n in values)
  if mlm_only:
    check_mlm_only_layout(to_layout)
  if not with_heads:
    for head in [n for n in values if cw.is_head(n)]:
      report.skipped[report.mapped.pop(head)] = (
          "pretraining head (target is the encoder only)")
      del values[head]
    target = getattr(target, "encoder", target)
  # Checks every target variable is filled with the right shape.
  cw.check_and_assign(cw.model_variables(target, mlm_only=mlm_only), values,
                      report.mapped, prefix)
  with output.Staging(output_dir) as staging:
    write_weights(target, os.path.join(staging.directory, name), to_layout,
                  global_step=global_step, mlm_only=mlm_only)
    write_config(config, staging.directory, to_layout)
    for source in vocab:
      tf.io.gfile.copy(source, os.path.join(staging.directory,
                                            os.path.basename(source)))
    if replaced and log:
      log(f"--overwrite: replacing checkpoint {', '.join(replaced)} in "
          f"{output_dir} with {os.path.join(output_dir, name)}")
    staging.commit(replaced)
  return os.path.join(output_dir, name), report
