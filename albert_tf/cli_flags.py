"""Flags and the main body shared by the command-line entry points.

Only entry points (albert_tf/run_*.py, export_savedmodel, convert_checkpoint)
import this module, and only from their `define_flags()` / `main()`: the
library below them defines no flags. Every tool takes its configuration as
`--config_file` (repeatable; a path or a packaged config such as
`models/albert_base_v2.yaml`) + `--params_override` (repeatable too, applied
in order); the config fields that declare a flag (`setting(flag=...)`,
core/settings.py) have their own, applied last, and the exporter's flags
are the serving params fields that declare one. Every tool parses its
command line with `parse_flags`.
"""

import sys
import typing
from typing import Any, Dict, Sequence

from absl import app
from absl import flags
from absl import logging
import tensorflow as tf

from albert_tf.checkpoints import canonical_weights
from albert_tf.core import experiment_config
from albert_tf.core import run_record
from albert_tf.core import settings
from albert_tf.core import train_lib
from albert_tf.core import actions
from albert_tf.serving import lite_export
from albert_tf.serving import preprocessing
from albert_tf.tasks import all_tasks  # pylint: disable=unused-import
from albert_tf.tasks import export as tasks_export
from albert_tf.tasks import registry
from albert_tf.tasks.export_request import ExportForm, ExportRequest
from albert_toolkit import command_line

FLAGS = flags.FLAGS
PREEMPTED_EXIT_CODE = 143  # 128 + SIGTERM
# Errors a tool reports as one line (exit 1) instead of a traceback.
USER_ERRORS = (ValueError, FileNotFoundError, PermissionError,
               actions.TrainingError, canonical_weights.CheckpointConversionError)

# The flag type of a setting's field type (other types: a string flag).
_DEFINE = {bool: flags.DEFINE_bool, int: flags.DEFINE_integer,
           float: flags.DEFINE_float}
# The modes of the fine-tuning tools.
FINETUNING_MODES = [m for m in train_lib.MODES if m != "continuous_eval"]
# The run tools' flags that only these modes read (any other mode would
# ignore them). Export settings: --mode=export only (run_training).
_TRAINING_MODES = ("train", "train_and_eval")
MODE_FLAGS = {
    "checkpoint": ("eval", "predict", "export"),
    "output_dir": ("eval", "train_and_eval", "predict"),
    "export_dir": ("export",),
    # A warm start: the first step of a new run.
    "init_checkpoint": _TRAINING_MODES,
    "init_from_group0": _TRAINING_MODES,
    "init_saved_model": _TRAINING_MODES,
    # The end of training (continuous_eval waits for its checkpoint); an
    # eval or export would log it as a change of the run.
    "train_steps": _TRAINING_MODES + ("continuous_eval",),
}


def define_config_flags():
  flags.DEFINE_multi_string(
      "config_file", [], "YAML experiment/model config(s) applied in order: "
      "a path, or a packaged config under albert_tf/configs/ (e.g. "
      "models/albert_base_v2.yaml, pretraining/albert_tiny_cpu.yaml); a flat "
      "model YAML or a released albert_config.json sets `model`.")
  flags.DEFINE_multi_string(
      "params_override", [], "Overrides 'a.b=c,d.e=f' applied after the "
      "files (repeatable: applied in order, later values winning).")


# The flags `_define_flags` derives from config and serving params fields
# (`setting(flag=...)`), named here so that grep finds where each comes
# from; tests/test_cli_strict.py checks this table against the fields.
SETTING_FLAGS = {
    # Experiment config fields (the run tools; each defines its tasks').
    "run": ("data_dir", "do_lower_case", "doc_stride", "init_checkpoint",
            "init_from_group0", "init_saved_model", "label_names",
            "max_answer_length", "max_query_length", "max_seq_length",
            "null_score_diff_threshold", "num_cpu_devices", "predict_file",
            "skip_malformed_rows", "spm_model_file", "strategy", "task_name",
            "tpu", "train_file", "train_steps", "version_2_with_negative",
            "vocab_file", "with_answerability"),
    # Serving params fields (export_savedmodel; a run tool's --mode=export
    # those no config field covers).
    "export": ("do_lower_case", "doc_stride", "label_names",
               "max_answer_length", "max_query_length", "max_seq_length",
               "max_windows", "null_score_diff_threshold", "num_choices",
               "num_labels", "num_text_fields", "spm_model_file",
               "vocab_file", "with_answerability"),
}


