"""GLUE: readers for the public TSV files, feature conversion, submission files.

Tasks (directory = the GLUE download's task directory, e.g. `glue/MNLI`):

  task   files (train / dev / test)                       text columns   labels
  cola   train.tsv dev.tsv (no header) / test.tsv          sentence       0 1
  sst-2  train.tsv dev.tsv / test.tsv                       sentence       0 1
  mrpc   train.tsv dev.tsv / test.tsv                       #1/#2 String   0 1
  sts-b  train.tsv dev.tsv / test.tsv                       sentence1/2    score
  qqp    train.tsv dev.tsv / test.tsv                       question1/2    0 1
  mnli   train.tsv dev_matched.tsv / test_matched.tsv       sentence1/2    c e n
  mnli-mm  dev_mismatched.tsv / test_mismatched.tsv (a model trained on mnli)
  ax     diagnostic.tsv (test only, predicted with an MNLI model)
  qnli   train.tsv dev.tsv / test.tsv                       question/sent. e ne
  rte    train.tsv dev.tsv / test.tsv                       sentence1/2    e ne
  wnli   train.tsv dev.tsv / test.tsv                       sentence1/2    0 1

Columns are found by header name where the file has a header (so extra or
reordered columns are fine; a name given twice is refused); CoLA's
train/dev files have none and use the fixed layout `source, label, original
label, sentence`. Rows end at LF (or CRLF), as the original's reader reads
them: a bare CR is text inside a field. Fields are split on tabs only
(GLUE's TSVs are not quoted: quotes are literal text).

Malformed rows (wrong number of fields, unknown label, empty text, a score
that is not a number from 0 to 5) raise `GlueFormatError` naming the file
and line, unless `skip_malformed=True`, in which case they are skipped and
counted (`ReadStats`), the first few logged with their file and line.
"""

import dataclasses
import os
import re
from typing import List, Optional

from absl import logging
import tensorflow as tf

from albert_tf.data import finetune_features
from albert_toolkit import output_files


# A byte that is not UTF-8, as errors="surrogateescape" reads it.
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")


class GlueFormatError(ValueError):
  """A GLUE file row that cannot be read; the message names file and line."""


@dataclasses.dataclass
class InputExample:
  guid: str            # "<split>-<index>", unique within a split
  text_a: str
  text_b: Optional[str]
  label: object        # label string, float (regression) or None (test)
  index: str           # the file's index/id column (submission row key)


