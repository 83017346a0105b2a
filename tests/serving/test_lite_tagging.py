"""The tagging export, SavedModel and .tflite: text longer than the sequence
is windowed in-graph and each word labelled once (the .tflite equal to the
SavedModel; with a model whose labels do not depend on context, equal to a
long-enough model's), words that normalise to no piece keep their place,
and the .tflite export runs every signature in LiteRT before it is written."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  pylint: disable=unused-import
import tf_keras

from albert_tf.serving import lite
from albert_tf.serving import lite_export
from albert_tf.tasks import export as tasks_export
from albert_tf.tasks import export_request
from tests.testing import export_testlib as lib

LABELS = ["O", "B-LOC", "B-PER", "I-LOC", "I-PER"]
SEQ = 8  # 6 pieces a window, windows 3 pieces apart
WORDS = ("the cat sat on a mat and then it ran home to see the old dog "
         "Zyxwqk by the river").split()
TEXTS = np.array([
    " ".join(WORDS * 3),  # far more pieces than a window
    "Ann \u00ad met \u0301 Bob \u200d at \ufeff noon",  # pieceless words
    "\u00ad \u200d",  # nothing but pieceless words
    "",
    "a cat",
], dtype=object)


def _export(model, spm, directory, seq=SEQ, tflite=False):
  task_cls, params = tasks_export.task_for_flags(
      "tagging", "serving", dict(spm_model_file=spm, max_seq_length=seq,
                                 label_names=LABELS))
  form = export_request.ExportForm("tflite") if tflite else None
  return tasks_export.export_model(task_cls, "serving", model, params,
                                   str(directory), form=form)


def _saved_labels(path, texts=TEXTS):
  out = tf.saved_model.load(path).signatures["serving_default"](
      text=tf.constant(texts, tf.string))
  return {k: v.numpy() for k, v in out.items()}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("lite_tagging")
  spm = lib.train_spm(str(tmp))
  tf_keras.utils.set_random_seed(5)
  task_cls, params = tasks_export.task_for_flags(
      "tagging", "serving", dict(spm_model_file=spm, max_seq_length=SEQ,
                                 label_names=LABELS))
  model = tasks_export.model_for_flags(
      task_cls, "serving", lib.tiny_config(max_position_embeddings=128),
      params)
  return dict(tmp=tmp, spm=spm, model=model,
              saved=_export(model, spm, tmp / "saved"),
              lite=_export(model, spm, tmp / "lite", tflite=True))


@pytest.mark.slow  # the module's exports and a TFLite conversion
def test_tflite_runs_and_equals_the_saved_model(setup):
  saved = _saved_labels(setup["saved"])
  lite_model = lite.LiteModel(setup["lite"])
  got = lite_model("serving_default", text=TEXTS)
  for key in ("label", "word_start", "word_end", "num_words"):
    np.testing.assert_array_equal(got[key], saved[key], err_msg=key)
  # Every word has a label, pieceless ones too; nothing past them.
  assert list(saved["num_words"]) == [len(t.split()) for t in TEXTS]
  for row, n in zip(saved["label"], saved["num_words"]):
    assert all(l.decode() in LABELS for l in row[:n])
    assert set(row[n:]) <= {b""}
  # The long text's words are labelled from several windows' positions.
  assert len(set(saved["label"][0][:saved["num_words"][0]])) > 1
  # A batch without words, or without texts, has no words to label (it
  # failed in an argmax over no windows).
  for texts in (np.array(["", " \t"], dtype=object),
                np.array([], dtype=object)):
    for out in (_saved_labels(setup["saved"], texts),
                lite_model("serving_default", text=texts)):
      assert out["num_words"].tolist() == [0] * len(texts)
      for key in ("label", "word_start", "word_end"):
        assert out[key].shape == (len(texts), 0), key
  # Words split at Unicode White_Space (docs/serving.md): U+001C, which
  # str.split() splits on, stays inside a word.
  texts = np.array(["a\x1cb c"], dtype=object)
  for out in (_saved_labels(setup["saved"], texts),
              lite_model("serving_default", text=texts)):
    assert out["num_words"].tolist() == [2]


@pytest.mark.slow
def test_windows_equal_a_long_enough_model_without_context(setup, tmp_path):
  """A model whose label at a piece depends on that piece only (no
  position embeddings, attention adds a constant): the windowed labels must
  equal those of a model whose sequence holds the whole text."""
  model = setup["model"]
  saved = {v.name: v.numpy() for v in model.weights}
  try:
    for v in model.weights:
      if ("position_embeddings" in v.name or "/value/" in v.name):
        v.assign(tf.zeros_like(v))
    windowed = _saved_labels(_export(model, setup["spm"], tmp_path / "w"))
    whole = _saved_labels(_export(model, setup["spm"], tmp_path / "l",
                                  seq=128))  # the longest text fits
  finally:
    for v in model.weights:
      v.assign(saved[v.name])
  np.testing.assert_array_equal(windowed["label"], whole["label"])
  n = windowed["num_words"][0]
  assert len(set(whole["label"][0][:n])) > 1  # labels that can differ


def test_a_model_that_loads_but_cannot_run_is_refused(tmp_path):
  """A string tf.where converts (as custom op SelectV2) and loads, but has
  no kernel: the export's check runs each signature and says which."""

  class Module(tf.Module):

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int32)])
    def ok(self, x):
      return {"y": x + 1}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int32)])
    def strings(self, x):
      return {"y": tf.where(x > 0, "yes", "no")}

  module = Module()
  tf.saved_model.save(module, str(tmp_path), signatures={
      "ok": module.ok, "strings": module.strings})
  converter = tf.lite.TFLiteConverter.from_saved_model(
      str(tmp_path), signature_keys=["ok", "strings"])
  converter.allow_custom_ops = True
  tflite_bytes = converter.convert()
  assert "SelectV2" in lite_export.custom_ops(tflite_bytes)
  with pytest.raises(ValueError, match=(
      r"^the converted model does not run in \S+ with TF Text's TFLite "
      r"kernels \(signature 'strings'\): .*SelectV2[^\n]*$")):
    lite_export.check_ops(tflite_bytes)
