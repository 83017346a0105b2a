"""albert_toolkit.output_files.atomic_write / write_json: the project's one
write-to-a-temporary-name-then-rename helper."""

import json
import os

import pytest

from albert_tf.checkpoints import paths
from albert_tf.core import run_record
from albert_toolkit import output_files


def test_text_and_bytes_are_written_whole_and_replace_the_old_file(tmp_path):
  path = str(tmp_path / "sub" / "a.txt")  # the directory is created
  assert output_files.atomic_write(path, "caf\u00e9\n") == path
  assert open(path, encoding="utf-8").read() == "caf\u00e9\n"
  output_files.atomic_write(path, b"\x00\xff")
  assert open(path, "rb").read() == b"\x00\xff"
  assert os.listdir(tmp_path / "sub") == ["a.txt"]  # no temporary left


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
  path = tmp_path / "record.json"
  path.write_text("old")
  with pytest.raises(UnicodeEncodeError):
    output_files.atomic_write(str(path), "half \ud800 written")
  assert path.read_text() == "old"
  assert os.listdir(tmp_path) == ["record.json"]


def test_the_temporary_is_hidden_and_never_read_as_input(tmp_path,
                                                         monkeypatch):
  seen = []
  real_replace = os.replace

  def spy(src, dst):
    seen.append(src)
    assert os.path.exists(src) and not os.path.exists(dst)
    real_replace(src, dst)

  monkeypatch.setattr(os, "replace", spy)
  output_files.atomic_write(str(tmp_path / "corpus.txt"), "text")
  (tmp,) = seen
  assert os.path.dirname(tmp) == str(tmp_path)  # same file system: atomic
  assert os.path.basename(tmp).startswith(".corpus.txt.")
  assert output_files.is_tool_output(tmp)


def test_write_json_reads_back_with_sorted_keys(tmp_path):
  path = str(tmp_path / "s.json")
  output_files.write_json(path, {"b": 1, "a": [1.5, "x"]})
  text = open(path, encoding="utf-8").read()
  assert json.loads(text) == {"a": [1.5, "x"], "b": 1}
  assert text.index('"a"') < text.index('"b"')
  output_files.write_json(path, {"b": 1, "a": 2}, sort_keys=False)
  assert list(json.load(open(path, encoding="utf-8"))) == ["b", "a"]


def test_urls_go_through_gfile(tmp_path):
  path = "file://" + str(tmp_path / "remote.json")
  output_files.write_json(path, {"x": 1})
  assert json.load(open(tmp_path / "remote.json")) == {"x": 1}
  assert os.listdir(tmp_path) == ["remote.json"]


def test_albert_tf_writes_through_the_one_helper(tmp_path):
  assert run_record.atomic_write is output_files.atomic_write
  paths.write_checkpoint_state(str(tmp_path), "ckpt-7")
  open(tmp_path / "ckpt-7.index", "w").close()
  assert paths.latest_checkpoint(str(tmp_path)) == str(tmp_path / "ckpt-7")
  assert sorted(os.listdir(tmp_path)) == ["checkpoint", "ckpt-7.index"]


def test_two_outputs_that_are_one_file_are_refused(tmp_path):
  out = str(tmp_path / "a.tfrecord")
  os.symlink(out, tmp_path / "link.tfrecord")
  for other in (out, str(tmp_path / "sub" / ".." / "a.tfrecord"),
                str(tmp_path / "link.tfrecord")):
    with pytest.raises(ValueError) as e:
      output_files.check_distinct([("--output_file", out),
                                   ("--output_file", other)])
    assert str(e.value) == (f"--output_file names one file twice ({out} and "
                            f"{other}); give each output once")
  with pytest.raises(ValueError, match=(
      f"^--summary_file {out} is the same file as --output_file {out}; ")):
    output_files.check_outputs([("--output_file", out),
                                ("--summary_file", out)], [])
  output_files.check_outputs([("--output_file", out),
                              ("--summary_file", out + ".summary.json"),
                              ("--vocab_file", None)], [])
  assert os.listdir(tmp_path) == ["link.tfrecord"]  # nothing created


def test_an_output_that_is_not_a_regular_file_is_refused(tmp_path):
  directory = tmp_path / "adir"
  directory.mkdir()
  fifo = tmp_path / "fifo"
  os.mkfifo(fifo)
  os.symlink(fifo, tmp_path / "to_fifo")
  for path, what in ((directory, "a directory"),
                     (fifo, "not a regular file"),
                     (tmp_path / "to_fifo", "not a regular file"),
                     ("/dev/null", "not a regular file")):
    with pytest.raises(ValueError) as e:
      output_files.check_outputs([("--output_file", str(path))], [])
    assert str(e.value).startswith(f"--output_file {path} is {what}")
    assert "\n" not in str(e.value)
  # A regular file (or a symlink to one) is replaced; a missing one created.
  (tmp_path / "old.txt").write_text("old")
  os.symlink(tmp_path / "old.txt", tmp_path / "to_old")
  os.symlink(tmp_path / "gone", tmp_path / "dangling")
  for name in ("old.txt", "to_old", "dangling", "new.txt"):
    output_files.check_outputs([("--output_file", str(tmp_path / name))], [])


def test_an_output_is_checked_against_every_input(tmp_path):
  model = tmp_path / "spm.model"
  model.write_bytes(b"model")
  os.symlink(model, tmp_path / "link.model")
  inputs = [("--input_file matched", str(tmp_path / "corpus.txt")),
            ("--spm_model_file", str(tmp_path / "link.model")),
            ("--vocab_file", "")]
  with pytest.raises(ValueError) as e:
    output_files.check_outputs([("--output_file", str(tmp_path / "o")),
                                ("--summary_file", str(model))], inputs)
  assert str(e.value) == (f"--summary_file {model} is also an input "
                          f"(--spm_model_file {tmp_path}/link.model); "
                          "refusing to overwrite it")
  assert model.read_bytes() == b"model"
