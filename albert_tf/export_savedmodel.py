r"""Exports ALBERT as SavedModels: encoder, pretraining, preprocessing, serving.

Every export is written to `<export_dir>/<version>/` (TF Serving's layout;
the version is the next free integer unless --version is given), atomically
(written beside it under a hidden name, then renamed), with the config JSON
(`assets/albert_config.json`) and the SentencePiece model as assets. Loading
needs only `tensorflow`, plus `import tensorflow_text` for the text-in
signatures (preprocessing and serving exports).

Kinds:
  encoder        TF-Hub reusable encoder: `hub.KerasLayer(path,
                 trainable=True)`; signature `serving_default` (ids in).
  pretraining    encoder + `mlm` (extra input `masked_lm_positions`, output
                 `mlm_logits`) and `sop` (`sop_logits`) signatures.
  preprocessing  text in -> `input_word_ids`, `input_mask`, `input_type_ids`
                 (signatures `serving_default` for one segment, `text_pair`,
                 `tokenize`), TF-Hub preprocessor API (`__call__`,
                 `tokenize`, `pack_pair`).
  serving        one model for TF Serving: `serving_default` (raw text),
                 `serve_ids`, `serve_examples` (serialized tf.Example).

Examples:

  python -m albert_tf.export_savedmodel --export_kind=encoder \
      --albert_config_file=albert_base/albert_config.json \
      --checkpoint=albert_base/model.ckpt-best \
      --spm_model_file=albert_base/30k-clean.model --export_dir=/tmp/enc
  python -m albert_tf.export_savedmodel --export_kind=serving \
      --task=classification --num_labels=3 --num_text_fields=2 \
      --label_names=entailment,neutral,contradiction \
      --albert_config_file=... --checkpoint=mnli_run/ckpt \
      --spm_model_file=... --seq_length=128 --export_dir=/models/mnli
"""

import os
import re
import shutil
import tempfile

from absl import app
from absl import flags
from absl import logging
import tensorflow as tf

from albert_tf import checkpointing
from albert_tf import configs
from albert_tf import downstream_models
from albert_tf import preprocessing
from albert_tf import serving_modules
from albert_tf.encoder import AlbertEncoder
from albert_tf.pretrainer import AlbertPretrainer

EXPORT_KINDS = ("encoder", "pretraining", "preprocessing", "serving")
CONFIG_ASSET_NAME = "albert_config.json"

# --- Versioned directories ---------------------------------------------------


def existing_versions(export_dir):
  """Sorted integer version subdirectories of `export_dir`."""
  if not tf.io.gfile.isdir(export_dir):
    return []
  return sorted(int(name.rstrip("/")) for name in tf.io.gfile.listdir(export_dir)
                if re.fullmatch(r"\d+/?", name))


def next_version(export_dir):
  """1 + the largest existing version (1 for a new directory)."""
  versions = existing_versions(export_dir)
  return versions[-1] + 1 if versions else 1


def save_versioned(module, export_dir, signatures, version=None):
  """Saves `module` to `<export_dir>/<version>/` atomically; returns the path.

  Written to a hidden sibling directory first (TF Serving ignores
  non-integer names) and renamed, so a server polling `export_dir` never
  loads a half-written model.
  """
  if version is None:
    version = next_version(export_dir)
  if int(version) < 0:
    raise ValueError(f"version must be a non-negative integer, got {version}")
  final = os.path.join(export_dir, str(int(version)))
  if tf.io.gfile.exists(final):
    raise ValueError(f"{final} already exists; pass another --version or "
                     "leave it unset to use the next free one")
  tf.io.gfile.makedirs(export_dir)
  tmp = os.path.join(export_dir, f".tmp-{int(version)}-{os.getpid()}")
  if tf.io.gfile.exists(tmp):
    tf.io.gfile.rmtree(tmp)
  tf.saved_model.save(module, tmp, signatures=signatures)
  tf.io.gfile.rename(tmp, final)
  return final


class _ConfigAsset:
  """A temporary `albert_config.json` file to attach as an asset."""

  def __init__(self, config):
    self._dir = tempfile.mkdtemp(prefix="albert_export_")
    self.path = os.path.join(self._dir, CONFIG_ASSET_NAME)
    config.to_json_file(self.path)

  def __enter__(self):
    return self.path

  def __exit__(self, *unused):
    shutil.rmtree(self._dir, ignore_errors=True)


