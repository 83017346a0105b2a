r"""Fine-tunes ALBERT on any registered fine-tuning task (Model Garden's
manner: one entry point, the task by name).

  python -m albert_tf.run_finetuning --task=sentence_prediction \
    --config_file=models/albert_base_v2.yaml \
    --config_file=finetuning/glue_mnli.yaml \
    --data_dir=glue/MNLI --spm_model_file=albert_base/30k-clean.model \
    --init_checkpoint=albert_base/model.ckpt-best \
    --model_dir=/tmp/mnli --mode=train_and_eval

Its flags are the task's settings (the fields of the task's config class
that declare a flag, core/settings.py) and those of every fine-tuning tool
(tasks/registry.py lists the tasks; `--task=NAME --help` shows that task's
flags, `--help` every task's). A new task registers itself and needs no
entry point of its own; run_classifier, run_squad and run_race are this
tool with the task fixed. Modes: core/train_lib.py.
"""

import sys

from absl import app
from absl import flags

from albert_tf import cli_flags
from albert_tf.tasks import all_tasks  # pylint: disable=unused-import
from albert_tf.tasks import finetuning
from albert_tf.tasks import registry

FLAGS = flags.FLAGS


def finetuning_tasks():
  """The registered fine-tuning tasks."""
  return [cls for cls in registry.tasks()
          if issubclass(cls, finetuning.FinetuneTask)]


def task_in_argv(argv):
  """The value of --task on command line `argv` (a task's flags are defined
  before absl parses it), or None."""
  for i, word in enumerate(argv[1:], 1):
    if word.startswith("--task="):
      return word.split("=", 1)[1]
    if word == "--task" and i + 1 < len(argv):
      return argv[i + 1]
  return None


def define_flags(argv):
  """--task, and the flags of the task it names (of every task without
  one: --help; an unknown name is refused by --task's parser)."""
  tasks = finetuning_tasks()
  flags.DEFINE_enum("task", None, [t.name for t in tasks],
                    "The fine-tuning task to run (its flags: --task=NAME "
                    "--help).")
  name = task_in_argv(argv)
  cli_flags.define_finetuning_flags(
      [t for t in tasks if t.name == name] or tasks)


def main(argv):
  del argv
  if not FLAGS.task:
    cli_flags.fail(ValueError("--task is required: one of " + ", ".join(
        t.name for t in finetuning_tasks())))
  cli_flags.run_training(registry.get_task_cls(FLAGS.task))


def cli():
  """Console-script entry point (pyproject.toml)."""
  define_flags(sys.argv)
  app.run(main, flags_parser=cli_flags.parse_flags)


if __name__ == "__main__":
  cli()
