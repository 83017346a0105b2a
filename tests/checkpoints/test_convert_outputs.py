"""What `convert_checkpoint` reads and writes around the conversion itself:
the checkpoint a directory stands for, where its outputs may go, and that a
failed conversion leaves no output (and deletes no checkpoint).
"""

import os
import shutil
import sys

import pytest

from albert_tf.checkpoints import conversion as cc
from albert_tf.checkpoints import paths
from tests.testing import tool_server
from tests.testing.repo_paths import ROOT
from tests.testing.tf1_reference import SINGLE, original_weights, save_original

SPM = b"\x0a\x05fake-spm"  # the 30k-clean.model save_original writes


def _files(directory):
  """name -> bytes of every file in `directory` (hidden ones too)."""
  return {name: open(os.path.join(directory, name), "rb").read()
          for name in sorted(os.listdir(directory))}


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


def test_output_name_with_a_directory_part_is_refused(tmp_path):
  """`--output_name=../victim/model.ckpt-best` replaced another directory's
  checkpoint (or the input itself), no --overwrite needed."""
  prefix = _release(tmp_path / "release")
  victim = tmp_path / "victim"
  _release(victim, seed=3)
  before = _files(victim), _files(tmp_path / "release")
  for name in ("../victim/model.ckpt-best", "../release/model.ckpt-best",
               str(victim / "model.ckpt-best"), "sub/ckpt", "..", ""):
    with pytest.raises(cc.CheckpointConversionError) as e:
      cc.convert(prefix, str(tmp_path / "out"), "tf1", "tf1",
                 output_name=name)
    assert str(e.value) == (
        f"--output_name {name!r}: give a checkpoint name without a "
        "directory part (e.g. ckpt); --output_dir says where it goes")
  assert (_files(victim), _files(tmp_path / "release")) == before
  assert not os.path.exists(tmp_path / "out")


def test_global_step_only_where_the_layout_records_it(tmp_path):
  prefix = _release(tmp_path / "release")
  for to in ("albert_tf", "model_garden"):
    with pytest.raises(cc.CheckpointConversionError) as e:
      cc.convert(prefix, str(tmp_path / "out"), "tf1", to, global_step=5)
    assert str(e.value) == (f"--global_step=5: only --to=tf1 records a "
                            f"step; --to={to} has no place for it")
  assert not os.path.exists(tmp_path / "out")


def test_files_of_a_directory_without_a_checkpoint_need_overwrite(tmp_path):
  """A user's albert_config.json and a vocabulary of the same name in an
  --output_dir holding no checkpoint were replaced silently."""
  prefix = _release(tmp_path / "release")
  out = tmp_path / "out"
  os.makedirs(out)
  (out / "albert_config.json").write_text('{"mine": 1}')
  (out / "30k-clean.model").write_bytes(b"another vocabulary")
  (out / "notes.txt").write_text("kept")
  before = _files(out)
  with pytest.raises(cc.CheckpointConversionError) as e:
    cc.convert(prefix, str(out), "tf1", "albert_tf")
  assert str(e.value) == (
      f"--output_dir {out} already holds 30k-clean.model, albert_config.json, "
      "which the conversion would replace; use another directory, or pass "
      "--overwrite to replace it")
  assert _files(out) == before
  # The same bytes are no conflict: the vocabulary alone, as it would be.
  (out / "albert_config.json").unlink()
  (out / "30k-clean.model").write_bytes(SPM)
  path, _ = cc.convert(prefix, str(out), "tf1", "albert_tf")
  assert sorted(_files(out)) == [
      "30k-clean.model", "albert_config.json", "checkpoint",
      "ckpt.data-00000-of-00001", "ckpt.index", "notes.txt"]
  assert paths.resolve_checkpoint(str(out)) == path
  # With --overwrite the files are replaced; other files stay.
  other = tmp_path / "other"
  _release(other, seed=4)
  (other / "30k-clean.model").write_bytes(b"a new vocabulary")
  cc.convert(str(other), str(out), "tf1", "albert_tf", overwrite=True,
             log=None)
  assert (out / "30k-clean.model").read_bytes() == b"a new vocabulary"
  assert (out / "notes.txt").read_text() == "kept"


