""".tflite exports: every serving kind equals its SavedModel (float32 to
1e-5) on real and tricky text, the ids equal data_prep's, the other
precisions, what model.json says, refusals, and the runner's input checks."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.lite.python import schema_py_generated as schema
import tensorflow_text  # pylint: disable=unused-import  (SavedModel text ops)
import tf_keras

from albert_tf import predict_lite
from albert_tf.serving import lite
from albert_tf.serving import lite_export
from albert_tf.serving import preprocessing
from albert_tf.tasks import export as tasks_export
from albert_tf.tasks import export_request
from albert_toolkit import output_files
from data_prep import tokenization
from tests.serving.test_export_text import TRICKY
from tests.serving.test_lite_tokenizer import MORE_TRICKY
from tests.testing import export_testlib as lib

# Ten seconds or more in all: handed out first (tests/conftest.py).
pytestmark = pytest.mark.slow

SEQ = 24
REAL = lib._training_lines(limit=40)[5:37]  # pylint: disable=protected-access
LABELS = ["neg", "neutral", "pos"]
CHOICES = 4
# kind -> (serving task, settings, text inputs).
KINDS = {
    "classification": ("classification",
                       dict(num_labels=3, num_text_fields=2,
                            label_names=LABELS),
                       lambda a, b: dict(text_a=a, text_b=b)),
    "regression": ("regression", dict(num_text_fields=1),
                   lambda a, b: dict(text=a)),
    # 4 choices (RACE's): the export's probe once ran 2 whatever the model.
    "multiple_choice": ("multiple_choice", dict(num_choices=CHOICES),
                        lambda a, b: dict(context=a,
                                          choices=np.stack([a, b, b, a], 1))),
    "squad": ("squad", dict(doc_stride=0, with_answerability=True,
                            max_query_length=8, max_answer_length=6),
              lambda a, b: dict(question=a, context=b)),
    "encoder": ("encoder", {}, lambda a, b: dict(text=a)),
}


def _texts():
  """Pairs of real text and of the tricky table (each against a real line)."""
  a = list(REAL[:16]) + TRICKY + MORE_TRICKY
  b = list(REAL[16:32]) + [REAL[i % len(REAL)] for i in
                           range(len(TRICKY) + len(MORE_TRICKY))]
  return np.array(a, dtype=object), np.array(b, dtype=object)


def _build(task, settings, spm_file):
  task_cls, params = tasks_export.task_for_flags(
      task, "serving", dict(spm_model_file=spm_file, max_seq_length=SEQ,
                            **settings))
  model = tasks_export.model_for_flags(task_cls, "serving", lib.tiny_config(),
                                       params)
  return task_cls, params, model


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("lite_export")
  spm_file = lib.train_spm(str(tmp))
  tf_keras.utils.set_random_seed(3)
  out = {"spm": spm_file, "tmp": tmp}
  for kind, (task, settings, _) in KINDS.items():
    task_cls, params, model = _build(task, settings, spm_file)
    out[kind] = dict(
        saved=tasks_export.export_model(task_cls, "serving", model, params,
                                        str(tmp / kind / "saved")),
        lite=tasks_export.export_model(
            task_cls, "serving", model, params, str(tmp / kind / "lite"),
            form=export_request.ExportForm("tflite")),
        task_cls=task_cls, params=params, model=model)
  return out


def _saved_outputs(path, signature, inputs):
  fn = tf.saved_model.load(path).signatures[signature]
  return {k: v.numpy() for k, v in fn(**{k: tf.constant(v) for k, v in
                                          inputs.items()}).items()}


def assert_same(got, want, atol=1e-5):
  assert sorted(got) == sorted(want)
  for key, value in want.items():
    if value.dtype.kind == "f":
      np.testing.assert_allclose(got[key], value, atol=atol, rtol=0,
                                 err_msg=key)
    else:
      np.testing.assert_array_equal(got[key], value, err_msg=key)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_float32_equals_saved_model(setup, kind):
  paths, (_, _, make_inputs) = setup[kind], KINDS[kind]
  model = lite.LiteModel(paths["lite"])
  a, b = _texts()
  inputs = make_inputs(a, b)
  assert_same(model("serving_default", **inputs),
              _saved_outputs(paths["saved"], "serving_default", inputs))
  # ids in: the same signature name and outputs as the SavedModel.
  prep = preprocessing.TextPreprocessor(setup["spm"], seq_length=SEQ)
  ids = {k: v.numpy() for k, v in prep.preprocess([a, b]).items()}
  if kind == "multiple_choice":
    ids = {k: np.stack([v] * CHOICES, 1) for k, v in ids.items()}
  assert_same(model("serve_ids", **ids),
              _saved_outputs(paths["saved"], "serve_ids", ids))
  assert sorted(model.signatures) == ["serve_ids", "serving_default"]


def test_tflite_ids_equal_data_prep(setup):
  """A .tflite tokenizer (the folded model + "<digit>," fix) gives
  data_prep's ids for real text and the tricky table."""
  module = lib.Tokenize(preprocessing.TextPreprocessor(setup["spm"]))
  runner = lite.interpreter(model_content=lite_export.convert(
      module, "float32")).get_signature_runner("tokenize")
  texts, _ = _texts()
  got = runner(text=np.array([lite.lite_tokenizer.pre_rules(t, True)
                              for t in texts], dtype=object))
  tok = tokenization.FullTokenizer(setup["spm"])
  for i, text in enumerate(texts):
    want = tok.encode_ids(text)
    assert got["ids"][i, :got["lengths"][i]].tolist() == want, repr(text)
  # The vocabulary has a "<digit>," piece, so the fix was exercised.
  assert tok._digit_comma  # pylint: disable=protected-access


