r"""Predicts a TSV or JSON-lines file with a .tflite export (text in).

Each row's fields are the signature's inputs by name: a TSV with a header
row (`text_a<TAB>text_b`; other columns, e.g. a label, are left aside and
named once), or JSON lines (`{"context": "...", "choices": ["..", ..]}`).
Output: one block per row as the TF Serving client prints it, or with
--output_file one JSON object per line (the row's outputs).

  python -m albert_tf.predict_lite --model=export_lite/1 \
      --input_file=dev.tsv --output_file=predictions.jsonl
"""

import csv
import json
import os
import sys
import time

from absl import app
from absl import flags
from absl import logging

from albert_tf import cli_flags
from albert_tf.serving import lite
from clients import serving_client
from albert_toolkit import output_files

FLAGS = flags.FLAGS


def define_flags():
  flags.DEFINE_string("model", None, "A .tflite file, its version directory "
                      "or the export directory (highest version).")
  flags.DEFINE_string("input_file", None, "A .tsv (header row) or .jsonl "
                      "file whose fields are the signature's inputs.")
  flags.DEFINE_string("output_file", None, "JSON lines of the outputs, one "
                      "per input row (default: print them).")
  flags.DEFINE_string("signature", "serving_default", "Signature to call.")
  flags.DEFINE_integer("batch_size", 32, "Rows per interpreter call.")
  flags.DEFINE_integer("num_threads", None, "Interpreter threads (default: "
                       "the interpreter's).")


def read_rows(path, inputs):
  """(rows as {input: value}, columns left aside) of a TSV or JSONL file."""
  if not os.path.isfile(path):
    raise ValueError(f"{path}: no such file (--input_file)")
  rows, unused = [], set()
  with open(path, encoding="utf-8", newline="") as f:
    if path.endswith((".jsonl", ".json")):
      for number, line in enumerate(f, 1):
        if not line.strip():
          continue
        try:
          row = json.loads(line)
        except json.JSONDecodeError as e:
          raise ValueError(f"{path}:{number}: not JSON ({e.msg})") from e
        if not isinstance(row, dict):
          raise ValueError(f"{path}:{number}: a JSON object per line, got "
                           f"{type(row).__name__}")
        rows.append(row)
    else:
      reader = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
      for row in reader:
        if None in row or None in row.values():
          raise ValueError(f"{path}:{reader.line_num}: {len(row)} fields "
                           f"but the header has {len(reader.fieldnames)}")
        rows.append(row)
  for number, row in enumerate(rows, 1):
    missing = [name for name in inputs if name not in row]
    if missing:
      raise ValueError(f"{path}: row {number} lacks {', '.join(missing)} "
                       f"(the signature's inputs: {', '.join(inputs)})")
    unused.update(set(row) - set(inputs))
  return rows, sorted(unused)


def predict(model, rows, signature, batch_size):
  """Per-row output dicts (JSON-ready), in order."""
  inputs = model.signatures[signature]["inputs"]
  out = []
  start = time.time()
  for first in range(0, len(rows), batch_size):
    batch = rows[first:first + batch_size]
    # The runner makes arrays of the signature's dtypes (and checks them).
    columns = {name: [row[name] for row in batch] for name in inputs}
    out.extend(serving_client.rows_from_arrays(model(signature, **columns)))
    done = first + len(batch)
    elapsed = time.time() - start
    logging.info("%d/%d rows, %.1f rows/s, ETA %.0f s", done, len(rows),
                 done / elapsed, (len(rows) - done) * elapsed / done)
  return out


def main(argv):
  del argv
  try:
    if not FLAGS.model or not FLAGS.input_file:
      raise ValueError("--model and --input_file are required")
    if FLAGS.batch_size < 1:
      raise ValueError(f"--batch_size must be >= 1, got {FLAGS.batch_size}")
    model = lite.LiteModel(FLAGS.model, num_threads=FLAGS.num_threads)
    if FLAGS.signature not in model.signatures:
      raise ValueError(f"{model.path}: no signature {FLAGS.signature!r} (it "
                       f"has {', '.join(sorted(model.signatures))})")
    inputs = sorted(model.signatures[FLAGS.signature]["inputs"])
    rows, unused = read_rows(FLAGS.input_file, inputs)
    if unused:
      logging.info("%s: columns not used: %s", FLAGS.input_file,
                   ", ".join(unused))
    results = predict(model, rows, FLAGS.signature, FLAGS.batch_size)
    if FLAGS.output_file:
      output_files.atomic_write(
          FLAGS.output_file,
          "".join(json.dumps(r) + "\n" for r in results))
      print(f"{len(results)} rows -> {FLAGS.output_file} ({model.interpreter}"
            f" interpreter)")
    else:
      texts = [" | ".join(str(row[n]) for n in inputs) for row in rows]
      print(serving_client.format_rows(texts, results))
  except cli_flags.USER_ERRORS as e:
    cli_flags.fail(e)


def cli():  # console script (pyproject.toml)
  define_flags()
  app.run(main, flags_parser=cli_flags.parse_flags)


if __name__ == "__main__":
  sys.exit(cli())
