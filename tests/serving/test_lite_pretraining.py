"""The pretraining .tflite (mlm, sop): equal to the Keras model, and
masked_lm_positions outside the sequence refused as the SavedModel refuses
them, naming the input."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from albert_tf.checkpoints import object_layout
from albert_tf.modeling.models.albert_pretrainer import AlbertPretrainer
from albert_tf.serving import lite
from albert_tf.tasks import export_request
from tests.testing import export_testlib as lib

SEQ = 8


def _ids(batch=2):
  rng = np.random.RandomState(0)
  ids = rng.randint(5, lib.SPM_VOCAB_SIZE, size=[batch, SEQ]).astype(np.int32)
  return {"input_word_ids": ids, "input_mask": np.ones_like(ids),
          "input_type_ids": np.zeros_like(ids)}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("lite_pretraining")
  config = lib.tiny_config()
  tf_keras.utils.set_random_seed(2)
  pretrainer = AlbertPretrainer(config)
  pretrainer(dict(_ids(), masked_lm_positions=np.zeros([2, 2], np.int32)))
  ckpt = object_layout.checkpoint_for(pretrainer).write(str(tmp / "ckpt"))
  config_file = str(tmp / "albert_config.json")
  config.to_json_file(config_file)
  request = dict(export_kind="pretraining", config_files=[config_file],
                 checkpoint=ckpt)
  return dict(
      pretrainer=pretrainer,
      saved=lib.export(str(tmp / "saved"), **request),
      lite=lib.export(str(tmp / "lite"), **request,
                      form=export_request.ExportForm("tflite")))


def test_mlm_equals_the_keras_model(setup):
  inputs = dict(_ids(), masked_lm_positions=np.array([[0, 7], [3, 3]],
                                                     np.int32))
  got = lite.LiteModel(setup["lite"])("mlm", **inputs)["mlm_logits"]
  want = setup["pretrainer"](inputs, training=False)["mlm_logits"].numpy()
  np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)


LONG = "masked_lm_positions must be < the sequence length"
NEGATIVE = "masked_lm_positions must be >= 0"


@pytest.mark.parametrize("positions,saved,message", [
    ([[1, SEQ]], LONG, f"{LONG} {SEQ}, got {SEQ}"),
    ([[1, 100]], LONG, f"{LONG} {SEQ}, got 100"),
    ([[-1, 1]], NEGATIVE, f"{NEGATIVE}, got -1"),
])
def test_masked_lm_positions_out_of_range(setup, positions, saved, message):
  """They failed inside the interpreter ('gather index out of bounds')."""
  inputs = dict(_ids(batch=1),
                masked_lm_positions=np.array(positions, np.int32))
  fn = tf.saved_model.load(setup["saved"]).signatures["mlm"]
  with pytest.raises(tf.errors.InvalidArgumentError) as saved_error:
    fn(**{k: tf.constant(v) for k, v in inputs.items()})
  assert saved in saved_error.value.message
  with pytest.raises(ValueError) as error:
    lite.LiteModel(setup["lite"])("mlm", **inputs)
  assert str(error.value) == message