def test_a_failed_conversion_leaves_the_output_as_it_was(tmp_path,
                                                          monkeypatch):
  """`--overwrite --spm_model_file=/nonexistent` deleted the old checkpoint
  and left the new one without its vocabulary; into a new directory, a
  half output that reruns then refused."""
  prefix = _release(tmp_path / "release")
  out = tmp_path / "out"
  old, _ = cc.convert(prefix, str(out), "tf1", "tf1", output_name="old")
  before = _files(out)
  missing = str(tmp_path / "nonexistent.model")
  for target in (out, tmp_path / "new"):
    with pytest.raises(cc.CheckpointConversionError) as e:
      cc.convert(prefix, str(target), "tf1", "albert_tf", overwrite=True,
                 spm_model_file=missing)
    assert str(e.value) == f"--spm_model_file {missing}: no such file"
  with pytest.raises(cc.CheckpointConversionError) as e:
    cc.convert(prefix, str(out), "tf1", "albert_tf", overwrite=True,
               spm_model_file=str(tmp_path), vocab_flag="--vocab_file")
  assert str(e.value) == (f"--vocab_file {tmp_path} is a directory, not a "
                          "vocabulary file")
  # A failure while writing (a full disk): nothing moved in, nothing left.
  def full_disk(*args):
    raise OSError(28, "No space left on device")
  monkeypatch.setattr(cc, "write_config", full_disk)
  for target in (out, tmp_path / "new"):
    with pytest.raises(OSError, match="No space left"):
      cc.convert(prefix, str(target), "tf1", "albert_tf", overwrite=True)
  assert _files(out) == before
  assert paths.resolve_checkpoint(str(out)) == old
  assert not os.path.exists(tmp_path / "new")
  monkeypatch.undo()
  path, _ = cc.convert(prefix, str(tmp_path / "new"), "tf1", "albert_tf")
  assert paths.resolve_checkpoint(str(tmp_path / "new")) == path


def test_replacing_a_checkpoint_of_the_same_name_drops_its_old_shards(
    tmp_path):
  prefix = _release(tmp_path / "release")
  out = tmp_path / "out"
  path, _ = cc.convert(prefix, str(out), "tf1", "tf1")
  stale = out / "model.ckpt.data-00001-of-00002"
  stale.write_bytes(b"old shard")
  cc.convert(prefix, str(out), "tf1", "tf1", overwrite=True, log=None)
  assert sorted(_files(out)) == [
      "30k-clean.model", "albert_config.json", "checkpoint",
      "model.ckpt.data-00000-of-00001", "model.ckpt.index"]
  assert paths.resolve_checkpoint(str(out)) == path


def test_output_dir_that_is_a_file_is_refused_before_reading(tmp_path,
                                                             monkeypatch):
  """It failed with a FailedPreconditionError traceback after reading the
  whole checkpoint."""
  prefix = _release(tmp_path / "release")
  afile = tmp_path / "afile"
  afile.write_text("mine")
  def no_reading(*args, **kwargs):
    raise AssertionError("the checkpoint was read")
  monkeypatch.setattr(cc, "read_weights", no_reading)
  for output_dir, path in ((afile, afile), (afile / "sub", afile)):
    with pytest.raises(cc.CheckpointConversionError) as e:
      cc.convert(prefix, str(output_dir), "tf1", "albert_tf")
    assert str(e.value) == (f"--output_dir {output_dir}: {path} exists and "
                            "is not a directory")
  assert afile.read_text() == "mine"


def tool(*args):
  return tool_server.run(
      [sys.executable, "-m", "albert_tf.convert_checkpoint", *args], cwd=ROOT,
      env=tool_server.tool_env(), capture_output=True, text=True,
      timeout=300)


@pytest.mark.slow
def test_command_line_errors_are_one_line(tmp_path):
  prefix = _release(tmp_path / "release")
  afile = tmp_path / "afile"
  afile.write_text("mine")
  common = ("--from=tf1", "--to=albert_tf", f"--input_checkpoint={prefix}")
  for args, error in (
      ((f"--output_dir={afile}",),
       f"--output_dir {afile}: {afile} exists and is not a directory"),
      ((f"--output_dir={tmp_path / 'o'}", "--vocab_file=/nonexistent"),
       "--vocab_file /nonexistent: no such file")):
    proc = tool(*common, *args)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert [l for l in proc.stderr.splitlines() if l.startswith("ERROR")] == [
        f"ERROR: {error}"]
  assert sorted(os.listdir(tmp_path)) == ["afile", "release"]