@dataclasses.dataclass
class ReadStats:
  rows: int = 0
  skipped: int = 0
  examples_of_skips: List[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class TaskSpec:
  name: str
  labels: Optional[tuple]        # None: regression
  text_a: str                    # header column of the first text
  text_b: Optional[str]          # header column of the second text or None
  label_column: Optional[str]    # header column of the label
  metric: str                    # finetune_metrics.classification_metrics key
  submission: dict               # split ("test"...) -> submission file name
  files: dict = dataclasses.field(  # split -> file name
      default_factory=lambda: {"train": "train.tsv", "dev": "dev.tsv",
                               "test": "test.tsv"})
  id_column: Optional[str] = "index"
  header: bool = True


_TASKS = {
    "cola": TaskSpec("cola", ("0", "1"), "sentence", None, "label", "mcc",
                     {"test": "CoLA.tsv"}, header=False),
    "sst-2": TaskSpec("sst-2", ("0", "1"), "sentence", None, "label",
                      "accuracy", {"test": "SST-2.tsv"}),
    "mrpc": TaskSpec("mrpc", ("0", "1"), "#1 String", "#2 String", "Quality",
                     "f1", {"test": "MRPC.tsv"}),
    "sts-b": TaskSpec("sts-b", None, "sentence1", "sentence2", "score",
                      "corr", {"test": "STS-B.tsv"}),
    "qqp": TaskSpec("qqp", ("0", "1"), "question1", "question2",
                    "is_duplicate", "f1", {"test": "QQP.tsv"}, id_column="id"),
    "mnli": TaskSpec("mnli", ("contradiction", "entailment", "neutral"),
                     "sentence1", "sentence2", "gold_label", "accuracy",
                     {"test": "MNLI-m.tsv", "test_mismatched": "MNLI-mm.tsv",
                      "test_ax": "AX.tsv"},
                     files={"train": "train.tsv", "dev": "dev_matched.tsv",
                            "test": "test_matched.tsv",
                            "dev_mismatched": "dev_mismatched.tsv",
                            "test_mismatched": "test_mismatched.tsv",
                            "test_ax": "diagnostic.tsv"}),
    "qnli": TaskSpec("qnli", ("entailment", "not_entailment"), "question",
                     "sentence", "label", "accuracy", {"test": "QNLI.tsv"}),
    "rte": TaskSpec("rte", ("entailment", "not_entailment"), "sentence1",
                    "sentence2", "label", "accuracy", {"test": "RTE.tsv"}),
    "wnli": TaskSpec("wnli", ("0", "1"), "sentence1", "sentence2", "label",
                     "accuracy", {"test": "WNLI.tsv"}),
}
TASK_NAMES = tuple(sorted(_TASKS))
# CoLA train/dev (no header): source, label, original label, sentence.
_COLA_FIELDS = 4


def get_task(name):
  key = name.lower().replace("_", "-")
  key = {"sst2": "sst-2", "stsb": "sts-b", "sts": "sts-b"}.get(key, key)
  if key not in _TASKS:
    raise ValueError(f"unknown GLUE task {name!r}; expected one of "
                     f"{TASK_NAMES}")
  return _TASKS[key]


def task_splits(task):
  """Splits to evaluate in eval mode and to predict in predict mode."""
  spec = get_task(task)
  evals = [s for s in spec.files if s.startswith("dev")]
  tests = [s for s in spec.files if s.startswith("test")]
  return evals, tests


def _lines(path):
  """(number, line) of a TSV; a leading byte-order mark dropped. Bytes that
  are not UTF-8 come through as surrogates (`not_utf8` finds them), so the
  error names the line, not a position in a decoded chunk."""
  with open(path, encoding="utf-8-sig", errors="surrogateescape",
            newline="\n") as f:
    for number, line in enumerate(f, start=1):
      yield number, line.removesuffix("\n").removesuffix("\r")


def not_utf8(line):
  """Why `line` (read with errors="surrogateescape") is not UTF-8, or
  None."""
  bad = _ESCAPED_BYTE.search(line)
  return bad and (f"not UTF-8 (byte 0x{ord(bad.group()) - 0xDC00:02x}); "
                  "save the file as UTF-8")


# STS-B's similarity scores.
SCORE_RANGE = (0.0, 5.0)


def _score(raw):
  """The float of a score, or None when it is not a number in SCORE_RANGE
  (nan and inf included)."""
  try:
    value = float(raw)
  except ValueError:
    return None
  return value if SCORE_RANGE[0] <= value <= SCORE_RANGE[1] else None


def _bad(stats, skip, path, number, why):
  where = f"{path}:{number}: {why}"
  if not skip:
    raise GlueFormatError(where + " (pass skip_malformed=True / "
                          "--skip_malformed_rows to skip such rows)")
  stats.skipped += 1
  if len(stats.examples_of_skips) < 5:
    stats.examples_of_skips.append(where)
    logging.warning("Skipping malformed row %s", where)


def read_examples(task, data_dir, split, skip_malformed=False, stats=None):
  """Reads `split` ("train", "dev", "test", "dev_mismatched", ...) of `task`.

  Returns a list of InputExample. Labels are validated against the task's
  label set (regression: parsed as float); test files have no labels.
  """
  spec = get_task(task)
  if split not in spec.files:
    raise ValueError(f"{spec.name} has no split {split!r}; available: "
                     f"{sorted(spec.files)}")
  path = os.path.join(data_dir, spec.files[split])
  if not os.path.isfile(path):
    raise FileNotFoundError(f"{spec.name} {split}: file not found: {path}")
  stats = stats if stats is not None else ReadStats()
  is_test = split.startswith("test")
  lines = _lines(path)
  examples = []
  if spec.header or is_test:
    try:
      _, header_line = next(lines)
    except StopIteration:
      raise GlueFormatError(f"{path}:1: empty file (expected a header row)")
    if not_utf8(header_line):
      raise GlueFormatError(f"{path}:1: {not_utf8(header_line)}")
    header = header_line.split("\t")
    col = {name: i for i, name in enumerate(header)}
    twice = next((n for n in header if header.count(n) > 1), None)
    if twice is not None:
      raise GlueFormatError(f"{path}:1: header names column {twice!r} "
                            "twice; which one is meant?")
    needed = [spec.text_a] + ([spec.text_b] if spec.text_b else [])
    if not is_test:
      needed.append(spec.label_column)
    missing = [n for n in needed if n not in col]
    if missing:
      raise GlueFormatError(
          f"{path}:1: header lacks column(s) {missing}; found {header}")
    id_col = col.get(spec.id_column if spec.id_column in col else "index")
    label_col = col.get(spec.label_column)
    width = len(header)
    a_col, b_col = col[spec.text_a], col.get(spec.text_b)
  else:  # CoLA train/dev
    width, a_col, b_col, label_col, id_col = _COLA_FIELDS, 3, None, 1, None
  for number, line in lines:
    if not line.strip():
      continue
    stats.rows += 1
    if not_utf8(line):
      _bad(stats, skip_malformed, path, number, not_utf8(line))
      continue
    fields = line.split("\t")
    if len(fields) != width:
      _bad(stats, skip_malformed, path, number,
           f"expected {width} tab-separated fields, found {len(fields)}")
      continue
    text_a = fields[a_col].strip()
    text_b = fields[b_col].strip() if b_col is not None else None
    if not text_a or (b_col is not None and not text_b):
      _bad(stats, skip_malformed, path, number, "empty text field")
      continue
    label = None
    if not is_test:
      raw = fields[label_col].strip()
      if spec.labels is None:
        label = _score(raw)
        if label is None:
          _bad(stats, skip_malformed, path, number,
               f"score {raw!r} is not a number from {SCORE_RANGE[0]} to "
               f"{SCORE_RANGE[1]}")
          continue
      elif raw not in spec.labels:
        _bad(stats, skip_malformed, path, number,
             f"unknown label {raw!r}; expected one of {list(spec.labels)}")
        continue
      else:
        label = raw
    index = fields[id_col].strip() if id_col is not None else str(
        len(examples))
    examples.append(InputExample(f"{split}-{len(examples)}", text_a, text_b,
                                 label, index))
  if stats.skipped:
    logging.warning("%s: skipped %d of %d rows as malformed", path,
                    stats.skipped, stats.rows)
  return examples


def num_labels(task):
  spec = get_task(task)
  return 1 if spec.labels is None else len(spec.labels)


def convert_examples(examples, task, tokenizer, max_seq_length):
  """Yields feature dicts: the three inputs + `label_ids` (int) or
  `label_values` (regression float) + `example_index`."""
  spec = get_task(task)
  label_map = {l: i for i, l in enumerate(spec.labels or ())}
  texts_a = tokenizer.encode_ids_batch([e.text_a for e in examples])
  texts_b = iter(tokenizer.encode_ids_batch(
      [e.text_b for e in examples if e.text_b is not None]))
  for i, example in enumerate(examples):
    ids_b = next(texts_b) if example.text_b is not None else None
    features = finetune_features.pack_pair(tokenizer, texts_a[i], ids_b,
                                           max_seq_length)
    if spec.labels is None:
      features["label_values"] = [float(example.label or 0.0)]
    else:
      features["label_ids"] = [label_map.get(example.label, 0)]
    features["example_index"] = [i]
    yield features


def feature_spec(task, max_seq_length):
  label = ({"label_values": ([], tf.float32)} if get_task(task).labels is None
           else {"label_ids": ([], tf.int64)})
  return finetune_features.feature_spec(
      [max_seq_length], example_index=([], tf.int64), **label)


def write_submission(task, split, examples, predictions, output_dir):
  """Writes the GLUE server's file (`index<TAB>prediction`); returns path.

  `predictions`: label ids (classification) or scores (regression), one per
  example, in order.
  """
  spec = get_task(task)
  name = spec.submission.get(split, f"{spec.name}-{split}.tsv")
  rows = ["index\tprediction\n"]
  for example, pred in zip(examples, predictions):
    if spec.labels is None:
      value = f"{min(max(float(pred), 0.0), 5.0):.3f}"
    else:
      value = spec.labels[int(pred)]
    rows.append(f"{example.index}\t{value}\n")
  return output_files.atomic_write(os.path.join(output_dir, name),
                                   "".join(rows))