def _encoder_of(model):
  return getattr(model, "encoder", model)


# --- Export functions ----------------------------------------------------------


def export_encoder(encoder, export_dir, spm_model_file=None,
                   do_lower_case=True, version=None):
  """Exports an AlbertEncoder (or a model's `.encoder`) as a TF-Hub encoder.

  Returns the versioned directory written.
  """
  encoder = _encoder_of(encoder)
  with _ConfigAsset(encoder.config) as config_file:
    module = serving_modules.EncoderModule(
        encoder, encoder.config, config_file=config_file,
        spm_model_file=spm_model_file,
        do_lower_case=do_lower_case if spm_model_file else None)
    module.trace()
    return save_versioned(module, export_dir, module.signatures(), version)


def export_pretraining(pretrainer, export_dir, spm_model_file=None,
                       do_lower_case=True, version=None):
  """Exports an AlbertPretrainer: encoder API + `mlm` and `sop`."""
  if not (hasattr(pretrainer, "mlm_head") and hasattr(pretrainer, "sop_head")):
    raise TypeError("export_pretraining needs an AlbertPretrainer, got "
                    f"{type(pretrainer).__name__}")
  config = pretrainer.encoder.config
  with _ConfigAsset(config) as config_file:
    module = serving_modules.PretrainingModule(
        pretrainer, config, config_file=config_file,
        spm_model_file=spm_model_file,
        do_lower_case=do_lower_case if spm_model_file else None)
    module.trace()
    return save_versioned(module, export_dir, module.signatures(), version)


def export_preprocessing(spm_model_file, export_dir, seq_length=128,
                         do_lower_case=True, config=None,
                         truncation="longest_first",
                         max_first_segment_length=None, version=None):
  """Exports the text preprocessing model (text -> packed int32 inputs).

  Signatures: `serving_default` (`text` -> inputs), `text_pair` (`text_a`,
  `text_b` -> inputs), `tokenize` (`text` -> `token_ids` [batch, max_len]
  zero-padded, `num_tokens` [batch]).
  """
  if config is not None:
    config = configs.as_albert_config(config)
    if seq_length > config.max_position_embeddings:
      raise ValueError(f"seq_length {seq_length} exceeds the model's "
                       f"max_position_embeddings "
                       f"{config.max_position_embeddings}")
  module = preprocessing.TextPreprocessor(
      spm_model_file, do_lower_case=do_lower_case, seq_length=seq_length,
      truncation=truncation, max_first_segment_length=max_first_segment_length)
  module.do_lower_case_var = tf.Variable(do_lower_case, trainable=False,
                                         name="do_lower_case")

  text = tf.TensorSpec([None], tf.string, name="text")

  def checked(text, name):
    return serving_modules.check_rank(text, 1, name, "[batch]")

  @tf.function(autograph=False, input_signature=[text])
  def serving_default(text):
    return module.preprocess([checked(text, "text")])

  @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string, name="text_a"),
                                tf.TensorSpec([None], tf.string,
                                              name="text_b")])
  def text_pair(text_a, text_b):
    check = tf.debugging.assert_equal(
        tf.shape(text_a), tf.shape(text_b),
        message="text_a and text_b must have the same batch size")
    with tf.control_dependencies([check]):
      return module.preprocess([checked(text_a, "text_a"),
                                checked(text_b, "text_b")])

  @tf.function(autograph=False, input_signature=[text])
  def tokenize(text):
    ids = module.tokenize_ids(checked(text, "text"))
    return {"token_ids": ids.to_tensor(0),
            "num_tokens": tf.cast(ids.row_lengths(), tf.int32)}

  signatures = {"serving_default": serving_default, "text_pair": text_pair,
                "tokenize": tokenize}
  if config is not None:
    with _ConfigAsset(config) as config_file:
      module.albert_config_file = tf.saved_model.Asset(config_file)
      return save_versioned(module, export_dir, signatures, version)
  return save_versioned(module, export_dir, signatures, version)


def task_of(model, regression=False):
  """The serving task of a model instance."""
  if isinstance(model, downstream_models.AlbertClassifier):
    return "regression" if regression or model.num_labels == 1 else (
        "classification")
  if isinstance(model, downstream_models.AlbertSpanLabeler):
    return "squad"
  if isinstance(model, downstream_models.AlbertMultipleChoice):
    return "multiple_choice"
  if isinstance(model, AlbertEncoder):
    return "encoder"
  raise TypeError(f"no serving task for {type(model).__name__}")


