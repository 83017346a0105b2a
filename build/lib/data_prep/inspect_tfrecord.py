r"""Prints pretraining TFRecord examples decoded back to text.

Shows, for each example, the SOP/NSP label, segment A and B as pieces with
masked positions marked as [MASK:original] (or {replacement->original} when the
input holds a random or kept token), and the masked_lm lists.

Example:
  python -m data_prep.inspect_tfrecord --input_file=out/train.tfrecord \
    --spm_model_file=30k-clean.model --max_examples=3
"""

import sys

from absl import app
from absl import flags

from data_prep import tokenization

FLAGS = flags.FLAGS

def define_flags():
  """Defines the command-line flags (only when run as a program)."""
  flags.DEFINE_string("input_file", None, "TFRecord file (plain or GZIP).")
  flags.DEFINE_string("spm_model_file", None, "SentencePiece model used to write it.")
  flags.DEFINE_integer("max_examples", 5, "Number of examples to print.")
  flags.DEFINE_integer("skip", 0, "Examples to skip first.")
  flags.DEFINE_bool("do_lower_case", True, "Unused for decoding; kept for symmetry.")
  flags.DEFINE_enum("compression", "auto", ["auto", "NONE", "GZIP"],
                    "Input compression (auto: detect gzip magic).")


def iter_examples(path, compression="auto"):
  """Yields dicts name -> list of values from a TFRecord file."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  if compression == "auto":
    with open(path, "rb") as f:
      compression = "GZIP" if f.read(2) == b"\x1f\x8b" else ""
  compression = "" if compression == "NONE" else compression
  for record in tf.data.TFRecordDataset(path, compression_type=compression):
    ex = tf.train.Example.FromString(record.numpy())
    out = {}
    for name, feat in ex.features.feature.items():
      kind = feat.WhichOneof("kind")
      out[name] = list(getattr(feat, kind).value)
    yield out


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


def main(argv):
  del argv
  if not FLAGS.input_file or not FLAGS.spm_model_file:
    raise app.UsageError("--input_file and --spm_model_file are required")
  tok = tokenization.FullTokenizer(FLAGS.spm_model_file, FLAGS.do_lower_case)
  shown = 0
  for k, ex in enumerate(iter_examples(FLAGS.input_file, FLAGS.compression)):
    if k < FLAGS.skip:
      continue
    sys.stdout.write(f"=== example {k}\n{format_example(ex, tok)}\n")
    shown += 1
    if shown >= FLAGS.max_examples:
      break


def cli():
  """Console-script entry point (pyproject.toml)."""
  define_flags()
  app.run(main)


if __name__ == "__main__":
  cli()
