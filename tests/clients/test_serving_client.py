"""serving_client against a local TF-Serving stand-in serving a classifier
export: text -> label over REST (row and columnar), status, metadata, the
CLI, errors, and the gRPC path's missing-dependency message."""

import json
import os
import subprocess

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from tests.testing import export_testlib as lib
from albert_tf.modeling.models import downstream_models as dm
from albert_tf.serving import preprocessing
from clients import serving_client
from albert_tf.modeling.networks.albert_encoder import AlbertEncoder
from albert_tf.tasks import sentence_prediction
from tests.testing import serving_standin
from tests.testing import user_env
from tests.testing.repo_paths import ROOT

SEQ = 16
LABELS = ["negative", "positive"]
TEXTS = ["a fine and happy film", "the dull old house", "Héllo naïve café",
         "", "botchan went to the school " * 5]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("serving_client")
  spm_file = lib.train_spm(str(tmp))
  tf_keras.utils.set_random_seed(3)
  model = dm.AlbertClassifier(AlbertEncoder(lib.tiny_config()), num_labels=2)
  features = preprocessing.TextPreprocessor(spm_file, seq_length=SEQ
                                            ).preprocess([tf.constant(TEXTS)])
  # Shift the random head's bias so the texts fall on both sides (both
  # labels must occur for the test to be able to fail).
  logits = model(features)["logits"].numpy()
  margin = np.sort(logits[:, 1] - logits[:, 0])
  model.head.output_bias.assign([0.0, -(margin[2] + margin[3]) / 2])
  logits = model(features)["logits"].numpy()
  base = str(tmp / "models" / "albert_clf")
  lib.export_serving(sentence_prediction.ClassifierTask, model, base,
                     spm_file, max_seq_length=SEQ, label_names=list(LABELS))
  server = serving_standin.StandinServer(base, "albert_clf", max_requests=30,
                                         lifetime=150).start()
  yield dict(url=server.url, logits=logits, features=features, server=server)
  server.stop()


def test_status_and_metadata(served):
  status = serving_client.model_status(served["url"], "albert_clf")
  assert status["model_version_status"][0]["state"] == "AVAILABLE"
  assert status["model_version_status"][0]["version"] == "1"
  meta = serving_client.model_metadata(served["url"], "albert_clf")
  assert serving_client.string_inputs(meta) == ["text"]
  assert sorted(meta["metadata"]["signature_def"]["signature_def"]) == [
      "serve_examples", "serve_ids", "serving_default"]


@pytest.mark.parametrize("request_format", ["instances", "inputs"])
def test_rest_text_to_label(served, request_format):
  rows = serving_client.run(served["url"], "albert_clf", TEXTS,
                            request_format=request_format)
  expected = served["logits"].argmax(-1)
  assert [r["label"] for r in rows] == [LABELS[i] for i in expected]
  assert [r["label_id"] for r in rows] == expected.tolist()
  np.testing.assert_allclose([r["probabilities"] for r in rows],
                             tf.nn.softmax(served["logits"]).numpy(),
                             atol=1e-5)
  assert len(set(expected.tolist())) == 2  # both labels occur


def test_cli_prints_labels(served):
  env = user_env.environ()  # the client needs nothing of the repository
  script = os.path.join(ROOT, "clients", "serving_client.py")
  proc = subprocess.run(
      [lib.PYTHON, script, f"--server={served['url']}",
       "--model_name=albert_clf", "--json"] +
      [f"--text={t}" for t in TEXTS[:3]],
      capture_output=True, text=True, timeout=60, env=env, check=True)
  rows = json.loads(proc.stdout)
  expected = served["logits"][:3].argmax(-1)
  assert [r["label"] for r in rows] == [LABELS[i] for i in expected]
  text = subprocess.run(
      [lib.PYTHON, script, f"--server={served['url']}",
       "--model_name=albert_clf", "--text=a fine film"],
      capture_output=True, text=True, timeout=60, env=env, check=True).stdout
  assert "text: 'a fine film'" in text and "label: " in text


def test_errors_are_reported(served):
  with pytest.raises(serving_client.ServingError, match="not found"):
    serving_client.predict_rest(served["url"], "albert_clf",
                                instances=["x"], signature_name="nope")
  ids = {k: np.tile(v.numpy(), [1, 3]).tolist()  # seq 48 > 32
         for k, v in served["features"].items()}
  with pytest.raises(serving_client.ServingError,
                     match="max_position_embeddings = 32"):
    serving_client.predict_rest(served["url"], "albert_clf", inputs=ids,
                                signature_name="serve_ids")
  with pytest.raises(serving_client.ServingError, match="HTTP 404"):
    serving_client.model_status(served["url"], "other_model")


def test_texts_that_do_not_fit_the_model_are_refused(served):
  """A signature without text inputs raised IndexError; a --text_b for a
  one-text model and a third --fields name were dropped without a word."""
  url, usage = served["url"], serving_client.UsageError
  with pytest.raises(usage) as e:
    serving_client.run(url, "albert_clf", ["hello"],
                       signature_name="serve_ids")
  assert str(e.value) == (
      "signature 'serve_ids' takes no text inputs (its inputs: input_mask, "
      "input_type_ids, input_word_ids); the client sends texts only")
  with pytest.raises(usage) as e:
    serving_client.run(url, "albert_clf", ["hello"], ["world"])
  assert str(e.value) == ("--text_b given but signature 'serving_default' "
                          "takes one text input (text); drop --text_b")
  for protocol in ("rest", "grpc"):  # refused before any request
    with pytest.raises(usage) as e:
      serving_client.run("localhost:1", "m", ["x"], ["y"], protocol=protocol,
                         fields=["a", "b", "c"])
    assert str(e.value) == ("--fields names 3 text inputs (a, b, c); the "
                            "client fills at most two (--text, --text_b)")
    with pytest.raises(usage, match="^--text_b given but --fields names one "
                       r"text input \(text\); drop --text_b$"):
      serving_client.run("localhost:1", "m", ["x"], ["y"], protocol=protocol,
                         fields=["text"])
    with pytest.raises(usage, match="give one --text_b per --text"):
      serving_client.run("localhost:1", "m", ["x"], protocol=protocol,
                         fields=["text_a", "text_b"])
  # The CLI: one line, exit 2 (the command, not the server, is wrong).
  proc = subprocess.run(
      [lib.PYTHON, os.path.join(ROOT, "clients", "serving_client.py"),
       f"--server={url}", "--model_name=albert_clf", "--text=hello",
       "--text_b=world"], capture_output=True, text=True, timeout=60,
      env=user_env.environ())
  assert (proc.returncode, proc.stdout) == (2, "")
  assert proc.stderr == ("error: --text_b given but signature "
                         "'serving_default' takes one text input (text); "
                         "drop --text_b\n")


def test_grpc_without_serving_api_explains():
  try:
    import tensorflow_serving  # pylint: disable=g-import-not-at-top,unused-import
    pytest.skip("tensorflow-serving-api is installed")
  except ImportError:
    pass
  with pytest.raises(ImportError, match="pip install tensorflow-serving-api"):
    serving_client.predict_grpc("localhost:1", "m", {"text": ["x"]})
