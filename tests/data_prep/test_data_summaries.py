"""Where create_pretraining_data writes its summary, and which summaries a
run that replaces outputs removes.

What used to go wrong: `--summary_file=meta/train.json` was accepted but no
reader ever found it (training then asked to regenerate the data); a
summary of an earlier run that described a replaced output stayed beside
it and readers took it for the new file's."""

import os

import pytest

from albert_toolkit import output_files
from data_prep import create_pretraining_data as cpd
from data_prep import pretraining_config
from data_prep import pretraining_instances as pi
from data_prep import pretraining_summary
from tests.testing import beam_testlib


@pytest.fixture(scope="module")
def spm_corpus(tmp_path_factory):
  return beam_testlib.small_corpus(tmp_path_factory, documents=3)


def make(spm_corpus, outputs, summary_file=None, model=None):
  spm, corpus = spm_corpus
  run_cfg = pretraining_config.RunConfig(
      spm_model_file=model or spm, do_lower_case=True, dupe_factor=1,
      instance=pi.InstanceConfig(max_seq_length=64,
                                 max_predictions_per_seq=10))
  return cpd.run([corpus], [str(p) for p in outputs], run_cfg,
                 summary_file=summary_file and str(summary_file),
                 progress_interval=0)


def names(directory):
  return sorted(os.listdir(directory)) if os.path.isdir(directory) else []


@pytest.mark.parametrize("summary, error", [
    ("meta/train.json", "--summary_file {d}/meta/train.json: readers find "
     "a summary by its name ending in .summary.json; give e.g. "
     "--summary_file={d}/out/train.summary.json"),
    ("meta/train.summary.json", "--summary_file {d}/meta/train.summary.json "
     "is not in the directory of --output_file {d}/out/a.tfrecord: readers "
     "find a file's summary beside it; give e.g. "
     "--summary_file={d}/out/train.summary.json"),
    ("out/train.json", "--summary_file {d}/out/train.json: readers find a "
     "summary by its name ending in .summary.json; give e.g. "
     "--summary_file={d}/out/train.summary.json")])
def test_a_summary_readers_cannot_find_is_refused(spm_corpus, tmp_path,
                                                  summary, error):
  with pytest.raises(ValueError) as info:
    make(spm_corpus, [tmp_path / "out" / "a.tfrecord"], tmp_path / summary)
  assert str(info.value) == error.format(d=tmp_path)
  assert names(tmp_path) == []  # refused before anything is written


def test_outputs_in_two_directories_are_refused(spm_corpus, tmp_path):
  """The default summary is beside the first output only: the second
  directory's files had none a reader could find."""
  a, b = tmp_path / "x" / "a.tfrecord", tmp_path / "y" / "b.tfrecord"
  with pytest.raises(ValueError) as info:
    make(spm_corpus, [a, b])
  assert str(info.value) == (
      f"--output_file {a} and {b} are in different directories: readers "
      "find a file's summary beside it; write the outputs to one directory")
  assert names(tmp_path) == []


def test_a_summary_named_and_placed_for_readers_is_written(spm_corpus,
                                                           tmp_path):
  out = tmp_path / "out"
  summary = make(spm_corpus, [out / "a.tfrecord", out / "b.tfrecord"],
                 out / "run.summary.json")
  assert summary["summary_file"] == str(out / "run.summary.json")
  assert names(out) == ["a.tfrecord", "b.tfrecord", "run.summary.json"]


def other_model(spm_corpus, directory):
  """The SentencePiece model with two pieces swapped (same size)."""
  from sentencepiece import sentencepiece_model_pb2  # pylint: disable=g-import-not-at-top
  proto = sentencepiece_model_pb2.ModelProto()
  proto.ParseFromString(open(spm_corpus[0], "rb").read())
  a, b = proto.pieces[100], proto.pieces[200]
  a.piece, b.piece = b.piece, a.piece
  path = directory / "other.model"
  path.write_bytes(proto.SerializeToString())
  return str(path)


def test_summary_records_each_files_size(spm_corpus, tmp_path):
  out = [tmp_path / "a.tfrecord", tmp_path / "b.tfrecord"]
  summary = make(spm_corpus, out)
  assert summary["bytes_per_file"] == {
      str(p): os.path.getsize(p) for p in out}


@pytest.mark.parametrize("summary_name", [None, "st.summary.json"])
def test_a_run_replacing_an_output_removes_the_summary_describing_it(
    spm_corpus, tmp_path, capfd, summary_name):
  """b.tfrecord made again with a.tfrecord (other model, other summary
  name): b.tfrecord.summary.json of the first run stayed, and readers
  preferred it."""
  out = tmp_path / "st2"
  a, b = out / "a.tfrecord", out / "b.tfrecord"
  make(spm_corpus, [b])
  capfd.readouterr()
  summary_file = out / summary_name if summary_name else None
  make(spm_corpus, [a, b], summary_file, other_model(spm_corpus, tmp_path))
  err = capfd.readouterr().err
  assert f"note: removing {b}.summary.json: it describes {b}, which this " \
         "run replaces\n" in err
  new = str(summary_file or f"{a}.summary.json")
  assert names(out) == sorted(["a.tfrecord", "b.tfrecord",
                               os.path.basename(new)])
  assert pretraining_summary.find(str(b))[0] == new


def test_a_summary_listing_other_files_too_is_removed_and_said(spm_corpus,
                                                               tmp_path,
                                                               capfd):
  a, b = tmp_path / "a.tfrecord", tmp_path / "b.tfrecord"
  make(spm_corpus, [a, b])
  capfd.readouterr()
  make(spm_corpus, [b])
  assert (f"note: removing {a}.summary.json: it describes {b}, which this "
          "run replaces; 1 more file(s) it lists are left without a "
          "summary\n") in capfd.readouterr().err
  assert names(tmp_path) == ["a.tfrecord", "b.tfrecord",
                             "b.tfrecord.summary.json"]
  assert pretraining_summary.find(str(a)) == (None, None)


def test_a_failed_run_leaves_the_earlier_summaries(spm_corpus, tmp_path,
                                                   monkeypatch):
  """Removed at the end, with the renames: outputs not replaced keep
  theirs."""
  a, b = tmp_path / "a.tfrecord", tmp_path / "b.tfrecord"
  make(spm_corpus, [b])
  before = (tmp_path / "b.tfrecord.summary.json").read_bytes()

  def fail(*args, **kwargs):
    raise OSError("injected")
  monkeypatch.setattr(pretraining_summary, "build", fail)
  with pytest.raises(OSError, match="injected"):
    make(spm_corpus, [a, b])
  assert (tmp_path / "b.tfrecord.summary.json").read_bytes() == before
