"""The one export path: a task's model, restored, exported with the task's
serving module and params. `export` runs an `ExportRequest` (what
export_savedmodel's flags say; checked first by export_request.py): from a
run directory (--model_dir, or a --checkpoint inside one) the task is
rebuilt from the run record through the registry and exported by
`export_run`, as `run_* --mode=export` is; else the task class and params
come from the request (`task_for_flags`).
"""

import contextlib
import dataclasses
import functools
from typing import Any, Dict, List, Mapping, Optional, Tuple, Type

from absl import logging
import numpy as np
import tf_keras

from albert_tf.checkpoints import identity as identity_lib
from albert_tf.core import base_task
from albert_tf.core import checkpoint_config
from albert_tf.core import distribute_utils
from albert_tf.core import run_record
from albert_tf.core import run_restore
from albert_tf.modeling.networks.albert_encoder import AlbertEncoder
from albert_tf.modeling.networks.albert_encoder import INPUT_NAMES
from albert_tf.serving import export_lib
from albert_tf.serving import lite_export
from albert_tf.serving import preprocessing
from albert_tf.serving import serving_modules
from albert_tf.serving import serving_params
from albert_tf.serving import wordpiece
from albert_tf.tasks import export_request
from albert_tf.tasks import registry
from albert_tf.tasks.export_request import ExportForm, ExportRequest
from albert_toolkit import output_files

ENCODER = base_task.ENCODER_EXPORT


def export_kinds():
  """Every export kind: the generic ones and each registered task's."""
  kinds = {ENCODER, export_lib.PREPROCESSING_EXPORT}
  for task_cls in registry.tasks():
    kinds.update(task_cls.export_kinds)
  return sorted(kinds)


def serving_task_names():
  """Every `--task` name: the serving tasks of each registered task."""
  return sorted({serving for task_cls in registry.tasks()
                 for serving in task_cls.serving_tasks})


def _encoder_config(model):
  return getattr(model, "encoder", model).config


def check_params(params, model_config) -> None:
  preprocessing.check_tokenizer_files(
      params.spm_model_file, params.vocab_file, model_config.vocab_size)


@contextlib.contextmanager
def precision_scope(precision: str):
  """Models built inside compute in `precision` (Keras' mixed policy: the
  weights stay float32, so checkpoints restore as they are)."""
  previous = tf_keras.mixed_precision.global_policy()
  # A .tflite's precisions are the converter's: its model is float32.
  tf_keras.mixed_precision.set_global_policy(
      distribute_utils.policy_name(precision) if precision == "bfloat16"
      else "float32")
  try:
    yield
  finally:
    tf_keras.mixed_precision.set_global_policy(previous)


def _export_tflite(task_cls, kind, model, params, export_dir, version, form):
  config = _encoder_config(model)
  if kind == ENCODER:
    module = serving_modules.EncoderModule(getattr(model, "encoder", model),
                                           config)
  else:
    module = task_cls.serving_module(
        kind, model, params, dict(config_file=None, spm_model_file=None,
                                  vocab_file=None, do_lower_case=None))
  spm, vocab = params.spm_model_file, params.vocab_file
  metadata = {
      "kind": kind,
      "task": task_cls.name if task_cls else None,
      "serving_params": {k: v for k, v in dataclasses.asdict(params).items()
                         if k not in serving_params.TOKENIZER_FILES},
      "spm_model_file": spm or None,
      "vocab_file": vocab or None,
      "vocabulary_sha256": output_files.file_sha256(spm or vocab)
                           if spm or vocab else None,
      "model_config": config.to_json_dict(),
      "source": form.source,
  }
  return lite_export.export_tflite(module, export_dir, form.precision,
                                   metadata, form.calibration_examples,
                                   version)


def export_model(task_cls: Type[base_task.Task], kind: str, model, params,
                 export_dir: str, version: Optional[int] = None,
                 form: Optional[ExportForm] = None) -> str:
  """Exports `model` as `kind`; returns the version directory written.

  Args:
    task_cls: the registered task class whose serving module is used.
    kind: `encoder` or one of `task_cls.export_kinds`.
    model, params: the restored model and the task's `ServingParams`.
    export_dir, version: `<export_dir>/<version>/`; None: the next free one.
    form: SavedModel or .tflite and the precision (a float32 SavedModel).
  """
  form = form or ExportForm()
  config = _encoder_config(model)
  check_params(params, config)
  if kind != ENCODER and kind not in task_cls.export_kinds:
    raise ValueError(f"--export_kind={kind} is not an export of task "
                     f"{task_cls.name!r} (its kinds: "
                     f"{', '.join((ENCODER,) + tuple(task_cls.export_kinds))})")
  if form.export_format == "tflite":
    return _export_tflite(task_cls, kind, model, params, export_dir, version,
                          form)
  info = export_info(task_cls, kind, params, form)
  if kind == ENCODER:
    return export_lib.export_encoder(
        model, export_dir, params.spm_model_file or None,
        params.do_lower_case, version, params.vocab_file or None, info)
  return export_lib.export_module(
      lambda assets: task_cls.serving_module(kind, model, params, assets),
      config, export_dir, params.spm_model_file or None,
      params.do_lower_case, version, params.vocab_file or None, info)


