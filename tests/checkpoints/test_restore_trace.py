"""A restore is one pass: following a model through
`Task.restore_for_inference` enters each module of checkpoints/ once."""

import collections
import os
import sys

import numpy as np
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


def test_restore_from_a_converted_layout_enters_object_layout_once(tmp_path):
  """A TF1 checkpoint (converted to canonical arrays, variable by variable)
  resolves, detects, reads and checks the model's parts in one pass."""
  tf_keras.utils.set_random_seed(5)
  config = lib.tiny_config(vocab_size=50)
  encoder = AlbertEncoder(config)
  prefix = conversion.write_weights(
      encoder, str(tmp_path / "tf1" / "model.ckpt"), "tf1")
  target = dm.AlbertClassifier(AlbertEncoder(config), num_labels=3)

  report, entries = _module_entries(
      sentence_prediction.ClassifierTask.restore_for_inference, target,
      prefix, allow_missing_heads=True)

  assert report.layout == "tf1"
  assert report.restored == ["encoder"] and report.fresh == ["head"]
  for a, b in zip(target.encoder.variables, encoder.variables):
    np.testing.assert_array_equal(a.numpy(), b.numpy())
  once = ("restore.py", "paths.py", "object_layout.py")
  assert all(entries[name] == 1 for name in once), dict(entries)
