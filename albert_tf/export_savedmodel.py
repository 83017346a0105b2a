r"""Exports ALBERT as SavedModels: encoder, pretraining, preprocessing, serving
(see albert_tf/serving/export_lib.py for the kinds and signatures).

From a run directory everything but --export_dir comes from its run record
(model config, task, labels, text fields, seq length, SentencePiece model,
lower-casing); a flag or --config_file that disagrees is refused.

  python -m albert_tf.export_savedmodel --model_dir=mnli_run --export_dir=/m
  python -m albert_tf.export_savedmodel --export_kind=encoder \
      --config_file=albert_base/albert_config.json \
      --checkpoint=albert_base/model.ckpt-best \
      --spm_model_file=albert_base/30k-clean.model --export_dir=/tmp/enc
"""

import os
import tempfile

from absl import app
from absl import flags
import tensorflow as tf

from albert_tf import cli_flags
from albert_tf.core import run_record
from albert_tf.serving import export_lib

FLAGS = flags.FLAGS


def define_flags():
  cli_flags.define_export_flags()


def export():
  """The model and facts from the run record and flags; exports."""
  checkpoint = FLAGS.checkpoint
  if FLAGS.model_dir and not checkpoint and not FLAGS.random_init:
    checkpoint = tf.train.latest_checkpoint(
        os.path.join(FLAGS.model_dir, "checkpoints"))
    if not checkpoint:
      raise ValueError(f"--model_dir {FLAGS.model_dir}: no checkpoint yet")
  config, record = run_record.model_config_for(
      cli_flags.config_sources(), FLAGS.params_override, FLAGS.model_dir,
      checkpoint)
  facts = run_record.resolve_facts(record, {  # --task: the serving task
      fact: FLAGS["task" if fact == "serving_task" else fact].value
      for fact in run_record.SERVING_DEFAULTS}, run_record.SERVING_DEFAULTS)
  kind = FLAGS.export_kind or ("serving" if record and record.task !=
                               "pretraining" else "encoder")
  with tempfile.TemporaryDirectory() as tmp:
    config_file = None
    if config is not None:  # export_lib reads the model config from a file
      config_file = os.path.join(tmp, "albert_config.json")
      config.to_json_file(config_file)
    return export_lib.run(
        kind, FLAGS.export_dir, albert_config_file=config_file,
        checkpoint=checkpoint, random_init=bool(FLAGS.random_init),
        allow_random_head=bool(FLAGS.allow_random_head),
        task=facts.pop("serving_task"), truncation=FLAGS.truncation,
        max_first_segment_length=FLAGS.max_first_segment_length,
        max_windows=FLAGS.max_windows, version=FLAGS.version, **facts)


def main(argv):
  del argv
  try:
    path = export()
  except cli_flags.USER_ERRORS as e:
    cli_flags.fail(e)
  print(export_lib.describe_signatures(path))
  print(f"Check with: saved_model_cli show --all --dir {path}")


def cli():  # console script (pyproject.toml)
  define_flags()
  flags.mark_flags_as_required(["export_dir"])
  app.run(main, flags_parser=cli_flags.parse_flags)


if __name__ == "__main__":
  cli()
