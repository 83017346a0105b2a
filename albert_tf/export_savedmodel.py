r"""Exports ALBERT as SavedModels (kinds and signatures: albert_tf/serving/
export_lib.py and each task's serving module).

From a run directory (--model_dir, or a --checkpoint inside one) the task
is rebuilt from the run record through the task registry, its model
restored, and exported with the task's serving module and params
(albert_tf/tasks/export.py, the same path as `run_* --mode=export`). Only
the decoding and display settings (--label_names in their order,
--max_windows, --doc_stride, --max_answer_length) may differ from the run;
any other flag or --config_file that disagrees is refused, as is a flag the
task's export does not have. --format=tflite writes a .tflite that takes
text on device (albert_tf/serving/lite_export.py), in --precision float32,
float16, dynamic_int8 or int8; --precision=bfloat16 writes a SavedModel
that computes in bfloat16.

  python -m albert_tf.export_savedmodel --model_dir=mnli_run --export_dir=/m
  python -m albert_tf.export_savedmodel --export_kind=encoder \
      --config_file=albert_base/albert_config.json \
      --checkpoint=albert_base/model.ckpt-best \
      --spm_model_file=albert_base/30k-clean.model --export_dir=/tmp/enc
"""

import shlex

from absl import app
from absl import flags

from albert_tf import cli_flags
from albert_tf.serving import export_lib
from albert_tf.serving import lite_export
from albert_tf.tasks import export as tasks_export
from albert_toolkit import command_line

FLAGS = flags.FLAGS


def main(argv):
  del argv
  try:
    path = tasks_export.export(cli_flags.export_request())
  except cli_flags.USER_ERRORS as e:
    cli_flags.fail(e)
  if FLAGS.format == "tflite":
    print(lite_export.describe(path))
    print(f"Run with: python -m albert_tf.predict_lite --model={path} "
          "--input_file=...")
    return
  print(export_lib.describe_signatures(path))
  print("Check with: saved_model_cli show --all --dir " + shlex.quote(path))


def cli():  # console script (pyproject.toml)
  cli_flags.define_export_flags()
  flags.mark_flags_as_required(["export_dir"])
  command_line.exit_on_sigterm()  # a stop removes the staging directories
  app.run(main, flags_parser=cli_flags.parse_flags)


if __name__ == "__main__":
  cli()
