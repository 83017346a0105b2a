r"""Converts ALBERT checkpoints between the original TF1 layout (`bert/...`,
`cls/...`; the released model.ckpt-best), ours (albert_tf), Model
Garden's (model_garden) and Hugging Face model directories (hf, every
head: albert_tf/tasks/hf_models.py, hf_export.py); see
albert_tf/checkpoints/conversion.py.

  python -m albert_tf.convert_checkpoint --from=hf --to=albert_tf \
      --input_checkpoint=albert-base-v2 --output_dir=albert_base_tf2
  python -m albert_tf.convert_checkpoint --from=albert_tf --to=hf \
      --input_checkpoint=sst2_run --output_dir=sst2_hf

  python -m albert_tf.convert_checkpoint --from=tf1 --to=albert_tf \
      --input_checkpoint=albert_base/model.ckpt-best --output_dir=albert_tf2

The model config is the run record's when the checkpoint is a run's
(RUN/checkpoints/ckpt-N), else `albert_config.json` next to the checkpoint;
--config_file/--params_override that change that model are refused. Without
either, --config_file gives it. The vocabulary (--spm_model_file or
--vocab_file, else the run record's, else the SentencePiece model or
WordPiece vocab*.txt next to the checkpoint) is copied to --output_dir with
the config. Everything is checked first and the outputs are moved in
together at the end: a failed conversion leaves --output_dir as it was.
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
from albert_tf.tasks import all_tasks  # pylint: disable=unused-import
from albert_tf.tasks import hf_export
from albert_tf.tasks import hf_models

HF = "hf"
# Flags a Hugging Face conversion has no use for (its config and tokenizer
# are the directory's or the run's).
NOT_HF_FLAGS = ("config_file", "params_override", "albert_config_file",
                "spm_model_file", "vocab_file", "model", "init_from_group0",
                "global_step", "output_name")


def define_flags():
  cli_flags.define_config_flags()
  flags.DEFINE_enum("from", None, restore.LAYOUTS + (HF,),
                    "Layout of the input (hf: a Hugging Face directory).")
  flags.DEFINE_enum("to", None, restore.LAYOUTS + (HF,), "Layout to write.")
  flags.DEFINE_string("input_checkpoint", None, "Checkpoint prefix, a "
                      "directory holding one, a run directory, a TF-Hub "
                      "module directory or a Hugging Face directory.")
  flags.DEFINE_string("output_dir", None, "Directory for the checkpoint, "
                      "albert_config.json and the SentencePiece model.")
  flags.DEFINE_string("output_name", None, "Checkpoint name in --output_dir, "
                      "without a directory part (default: model.ckpt for "
                      "tf1, else ckpt).")
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
  flags.DEFINE_integer("global_step", None, "--to=tf1 only: write "
                       "global_step.")
  flags.DEFINE_bool("overwrite", False, "Replace the checkpoint, config and "
                    "vocabulary already in --output_dir (refused without "
                    "this flag).")


def convert_hf(flag_values):
  """--from=hf to any layout of ours, or --from=albert_tf --to=hf
  (albert_tf/tasks/hf_models.py, hf_export.py)."""
  source, target = flag_values["from"].value, flag_values.to
  given = [f"--{n}" for n in NOT_HF_FLAGS if flag_values[n].present]
  if given:
    raise ValueError(f"{', '.join(given)}: not used by a Hugging Face "
                     "conversion (the config and tokenizer are the "
                     "directory's or the run's)")
  if source == HF and target != HF:
    path, report = hf_models.import_hf(
        flag_values.input_checkpoint, flag_values.output_dir, target,
        flag_values.overwrite)
    print(report.summary())
    print(f"wrote {path} ({target} layout) in {flag_values.output_dir}")
    return
  if target == HF and source == "albert_tf":
    path, arch = hf_export.export_hf(flag_values.input_checkpoint,
                                     flag_values.output_dir,
                                     flag_values.overwrite)
    print(f"wrote {path} ({arch}) and its config.json")
    return
  raise ValueError(f"--from={source} --to={target}: Hugging Face "
                   "conversions are --from=hf (to albert_tf, tf1, "
                   "model_garden) and --from=albert_tf --to=hf")


def main(argv):
  del argv
  flag_values = flags.FLAGS
  if HF in (flag_values["from"].value, flag_values.to):
    try:
      convert_hf(flag_values)
    except cli_flags.USER_ERRORS as e:
      cli_flags.fail(e)
    return
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
    given = (("--spm_model_file", flag_values.spm_model_file),
             ("--vocab_file", flag_values.vocab_file),
             ("the run record's spm_model_file", facts.get("spm_model_file")),
             ("the run record's vocab_file", facts.get("vocab_file")))
    vocab_flag, spm = next(((f, v) for f, v in given if v),
                           ("--spm_model_file", None))
    path, report = conversion.convert(
        flag_values.input_checkpoint, flag_values.output_dir,
        flag_values["from"].value, flag_values.to,
        config=config, model=flag_values.model,
        init_from_group0=flag_values.init_from_group0,
        spm_model_file=spm,
        output_name=flag_values.output_name,
        global_step=flag_values.global_step,
        overwrite=flag_values.overwrite, vocab_flag=vocab_flag)
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
