"""A Model Garden pretrainer whose `next_sentence` head has an inner dense
layer of its own (trained in Model Garden, not the copy of the pooler our
writer puts there): our SOP head reads the pooled output and has no place
for it. It was skipped as "the original SOP head uses the encoder pooler",
so the SOP logits changed without a word; the SOP head is now refused, the
encoder and the MLM head may still be taken."""

import os

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from albert_tf.checkpoints import conversion
from albert_tf.checkpoints import model_garden_checkpoint as mg
from albert_tf.checkpoints.restore import restore
from albert_tf.modeling.models.albert_pretrainer import AlbertPretrainer
from albert_tf.modeling.networks.albert_encoder import AlbertEncoder
from tests.testing import export_testlib as lib
from tests.testing.tf1_reference import inputs_for, run_model

CONFIG = lib.tiny_config(vocab_size=50)
SOP_DENSE = ("Model Garden's next_sentence head has its own inner dense "
             "layer (pooler_dense is not the encoder's pooler); ALBERT's SOP "
             "head reads the pooled output and cannot represent it")


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
  """(Model Garden pretrainer with its own SOP dense, its checkpoint; the
  checkpoint as our writer makes it, SOP dense = pooler)."""
  base = tmp_path_factory.mktemp("mg_sop")
  tf_keras.utils.set_random_seed(8)
  copied = conversion.write_weights(
      AlbertPretrainer(CONFIG), str(base / "copied" / "ckpt"),
      "model_garden")
  pretrainer = mg.build_pretrainer(CONFIG)
  root = dict(pretrainer.checkpoint_items, model=pretrainer)
  tf.train.Checkpoint(**root).read(copied).assert_existing_objects_matched()
  dense = mg._sop_head(pretrainer).dense  # pylint: disable=protected-access
  dense.kernel.assign(np.random.RandomState(0).normal(
      0, 0.5, dense.kernel.shape).astype(np.float32))
  trained = tf.train.Checkpoint(**root).write(str(base / "trained" / "ckpt"))
  return pretrainer, trained, copied


def _inputs():
  return inputs_for({"vocab_size": CONFIG.vocab_size})


def test_its_sop_head_is_refused(checkpoints):
  """Refused when the inner dense differs from the pooler; as our writer
  makes it (equal) every head is read, with Model Garden's SOP logits."""
  _, trained, copied = checkpoints
  model = AlbertPretrainer(CONFIG)
  before = [v.numpy() for v in model.variables]
  with pytest.raises(ValueError) as e:
    restore(model, trained)
  assert str(e.value) == (
      f"{trained}: cannot restore sop_head: {SOP_DENSE}; restore "
      "parts='encoder', or allow_missing_heads (--allow_random_head) to keep "
      "fresh heads")
  for old, new in zip(before, model.variables):
    np.testing.assert_array_equal(old, new.numpy())
  pretrainer = mg.build_pretrainer(CONFIG)
  tf.train.Checkpoint(**pretrainer.checkpoint_items, model=pretrainer).read(
      copied).assert_existing_objects_matched()
  report = restore(model, copied)
  assert report.restored == ["encoder", "mlm_head", "sop_head"]
  np.testing.assert_allclose(run_model(model, _inputs())["sop_logits"],
                             pretrainer(_inputs())["next_sentence"],
                             atol=1e-5)


def test_the_encoder_and_mlm_head_may_still_be_taken(checkpoints):
  pretrainer, trained, _ = checkpoints
  theirs = pretrainer(_inputs())
  model = AlbertPretrainer(CONFIG)
  report = restore(model, trained, allow_missing_heads=True)
  assert report.restored == ["encoder", "mlm_head"]
  assert report.fresh == ["sop_head"]
  ours = run_model(model, _inputs())
  np.testing.assert_allclose(ours["mlm_logits"], theirs["mlm_logits"],
                             atol=1e-5)
  encoder = AlbertEncoder(CONFIG)
  assert restore(encoder, trained).restored == ["encoder"]
  np.testing.assert_allclose(run_model(encoder, _inputs())["pooled_output"],
                             ours["pooled_output"], atol=1e-6)


def test_conversion_of_its_sop_head_is_refused(checkpoints, tmp_path):
  _, trained, _ = checkpoints
  with pytest.raises(ValueError) as e:
    conversion.convert(trained, str(tmp_path / "out"), "model_garden",
                       "albert_tf", config=CONFIG)
  assert str(e.value) == (
      f"{trained}: cannot read its sop_head: {SOP_DENSE}; take the encoder "
      "alone (convert_checkpoint --model=encoder)")
  path, report = conversion.convert(trained, str(tmp_path / "enc"),
                                    "model_garden", "albert_tf",
                                    config=CONFIG, model="encoder")
  (reason,) = {why for key, why in report.skipped.items()
               if "pooler_dense/kernel" in key}
  assert reason == "pretraining head (target is the encoder only)"
  assert os.path.dirname(path) == str(tmp_path / "enc")
