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
      --config_file=albert_base/albert_config.json \
      --checkpoint=albert_base/model.ckpt-best \
      --spm_model_file=albert_base/30k-clean.model --export_dir=/tmp/enc
  python -m albert_tf.export_savedmodel --export_kind=serving \
      --task=classification --num_labels=3 --num_text_fields=2 \
      --label_names=entailment,neutral,contradiction \
      --config_file=... --checkpoint=mnli_run/ckpt \
      --spm_model_file=... --seq_length=128 --export_dir=/models/mnli
"""

import os
import shutil
import tempfile

from absl import logging
import tensorflow as tf

from albert_tf.checkpoints import restore as restore_lib
from albert_tf.checkpoints.paths import existing_versions  # pylint: disable=unused-import
from albert_tf.checkpoints.paths import next_version
from albert_tf.modeling import albert_config
from albert_tf.modeling.models import albert_squad_v2
from albert_tf.modeling.models import downstream_models
from albert_tf.modeling.models.albert_pretrainer import AlbertPretrainer
from albert_tf.modeling.networks.albert_encoder import AlbertEncoder
from albert_tf.serving import preprocessing
from albert_tf.serving import serving_modules
from albert_tf.serving import squad_module
from albert_tf.serving import squad_windows
from albert_tf.serving import task_modules

EXPORT_KINDS = ("encoder", "pretraining", "preprocessing", "serving")
CONFIG_ASSET_NAME = "albert_config.json"
# The TF Serving module class of each task (serving_modules.TASKS).
SERVING_MODULES = {cls.task: cls for cls in (
    task_modules.EncoderServingModule, task_modules.ClassificationModule,
    task_modules.RegressionModule, squad_module.SquadModule,
    task_modules.MultipleChoiceModule)}

# --- Versioned directories ---------------------------------------------------


def version_dir(export_dir, version=None):
  """`<export_dir>/<version>` (default: the next free one); fails in one line
  when that version already exists."""
  if version is None:
    version = next_version(export_dir)
  if int(version) < 0:
    raise ValueError(f"version must be a non-negative integer, got {version}")
  final = os.path.join(export_dir, str(int(version)))
  if tf.io.gfile.exists(final):
    raise ValueError(f"{final} already exists; pass another --version or "
                     "leave it unset to use the next free one")
  return final


def save_versioned(module, export_dir, signatures, version=None):
  """Saves `module` to `<export_dir>/<version>/` atomically; returns the path.

  Written to a hidden sibling directory first (TF Serving ignores
  non-integer names) and renamed, so a server polling `export_dir` never
  loads a half-written model.
  """
  final = version_dir(export_dir, version)
  tf.io.gfile.makedirs(export_dir)
  tmp = os.path.join(export_dir,
                     f".tmp-{os.path.basename(final)}-{os.getpid()}")
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
  if spm_model_file:
    preprocessing.check_spm_model(spm_model_file, encoder.config.vocab_size)
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
  if spm_model_file:
    preprocessing.check_spm_model(spm_model_file, config.vocab_size)
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
    config = albert_config.as_albert_config(config)
    if seq_length > config.max_position_embeddings:
      raise ValueError(f"seq_length {seq_length} exceeds the model's "
                       f"max_position_embeddings "
                       f"{config.max_position_embeddings}")
    preprocessing.check_spm_model(spm_model_file, config.vocab_size)
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
  if isinstance(model, (downstream_models.AlbertSpanLabeler,
                        albert_squad_v2.AlbertSquadV2)):
    return "squad"
  if isinstance(model, downstream_models.AlbertMultipleChoice):
    return "multiple_choice"
  if isinstance(model, AlbertEncoder):
    return "encoder"
  raise TypeError(f"no serving task for {type(model).__name__}")


def serving_module_class(model, task, doc_stride=None):
  """The TF Serving module class for `model` and `task`."""
  if task not in SERVING_MODULES:
    raise ValueError(f"task must be one of {serving_modules.TASKS}, got "
                     f"{task!r}")
  if isinstance(model, albert_squad_v2.AlbertSquadV2) and not doc_stride:
    raise ValueError("the SQuAD 2.0 (xlnet head) export serves doc-stride "
                     "windows; set doc_stride")
  if doc_stride and SERVING_MODULES[task] is squad_module.SquadModule:
    return squad_windows.SquadWindowServingModule
  return SERVING_MODULES[task]


def export_serving(model, export_dir, spm_model_file, seq_length=128,
                   do_lower_case=True, label_names=None, num_text_fields=1,
                   max_answer_length=30, max_query_length=64,
                   regression=False, version=None, task=None,
                   doc_stride=None, max_windows=32,
                   null_score_diff_threshold=None):
  """Exports `model` for TF Serving (text, ids and tf.Example signatures).

  `model`: AlbertEncoder, AlbertClassifier (classification, or regression
  when num_labels == 1), AlbertSpanLabeler (SQuAD: fields `question`,
  `context`; the question is capped at `max_query_length` tokens) or
  AlbertMultipleChoice (fields `context`, `choices`). `task` (one of
  serving_modules.TASKS) overrides the task read from the model's type.
  SQuAD with `doc_stride`: the text signatures slide doc-stride windows over
  long contexts (up to `max_windows`; `squad_windows`) instead of
  truncating; AlbertSquadV2 (the original's v2 head) needs it, and answers
  "" at `null_score_diff_threshold`.
  """
  module_class = serving_module_class(model, task or task_of(model, regression),
                                      doc_stride)
  config = _encoder_of(model).config
  if seq_length > config.max_position_embeddings:
    raise ValueError(f"seq_length {seq_length} exceeds the model's "
                     f"max_position_embeddings {config.max_position_embeddings}")
  preprocessing.check_spm_model(spm_model_file, config.vocab_size)
  preprocessor = module_class.make_preprocessor(
      spm_model_file, do_lower_case, seq_length,
      max_query_length=max_query_length)
  given = dict(num_text_fields=num_text_fields, label_names=label_names,
               max_answer_length=max_answer_length, doc_stride=doc_stride,
               max_query_length=max_query_length, max_windows=max_windows,
               null_score_diff_threshold=null_score_diff_threshold)
  options = {k: v for k, v in given.items() if k in module_class.options}
  with _ConfigAsset(config) as config_file:
    module = module_class(model, preprocessor, config, config_file=config_file,
                          spm_model_file=spm_model_file,
                          do_lower_case=do_lower_case, **options)
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


def load_weights(model, checkpoint, allow_random_head=False):
  """Loads `checkpoint` (any layout `restore` reads) into the whole `model`;
  returns a one-line description.

  A downstream model whose checkpoint holds no head fails unless
  `allow_random_head` (e.g. exporting a pretraining checkpoint as a
  classifier for a smoke test).
  """
  return restore_lib.restore(model, checkpoint,
                             allow_missing_heads=allow_random_head).summary()


def run(kind, export_dir, albert_config_file=None, checkpoint=None,
        random_init=False, allow_random_head=False, spm_model_file=None,
        do_lower_case=True, seq_length=128, task="encoder", num_labels=2,
        label_names=None, num_text_fields=1, with_answerability=False,
        max_answer_length=30, max_query_length=64, num_choices=4,
        truncation="longest_first", max_first_segment_length=None,
        version=None, doc_stride=None, max_windows=32):
  """Builds, loads and exports; returns the version directory written."""
  if kind not in EXPORT_KINDS:
    raise ValueError(f"export kind must be one of {EXPORT_KINDS}, got {kind!r}")
  if not export_dir:
    raise ValueError("--export_dir is required")
  if kind in ("preprocessing", "serving") and not spm_model_file:
    raise ValueError(f"--spm_model_file is required for a {kind} export")
  # Bad paths fail here, in one line, before a model is built and loaded.
  version_dir(export_dir, version)
  config = (albert_config.load_model_config([albert_config_file])
            if albert_config_file else None)
  if spm_model_file:
    preprocessing.check_spm_model(spm_model_file,
                                  config.vocab_size if config else None)
  if kind == "preprocessing":
    return export_preprocessing(
        spm_model_file, export_dir, seq_length=seq_length,
        do_lower_case=do_lower_case, config=config, truncation=truncation,
        max_first_segment_length=max_first_segment_length, version=version)
  if config is None:
    raise ValueError(f"--config_file is required for a {kind} export")
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
                        max_query_length=max_query_length, version=version,
                        task=task, doc_stride=doc_stride,
                        max_windows=max_windows)