def _define_flags(flagged: Dict[str, settings.Setting]) -> None:
  """Defines flag name -> its setting's flag (type from the field's); a name
  defined already keeps its first definition."""
  for name, s in flagged.items():
    if name in FLAGS:
      continue
    if s.choices:
      flags.DEFINE_enum(name, None, list(s.choices), s.flag)
    elif typing.get_origin(s.type) is list:
      flags.DEFINE_list(name, None, s.flag)
    else:
      _DEFINE.get(s.type, flags.DEFINE_string)(name, None, s.flag)


def define_run_flags(task_classes, default_mode: str, modes: Sequence[str]):
  """Flags of every training tool: the tool's own and the settings of the
  tasks' configs."""
  define_config_flags()
  flags.DEFINE_string("model_dir", None, "The run directory: checkpoints, "
                      "summaries, metrics.jsonl and the run record.")
  flags.DEFINE_enum("mode", default_mode, list(modes), "What to run.")
  flags.DEFINE_string("checkpoint", None,
                      "eval/predict/export: checkpoint to load (default: the "
                      "latest in <model_dir>/checkpoints; "
                      "<model_dir>/best/ckpt is the best one).")
  for task_cls in task_classes:
    _define_flags(settings.flagged(task_cls.config_cls))


def define_finetuning_flags(task_classes):
  """Flags of the fine-tuning tools (`task_classes`: the tasks they run)."""
  define_run_flags(task_classes, "train_and_eval", FINETUNING_MODES)
  flags.DEFINE_string("output_dir", None,
                      "Where eval results and predictions go (default: "
                      "--model_dir).")
  flags.DEFINE_string("export_dir", None,
                      "--mode=export: base directory of the SavedModel "
                      "(written to <export_dir>/<version>/).")
  for task_cls in task_classes:
    _define_flags(run_export_flags(task_cls))


def run_export_flags(task_cls) -> Dict[str, settings.Setting]:
  """The export flags of a run tool's --mode=export: the settings of the
  task's serving params an export may change that no config field covers
  (those follow the config)."""
  config_fields = {s.path.rsplit(".", 1)[-1]
                   for s in settings.walk(task_cls.config_cls)}
  return {name: s for name, s in
          settings.flagged(task_cls.serving_params_cls).items()
          if s.export and s.path not in config_fields}


def config_export_flags(task_cls) -> Dict[str, settings.Setting]:
  """The config fields' flags an export of a run may change
  (`setting(export=True)`: label names, decoding). With --mode=export they
  are the export's settings, as export_savedmodel takes them, not changes
  of the run's recorded config."""
  return {name: s for name, s in settings.flagged(task_cls.config_cls).items()
          if s.export}