def export_info(task_cls, kind: str, params, form: ExportForm
                ) -> Dict[str, Any]:
  """A SavedModel's `assets/export.json`: what it is (kind, task, serving
  settings with the label names, precision) and its weights' source (the
  checkpoint and its identity, whose `updates` is the step; or
  `random_init`), as a .tflite's model.json says."""
  return {
      "kind": kind,
      "task": task_cls.name if task_cls else None,
      "serving_params": {k: v for k, v in dataclasses.asdict(params).items()
                         if k not in serving_params.TOKENIZER_FILES},
      "precision": form.precision,
      "source": form.source,
  }


def run_params(task: base_task.Task, recorded_facts: Mapping[str, Any],
               given: Mapping[str, Any]):
  """The params of a run's task with the flags `given` applied (only
  settable fields may change)."""
  return serving_params.with_settings(
      task.serving_params(recorded_facts), given,
      f"a {task.name} export", recorded_in=task.model_dir)


def export_run(task: base_task.Task, model, kind: str, export_dir: str,
               recorded_facts: Mapping[str, Any],
               given: Optional[Mapping[str, Any]] = None,
               version: Optional[int] = None,
               form: Optional[ExportForm] = None) -> str:
  """Exports a run's restored `model` (built by `task.build_model()`)."""
  params = run_params(task, recorded_facts, given or {})
  return export_model(type(task), kind, model, params, export_dir, version,
                      form)


def run_exporter(settings: Optional[Mapping[str, Any]] = None):
  """`export_fn(task, model, export_dir, record, checkpoint)` of
  run_experiment's export mode: the task's default export of the run's
  restored model, saying which checkpoint it came from."""
  def export_fn(task, model, export_dir, record, checkpoint):
    form = ExportForm(source=weights_source(checkpoint))
    return export_run(task, model, type(task).default_export_kind,
                      export_dir, record.facts, settings, form=form)
  return export_fn


def task_for_flags(serving_task: Optional[str], kind: str,
                   given: Dict[str, Any]
                   ) -> Tuple[Type[base_task.Task], Any]:
  """(task class, params) of an export without a run directory."""
  if serving_task:
    task_cls = registry.task_for_serving_name(serving_task)
    defaults = dict(task_cls.serving_tasks[serving_task])
  elif kind in (ENCODER, export_lib.PREPROCESSING_EXPORT):  # no task
    return None, serving_params.with_settings(
        serving_params.ServingParams(), given,
        "an encoder export" if kind == ENCODER else "a preprocessing export")
  else:
    task_cls = registry.task_for_export_kind(kind)
    defaults = {}
  params = task_cls.serving_params_cls(**defaults)
  what = f"a {serving_task or kind} export"
  return task_cls, serving_params.with_settings(params, given, what)


def model_for_flags(task_cls: Type[base_task.Task], kind: str, model_config,
                    params):
  """The model an export without a run wraps: the bare encoder for the
  encoder export, else the task's (`model_for`)."""
  if kind == ENCODER:
    return AlbertEncoder(model_config)
  return task_cls.model_for(kind, model_config, params)


def _run_record(request: ExportRequest) -> Optional[run_record.RunRecord]:
  """The record of --model_dir, else of the run the checkpoint belongs to
  (None if none): the one read of it for the whole export."""
  if request.model_dir:
    record = run_record.read(request.model_dir)
    if record is None:
      raise ValueError(f"--model_dir {request.model_dir}: no "
                       f"{run_record.RECORD_NAME} (not a run directory of "
                       "this version)")
    return record
  if request.checkpoint:
    return run_record.find_for_checkpoint(request.checkpoint)
  return None


def _export_preprocessing(request: ExportRequest, params, model_config):
  return export_lib.export_preprocessing(
      params.spm_model_file, request.export_dir, vocab_file=params.vocab_file,
      seq_length=params.max_seq_length, do_lower_case=params.do_lower_case,
      config=model_config, truncation=request.truncation or "longest_first",
      max_first_segment_length=request.max_first_segment_length,
      version=request.version)


def weights_source(checkpoint: Optional[str]) -> Dict[str, Any]:
  """What an export says its weights came from: the checkpoint and its
  identity, or random initialisation (None)."""
  if not checkpoint:
    return {"random_init": True}
  return {"checkpoint": checkpoint, "identity": identity_lib.read(checkpoint)}


def _form(request: ExportRequest, checkpoint: Optional[str]) -> ExportForm:
  """The request's format and precision; the weights' source."""
  return dataclasses.replace(request.form, source=weights_source(checkpoint))


