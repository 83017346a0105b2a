"""What `convert_checkpoint` reads and writes around the conversion itself:
the checkpoint a directory stands for, where its outputs may go, and that a
failed conversion leaves no output (and deletes no checkpoint).
"""

import os
import shutil

import pytest

from albert_tf.checkpoints import conversion as cc
from albert_tf.checkpoints import paths
from tests.testing.tf1_reference import SINGLE, original_weights, save_original


def _release(directory, seed=1):
  return save_original(str(directory), original_weights(SINGLE, seed=seed),
                       SINGLE)


def test_a_copied_directory_stands_for_its_own_checkpoint(tmp_path):
  """TF1's Saver writes absolute paths into the state file: a copy of a
  release directory named the original's checkpoint, and was converted
  with the original's weights and config."""
  original = _release(tmp_path / "a", seed=1)
  shutil.copytree(tmp_path / "a", tmp_path / "b")
  _release(tmp_path / "a", seed=2)  # the original changes afterwards
  with open(tmp_path / "b" / "checkpoint") as f:
    assert original in f.read()
  copy = str(tmp_path / "b" / "model.ckpt-best")
  assert paths.resolve_checkpoint(str(tmp_path / "b")) == copy
  _, report = cc.convert(str(tmp_path / "b"), str(tmp_path / "out"), "tf1",
                         "albert_tf")
  assert report.source == copy
  # A copy without the checkpoint its state file names is refused.
  os.makedirs(tmp_path / "c")
  shutil.copy(tmp_path / "b" / "checkpoint", tmp_path / "c")
  for name in ("index", "data-00000-of-00001"):
    shutil.copy(f"{copy}.{name}", tmp_path / "c" / f"model.ckpt-9.{name}")
  with pytest.raises(cc.CheckpointConversionError) as e:
    paths.resolve_checkpoint(str(tmp_path / "c"))
  assert str(e.value) == (
      f"{tmp_path / 'c'}: its checkpoint state file names {original}, a "
      "checkpoint in another directory, and there is no model.ckpt-best "
      "here (a copied directory?); pass the checkpoint prefix")
  # The state file of a directory naming its own checkpoint is as before.
  assert paths.resolve_checkpoint(str(tmp_path / "a")) == original

