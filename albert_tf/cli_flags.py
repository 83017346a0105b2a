"""Flags and the main body shared by the command-line entry points.

Only entry points (albert_tf/run_*.py, export_savedmodel, convert_checkpoint)
import this module, and only from their `define_flags()` / `main()`: the
library below them defines no flags. Every tool takes its configuration as
`--config_file` (repeatable; a path or a packaged config such as
`models/albert_base_v2.yaml`) + `--params_override` (repeatable too, applied
in order); a few common fields also have their own flag (FLAG_FIELDS),
applied last. Every tool parses its command line with `parse_flags`.
"""

import sys
from typing import Any, Dict, Sequence

from absl import flags
from absl import logging
import tensorflow as tf

from albert_tf.checkpoints import canonical_weights
from albert_tf.core import distribute_utils
from albert_tf.core import experiment_config
from albert_tf.core import run_record
from albert_tf.core import train_lib
from albert_tf.core import actions
from albert_tf.serving import lite_export
from albert_tf.serving import preprocessing
from albert_tf.tasks import all_tasks  # pylint: disable=unused-import
from albert_tf.tasks import export as tasks_export
from data_prep import command_line

FLAGS = flags.FLAGS
PREEMPTED_EXIT_CODE = 143  # 128 + SIGTERM
# Errors a tool reports as one line (exit 1) instead of a traceback.
USER_ERRORS = (ValueError, FileNotFoundError, PermissionError,
               actions.TrainingError, canonical_weights.CheckpointConversionError)

# Flags that set one config field (applied after the files and overrides).
FLAG_FIELDS = {
    "tpu": "runtime.tpu",
    "strategy": "runtime.distribution_strategy",
    "num_cpu_devices": "runtime.num_cpu_devices",
    "init_checkpoint": "trainer.init_checkpoint",
    "init_from_group0": "trainer.init_from_group0",
    "train_steps": "trainer.train_steps",
    "init_saved_model": "task.init_saved_model",
    "spm_model_file": "data.spm_model_file",
    "do_lower_case": "data.do_lower_case",
    "max_seq_length": "data.max_seq_length",
    "skip_malformed_rows": "data.skip_malformed_rows",
    "task_name": "data.task_name",
    "data_dir": "data.data_dir",
    "train_file": "data.train_file",
    "predict_file": "data.predict_file",
    "version_2_with_negative": "data.version_2_with_negative",
    "null_score_diff_threshold": "data.null_score_diff_threshold",
}
# Flags that set a field of the task's serving params (serving_params.py;
# a flag the task's params lack is refused). The run tools' --mode=export
# takes those of them they define that no config field covers.
EXPORT_PARAM_FLAGS = ("seq_length", "spm_model_file", "do_lower_case",
                      "num_labels", "label_names", "num_text_fields",
                      "max_answer_length", "max_query_length", "doc_stride",
                      "max_windows", "with_answerability", "num_choices")


def define_config_flags():
  flags.DEFINE_multi_string(
      "config_file", [], "YAML experiment/model config(s) applied in order: "
      "a path, or a packaged config under albert_tf/configs/ (e.g. "
      "models/albert_base_v2.yaml, pretraining/albert_tiny_cpu.yaml); a flat "
      "model YAML or a released albert_config.json sets `model`.")
  flags.DEFINE_multi_string(
      "params_override", [], "Overrides 'a.b=c,d.e=f' applied after the "
      "files (repeatable: applied in order, later values winning).")


