""".tflite exports with a BERT WordPiece vocabulary: no Flex op, the
tokenizer's ids equal the original FullTokenizer's, and a classifier and a
SQuAD export give their SavedModel's outputs on the tricky table."""

import json

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # pylint: disable=unused-import  (SavedModel text ops)
import tf_keras

from albert_tf.serving import lite
from albert_tf.serving import lite_export
from albert_tf.serving import lite_preprocessing
from albert_tf.serving import wordpiece
from albert_tf.tasks import export as tasks_export
from albert_tf.tasks import export_request
from tests.serving.test_wordpiece import PAIR, TABLE, call, reference
from tests.serving.test_wordpiece import reference_ids
from tests.testing import export_testlib as lib

SEQ = 24
KINDS = {
    "classification": (dict(num_labels=3, num_text_fields=2,
                            label_names=["neg", "neutral", "pos"]),
                       lambda a, b: dict(text_a=a, text_b=b)),
    "squad": (dict(doc_stride=0, max_query_length=6, max_answer_length=5),
              lambda a, b: dict(question=a, context=b)),
}


@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
  return lib.write_wordpiece_vocab(str(tmp_path_factory.mktemp("vocab")))


@pytest.fixture(scope="module")
def setup(vocab, tmp_path_factory):
  tmp = tmp_path_factory.mktemp("lite_wordpiece")
  tf_keras.utils.set_random_seed(7)
  out = {"vocab": vocab}
  for kind, (settings, _) in KINDS.items():
    task_cls, params = tasks_export.task_for_flags(
        kind, "serving", dict(vocab_file=vocab, max_seq_length=SEQ, **settings))
    model = tasks_export.model_for_flags(
        task_cls, "serving", lib.tiny_config(lib.WORDPIECE_VOCAB_SIZE),
        params)
    out[kind] = dict(
        saved=tasks_export.export_model(task_cls, "serving", model, params,
                                        str(tmp / kind / "saved")),
        lite=tasks_export.export_model(
            task_cls, "serving", model, params, str(tmp / kind / "lite"),
            form=export_request.ExportForm("tflite")))
  return out


@pytest.mark.slow  # four exports
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_tflite_equals_saved_model(setup, kind):
  paths, make_inputs = setup[kind], KINDS[kind][1]
  model = lite.LiteModel(paths["lite"])
  inputs = make_inputs(np.array(TABLE, dtype=object),
                       np.array(PAIR, dtype=object))
  got = model("serving_default", **inputs)
  want = call(tf.saved_model.load(paths["saved"]).signatures[
      "serving_default"], **inputs)
  assert sorted(got) == sorted(want)
  for key, value in want.items():
    if value.dtype.kind == "f":
      np.testing.assert_allclose(got[key], value, atol=1e-5, rtol=0,
                                 err_msg=key)
    else:
      np.testing.assert_array_equal(got[key], value, err_msg=key)
  info = json.loads(open(paths["lite"] + "/model.json").read())
  assert info["text"]["tokenizer"] == "wordpiece"
  assert info["vocab_file"] == setup["vocab"] and not info["spm_model_file"]
  # Builtins and TF Text's kernels only: no Flex (Select TF) op.
  assert info["custom_ops"] and not [
      op for op in info["custom_ops"] if op.startswith("Flex")]
  assert {"FastBertNormalize", "FastWordpieceTokenizeWithOffsets"} <= set(
      info["custom_ops"]), info["custom_ops"]


@pytest.mark.parametrize("lower", [True, False])
def test_tflite_ids_equal_full_tokenizer(vocab, lower):
  module = lib.Tokenize(lite_preprocessing.LiteWordPiecePreprocessor(
      vocab, do_lower_case=lower))
  tflite = lite_export.convert(module, "float32")
  assert not [op for op in lite_export.custom_ops(tflite)
              if op.startswith("Flex")]
  runner = lite.interpreter(model_content=tflite).get_signature_runner(
      "tokenize")
  got = runner(text=np.array([wordpiece.pre_rules(t, lower).encode("utf-8")
                              for t in TABLE], dtype=object))
  tok = reference(vocab, lower)
  for i, text in enumerate(TABLE):
    want = reference_ids(tok, text)
    assert got["ids"][i, :got["lengths"][i]].tolist() == want, repr(text)