def export_serving(model, export_dir, spm_model_file, seq_length=128,
                   do_lower_case=True, label_names=None, num_text_fields=1,
                   max_answer_length=30, max_query_length=64,
                   regression=False, version=None):
  """Exports `model` for TF Serving (text, ids and tf.Example signatures).

  `model`: AlbertEncoder, AlbertClassifier (classification, or regression
  when num_labels == 1), AlbertSpanLabeler (SQuAD: fields `question`,
  `context`; the question is capped at `max_query_length` tokens) or
  AlbertMultipleChoice (fields `context`, `choices`).
  """
  task = task_of(model, regression)
  config = _encoder_of(model).config
  if seq_length > config.max_position_embeddings:
    raise ValueError(f"seq_length {seq_length} exceeds the model's "
                     f"max_position_embeddings {config.max_position_embeddings}")
  squad = task == "squad"
  preprocessor = preprocessing.TextPreprocessor(
      spm_model_file, do_lower_case=do_lower_case, seq_length=seq_length,
      truncation="first_fixed" if squad else "longest_first",
      max_first_segment_length=max_query_length if squad else None)
  with _ConfigAsset(config) as config_file:
    module = serving_modules.TaskServingModule(
        model, task, preprocessor, config, label_names=label_names,
        max_answer_length=max_answer_length, num_text_fields=num_text_fields,
        config_file=config_file, spm_model_file=spm_model_file,
        do_lower_case=do_lower_case)
    return save_versioned(module, export_dir, module.signatures(), version)


# --- Inspection ------------------------------------------------------------------


def describe_signatures(path):
  """Text listing each signature's inputs and outputs (dtype, shape)."""
  try:
    import tensorflow_text  # pylint: disable=g-import-not-at-top,unused-import
  except ImportError:
    pass
  loaded = tf.saved_model.load(path)
  lines = [f"SavedModel {path}"]
  for name, fn in sorted(loaded.signatures.items()):
    lines.append(f"  signature {name!r}")
    for key, spec in sorted(fn.structured_input_signature[1].items()):
      lines.append(f"    in  {key}: {spec.dtype.name} {spec.shape}")
    for key, spec in sorted(fn.structured_outputs.items()):
      lines.append(f"    out {key}: {spec.dtype.name} {spec.shape}")
  return "\n".join(lines)


# --- Building models and loading weights ---------------------------------------


def load_config(value):
  """AlbertConfig from a .json (original) or .yaml file, or a preset name."""
  if value.endswith(".json"):
    return configs.AlbertConfig.from_json_file(value)
  if value.endswith((".yaml", ".yml")):
    return configs.AlbertConfig.from_yaml(value)
  return configs.AlbertConfig.from_preset(value)


def build_model(kind, config, task="encoder", num_labels=2,
                with_answerability=False, num_choices=4):
  """The in-memory Keras model an export of `kind`/`task` wraps."""
  if kind == "pretraining":
    return AlbertPretrainer(config)
  if kind == "encoder" or task == "encoder":
    return AlbertEncoder(config)
  encoder = AlbertEncoder(config, name="albert_encoder")
  if task in ("classification", "regression"):
    return downstream_models.AlbertClassifier(
        encoder, num_labels=1 if task == "regression" else num_labels)
  if task == "squad":
    return downstream_models.AlbertSpanLabeler(
        encoder, with_answerability=with_answerability)
  if task == "multiple_choice":
    return downstream_models.AlbertMultipleChoice(encoder,
                                                  num_choices=num_choices)
  raise ValueError(f"unknown task {task!r}; expected one of "
                   f"{serving_modules.TASKS}")


# Heads of the original fine-tuning scripts, by TF1 variable name.
_TF1_HEADS = {
    "classification_head": ("output_weights", "output_bias"),
    "span_labeling_head": ("cls/squad/output_weights", "cls/squad/output_bias"),
    "multiple_choice_head": ("output_weights", "output_bias"),
}