@pytest.mark.parametrize("precision", ["float16", "dynamic_int8", "int8"])
def test_lower_precisions(setup, precision, tmp_path):
  kind = setup["classification"]
  rng = np.random.default_rng(0)
  calibration = [{"input_word_ids": rng.integers(5, 400, SEQ, np.int32),
                  "input_mask": np.ones(SEQ, np.int32),
                  "input_type_ids": np.repeat([0, 1], SEQ // 2).astype(
                      np.int32)} for _ in range(8)]
  path = tasks_export.export_model(
      kind["task_cls"], "serving", kind["model"], kind["params"],
      str(tmp_path), form=export_request.ExportForm(
          "tflite", precision, calibration_examples=calibration))
  a, b = _texts()
  got = lite.LiteModel(path)("serving_default", text_a=a, text_b=b)
  want = lite.LiteModel(kind["lite"])("serving_default", text_a=a, text_b=b)
  scale = np.abs(want["logits"]).max()
  error = np.abs(got["logits"] - want["logits"]).max() / scale
  # float16 keeps weights in half precision; the int8 forms quantize.
  assert error < (1e-2 if precision == "float16" else 0.25), error
  info = json.loads((tmp_path / "1" / "model.json").read_text())
  assert info["precision"] == precision
  assert not [op for op in info["custom_ops"] if op.startswith("Flex")]
  with open(os.path.join(path, "model.tflite"), "rb") as f:
    types = _tensor_types(f.read())
  want = {"float16": "FLOAT16", "dynamic_int8": "INT8", "int8": "INT8"}
  assert want[precision] in types, types
  if precision == "dynamic_int8":  # int8 weights: a quarter the size
    size = os.path.getsize(os.path.join(path, "model.tflite"))
    assert size < os.path.getsize(os.path.join(kind["lite"], "model.tflite"))


def _tensor_types(tflite_bytes):
  """Names of the tensor types a .tflite holds."""
  names = {v: k for k, v in vars(schema.TensorType).items()
           if not k.startswith("_")}
  model = schema.ModelT.InitFromPackedBuf(bytearray(tflite_bytes), 0)
  return {names[t.type] for g in model.subgraphs for t in g.tensors}


def test_bfloat16_saved_model(setup, tmp_path):
  kind = setup["classification"]
  with tasks_export.precision_scope("bfloat16"):
    _, params, model = _build("classification",
                              KINDS["classification"][1], setup["spm"])
  assert tf_keras.mixed_precision.global_policy().name == "float32"
  model.set_weights(kind["model"].get_weights())
  path = tasks_export.export_model(kind["task_cls"], "serving", model, params,
                                   str(tmp_path / "bf16"))
  a, b = _texts()
  got = _saved_outputs(path, "serving_default", dict(text_a=a, text_b=b))
  want = _saved_outputs(kind["saved"], "serving_default",
                        dict(text_a=a, text_b=b))
  assert got["logits"].dtype == np.float32
  scale = np.abs(want["logits"]).max()
  assert np.abs(got["logits"] - want["logits"]).max() / scale < 0.05
  assert not np.array_equal(got["logits"], want["logits"])  # really bf16


def test_model_json_says_what_it_is(setup):
  info = json.loads(open(os.path.join(setup["classification"]["lite"],
                                      "model.json")).read())
  assert info["task"] == setup["classification"]["task_cls"].name
  assert info["kind"] == "serving" and info["format"] == "tflite"
  assert info["serving_params"]["label_names"] == LABELS
  assert info["serving_params"]["max_seq_length"] == SEQ
  assert info["vocabulary_sha256"] == output_files.file_sha256(setup["spm"])
  assert info["sha256"] == output_files.file_sha256(
      os.path.join(setup["classification"]["lite"], "model.tflite"))
  assert info["source"] == {}  # export_model of a model in memory
  assert info["text"]["do_lower_case"] is True
  assert info["model_config"]["vocab_size"] == lib.SPM_VOCAB_SIZE
  assert sorted(info["signatures"]["serving_default"]["inputs"]) == [
      "text_a", "text_b"]
  assert "serve_examples" in info["left_out_signatures"]


