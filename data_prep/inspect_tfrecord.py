r"""Prints pretraining TFRecord examples decoded back to text.

Shows, for each example, the SOP/NSP label, segment A and B as pieces with
masked positions marked as [MASK:original] (or {replacement->original} when the
input holds a random or kept token), and the masked_lm lists.

The vocabulary (--spm_model_file, or --vocab_file for BERT WordPiece) must
be the one the data's summary records (by content hash; older summaries: by
vocabulary size, a warning if only the path differs): another vocabulary
decodes other pieces.

Example:
  python -m data_prep.inspect_tfrecord --input_file=out/train.tfrecord \
    --spm_model_file=30k-clean.model --max_examples=3
"""

import os
import sys

from absl import app
from absl import flags

from albert_toolkit import command_line
from albert_toolkit import output_files
from data_prep import pretraining_config
from data_prep import pretraining_summary
from albert_toolkit import tfrecord_io
from data_prep import tokenization

FLAGS = flags.FLAGS

def define_flags():
  """Defines the command-line flags (only when run as a program)."""
  flags.DEFINE_string("input_file", None, "TFRecord file (plain or GZIP).")
  flags.DEFINE_string("spm_model_file", None, "SentencePiece model used to "
                      "write it (or --vocab_file).")
  flags.DEFINE_string("vocab_file", None, "BERT WordPiece vocabulary used to "
                      "write it (or --spm_model_file).")
  flags.DEFINE_integer("max_examples", 5, "Number of examples to print.",
                       lower_bound=0)
  flags.DEFINE_integer("skip", 0, "Examples to skip first.", lower_bound=0)
  flags.DEFINE_enum("compression", "auto", ["auto", "NONE", "GZIP"],
                    "Input compression (auto: detect gzip magic).")
  flags.register_multi_flags_validator(
      ["spm_model_file", "vocab_file"],
      pretraining_config.check_one_vocabulary_flags)