def define_run_flags(default_mode: str, modes: Sequence[str]):
  """Flags of every training tool."""
  define_config_flags()
  flags.DEFINE_string("model_dir", None, "The run directory: checkpoints, "
                      "summaries, metrics.jsonl and the run record.")
  flags.DEFINE_enum("mode", default_mode, list(modes), "What to run.")
  flags.DEFINE_string("checkpoint", None,
                      "eval/predict/export: checkpoint to load (default: the "
                      "latest in <model_dir>/checkpoints; "
                      "<model_dir>/best/ckpt is the best one).")
  flags.DEFINE_string("tpu", None, "TPU name, grpc:// address or 'local' "
                      "(runtime.tpu; selects the TPU strategy).")
  flags.DEFINE_enum("strategy", None, list(distribute_utils.STRATEGIES),
                    "runtime.distribution_strategy. auto: TPU if --tpu, "
                    "mirrored if GPUs, else default.")
  flags.DEFINE_string("init_checkpoint", None,
                      "Warm start of a fresh run: our checkpoint, an original "
                      "TF1 or Model Garden one (trainer.init_checkpoint).")
  flags.DEFINE_integer("train_steps", None, "trainer.train_steps.")


def define_finetuning_flags():
  define_run_flags("train_and_eval", [m for m in train_lib.MODES
                                      if m != "continuous_eval"])
  flags.DEFINE_string("output_dir", None,
                      "Where eval results and predictions go (default: "
                      "--model_dir).")
  flags.DEFINE_string("spm_model_file", None,
                      "SentencePiece model (data.spm_model_file).")
  flags.DEFINE_bool("do_lower_case", None, "Lowercase text "
                    "(data.do_lower_case; the released models: true).")
  flags.DEFINE_string("init_saved_model", None,
                      "Warm start from an exported encoder SavedModel "
                      "(task.init_saved_model).")
  flags.DEFINE_string("export_dir", None,
                      "--mode=export: base directory of the SavedModel "
                      "(written to <export_dir>/<version>/).")
  flags.DEFINE_integer("max_seq_length", None, "data.max_seq_length.")
  flags.DEFINE_bool("skip_malformed_rows", None,
                    "Skip and count malformed input rows instead of failing "
                    "(data.skip_malformed_rows).")


def define_export_flags():
  """Flags of export_savedmodel (a run record answers most of them)."""
  define_config_flags()
  for name, text in (
      ("albert_config_file", "Deprecated alias of --config_file."),
      ("model_dir", "A run directory (its record and latest checkpoint)."),
      ("export_dir", "Writes <export_dir>/<version>/."),
      ("checkpoint", "Checkpoint prefix or directory (any layout)."),
      ("spm_model_file", "SentencePiece .model (shipped as an asset).")):
    flags.DEFINE_string(name, None, text)
  for name, text in (("version", "Version dir (default: next free)."),
                     ("seq_length", "Packed length of text-in signatures."),
                     ("num_labels", "Classification: classes."),
                     ("num_text_fields", "1 (`text`) or 2 text inputs."),
                     ("max_answer_length", "SQuAD: longest answer."),
                     ("max_query_length", "SQuAD: question tokens kept."),
                     ("doc_stride", "SQuAD: window stride over long "
                      "contexts (default 128; 0 truncates)."),
                     ("num_choices", "Multiple choice: choices."),
                     ("max_first_segment_length", "Preprocessing export "
                      "with --truncation=first_fixed: cap on A.")):
    flags.DEFINE_integer(name, None, text)
  define_max_windows_flag()
  for name, text in (("random_init", "Random weights (smoke tests)."),
                     ("allow_random_head", "Keep a missing head random "
                      "(not with a run directory: its heads were trained)."),
                     ("do_lower_case", "Lowercase text (default true)."),
                     ("with_answerability", "SQuAD 2.0 simple head.")):
    flags.DEFINE_bool(name, None, text)
  flags.DEFINE_enum("export_kind", None, tasks_export.export_kinds(),
                    "Default: the run's task's (serving for fine-tuning, "
                    "encoder for pretraining), else encoder (or serving "
                    "with --task).")
  flags.DEFINE_enum("task", None, tasks_export.serving_task_names(),
                    "Serving export without a run directory: which model "
                    "and outputs.")
  flags.DEFINE_list("label_names", None, "Classification: class names "
                    "(a run's: renamed in their order).")
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


