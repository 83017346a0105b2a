r"""Converts ALBERT checkpoints between the original TF1 layout (`bert/...`,
`cls/...`; the released model.ckpt-best), ours (albert_tf) and Model
Garden's (model_garden); see albert_tf/checkpoints/conversion.py.

  python -m albert_tf.convert_checkpoint --from=tf1 --to=albert_tf \
      --input_checkpoint=albert_base/model.ckpt-best --output_dir=albert_tf2

The model config is the run record's when the checkpoint is a run's
(RUN/checkpoints/ckpt-N), else `albert_config.json` next to the checkpoint;
--config_file/--params_override that change that model are refused. Without
either, --config_file gives it. The vocabulary (--spm_model_file or
--vocab_file, else the run record's, else the SentencePiece model or
WordPiece vocab*.txt next to the checkpoint) is copied to --output_dir with
the config.
"""

import os

from absl import app
from absl import flags
import numpy as np

from albert_tf import cli_flags
from albert_tf.checkpoints import conversion
from albert_tf.checkpoints import restore
from albert_tf.core import checkpoint_config
from albert_tf.modeling import albert_config


def define_flags():
  cli_flags.define_config_flags()
  flags.DEFINE_enum("from", None, restore.LAYOUTS, "Layout of the input.")
  flags.DEFINE_enum("to", None, restore.LAYOUTS, "Layout to write.")
  flags.DEFINE_string("input_checkpoint", None, "Checkpoint prefix, a "
                      "directory holding one, or a TF-Hub module directory.")
  flags.DEFINE_string("output_dir", None, "Directory for the checkpoint, "
                      "albert_config.json and the SentencePiece model.")
  flags.DEFINE_string("output_name", None, "Checkpoint prefix in "
                      "--output_dir (default: model.ckpt for tf1, else ckpt).")
  flags.DEFINE_string("albert_config_file", None,
                      "Deprecated alias of --config_file.")
  flags.DEFINE_string("spm_model_file", None, "SentencePiece model to copy "
                      "(default: the run record's for a run's checkpoint, "
                      "else the *.model next to the checkpoint).")
  flags.DEFINE_string("vocab_file", None, "BERT WordPiece vocabulary to "
                      "copy instead (default: as --spm_model_file, or the "
                      "vocab*.txt next to the checkpoint).")
  flags.DEFINE_enum("model", "auto", ["auto", "pretrainer", "encoder"],
                    "pretrainer (+ MLM/SOP heads), encoder, or auto.")
  flags.DEFINE_bool("init_from_group0", False, "Every group from group_0.")
  flags.DEFINE_integer("global_step", None, "--to=tf1: write global_step.")
  flags.DEFINE_bool("overwrite", False, "Replace the checkpoint already in "
                    "--output_dir (refused without this flag).")


def main(argv):
  del argv
  flag_values = flags.FLAGS
  try:
    checkpoint_config.check_not_in_run(flag_values.output_dir)
    config, record = checkpoint_config.model_config_for(
        cli_flags.config_sources(), flag_values.params_override,
        checkpoint=flag_values.input_checkpoint)
    # A run's checkpoint: its vocabulary is the run record's.
    if flag_values.spm_model_file and flag_values.vocab_file:
      raise ValueError("give one of --spm_model_file and --vocab_file, not "
                       "both")
    facts = record.facts if record else {}
    spm = (flag_values.spm_model_file or flag_values.vocab_file or
           facts.get("spm_model_file") or facts.get("vocab_file") or None)
    path, report = conversion.convert(
        flag_values.input_checkpoint, flag_values.output_dir,
        flag_values["from"].value, flag_values.to,
        config=config, model=flag_values.model,
        init_from_group0=flag_values.init_from_group0,
        spm_model_file=spm,
        output_name=flag_values.output_name,
        global_step=flag_values.global_step,
        overwrite=flag_values.overwrite)
  except cli_flags.USER_ERRORS as e:
    cli_flags.fail(e)
  print(report.summary())
  if report.extras:
    print("  task-head variables not converted: " +
          ", ".join(f"{n} {list(np.shape(v))}"
                    for n, v in sorted(report.extras.items())))
  print(f"wrote {path} ({flag_values.to} layout) and "
        f"{os.path.join(flag_values.output_dir, albert_config.CONFIG_JSON_NAME)}")


def cli():  # console script (pyproject.toml)
  define_flags()
  flags.mark_flags_as_required(["from", "to", "input_checkpoint",
                                "output_dir"])
  app.run(main, flags_parser=cli_flags.parse_flags)


if __name__ == "__main__":
  cli()
