"""Flags and main bodies shared by the command-line entry points.

Only entry points (albert_tf/run_*.py, export_savedmodel, convert_checkpoint)
import this module; the library below them defines no flags.
"""

import sys

from absl import flags
from absl import logging

from albert_tf.core import distribute_utils
from albert_tf.core import trainer as trainer_lib
from albert_tf.tasks import finetuning

# --- CLI ----------------------------------------------------------------------------------

FLAGS = flags.FLAGS


def define_finetuning_flags():
  flags.DEFINE_multi_string(
      "config_file", [], "YAML experiment config(s) applied in order, e.g. "
      "official_configs/models/albert_base_v2.yaml then "
      "official_configs/finetuning/<task>.yaml.")
  flags.DEFINE_string("params_override", "",
                      "Overrides 'a.b=c,d.e=f' applied after the files.")
  flags.DEFINE_string("model_dir", None,
                      "Checkpoints, summaries, metrics.jsonl, features cache.")
  flags.DEFINE_enum("mode", "train_and_eval", list(finetuning.MODES), "What to run.")
  flags.DEFINE_string("output_dir", None,
                      "Where eval results and predictions go (default: "
                      "--model_dir).")
  flags.DEFINE_string("spm_model_file", None,
                      "SentencePiece model (data.spm_model_file).")
  flags.DEFINE_bool("do_lower_case", None, "Lowercase text "
                    "(data.do_lower_case; the released models: true).")
  flags.DEFINE_string("init_checkpoint", None,
                      "Warm start: our pretraining checkpoint, an original "
                      "TF1 or Model Garden checkpoint "
                      "(trainer.init_checkpoint).")
  flags.DEFINE_string("init_saved_model", None,
                      "Warm start from an exported encoder SavedModel "
                      "(task.init_saved_model).")
  flags.DEFINE_string("checkpoint", None,
                      "eval/predict/export: checkpoint to load (default: the "
                      "latest in <model_dir>/checkpoints; "
                      "<model_dir>/best/ckpt is the best one).")
  flags.DEFINE_string("export_dir", None,
                      "--mode=export: base directory of the SavedModel "
                      "(written to <export_dir>/<version>/).")
  flags.DEFINE_integer("max_seq_length", None, "data.max_seq_length.")
  flags.DEFINE_integer("train_steps", None, "trainer.train_steps.")
  flags.DEFINE_string("tpu", None, "TPU name, grpc:// address or 'local'.")
  flags.DEFINE_enum("strategy", None, list(distribute_utils.STRATEGIES),
                    "Distribution strategy (runtime.distribution_strategy).")
  flags.DEFINE_bool("skip_malformed_rows", None,
                    "Skip and count malformed input rows instead of failing "
                    "(data.skip_malformed_rows).")


def config_from_flags(extra=None):
  """Config files <- --params_override <- explicit flags (+ `extra`)."""
  config = finetuning.load_config(FLAGS.config_file, FLAGS.params_override)
  data = dict(extra or {})
  for flag, key in (("spm_model_file", "spm_model_file"),
                    ("do_lower_case", "do_lower_case"),
                    ("max_seq_length", "max_seq_length"),
                    ("skip_malformed_rows", "skip_malformed_rows")):
    value = getattr(FLAGS, flag)
    if value is not None:
      data[key] = value
  overrides = {"data": data} if data else {}
  if FLAGS.init_checkpoint is not None:
    overrides.setdefault("trainer", {})["init_checkpoint"] = (
        FLAGS.init_checkpoint)
  if FLAGS.train_steps is not None:
    overrides.setdefault("trainer", {})["train_steps"] = FLAGS.train_steps
  if FLAGS.init_saved_model is not None:
    overrides.setdefault("task", {})["init_saved_model"] = (
        FLAGS.init_saved_model)
  if FLAGS.tpu:
    overrides.setdefault("runtime", {})["tpu"] = FLAGS.tpu
  if FLAGS.strategy:
    overrides.setdefault("runtime", {})["distribution_strategy"] = (
        FLAGS.strategy)
  if overrides:
    config.override(overrides, is_strict=True)
  return finetuning.validate(config)


def finetuning_main(family, extra_data_flags=None):
  """absl main body shared by the run scripts."""
  if not FLAGS.model_dir:
    print("ERROR: --model_dir is required", file=sys.stderr)
    sys.exit(2)
  try:
    config = config_from_flags(extra_data_flags)
    result = finetuning.run(family, config, FLAGS.model_dir, FLAGS.mode,
                 output_dir=FLAGS.output_dir, checkpoint=FLAGS.checkpoint,
                 export_dir=FLAGS.export_dir)
  except (ValueError, FileNotFoundError,
          trainer_lib.NonFiniteLossError) as e:
    logging.error("%s", e)
    print(f"ERROR: {e}", file=sys.stderr)
    sys.exit(1)
  logging.info("done: %s", {k: v for k, v in result.items() if k != "train"})
  return result