def load_weights(model, checkpoint, allow_random_head=False):
  """Loads `checkpoint` into `model`; returns a one-line description.

  Our layout (`checkpointing.checkpoint_for`) loads the whole model. Other
  layouts go through `convert_checkpoint.load_any_checkpoint` (encoder; TF1
  fine-tuned classifier/SQuAD/RACE heads are read by their original names).
  A downstream model whose checkpoint holds no head fails unless
  `allow_random_head` (e.g. exporting a pretraining checkpoint as a
  classifier for a smoke test).
  """
  path = checkpointing.resolve_checkpoint_path(checkpoint)
  encoder = _encoder_of(model)
  is_downstream = model is not encoder
  names = {name for name, _ in tf.train.list_variables(path)}
  ours = any(name.startswith("encoder/") for name in names)
  if ours:
    heads = set(checkpointing.model_parts(model)) - {"encoder"}
    held = {name.split("/", 1)[0] for name in names}
    if heads - held:
      if not allow_random_head:
        raise ValueError(
            f"{path}: holds an encoder but not the {type(model).__name__} "
            f"head ({sorted(heads - held)}): it is not a fine-tuned "
            "checkpoint of this model. Pass --allow_random_head to export "
            "with a freshly initialised head.")
      checkpointing.restore_encoder(encoder, path)
      return f"encoder from {path} (albert_tf layout), head random"
    checkpointing.restore_model(model, path)
    return f"{path} (albert_tf layout)"
  from albert_tf import convert_checkpoint  # pylint: disable=g-import-not-at-top
  convert_checkpoint.load_any_checkpoint(model, path)
  if not is_downstream or isinstance(model, AlbertPretrainer):
    return f"{path} (converted)"
  head = getattr(model, "head", None)
  tf1_names = _TF1_HEADS.get(getattr(head, "name", ""))
  if tf1_names and all(n in names for n in tf1_names):
    reader = tf.train.load_checkpoint(path)
    for var, name in zip((head.output_weights, head.output_bias), tf1_names):
      value = reader.get_tensor(name)
      if tuple(value.shape) != tuple(var.shape):
        raise ValueError(f"{path}: {name} has shape {value.shape}, the model "
                         f"expects {tuple(var.shape)}")
      var.assign(value)
    return f"{path} (converted, head from {tf1_names[0]})"
  if not allow_random_head:
    raise ValueError(f"{path}: no task head found for "
                     f"{type(model).__name__}; pass --allow_random_head to "
                     "export with a freshly initialised head.")
  return f"encoder from {path} (converted), head random"


# --- CLI ---------------------------------------------------------------------------

FLAGS = flags.FLAGS


def define_flags():
  flags.DEFINE_enum("export_kind", None, list(EXPORT_KINDS),
                    "What to export: encoder (TF-Hub reusable), pretraining "
                    "(+ mlm/sop), preprocessing (text -> ids) or serving "
                    "(one task model for TF Serving).")
  flags.DEFINE_string("export_dir", None,
                      "Base directory; the export goes to <export_dir>/"
                      "<version>/.")
  flags.DEFINE_integer("version", None,
                       "Version subdirectory; default: next free integer.")
  flags.DEFINE_string("albert_config_file", None,
                      "albert_config.json (original), a .yaml config or a "
                      "preset name such as albert_base_v2.")
  flags.DEFINE_string("checkpoint", None,
                      "Checkpoint prefix or directory: ours or one "
                      "convert_checkpoint reads (original TF1, Model Garden).")
  flags.DEFINE_bool("random_init", False,
                    "Export randomly initialised weights (no --checkpoint); "
                    "for smoke tests only.")
  flags.DEFINE_bool("allow_random_head", False,
                    "Serving export of a task model from a checkpoint that "
                    "has no head (e.g. a pretraining one): keep the head "
                    "random instead of failing.")
  flags.DEFINE_string("spm_model_file", None,
                      "SentencePiece .model; required for preprocessing and "
                      "serving, shipped as an asset with the others.")
  flags.DEFINE_bool("do_lower_case", True,
                    "Lowercase text (must match how the model was trained).")
  flags.DEFINE_integer("seq_length", 128,
                       "Packed sequence length of text-in signatures.")
  flags.DEFINE_enum("task", "encoder", list(serving_modules.TASKS),
                    "Serving export: which model and outputs.")
  flags.DEFINE_integer("num_labels", 2, "Classification: number of classes.")
  flags.DEFINE_list("label_names", None,
                    "Classification: class names for the `label` output "
                    "(default 0..num_labels-1).")
  flags.DEFINE_integer("num_text_fields", 1,
                       "encoder/classification/regression serving: 1 "
                       "(`text`) or 2 (`text_a`, `text_b`) text inputs.")
  flags.DEFINE_bool("with_answerability", False,
                    "SQuAD 2.0: the model has an answerability head.")
  flags.DEFINE_integer("max_answer_length", 30, "SQuAD: longest answer "
                       "(tokens).")
  flags.DEFINE_integer("max_query_length", 64, "SQuAD: question tokens kept.")
  flags.DEFINE_integer("num_choices", 4, "Multiple choice: choices per "
                       "question.")
  flags.DEFINE_enum("truncation", "longest_first",
                    list(preprocessing.TRUNCATION_MODES),
                    "Preprocessing export: how a too-long pair is cut.")
  flags.DEFINE_integer("max_first_segment_length", None,
                       "Preprocessing export with --truncation=first_fixed: "
                       "cap on segment A.")


