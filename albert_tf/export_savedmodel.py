r"""Exports ALBERT as SavedModels: encoder, pretraining, preprocessing, serving.

Every export is written to `<export_dir>/<version>/` (TF Serving's layout;
the version is the next free integer unless --version is given), atomically
(written beside it under a hidden name, then renamed), with the config JSON
(`assets/albert_config.json`) and the SentencePiece model as assets. Loading
needs only `tensorflow`, plus `import tensorflow_text` for the text-in
signatures (preprocessing and serving exports).

Kinds:
  encoder        TF-Hub reusable encoder: `hub.KerasLayer(path,
                 trainable=True)`; signature `serving_default` (ids in).
  pretraining    encoder + `mlm` (extra input `masked_lm_positions`, output
                 `mlm_logits`) and `sop` (`sop_logits`) signatures.
  preprocessing  text in -> `input_word_ids`, `input_mask`, `input_type_ids`
                 (signatures `serving_default` for one segment, `text_pair`,
                 `tokenize`), TF-Hub preprocessor API (`__call__`,
                 `tokenize`, `pack_pair`).
  serving        one model for TF Serving: `serving_default` (raw text),
                 `serve_ids`, `serve_examples` (serialized tf.Example).

Examples:

  python -m albert_tf.export_savedmodel --export_kind=encoder \
      --albert_config_file=albert_base/albert_config.json \
      --checkpoint=albert_base/model.ckpt-best \
      --spm_model_file=albert_base/30k-clean.model --export_dir=/tmp/enc
  python -m albert_tf.export_savedmodel --export_kind=serving \
      --task=classification --num_labels=3 --num_text_fields=2 \
      --label_names=entailment,neutral,contradiction \
      --albert_config_file=... --checkpoint=mnli_run/ckpt \
      --spm_model_file=... --seq_length=128 --export_dir=/models/mnli
"""


from absl import app
from absl import flags

from albert_tf.serving import export_lib

# --- CLI ---------------------------------------------------------------------------

FLAGS = flags.FLAGS


def define_flags():
  flags.DEFINE_enum("export_kind", None, list(export_lib.EXPORT_KINDS),
                    "What to export: encoder (TF-Hub reusable), pretraining "
                    "(+ mlm/sop), preprocessing (text -> ids) or serving "
                    "(one task model for TF Serving).")
  flags.DEFINE_string("export_dir", None,
                      "Base directory; the export goes to <export_dir>/"
                      "<version>/.")
  flags.DEFINE_integer("version", None,
                       "Version subdirectory; default: next free integer.")
  flags.DEFINE_string("albert_config_file", None,
                      "albert_config.json (original), a .yaml config or a "
                      "preset name such as albert_base_v2.")
  flags.DEFINE_string("checkpoint", None,
                      "Checkpoint prefix or directory: ours or one "
                      "convert_checkpoint reads (original TF1, Model Garden).")
  flags.DEFINE_bool("random_init", False,
                    "Export randomly initialised weights (no --checkpoint); "
                    "for smoke tests only.")
  flags.DEFINE_bool("allow_random_head", False,
                    "Serving export of a task model from a checkpoint that "
                    "has no head (e.g. a pretraining one): keep the head "
                    "random instead of failing.")
  flags.DEFINE_string("spm_model_file", None,
                      "SentencePiece .model; required for preprocessing and "
                      "serving, shipped as an asset with the others.")
  flags.DEFINE_bool("do_lower_case", True,
                    "Lowercase text (must match how the model was trained).")
  flags.DEFINE_integer("seq_length", 128,
                       "Packed sequence length of text-in signatures.")
  flags.DEFINE_enum("task", "encoder", list(export_lib.serving_modules.TASKS),
                    "Serving export: which model and outputs.")
  flags.DEFINE_integer("num_labels", 2, "Classification: number of classes.")
  flags.DEFINE_list("label_names", None,
                    "Classification: class names for the `label` output "
                    "(default 0..num_labels-1).")
  flags.DEFINE_integer("num_text_fields", 1,
                       "encoder/classification/regression serving: 1 "
                       "(`text`) or 2 (`text_a`, `text_b`) text inputs.")
  flags.DEFINE_bool("with_answerability", False,
                    "SQuAD 2.0: the model has an answerability head.")
  flags.DEFINE_integer("max_answer_length", 30, "SQuAD: longest answer "
                       "(tokens).")
  flags.DEFINE_integer("max_query_length", 64, "SQuAD: question tokens kept.")
  flags.DEFINE_integer("doc_stride", 128, "SQuAD: the text signatures slide "
                       "windows this many tokens apart over long contexts "
                       "(0: truncate the context to --seq_length).")
  flags.DEFINE_integer("max_windows", 32, "SQuAD with --doc_stride: longer "
                       "contexts are refused with an error.")
  flags.DEFINE_integer("num_choices", 4, "Multiple choice: choices per "
                       "question.")
  flags.DEFINE_enum("truncation", "longest_first",
                    list(export_lib.preprocessing.TRUNCATION_MODES),
                    "Preprocessing export: how a too-long pair is cut.")
  flags.DEFINE_integer("max_first_segment_length", None,
                       "Preprocessing export with --truncation=first_fixed: "
                       "cap on segment A.")



def main(argv):
  del argv
  path = export_lib.run(FLAGS.export_kind, FLAGS.export_dir,
             albert_config_file=FLAGS.albert_config_file,
             checkpoint=FLAGS.checkpoint, random_init=FLAGS.random_init,
             allow_random_head=FLAGS.allow_random_head,
             spm_model_file=FLAGS.spm_model_file,
             do_lower_case=FLAGS.do_lower_case, seq_length=FLAGS.seq_length,
             task=FLAGS.task, num_labels=FLAGS.num_labels,
             label_names=FLAGS.label_names,
             num_text_fields=FLAGS.num_text_fields,
             with_answerability=FLAGS.with_answerability,
             max_answer_length=FLAGS.max_answer_length,
             max_query_length=FLAGS.max_query_length,
             doc_stride=FLAGS.doc_stride, max_windows=FLAGS.max_windows,
             num_choices=FLAGS.num_choices, truncation=FLAGS.truncation,
             max_first_segment_length=FLAGS.max_first_segment_length,
             version=FLAGS.version)
  print(export_lib.describe_signatures(path))
  print(f"Check with: saved_model_cli show --all --dir {path}")


def cli():
  """Console-script entry point (pyproject.toml)."""
  define_flags()
  flags.mark_flags_as_required(["export_kind", "export_dir"])
  app.run(main)


if __name__ == "__main__":
  cli()
