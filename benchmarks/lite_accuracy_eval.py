"""benchmarks/lite_accuracy.py's measurements: a dev set through one export
(SavedModel or .tflite, text in, `serving_default`) and its figures against
the float32 SavedModel's outputs."""

import os

import numpy as np
import tensorflow as tf
import tensorflow_text  # pylint: disable=unused-import  (the SavedModel's text ops)

from albert_tf.serving import lite
from albert_tf.tasks import metrics

BATCH = 64
# serving_default's text inputs, in the order of the dev set's columns.
TEXT_FIELDS = {"classification": ("text_a", "text_b"),
               "squad": ("question", "context")}
# The outputs compared: the answer (label id / answer text) and the logits.
LOGITS = {"classification": ("logits",),
          "squad": ("start_logits", "end_logits")}


def _runner(path, export_format):
  """fn(**{field: list of str}) -> {output name: numpy array}."""
  if export_format == "tflite":
    model = lite.LiteModel(path)
    return lambda **texts: model("serving_default", **texts)
  signature = tf.saved_model.load(path).signatures["serving_default"]
  return lambda **texts: {
      k: v.numpy() for k, v in signature(
          **{name: tf.constant(t) for name, t in texts.items()}).items()}


def _answers(task, out):
  if task == "classification":
    return [int(x) for x in out["label_id"]]
  return [x.decode("utf-8") if isinstance(x, bytes) else str(x)
          for x in out["answer_text"]]


def run_dev(path, export_format, task, dev):
  """The dev set (text columns..., gold) through the export at `path`:
  {"answers": [label id or answer text], logits name: float32 array}."""
  call = _runner(path, export_format)
  columns, n = dev[:-1], len(dev[-1])
  answers, logits = [], {name: [] for name in LOGITS[task]}
  for start in range(0, n, BATCH):
    texts = {field: list(column[start:start + BATCH])
             for field, column in zip(TEXT_FIELDS[task], columns)}
    out = call(**texts)
    answers += _answers(task, out)
    for name in logits:
      logits[name].append(np.asarray(out[name], dtype=np.float32))
  result = {"answers": answers}
  result.update({name: np.concatenate(parts) for name, parts in
                 logits.items()})
  return result


def compare(task, outputs, reference, dev):
  """One row: agreement with `reference`, dev accuracy, |logit| diff."""
  gold = dev[-1]
  same = [a == b for a, b in zip(outputs["answers"], reference["answers"])]
  row = {"examples": len(gold), "agreement": float(np.mean(same)),
         "max_abs_logit_diff": max(
             float(np.abs(outputs[name] - reference[name]).max())
             for name in LOGITS[task])}
  if task == "classification":
    row["accuracy"] = float(np.mean(
        [p == g for p, g in zip(outputs["answers"], gold)]))
  else:
    row["exact_match"] = float(np.mean(
        [metrics.exact_match(p, g) for p, g in zip(outputs["answers"],
                                                    gold)]))
    row["f1"] = float(np.mean(
        [metrics.token_f1(p, g) for p, g in zip(outputs["answers"], gold)]))
    row["accuracy"] = row["exact_match"]
  return row


def export_size(path):
  """Bytes of an export version directory: every file (SavedModel: graph,
  variables, the SentencePiece asset; .tflite: the model, which holds its
  vocabulary, and model.json)."""
  return sum(os.path.getsize(os.path.join(d, f))
             for d, _, files in os.walk(path) for f in files)


def describe(row):
  """One line of a row's figures."""
  extra = (f" F1 {row['f1']:.4f}" if "f1" in row else "")
  return (f"{row['size_bytes'] / 1e6:.2f} MB, agreement "
          f"{row['agreement']:.4f}, accuracy {row['accuracy']:.4f}{extra}, "
          f"max |logit diff| {row['max_abs_logit_diff']:.4f} "
          f"({row['examples']} examples, {row['dev_seconds']} s)")