def define_max_windows_flag():
  flags.DEFINE_integer("max_windows", None, "SQuAD export with doc-stride "
                       "windows: longer contexts are refused with an error "
                       "(default 32).")


def export_settings(run_tool: bool = False) -> Dict[str, Any]:
  """The serving params fields set on the command line: EXPORT_PARAM_FLAGS
  the tool defines and the user gave (a run tool's FLAG_FIELDS set the
  config instead, which sets the params)."""
  out = {}
  for name in EXPORT_PARAM_FLAGS:
    if run_tool and name in FLAG_FIELDS:
      continue
    value = flag_value(name)
    if value is not None:
      out[name] = list(value) if isinstance(value, list) else value
  return out


def parse_flags(argv):
  """The `flags_parser` of every tool (`app.run(main, flags_parser=...)`):
  a word that is not a flag (an unquoted glob's other matches, `a=b`
  without dashes) or a NaN/infinite float flag is a one-line error
  (data_prep/command_line.py, shared with the data tools)."""
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


def flag_overrides() -> Dict[str, Any]:
  """Nested {section: {field: value}} of the FLAG_FIELDS flags that are set."""
  out = {}
  for name, field in FLAG_FIELDS.items():
    value = flag_value(name)
    if value is None or value == "":
      continue
    section, key = field.split(".")
    out.setdefault(section, {})[key] = value
  return out


def fail(error: Exception):
  """The one-line error of every tool (exit 1), once (it was also logged,
  so every error showed twice)."""
  print(f"ERROR: {error}", file=sys.stderr)
  sys.exit(1)


def export_request() -> tasks_export.ExportRequest:
  """export_savedmodel's flags as an ExportRequest."""
  return tasks_export.ExportRequest(
      export_dir=FLAGS.export_dir, model_dir=FLAGS.model_dir or "",
      checkpoint=FLAGS.checkpoint or "", export_kind=FLAGS.export_kind,
      task=FLAGS.task, version=FLAGS.version,
      random_init=bool(FLAGS.random_init),
      allow_random_head=bool(FLAGS.allow_random_head),
      config_files=config_sources(), params_override=FLAGS.params_override,
      settings=export_settings(), truncation=FLAGS.truncation,
      max_first_segment_length=FLAGS.max_first_segment_length,
      export_format=FLAGS.format, precision=FLAGS.precision,
      representative_examples=FLAGS.representative_examples)


def run_training(task_cls):
  """The main body of the training tools: config from the flags, the task
  `task_cls(config, model_dir)`, then train_lib.run_experiment."""
  if not FLAGS.model_dir:
    fail(ValueError("--model_dir is required"))
  try:
    # A run that exists is continued from its recorded config: only what
    # the command line changes is checked against the record.
    # The one read of the record for the whole command.
    record = run_record.read(FLAGS.model_dir)
    # Not binding: a first start that ended before any checkpoint.
    base = record if record is not None and run_record.binding(record) else (
        None)
    if base is not None and base.task != task_cls.name:
      raise run_record.refuse("task", base.task, task_cls.name,
                              FLAGS.model_dir,
                              "use a new --model_dir for another task")
    config = experiment_config.load_experiment_config(
        task_cls.config_cls, FLAGS.config_file, FLAGS.params_override,
        flag_overrides(), base=base.config if base else None,
        base_source=f"{FLAGS.model_dir}/{run_record.CONFIG_NAME}")
    task = task_cls(config, FLAGS.model_dir)
    result = train_lib.run_experiment(
        task, config, FLAGS.model_dir, FLAGS.mode,
        output_dir=flag_value("output_dir"), checkpoint=FLAGS.checkpoint,
        export_dir=flag_value("export_dir"),
        export_fn=tasks_export.run_exporter(export_settings(run_tool=True)),
        record=record)
  except USER_ERRORS as e:
    fail(e)
  logging.info("done: %s", {k: v for k, v in result.items() if k != "train"})
  if result.get("train", {}).get("stopped") == "preempted":
    sys.exit(PREEMPTED_EXIT_CODE)
  return result
