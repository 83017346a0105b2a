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
import io
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
from albert_toolkit import command_line
from albert_toolkit import output_files
from albert_toolkit import text_files

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
  text = text_files.read_utf8(path)  # a byte-order mark is dropped
  rows, unused = [], set()
  if path.endswith((".jsonl", ".json")):
    # Lines end at "\n" only: JSON strings may hold U+2028 and the like.
    for number, line in enumerate(text.split("\n"), 1):
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
    rows = _tsv_rows(path, text)
  if not rows:
    raise ValueError(f"{path}: no rows to predict (a TSV needs a header "
                     "row and a row under it)")
  for number, row in enumerate(rows, 1):
    missing = [name for name in inputs if name not in row]
    if missing:
      raise ValueError(f"{path}: row {number} lacks {', '.join(missing)} "
                       f"(the signature's inputs: {', '.join(inputs)})")
    unused.update(set(row) - set(inputs))
  return rows, sorted(unused)


def _tsv_rows(path, text):
  """Rows of a TSV with a header row, as {column: value}; a repeated
  column name or a row of another width is refused naming the line."""
  reader = csv.reader(io.StringIO(text, newline=""), delimiter="\t",
                      quoting=csv.QUOTE_NONE)
  header, rows = None, []
  for fields in reader:
    if not fields:  # a blank line
      continue
    if header is None:
      seen = set()
      for name in fields:
        if name in seen:
          raise ValueError(f"{path}:{reader.line_num}: column {name!r} "
                           "appears twice in the header")
        seen.add(name)
      header = fields
      continue
    if len(fields) != len(header):
      raise ValueError(f"{path}:{reader.line_num}: {len(fields)} "
                       f"field{'s' if len(fields) != 1 else ''} but the "
                       f"header has {len(header)}")
    rows.append(dict(zip(header, fields)))
  return rows


def predict(model, rows, signature, batch_size, source="input"):
  """Per-row output dicts (JSON-ready), in order; an error names the rows
  of its batch (in `source`)."""
  inputs = model.signatures[signature]["inputs"]
  out = []
  start = time.time()
  for first in range(0, len(rows), batch_size):
    batch = rows[first:first + batch_size]
    # The runner makes arrays of the signature's dtypes (and checks them).
    columns = {name: [row[name] for row in batch] for name in inputs}
    try:
      outputs = model(signature, **columns)
    except ValueError as e:
      hint = (", or use --batch_size=1"
              if isinstance(e, lite.RaggedInputError) else "")
      raise ValueError(f"{source}: rows {first + 1}-{first + len(batch)}: "
                       f"{e}{hint}") from e
    out.extend(serving_client.rows_from_arrays(outputs))
    done = first + len(batch)
    elapsed = time.time() - start
    logging.info("%d/%d rows, %.1f rows/s, ETA %.0f s", done, len(rows),
                 done / elapsed, (len(rows) - done) * elapsed / done)
  return out


def check_flags():
  """Refuses bad flags in one line, before a model is loaded: an
  --output_file that is an input (the rows, the .tflite or its
  model.json) among them."""
  if not FLAGS.model or not FLAGS.input_file:
    raise ValueError("--model and --input_file are required")
  if FLAGS.batch_size < 1:
    raise ValueError(f"--batch_size must be >= 1, got {FLAGS.batch_size}")
  lite.check_num_threads(FLAGS.num_threads, "--num_threads")
  tflite_path = lite.model_path(FLAGS.model)
  output_files.check_not_inputs(
      [("--output_file", FLAGS.output_file)],
      [("--input_file", FLAGS.input_file), ("--model", tflite_path),
       ("--model", os.path.join(os.path.dirname(tflite_path),
                                lite.METADATA_NAME))])


def main(argv):
  del argv
  try:
    check_flags()
    model = lite.LiteModel(FLAGS.model, num_threads=FLAGS.num_threads)
    # Which file runs: an export directory's newest version may not be it.
    print(f"model: {model.path}" + (f" ({model.note})" if model.note else ""),
          file=sys.stderr)
    if FLAGS.signature not in model.signatures:
      raise ValueError(f"{model.path}: no signature {FLAGS.signature!r} (it "
                       f"has {', '.join(sorted(model.signatures))})")
    inputs = sorted(model.signatures[FLAGS.signature]["inputs"])
    rows, unused = read_rows(FLAGS.input_file, inputs)
    if unused:
      logging.info("%s: columns not used: %s", FLAGS.input_file,
                   ", ".join(unused))
    results = predict(model, rows, FLAGS.signature, FLAGS.batch_size,
                      FLAGS.input_file)
    if FLAGS.output_file:
      output_files.atomic_write(
          FLAGS.output_file,
          "".join(json.dumps(r) + "\n" for r in results))
      print(f"{len(results)} rows -> {FLAGS.output_file} ({model.path}, "
            f"{model.interpreter} interpreter)")
    else:
      texts = [" | ".join(str(row[n]) for n in inputs) for row in rows]
      print(serving_client.format_rows(texts, results))
  except cli_flags.USER_ERRORS as e:
    cli_flags.fail(e)


def cli():  # console script (pyproject.toml)
  define_flags()
  # A stop (kill, a scheduler) exits through the cleanup: no temporary
  # output left behind.
  command_line.exit_on_sigterm()
  app.run(main, flags_parser=cli_flags.parse_flags)


if __name__ == "__main__":
  sys.exit(cli())
