r"""Converts ALBERT checkpoints between the original TF1 layout, ours and Model
Garden's, and loads any of them into our models.

Layouts:
  tf1           the original google-research/albert names (`bert/...`,
                `cls/...`, optional TF-Hub `module/` prefix); released
                `model.ckpt-best` files and TF1 pretraining/fine-tuning runs.
  albert_tf     our object-based checkpoint (`object_layout.checkpoint_for`).
  model_garden  `official.nlp.modeling` AlbertEncoder / BertPretrainerV2.

Usage:

  python -m albert_tf.convert_checkpoint --from=tf1 --to=albert_tf \
      --input_checkpoint=albert_base/model.ckpt-best --output_dir=albert_base_tf2
  python -m albert_tf.convert_checkpoint --from=albert_tf --to=tf1 \
      --input_checkpoint=albert_base_tf2 --output_dir=albert_base_tf1

Without --albert_config_file the config is `albert_config.json` next to the
checkpoint; the SentencePiece model (`*.model`, `*.vocab`) next to it is copied
to the output directory with the config.

From Python, training and fine-tuning scripts call
`load_any_checkpoint(model, path)`, which detects the layout.
"""

import os
import sys

from absl import app
from absl import flags
import numpy as np

from albert_tf.checkpoints import conversion

# --- CLI ---------------------------------------------------------------------

def define_flags():
  """Defines the CLI flags (only when run as a script, so that importing
  `load_any_checkpoint` does not clash with the importer's flags)."""
  flags.DEFINE_enum("from", None, conversion.LAYOUTS, "Layout of --input_checkpoint.")
  flags.DEFINE_enum("to", None, conversion.LAYOUTS, "Layout to write.")
  flags.DEFINE_string("input_checkpoint", None,
                      "Checkpoint prefix (e.g. albert_base/model.ckpt-best), a "
                      "directory holding one, or a TF-Hub module directory.")
  flags.DEFINE_string("output_dir", None,
                      "Directory for the converted checkpoint, "
                      "albert_config.json and the SentencePiece model.")
  flags.DEFINE_string("output_name", None,
                      "Checkpoint file prefix inside --output_dir (default: "
                      "model.ckpt for tf1, ckpt otherwise).")
  flags.DEFINE_string("albert_config_file", None,
                      "albert_config.json, a YAML config or a preset name; "
                      "default: albert_config.json next to the checkpoint.")
  flags.DEFINE_string("spm_model_file", None,
                      "SentencePiece model to copy along; default: the *.model "
                      "(and *.vocab) next to the checkpoint.")
  flags.DEFINE_enum("model", "auto", ["auto", "pretrainer", "encoder"],
                    "What to convert: the pretrainer (encoder + MLM/SOP heads), "
                    "the encoder only, or auto (pretrainer when the source has "
                    "the heads).")
  flags.DEFINE_bool("init_from_group0", False,
                    "Initialise every group from the checkpoint's group_0 (the "
                    "original's option when the config has more groups).")
  flags.DEFINE_integer("global_step", None,
                       "With --to=tf1: also write a global_step variable.")


def main(argv):
  del argv
  flag_values = flags.FLAGS
  missing = [n for n in ("from", "to", "input_checkpoint", "output_dir")
             if flag_values[n].value is None]
  if missing:
    raise app.UsageError("required flag(s): " +
                         ", ".join("--" + n for n in missing))
  try:
    path, report = conversion.convert(
        flag_values.input_checkpoint, flag_values.output_dir,
        flag_values["from"].value, flag_values.to,
        config=flag_values.albert_config_file, model=flag_values.model,
        init_from_group0=flag_values.init_from_group0,
        spm_model_file=flag_values.spm_model_file,
        output_name=flag_values.output_name,
        global_step=flag_values.global_step)
  except conversion.CheckpointConversionError as e:
    sys.exit(f"error: {e}")
  print(report.summary())
  if report.extras:
    print("  task-head variables not converted: " +
          ", ".join(f"{n} {list(np.shape(v))}"
                    for n, v in sorted(report.extras.items())))
  print(f"wrote {path} ({flag_values.to} layout) and "
        f"{os.path.join(flag_values.output_dir, conversion.CONFIG_FILE_NAME)}")


def cli():
  """Console-script entry point (pyproject.toml)."""
  define_flags()
  app.run(main)


if __name__ == "__main__":
  cli()