def define_export_flags():
  """Flags of export_savedmodel (a run record answers most of them)."""
  define_config_flags()
  for name, text in (
      ("albert_config_file", "Deprecated alias of --config_file."),
      ("model_dir", "A run directory (its record and latest checkpoint)."),
      ("export_dir", "Writes <export_dir>/<version>/."),
      ("checkpoint", "Checkpoint prefix or directory (any layout).")):
    flags.DEFINE_string(name, None, text)
  for name, text in (("version", "Version dir (default: next free)."),
                     ("max_first_segment_length", "Preprocessing export "
                      "with --truncation=first_fixed: cap on A.")):
    flags.DEFINE_integer(name, None, text)
  for name, text in (("random_init", "Random weights (smoke tests)."),
                     ("allow_random_head", "Keep a missing head random "
                      "(not with a run directory: its heads were trained).")):
    flags.DEFINE_bool(name, None, text)
  # The export settings of every registered task's serving params.
  _define_flags(all_export_flags())
  flags.DEFINE_enum("export_kind", None, tasks_export.export_kinds(),
                    "Default: the run's task's (serving for fine-tuning, "
                    "encoder for pretraining), else encoder (or serving "
                    "with --task).")
  flags.DEFINE_enum("task", None, tasks_export.serving_task_names(),
                    "Serving export without a run directory: which model "
                    "and outputs.")
  flags.DEFINE_enum("truncation", None,
                    list(preprocessing.TRUNCATION_MODES),
                    "Preprocessing export: how a too-long pair is cut "
                    "(default longest_first).")
  flags.DEFINE_enum("format", "savedmodel", list(lite_export.FORMATS),
                    "savedmodel: <export_dir>/<version>/saved_model.pb; "
                    "tflite: <export_dir>/<version>/model.tflite + model.json "
                    "(text in, TF Text's TFLite kernels, no Flex ops).")
  flags.DEFINE_enum("precision", "float32", sorted(
      {p for ps in lite_export.PRECISIONS.values() for p in ps}),
                    "savedmodel: float32 | bfloat16; tflite: float32 | "
                    "float16 | dynamic_int8 | int8 (int8 calibrates on the "
                    "run's data).")
  flags.DEFINE_integer("representative_examples", None,
                       "--precision=int8: examples of the run's training "
                       "data that calibrate activation ranges (default "
                       f"{lite_export.DEFAULT_REPRESENTATIVE_EXAMPLES}).")


def export_settings(flagged: Dict[str, settings.Setting]) -> Dict[str, Any]:
  """The serving params fields of the `flagged` export flags that the user
  gave."""
  given = {name: flag_value(name) for name in flagged}
  return {name: list(value) if isinstance(value, list) else value
          for name, value in given.items() if value is not None}


def all_export_flags() -> Dict[str, settings.Setting]:
  """The export flags of export_savedmodel: every registered task's serving
  params settings that declare a flag."""
  out = {}
  for task_cls in registry.tasks():
    for name, s in settings.flagged(task_cls.serving_params_cls).items():
      out.setdefault(name, s)
  return out


def parse_flags(argv):
  """The `flags_parser` of every tool (`app.run(main, flags_parser=...)`):
  a word that is not a flag (an unquoted glob's other matches, `a=b`
  without dashes) or a NaN/infinite float flag is a one-line error
  (albert_toolkit/command_line.py, shared with the data tools)."""
  # TensorFlow's logger has a handler of its own and also reaches absl's:
  # every TensorFlow warning showed twice. absl's alone prints it.
  tf.get_logger().handlers.clear()
  return command_line.parse_flags(argv)


def config_sources():
  """--config_file values, plus the deprecated --albert_config_file."""
  alias = flag_value("albert_config_file")
  return list(FLAGS.config_file) + ([alias] if alias else [])


def flag_value(name: str):
  """The value of flag `name`, None when the tool does not define it."""
  return FLAGS[name].value if name in FLAGS else None


def flag_overrides(config_cls, skip=()) -> Dict[str, Any]:
  """Nested {section: {field: value}} of the flags of `config_cls`'s
  settings that are set, but the flags named in `skip`."""
  out = {}
  for name, s in settings.flagged(config_cls).items():
    value = flag_value(name) if name not in skip else None
    if value is None or value == "":
      continue
    *sections, key = s.path.split(".")
    node = out
    for section in sections:
      node = node.setdefault(section, {})
    node[key] = value
  return out