def run(kind, export_dir, albert_config_file=None, checkpoint=None,
        random_init=False, allow_random_head=False, spm_model_file=None,
        do_lower_case=True, seq_length=128, task="encoder", num_labels=2,
        label_names=None, num_text_fields=1, with_answerability=False,
        max_answer_length=30, max_query_length=64, num_choices=4,
        truncation="longest_first", max_first_segment_length=None,
        version=None):
  """Builds, loads and exports; returns the version directory written."""
  if kind not in EXPORT_KINDS:
    raise ValueError(f"export kind must be one of {EXPORT_KINDS}, got {kind!r}")
  if not export_dir:
    raise ValueError("--export_dir is required")
  if kind in ("preprocessing", "serving") and not spm_model_file:
    raise ValueError(f"--spm_model_file is required for a {kind} export")
  config = load_config(albert_config_file) if albert_config_file else None
  if kind == "preprocessing":
    return export_preprocessing(
        spm_model_file, export_dir, seq_length=seq_length,
        do_lower_case=do_lower_case, config=config, truncation=truncation,
        max_first_segment_length=max_first_segment_length, version=version)
  if config is None:
    raise ValueError(f"--albert_config_file is required for a {kind} export")
  if not checkpoint and not random_init:
    raise ValueError("--checkpoint is required (or --random_init for a smoke "
                     "test)")
  model = build_model(kind, config, task=task, num_labels=num_labels,
                      with_answerability=with_answerability,
                      num_choices=num_choices)
  if checkpoint:
    logging.info("loaded %s", load_weights(model, checkpoint,
                                          allow_random_head=allow_random_head))
  if kind == "encoder":
    return export_encoder(model, export_dir, spm_model_file, do_lower_case,
                          version)
  if kind == "pretraining":
    return export_pretraining(model, export_dir, spm_model_file, do_lower_case,
                              version)
  return export_serving(model, export_dir, spm_model_file,
                        seq_length=seq_length, do_lower_case=do_lower_case,
                        label_names=label_names,
                        num_text_fields=num_text_fields,
                        max_answer_length=max_answer_length,
                        max_query_length=max_query_length,
                        regression=task == "regression", version=version)


def main(argv):
  del argv
  path = run(FLAGS.export_kind, FLAGS.export_dir,
             albert_config_file=FLAGS.albert_config_file,
             checkpoint=FLAGS.checkpoint, random_init=FLAGS.random_init,
             allow_random_head=FLAGS.allow_random_head,
             spm_model_file=FLAGS.spm_model_file,
             do_lower_case=FLAGS.do_lower_case, seq_length=FLAGS.seq_length,
             task=FLAGS.task, num_labels=FLAGS.num_labels,
             label_names=FLAGS.label_names,
             num_text_fields=FLAGS.num_text_fields,
             with_answerability=FLAGS.with_answerability,
             max_answer_length=FLAGS.max_answer_length,
             max_query_length=FLAGS.max_query_length,
             num_choices=FLAGS.num_choices, truncation=FLAGS.truncation,
             max_first_segment_length=FLAGS.max_first_segment_length,
             version=FLAGS.version)
  print(describe_signatures(path))
  print(f"Check with: saved_model_cli show --all --dir {path}")


if __name__ == "__main__":
  define_flags()
  flags.mark_flags_as_required(["export_kind", "export_dir"])
  app.run(main)
