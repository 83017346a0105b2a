r"""ALBERT pretraining (MLM + SOP) with the generic albert_tf trainer.

  python -m albert_tf.run_pretraining \
    --config_file=official_configs/pretraining/albert_base_v2.yaml \
    --params_override='data.input_path=gs://b/train-*.tfrecord,trainer.train_steps=1000' \
    --model_dir=/tmp/albert_base --tpu=local

Modes: train (default), eval (the latest checkpoint over data.eval_input_path),
train_and_eval, continuous_eval. Resumes from <model_dir>/checkpoints when a
checkpoint exists. Exit code 143 when stopped by SIGTERM after saving.
"""

import sys

from absl import app
from absl import flags
from absl import logging

from albert_tf.core import distribute_utils
from albert_tf.core import experiment_config
from albert_tf.tasks import pretraining as pretraining_task
from albert_tf.core import trainer as trainer_lib

FLAGS = flags.FLAGS
PREEMPTED_EXIT_CODE = 143  # 128 + SIGTERM


def define_flags():
  flags.DEFINE_multi_string(
      "config_file", [], "YAML experiment config(s), applied in order; a flat "
      "model YAML (official_configs/models/*.yaml) sets `model`.")
  flags.DEFINE_string("params_override", "",
                      "Model Garden style overrides 'a.b=c,d.e=f', applied "
                      "after the config files.")
  flags.DEFINE_string("model_dir", None,
                      "Checkpoints, summaries, metrics.jsonl and the resolved "
                      "config go here.")
  flags.DEFINE_enum("mode", "train",
                    ["train", "eval", "train_and_eval", "continuous_eval"],
                    "What to run.")
  flags.DEFINE_string("tpu", None,
                      "TPU name, grpc:// address or 'local' (TPU VM); sets "
                      "runtime.tpu and selects the TPU strategy.")
  flags.DEFINE_enum("strategy", None,
                    list(distribute_utils.STRATEGIES),
                    "Distribution strategy (overrides "
                    "runtime.distribution_strategy). auto: TPU if --tpu, "
                    "mirrored if GPUs, else default.")
  flags.DEFINE_string("init_checkpoint", None,
                      "Warm-start the model (not the optimizer) from this "
                      "checkpoint (original TF1, albert_tf or Model Garden); "
                      "overrides trainer.init_checkpoint.")
  flags.DEFINE_bool("init_from_group0", None,
                    "Initialise every layer group from group_0 of "
                    "--init_checkpoint (the original's option).")
  flags.DEFINE_integer("num_cpu_devices", None,
                       "Split the CPU into N logical devices "
                       "(runtime.num_cpu_devices; for testing strategies).")


def build_config(config_files, params_override, tpu=None, strategy=None,
                 init_checkpoint=None, init_from_group0=None,
                 num_cpu_devices=None):
  """Config files <- --params_override <- explicit flags."""
  config = experiment_config.load_config(
      experiment_config.PretrainingExperimentConfig, config_files,
      params_override)
  overrides = {}
  if tpu:
    overrides.setdefault("runtime", {})["tpu"] = tpu
  if strategy:
    overrides.setdefault("runtime", {})["distribution_strategy"] = strategy
  if num_cpu_devices is not None:
    overrides.setdefault("runtime", {})["num_cpu_devices"] = num_cpu_devices
  if init_checkpoint is not None:
    overrides.setdefault("trainer", {})["init_checkpoint"] = init_checkpoint
  if init_from_group0 is not None:
    overrides.setdefault("trainer", {})["init_from_group0"] = init_from_group0
  if overrides:
    config.override(overrides, is_strict=True)
  return experiment_config.validate(config)


def run(config, model_dir, mode="train"):
  """Builds the strategy, task and trainer; runs `mode`. Returns its result."""
  rt = config.runtime
  strategy = distribute_utils.get_strategy(
      rt.distribution_strategy, tpu=rt.tpu or None,
      num_cpu_devices=rt.num_cpu_devices)
  task = pretraining_task.PretrainingTask(config)
  if mode in ("train", "train_and_eval"):
    # Fail on missing/empty/mismatched data before building anything.
    task.validate_inputs(training=True)
  if mode != "train":
    task.validate_inputs(training=False)
  trainer = trainer_lib.Trainer(task, config, model_dir, strategy)
  if trainer.is_chief:
    experiment_config.save_config(config, model_dir)
  return trainer_lib.run_experiment(trainer, mode)


def main(argv):
  del argv
  if not FLAGS.model_dir:
    raise app.UsageError("--model_dir is required")
  try:
    config = build_config(FLAGS.config_file, FLAGS.params_override,
                          tpu=FLAGS.tpu, strategy=FLAGS.strategy,
                          init_checkpoint=FLAGS.init_checkpoint,
                          init_from_group0=FLAGS.init_from_group0,
                          num_cpu_devices=FLAGS.num_cpu_devices)
    result = run(config, FLAGS.model_dir, FLAGS.mode)
  except (ValueError, FileNotFoundError,
          trainer_lib.NonFiniteLossError) as e:
    logging.error("%s", e)
    print(f"ERROR: {e}", file=sys.stderr)
    sys.exit(1)
  logging.info("done: %s", result)
  if isinstance(result, dict) and result.get("stopped") == "preempted":
    sys.exit(PREEMPTED_EXIT_CODE)


def cli():
  """Console-script entry point (pyproject.toml)."""
  define_flags()
  app.run(main)


if __name__ == "__main__":
  cli()