def fail(error: Exception):
  """The one-line error of every tool (exit 1), once (it was also logged,
  so every error showed twice)."""
  print(f"ERROR: {error}", file=sys.stderr)
  sys.exit(1)


def export_request() -> ExportRequest:
  """export_savedmodel's flags as an ExportRequest."""
  same = ("export_dir", "export_kind", "task", "version", "params_override",
          "truncation", "max_first_segment_length", "representative_examples")
  return ExportRequest(
      model_dir=FLAGS.model_dir or "", checkpoint=FLAGS.checkpoint or "",
      random_init=bool(FLAGS.random_init),
      allow_random_head=bool(FLAGS.allow_random_head),
      config_files=config_sources(),
      form=ExportForm(FLAGS.format, FLAGS.precision),
      settings=export_settings(all_export_flags()),
      **{name: FLAGS[name].value for name in same})


def training_tool(task_cls, modes: Sequence[str] = ()):
  """(main, cli) of the training tool of `task_cls`: a fine-tuning tool, or
  with `modes` a tool of those (the first the default); `cli` is its
  console-script entry point."""
  def main(argv):
    del argv
    run_training(task_cls)

  def cli():
    if modes:
      define_run_flags([task_cls], modes[0], modes)
    else:
      define_finetuning_flags([task_cls])
    app.run(main, flags_parser=parse_flags)
  return main, cli


def run_training(task_cls):
  """The main body of the training tools: config from the flags, the task
  `task_cls(config, model_dir)`, then train_lib.run_experiment."""
  if not FLAGS.model_dir:
    fail(ValueError("--model_dir is required"))
  export_given = export_settings(run_export_flags(task_cls))
  if export_given and FLAGS.mode != "export":
    fail(ValueError(f"--{sorted(export_given)[0]} applies to --mode=export "
                    f"only (--mode={FLAGS.mode})"))
  exported = config_export_flags(task_cls) if FLAGS.mode == "export" else {}
  export_given.update(export_settings(exported))
  for name, modes in MODE_FLAGS.items():
    if flag_value(name) is not None and FLAGS.mode not in modes:
      fail(ValueError(f"--{name} applies to --mode={' or '.join(modes)} "
                      f"only (--mode={FLAGS.mode})"))
  try:
    # A run that exists is continued from its recorded config: only what
    # the command line changes is checked against the record.
    # The one read of the record for the whole command.
    record = run_record.read(FLAGS.model_dir)
    # Not binding: a first start that ended before any checkpoint.
    base = record if record and run_record.binding(record) else None
    if base is not None and base.task != task_cls.name:
      raise run_record.refuse("task", base.task, task_cls.name,
                              FLAGS.model_dir,
                              "use a new --model_dir for another task")
    recipe = [task_cls.recipe] if task_cls.recipe and base is None else []
    if recipe:
      logging.info("a new %s run starts from the recipe %s (then --config_"
                   "file, --params_override and flags)", task_cls.name,
                   task_cls.recipe)
    config = experiment_config.load_experiment_config(
        task_cls.config_cls, recipe + list(FLAGS.config_file),
        FLAGS.params_override,
        flag_overrides(task_cls.config_cls, skip=exported),
        base=base.config if base else None,
        base_source=f"{FLAGS.model_dir}/{run_record.CONFIG_NAME}")
    task = task_cls(config, FLAGS.model_dir)
    result = train_lib.run_experiment(
        task, config, FLAGS.model_dir, FLAGS.mode,
        output_dir=flag_value("output_dir"), checkpoint=FLAGS.checkpoint,
        export_dir=flag_value("export_dir"),
        export_fn=tasks_export.run_exporter(export_given), record=record)
  except USER_ERRORS as e:
    fail(e)
  logging.info("done: %s", {k: v for k, v in result.items() if k != "train"})
  if result.get("train", {}).get("stopped") == "preempted":
    sys.exit(PREEMPTED_EXIT_CODE)
  return result
