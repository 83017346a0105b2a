"""The forms bench_inference compares, loaded and ready to call: one
ALBERT classifier as SavedModels (float32, bfloat16) and .tflite files
(float32, float16, dynamic_int8, int8), and Model Garden's encoder with the
same weights as a float32 SavedModel (form_exports.py writes them).

Every form of ours is the classification serving export: text in through
its `serving_default`, ids in through its `serve_ids`. Model Garden's form
is its `AlbertEncoder` behind the same ids-in signature (it has no text-in
export). A .tflite is timed through the raw LiteRT signature runner (no
input checks in Python; its text already through `lite_tokenizer.pre_rules`).

Run as a script, it is the peak-RSS child: a fresh process that imports
only what loading a form needs (TensorFlow, TF Text, LiteRT), loads one form
and runs it (ids in), printing {"baseline_rss_mb": after the imports,
"peak_rss_mb": VmHWM after the calls}:

  python benchmarks/inference_forms.py FORM PATH --batch 32 --seq 128
      --vocab_size 4000 [--lite_threads 2]
"""

import argparse
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_common  # pylint: disable=g-import-not-at-top
import numpy as np  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top

from albert_tf.serving import lite  # pylint: disable=g-import-not-at-top
from albert_tf.serving import lite_tokenizer  # pylint: disable=g-import-not-at-top

MODEL_GARDEN = "model_garden"
# (name, format, precision), in table order.
FORMS = ((MODEL_GARDEN, "savedmodel", "float32"),
         ("savedmodel_float32", "savedmodel", "float32"),
         ("savedmodel_bfloat16", "savedmodel", "bfloat16"),
         ("tflite_float32", "tflite", "float32"),
         ("tflite_float16", "tflite", "float16"),
         ("tflite_dynamic_int8", "tflite", "dynamic_int8"),
         ("tflite_int8", "tflite", "int8"))
FORMATS = {name: fmt for name, fmt, _ in FORMS}


def size_bytes(name, path):
  """The file size of a .tflite; the whole directory of a SavedModel."""
  if FORMATS[name] == "tflite":
    return os.path.getsize(lite.model_path(path))
  return sum(os.path.getsize(os.path.join(d, f))
             for d, _, files in os.walk(path) for f in files)


def fetched(outputs):
  """Outputs in host memory (a SavedModel's are eager tensors)."""
  return {k: np.asarray(v) for k, v in outputs.items()}


class Form:
  """A loaded form: `calls(texts, ids)` -> {"ids": fn, "text": fn} of
  zero-argument calls on those inputs (inputs converted beforehand, so a
  call times only the model)."""

  def __init__(self, name, path, lite_threads=None):
    self.name = name
    self.is_lite = FORMATS[name] == "tflite"
    if self.is_lite:
      self._interpreter = lite.interpreter(lite.model_path(path),
                                           num_threads=lite_threads)
      self._runners = {s: self._interpreter.get_signature_runner(s)
                       for s in self._interpreter.get_signature_list()}
    else:
      self._signatures = tf.saved_model.load(path).signatures

  def calls(self, texts, ids):
    if self.is_lite:
      text = np.array([lite_tokenizer.pre_rules(t, True).encode("utf-8")
                       for t in texts], dtype=object)
      return {"ids": lambda: self._runners["serve_ids"](**ids),
              "text": lambda: self._runners["serving_default"](text=text)}
    feed = {k: tf.constant(v) for k, v in ids.items()}
    if self.name == MODEL_GARDEN:
      return {"ids": lambda: fetched(
          self._signatures["serving_default"](**feed))}
    text = tf.constant(texts)
    examples = tf.constant([tf.train.Example(features=tf.train.Features(
        feature={"text": tf.train.Feature(bytes_list=tf.train.BytesList(
            value=[t.encode()]))})).SerializeToString() for t in texts])
    calls = {"ids": lambda: fetched(self._signatures["serve_ids"](**feed)),
             "text": lambda: fetched(
                 self._signatures["serving_default"](text=text))}
    if self.name == "savedmodel_float32":  # what tf.Example input adds
      calls["examples"] = lambda: fetched(
          self._signatures["serve_examples"](examples=examples))
    return calls


def peak_rss(name, path, batch, seq, vocab_size, lite_threads):
  """Runs the peak-RSS child for one form; returns its JSON."""
  cmd = [sys.executable, os.path.abspath(__file__), name, path,
         "--batch", str(batch), "--seq", str(seq),
         "--vocab_size", str(vocab_size)]
  if lite_threads:
    cmd += ["--lite_threads", str(lite_threads)]
  out = bench_common.run_checked(cmd)
  return json.loads(out.strip().splitlines()[-1])


def _rss_child():
  parser = argparse.ArgumentParser(description="peak-RSS child (see doc)")
  parser.add_argument("form", choices=sorted(FORMATS))
  parser.add_argument("path")
  parser.add_argument("--batch", type=int, required=True)
  parser.add_argument("--seq", type=int, required=True)
  parser.add_argument("--vocab_size", type=int, required=True)
  parser.add_argument("--lite_threads", type=int)
  args = parser.parse_args()
  baseline = bench_common.own_rss_mb()
  rng = np.random.default_rng(0)
  word_ids = rng.integers(5, args.vocab_size, (args.batch, args.seq))
  ids = {"input_word_ids": word_ids.astype(np.int32),
         "input_mask": np.ones_like(word_ids, np.int32),
         "input_type_ids": np.zeros_like(word_ids, np.int32)}
  call = Form(args.form, args.path, args.lite_threads).calls([], ids)["ids"]
  for _ in range(2):
    call()
  print(json.dumps({"baseline_rss_mb": baseline,
                    "peak_rss_mb": bench_common.own_peak_rss_mb()}))


if __name__ == "__main__":
  _rss_child()
