"""A restore is one pass: following a model through
`Task.restore_for_inference` enters each module of checkpoints/ once."""

import collections
import os
import sys

import numpy as np
import pytest
import tf_keras

from tests.testing import export_testlib as lib
from albert_tf.checkpoints import conversion
from albert_tf.checkpoints import object_layout
from albert_tf.modeling.models import downstream_models as dm
from albert_tf.modeling.networks.albert_encoder import AlbertEncoder
from albert_tf.serving import export_lib
from albert_tf.tasks import sentence_prediction

CHECKPOINTS_DIR = os.path.dirname(object_layout.__file__)


def _module_entries(function, *args, **kwargs):
  """(result, {module file name: calls into it from another module})."""
  entries = collections.Counter()

  def profile(frame, event, arg):
    del arg
    if event != "call":
      return
    here = frame.f_code.co_filename
    caller = frame.f_back.f_code.co_filename if frame.f_back else ""
    if os.path.dirname(here) == CHECKPOINTS_DIR and caller != here:
      entries[os.path.basename(here)] += 1

  sys.setprofile(profile)
  try:
    result = function(*args, **kwargs)
  finally:
    sys.setprofile(None)
  return result, entries


def test_restore_of_a_classifier_enters_each_checkpoints_module_once(
    tmp_path):
  tf_keras.utils.set_random_seed(3)
  config = lib.tiny_config(vocab_size=50)
  source = dm.AlbertClassifier(AlbertEncoder(config), num_labels=3)
  object_layout.checkpoint_for(source).write(str(tmp_path / "run" / "ckpt"))
  target = dm.AlbertClassifier(AlbertEncoder(config), num_labels=3)

  report, entries = _module_entries(
      sentence_prediction.ClassifierTask.restore_for_inference, target,
      str(tmp_path / "run"))

  assert report.layout == "albert_tf"
  assert report.restored == ["encoder", "head"] and not report.fresh
  for a, b in zip(target.variables, source.variables):
    np.testing.assert_array_equal(a.numpy(), b.numpy())
  assert entries and all(n == 1 for n in entries.values()), dict(entries)


def test_restore_from_an_encoder_saved_model_is_one_pass(tmp_path):
  tf_keras.utils.set_random_seed(4)
  config = lib.tiny_config(vocab_size=50)
  encoder = AlbertEncoder(config)
  export_lib.export_encoder(encoder, str(tmp_path / "hub"))
  target = dm.AlbertClassifier(AlbertEncoder(config), num_labels=3)

  report, entries = _module_entries(
      sentence_prediction.ClassifierTask.restore_for_inference, target,
      str(tmp_path / "hub"), allow_missing_heads=True)

  assert report.layout == "saved_model"
  assert report.restored == ["encoder"] and report.fresh == ["head"]
  for a, b in zip(target.encoder.variables, encoder.variables):
    np.testing.assert_array_equal(a.numpy(), b.numpy())
  assert entries and all(n == 1 for n in entries.values()), dict(entries)


@pytest.mark.parametrize("layout, read_as", [
    ("tf1", "tf1"), ("model_garden", "model_garden (encoder)")])
def test_restore_from_a_converted_layout_is_one_pass(tmp_path, layout,
                                                     read_as):
  """A TF1 or Model Garden checkpoint: its names are mapped in one call (the
  Model Garden root found by one), then read (reshaped to our shapes),
  checked and assigned in one call."""
  tf_keras.utils.set_random_seed(5)
  config = lib.tiny_config(vocab_size=50)
  encoder = AlbertEncoder(config)
  prefix = conversion.write_weights(
      encoder, str(tmp_path / layout / "model.ckpt"), layout)
  target = dm.AlbertClassifier(AlbertEncoder(config), num_labels=3)

  report, entries = _module_entries(
      sentence_prediction.ClassifierTask.restore_for_inference, target,
      prefix, allow_missing_heads=True)

  assert report.layout == read_as
  assert report.restored == ["encoder"] and report.fresh == ["head"]
  for a, b in zip(target.encoder.variables, encoder.variables):
    np.testing.assert_array_equal(a.numpy(), b.numpy())
  assert entries and all(n == 1 for n in entries.values()), dict(entries)