def iter_examples(path, compression="auto"):
  """Yields dicts name -> list of values from a TFRecord file."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  for record in tfrecord_io.read_records(path, compression):
    ex = tf.train.Example.FromString(record)
    yield {name: list(getattr(feat, feat.WhichOneof("kind")).value)
           for name, feat in ex.features.feature.items()}


def format_example(ex, tok):
  """Returns a multi-line human-readable rendering of one example."""
  ids = ex.get("input_ids", ex.get("input_word_ids"))
  seg = ex.get("segment_ids", ex.get("input_type_ids"))
  n = sum(ex["input_mask"])
  weights = ex["masked_lm_weights"]
  masked = {p: l for p, l, w in zip(ex["masked_lm_positions"],
                                    ex["masked_lm_ids"], weights) if w > 0}
  segments = {0: [], 1: []}
  for i in range(n):
    if ids[i] in (tok.cls_id,) or (ids[i] == tok.sep_id and i not in masked):
      continue
    piece = tok.convert_ids_to_tokens([ids[i]])[0]
    if i in masked:
      orig = tok.convert_ids_to_tokens([masked[i]])[0]
      if ids[i] == tok.mask_id:
        piece = f"[MASK:{orig}]"
      elif ids[i] == masked[i]:
        piece = f"{{={orig}}}"
      else:
        piece = f"{{{piece}->{orig}}}"
    segments[seg[i]].append(piece)
  label = ex.get("next_sentence_labels", [0])[0]
  lines = [f"label (SOP 1=swapped / NSP 1=random): {label}   tokens: {n}   "
           f"masked: {len(masked)}",
           "A: " + " ".join(segments[0])]
  if segments[1]:
    lines.append("B: " + " ".join(segments[1]))
  lines.append("masked_lm_positions: " + str(sorted(masked)))
  return "\n".join(lines)


_NEEDED = ("input_mask", "masked_lm_positions", "masked_lm_ids",
           "masked_lm_weights")


def check_features(ex, path, index):
  """Raises ValueError naming the file if `ex` is not a pretraining example."""
  missing = [n for n in _NEEDED if n not in ex]
  if "input_ids" not in ex and "input_word_ids" not in ex:
    missing.insert(0, "input_ids")
  if "segment_ids" not in ex and "input_type_ids" not in ex:
    missing.append("segment_ids")
  if missing:
    raise ValueError(f"{path}: record {index} is not a pretraining example "
                     f"(no feature {', '.join(missing)})")


def show(path, tok, compression="auto", skip=0, max_examples=5,
         stream=sys.stdout):
  """Prints examples of `path`; errors are ValueError/OSError naming it."""
  from google.protobuf import message  # pylint: disable=g-import-not-at-top
  shown, k = 0, -1
  try:
    for k, ex in enumerate(iter_examples(path, compression)):
      if k < skip:
        continue
      check_features(ex, path, k)
      stream.write(f"=== example {k}\n{format_example(ex, tok)}\n")
      shown += 1
      if shown >= max_examples:
        break
    else:
      if skip and not shown:  # else nothing at all would be printed
        raise ValueError(f"--skip={skip} is past the end of {path}: it holds "
                         f"{k + 1} records")
  except message.DecodeError as e:
    raise ValueError(f"{path}: not a readable TFRecord of tf.train.Example "
                     f"(record {k + 1}: {e})") from e
  except OSError as e:
    if not str(e).startswith(tfrecord_io.CORRUPT_RECORD_ERROR):
      raise  # the file cannot be opened
    raise ValueError(f"not a readable TFRecord of tf.train.Example: "
                     f"{e}") from e
  return shown


def check_model(path, spm_model_file, vocab_size, stream=sys.stderr,
                flag="--spm_model_file"):
  """Refuses a vocabulary (`spm_model_file`: either kind, given as `flag`)
  other than the one that wrote `path` (it would decode other pieces:
  garbage that looks like data).

  Compared with what the data's summary records: the model's content hash
  when the summary has one (newer data_prep), else its vocabulary size, and
  a warning if only the path differs. A file without a summary is shown with
  a warning.
  """
  summary_path, summary = pretraining_summary.find(path)
  if summary is None:
    stream.write(f"inspect_tfrecord: warning: no summary for {path}: cannot "
                 f"check that {spm_model_file} is the model that wrote it\n")
    return
  pretraining_summary.check_size(summary, summary_path, path)
  recorded = (pretraining_summary.value(summary, "vocab_file") or
              pretraining_summary.value(summary, "spm_model_file"))
  recorded_hash = pretraining_summary.vocab_sha256(summary)
  recorded_size = pretraining_summary.value(summary, "vocab_size")
  what = (f"{flag} {spm_model_file} is not the model that wrote "
          f"{path} ({summary_path} records {recorded}")
  if recorded_hash:
    if output_files.file_sha256(spm_model_file) != recorded_hash:
      raise ValueError(f"{what}, sha256 {recorded_hash[:12]}..., another "
                       "content); pass that model")
    return
  if recorded_size is not None and recorded_size != vocab_size:
    raise ValueError(f"{what} with {recorded_size} pieces; this one has "
                     f"{vocab_size}); pass that model")
  if recorded and os.path.realpath(recorded) != os.path.realpath(
      spm_model_file):
    stream.write(f"inspect_tfrecord: warning: {summary_path} records "
                 f"{recorded} (no content hash): if {spm_model_file} is "
                 "another model of the same size, the pieces shown are "
                 "wrong\n")


def main(argv):
  del argv
  if not FLAGS.input_file:
    raise app.UsageError("--input_file is required")
  with command_line.exit_on_error("inspect_tfrecord"):
    # Ids are decoded to pieces: lower-casing (an encoding step) is not used.
    tok = tokenization.load_tokenizer(FLAGS.spm_model_file, FLAGS.vocab_file,
                                      do_lower_case=True)
    if not os.path.isfile(FLAGS.input_file):
      if any(c in FLAGS.input_file for c in "*?[,"):
        raise ValueError(f"--input_file {FLAGS.input_file}: takes one file, "
                         "not a glob or a list (inspect one shard)")
      raise OSError(f"Cannot read input file {FLAGS.input_file}")
    check_model(FLAGS.input_file, tok.vocab_path, tok.vocab_size,
                flag="--vocab_file" if FLAGS.vocab_file else "--spm_model_file")
    show(FLAGS.input_file, tok, FLAGS.compression, FLAGS.skip,
         FLAGS.max_examples)


def cli():
  """Console-script entry point (pyproject.toml)."""
  define_flags()
  app.run(main, flags_parser=command_line.parse_flags)


if __name__ == "__main__":
  cli()