# --- Refusals -----------------------------------------------------------------


@pytest.mark.parametrize("request_fields,message", [
    (dict(form=export_request.ExportForm("tflite", "bfloat16")),
     "bfloat16 is not a tflite precision"),
    (dict(form=export_request.ExportForm(precision="int8")),
     "int8 is not a savedmodel precision"),
    (dict(form=export_request.ExportForm("onnx")), "--format must be one of"),
    (dict(form=export_request.ExportForm("tflite"),
          export_kind="preprocessing"),
     "preprocessing is a float32 SavedModel only"),
    (dict(form=export_request.ExportForm("tflite", "dynamic_int8"),
          representative_examples=10), "calibrates --precision=int8 only"),
    (dict(form=export_request.ExportForm("tflite", "int8")),
     "int8 calibrates on the run's own data"),
])
def test_refused(setup, tmp_path, request_fields, message):
  with pytest.raises(ValueError, match=message):
    lib.export(str(tmp_path / "out"), task="classification",
               settings=dict(spm_model_file=setup["spm"], max_seq_length=SEQ),
               config_files=[_config_file(tmp_path)], random_init=True,
               **request_fields)
  assert not (tmp_path / "out" / "1").exists()


def _config_file(tmp_path):
  path = str(tmp_path / "albert_config.json")
  lib.tiny_config().to_json_file(path)
  return path


def test_squad_windows_refused_with_the_reason(setup, tmp_path):
  with pytest.raises(ValueError, match="doc-stride windows.*--doc_stride=0"):
    lib.export(str(tmp_path / "out"), task="squad",
               form=export_request.ExportForm("tflite"),
               settings=dict(spm_model_file=setup["spm"], max_seq_length=SEQ,
                             max_query_length=8, doc_stride=8),
               config_files=[_config_file(tmp_path)], random_init=True)
  assert not (tmp_path / "out").exists() or not os.listdir(tmp_path / "out")


# --- The runner ---------------------------------------------------------------


def test_runner_rejects_bad_inputs_in_one_line(setup):
  model = lite.LiteModel(setup["classification"]["lite"])
  ids = np.array([[2, 10, 3, 0]], np.int32)
  good = dict(input_word_ids=ids, input_mask=np.array([[1, 1, 1, 0]]),
              input_type_ids=np.zeros_like(ids))
  cases = [
      ("serving_default", dict(text_a=["x"]), "missing: text_b"),
      ("serving_default", dict(text_a=["x"], text_b=["y"], text_c=["z"]),
       "unknown: text_c"),
      ("serving_default", dict(text_a=[["x"]], text_b=[["y"]]),
       "text_a must have rank 1"),
      ("serving_default", dict(text_a=[1.5], text_b=["y"]),
       "text_a must hold strings"),
      ("serving_default", dict(text_a=["x", "y"], text_b=["y"]),
       "same batch size"),
      ("serve_ids", dict(good, input_word_ids=ids.astype(np.float32)),
       "input_word_ids must hold integers"),
      ("serve_ids", dict(good, input_word_ids=ids[0]),
       "input_word_ids must have rank 2"),
      ("serve_ids", dict(good, input_word_ids=ids + lib.SPM_VOCAB_SIZE),
       r"input_word_ids must be in \[0, 500\)"),
      ("serve_ids", dict(good, input_word_ids=-ids), "must be in"),
      ("serve_ids", dict(good, input_type_ids=ids), "input_type_ids must be"),
      ("serve_ids", dict(good, input_mask=np.array([[1, 2, 1, 0]])),
       "input_mask must hold only 0 and 1"),
      ("serve_ids", dict(good, input_mask=np.array([[1, 1, 1]])),
       "input_mask must have the shape of input_word_ids"),
      ("serve_ids", {k: np.tile(v, [1, 20]) for k, v in good.items()},
       "sequence length 80 > max_position_embeddings = 32"),
      # Rows of different lengths gave NumPy's "inhomogeneous shape".
      ("serve_ids", dict(good, input_word_ids=[[2, 10, 3, 0], [2, 3]]),
       r"^input_word_ids: the rows of one call must share one length "
       r"\(int32 \[-1, -1\]\); pad them to one length$"),
      ("serve_examples", {}, "no signature 'serve_examples'"),
  ]
  for signature, inputs, message in cases:
    with pytest.raises(ValueError, match=message) as error:
      model(signature, **inputs)
    assert "\n" not in str(error.value)
  assert model("serve_ids", **good)["label"].shape == (1,)


