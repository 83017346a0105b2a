"""A restore is one pass: following a model through
`Task.restore_for_inference` enters each module of checkpoints/ once."""

import collections
import os
import sys

import numpy as np
import tf_keras

from tests.testing import export_testlib as lib
from albert_tf.checkpoints import object_layout
from albert_tf.modeling.models import downstream_models as dm
from albert_tf.modeling.networks.albert_encoder import AlbertEncoder
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