def _calibration_examples(task, count: int) -> List[Dict[str, Any]]:
  """`count` examples of the run's own training data (numpy arrays of one
  example: the model inputs, and masked_lm_positions where there are)."""
  keys = set(INPUT_NAMES) | {"masked_lm_positions"}
  examples = []
  for batch in task.build_inputs(None, training=True):
    features = batch[0] if isinstance(batch, tuple) else batch
    arrays = {k: np.asarray(v) for k, v in features.items() if k in keys}
    for i in range(len(arrays["input_word_ids"])):
      examples.append({k: v[i] for k, v in arrays.items()})
      if len(examples) == count:
        return examples
  return examples


def _export_of_run(request: ExportRequest, record: run_record.RunRecord
                   ) -> str:
  model_dir = record.model_dir
  task = registry.task_of_record(record, request.config_files,
                                 request.params_override)
  task_cls = type(task)
  if request.task and request.task not in task_cls.serving_tasks:
    raise ValueError(f"--task={request.task} but the run record of "
                     f"{model_dir} has task {task.name!r} (serving: "
                     f"{', '.join(task_cls.serving_tasks)}); omit --task")
  if request.allow_random_head:
    raise ValueError(f"--allow_random_head: the run record of {model_dir} "
                     f"says its heads were trained (task {task.name!r}); "
                     "its checkpoints hold them")
  kind = request.export_kind or task_cls.default_export_kind
  export_request.check_preprocessing_only(request, kind)
  export_request.check_encoder_settings(request, kind, has_tokenizer=True)
  if kind == export_lib.PREPROCESSING_EXPORT:
    params = run_params(task, record.facts, request.settings)
    return _export_preprocessing(request, params, task.config.model)
  with precision_scope(request.form.precision):
    model = task.build_model()
  checkpoint = None
  if not request.random_init:
    checkpoint, report = run_restore.restore_run(
        task, model, functools.partial(
            identity_lib.check, model=record.model, facts=record.facts,
            what=f"the run record of {model_dir}"),
        model_dir, request.checkpoint)
    logging.info("%s", report.summary())
  form = _form(request, checkpoint)
  if form.precision == "int8":
    form.calibration_examples = _calibration_examples(
        task, request.representative_examples or
        lite_export.DEFAULT_REPRESENTATIVE_EXAMPLES)
  return export_run(task, model, kind, request.export_dir, record.facts,
                    request.settings, request.version, form)


def _export_of_flags(request: ExportRequest) -> str:
  kind = request.export_kind or ("serving" if request.task else ENCODER)
  export_request.check_preprocessing_only(request, kind)
  export_request.check_encoder_settings(request, kind, has_tokenizer=bool(
      request.settings.get("spm_model_file") or
      request.settings.get("vocab_file")))
  preprocessing_only = kind == export_lib.PREPROCESSING_EXPORT
  task_cls, params = task_for_flags(
      request.task, kind,
      identity_lib.with_recorded_casing(request.checkpoint, request.settings))
  model_config, _ = checkpoint_config.model_config_for(
      request.config_files, request.params_override,
      checkpoint=request.checkpoint or None, record=None)
  if preprocessing_only:
    return _export_preprocessing(request, params, model_config)
  if model_config is None:
    raise ValueError(f"--config_file is required for a {kind} export")
  if not request.checkpoint and not request.random_init:
    raise ValueError("--checkpoint is required (or --random_init for a smoke "
                     "test)")
  check_params(params, model_config)
  with precision_scope(request.form.precision):
    model = model_for_flags(task_cls, kind, model_config, params)
  if request.checkpoint:
    # The weights must be of the given config and vocabulary (either kind).
    facts = {identity_lib.VOCAB_SHA256: run_record.with_fingerprints(
        dataclasses.asdict(params))[identity_lib.VOCAB_SHA256]}
    if "do_lower_case" in request.settings:
      facts["do_lower_case"] = params.do_lower_case
    _, report = run_restore.restore_run(
        task_cls or base_task.Task, model, functools.partial(
            identity_lib.check, model=model_config.as_dict(), facts=facts,
            what="the given config"), checkpoint=request.checkpoint,
        allow_missing_heads=request.allow_random_head)
    logging.info("%s", report.summary())
  return export_model(task_cls, kind, model, params, request.export_dir,
                      request.version, _form(request, request.checkpoint))


def export(request: ExportRequest) -> str:
  """Runs `request` (what, from where, in which form); returns the version
  directory written. Errors are one line, before anything is written."""
  if not request.export_dir:
    raise ValueError("--export_dir is required")
  export_request.check_form(request)
  export_request.check_weights(request)
  # A taken version or a bad path fails here, before a model is built.
  export_lib.version_dir(request.export_dir, request.version)
  spm = request.settings.get("spm_model_file")
  if spm:
    preprocessing.check_spm_model(spm)
  if request.settings.get("vocab_file"):
    wordpiece.read_vocab(request.settings["vocab_file"])
  record = _run_record(request)
  if record is not None:
    return _export_of_run(request, record)
  return _export_of_flags(request)