def test_predict_lite_id_rows_of_different_lengths(setup):
  """JSON-lines id rows of different lengths in one batch gave NumPy's
  "setting an array element with a sequence ... inhomogeneous shape"."""
  model = lite.LiteModel(setup["classification"]["lite"], max_interpreters=1)
  rows = [dict(input_word_ids=ids, input_mask=[1] * len(ids),
               input_type_ids=[0] * len(ids))
          for ids in ([2, 10, 3], [2, 10, 11, 3])]
  with pytest.raises(ValueError) as error:
    predict_lite.predict(model, rows, "serve_ids", 2, source="ids.jsonl")
  assert str(error.value) == (
      "ids.jsonl: rows 1-2: input_word_ids: the rows of one call must share "
      "one length (int32 [-1, -1]); pad them to one length, or use "
      "--batch_size=1")
  out = predict_lite.predict(model, rows, "serve_ids", 1, source="ids.jsonl")
  assert len(out) == 2 and all(r["label"] in LABELS for r in out)


def _saved_error(path, signature, inputs):
  with pytest.raises(tf.errors.InvalidArgumentError) as error:
    _saved_outputs(path, signature, inputs)
  return error.value.message


def test_runner_checks_the_number_of_choices(setup):
  """One choice on a multiple-choice model came back as an even
  distribution over the model's choices; more failed inside the
  interpreter. Refused as the SavedModel refuses them."""
  paths = setup["multiple_choice"]
  model = lite.LiteModel(paths["lite"])
  ones = np.ones([1, 3, 5], np.int32)
  for signature, inputs, message in (
      ("serving_default", dict(context=["c"], choices=[["a"]]),
       f"choices must have shape [batch, {CHOICES}]"),
      ("serving_default", dict(context=["c"], choices=[["a"] * 5]),
       f"choices must have shape [batch, {CHOICES}]"),
      ("serve_ids", dict(input_word_ids=ones * 5, input_mask=ones,
                         input_type_ids=ones * 0),
       f"input_word_ids must have shape [batch, {CHOICES}, seq]")):
    assert message in _saved_error(paths["saved"], signature, inputs)
    with pytest.raises(ValueError) as error:
      model(signature, **inputs)
    assert str(error.value).startswith(message)
    assert "\n" not in str(error.value)
  with pytest.raises(lite.RaggedInputError, match=(
      r"^choices: the rows of one call must share one length \(strings "
      r"\[-1, -1\]\); pad them to one length$")):
    model("serving_default", context=["c", "d"],
          choices=[["a"] * CHOICES, ["b"] * (CHOICES - 1)])
  assert model.info["serving_params"]["num_choices"] == CHOICES


def test_runner_errors_show_plain_numbers(setup):
  """Shapes in messages and `signatures` are ints, not numpy reprs."""
  model = lite.LiteModel(setup["classification"]["lite"])
  with pytest.raises(ValueError) as error:
    model("serving_default", text_a=[["x"]], text_b=["y"])
  assert str(error.value) == ("text_a must have rank 1 (strings [-1]), got "
                              "shape [1, 1]")
  assert "np." not in repr(model.signatures)
  assert repr(model.signatures["serve_ids"]["inputs"]["input_mask"][1]) == (
      "(-1, -1)")
  assert lite.interpreter_error(RuntimeError(
      "gather index out of boundsNode number 6 (GATHER) failed to invoke."
      "\nmore")) == ("gather index out of bounds; Node number 6 (GATHER) "
                     "failed to invoke.")


def test_runner_finds_the_file_and_refuses_other_paths(setup, tmp_path):
  version_dir = setup["classification"]["lite"]
  export_dir = os.path.dirname(version_dir)
  for path in (version_dir, export_dir,
               os.path.join(version_dir, "model.tflite")):
    assert lite.LiteModel(path).path == os.path.join(version_dir,
                                                     "model.tflite")
  with pytest.raises(ValueError, match="no model.tflite there"):
    lite.LiteModel(str(tmp_path))
  (tmp_path / "model.tflite").write_bytes(b"not a flatbuffer")
  with pytest.raises(ValueError, match="not a loadable .tflite"):
    lite.LiteModel(str(tmp_path))
  # The file without the model.json beside it.
  alone = tmp_path / "alone"
  alone.mkdir()
  (alone / "model.tflite").write_bytes(
      open(os.path.join(version_dir, "model.tflite"), "rb").read())
  with pytest.raises(ValueError, match="no model.json beside it"):
    lite.LiteModel(str(alone))
