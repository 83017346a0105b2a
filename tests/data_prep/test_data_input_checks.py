"""Data checked at the door (data_prep side): binary input is refused, a full
disk is an error naming the output and leaves no temporary file.

A TFRecord matched by a text tool's glob would otherwise be tokenized as text
(thousands of garbage instances, exit 0); on a full disk the cleanup's own
close() fails too, and must not leave `.incomplete` files or hide the
path."""

import gzip
import json
import os
import shutil

import pytest

from data_prep import pretraining_config
from data_prep import create_pretraining_data as cpd
from data_prep import pretraining_instances as pi
from data_prep import text_reader
from tests.testing.data_prep_tools import error_line, run_tool
from tests.testing import beam_testlib
from tests.testing.botchan_testlib import other_model_same_size


@pytest.fixture(scope="module")
def spm_corpus(tmp_path_factory):
  return beam_testlib.small_corpus(tmp_path_factory, documents=4)


def cfg(model):
  return pretraining_config.RunConfig(
      spm_model_file=model, do_lower_case=True,
      instance=pi.InstanceConfig(max_seq_length=64,
                                 max_predictions_per_seq=10))


@pytest.fixture(scope="module")
def data_dir(spm_corpus, tmp_path_factory):
  """corpus.txt beside the TFRecords made from it (plain and gzip)."""
  model, small = spm_corpus
  d = tmp_path_factory.mktemp("data")
  (d / "corpus.txt").write_bytes(open(small, "rb").read())
  cpd.run([str(d / "corpus.txt")], [str(d / "corpus.tfrecord")], cfg(model),
          progress_interval=0)
  cpd.run([str(d / "corpus.txt")], [str(d / "corpus.tfrecord.gz")],
          cfg(model), compression="GZIP", progress_interval=0)
  return d


@pytest.mark.parametrize("tool", ["create_pretraining_data", "prepare_corpus",
                                  "beam_pretraining_data"])
def test_tfrecord_matched_by_the_input_glob_is_refused(spm_corpus, data_dir,
                                                      tmp_path, tool):
  model, _ = spm_corpus
  args = [f"--input_file={data_dir}/corpus*",
          f"--output_file={tmp_path}/out/o.txt"]
  if tool != "prepare_corpus":
    args += [f"--spm_model_file={model}", "--max_seq_length=64",
             "--max_predictions_per_seq=10"]
  if tool == "beam_pretraining_data":
    args += ["--runner=DirectRunner", "--direct_num_workers=1"]
  line = error_line(run_tool(tool, *args))
  assert f"input file {data_dir}/corpus.tfrecord is a TFRecord file, not " \
         "text" in line, line
  assert not os.path.exists(tmp_path / "out" / "o.txt")


def test_gzip_tfrecord_and_other_binary_files_are_refused(data_dir, tmp_path):
  binary = tmp_path / "image.png"
  binary.write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + bytes(range(256)))
  utf16 = tmp_path / "utf16.txt"
  utf16.write_text("Some text.\n", encoding="utf-16")
  for path, what in ((data_dir / "corpus.tfrecord.gz", "a TFRecord file"),
                     (binary, "a binary file"),
                     (utf16, "UTF-16 text, not UTF-8; convert it first "
                      r"\(iconv -f UTF-16 -t UTF-8\)")):
    with pytest.raises(ValueError, match=f"input file {path} is {what}"):
      next(text_reader.iter_clean_lines(str(path), {}))
  # Text, gzip or in another 8-bit encoding or with a stray NUL, is read
  # (the bad bytes are repaired and counted as before).
  text = tmp_path / "ok.txt.gz"
  with gzip.open(text, "wt", encoding="utf-8") as f:
    f.write("first line\nsecond\n")
  assert list(text_reader.iter_clean_lines(str(text), {})) == [
      "first line", "second"]
  latin1 = tmp_path / "latin1.txt"
  latin1.write_bytes("Caf\u00e9 na\u00efve, one\0 NUL.\n".encode("latin-1"))
  stats = {"invalid_utf8_lines": 0, "control_char_lines": 0}
  assert list(text_reader.iter_clean_lines(str(latin1), stats)) == [
      "Caf nave, one NUL."]
  assert stats == {"invalid_utf8_lines": 1, "control_char_lines": 1}


def _fill_disk_at(path):
  """Writes to `path` fail with ENOSPC, as on a full disk (/dev/full)."""
  os.symlink("/dev/full", path)


def test_full_disk_names_the_output_and_removes_partial_files(spm_corpus,
                                                              tmp_path):
  model, small = spm_corpus
  out = tmp_path / "out"
  out.mkdir()
  _fill_disk_at(out / ".train.tfrecord-00000-of-00002.incomplete")
  line = error_line(run_tool(
      "create_pretraining_data", f"--input_file={small}",
      f"--output_file={out}/train.tfrecord@2", f"--spm_model_file={model}",
      "--max_seq_length=64", "--max_predictions_per_seq=10", "--dupe_factor=3",
      "--progress_interval=0"))
  assert (f"Cannot write output file {out}/train.tfrecord-00000-of-00002: No "
          "space left on device") in line, line
  assert os.listdir(out) == []  # the other shard's partial file too


@pytest.mark.parametrize("name", ["sentences.txt", "sentences.txt.gz"])
def test_full_disk_in_prepare_corpus(spm_corpus, tmp_path, name):
  _, small = spm_corpus
  out = tmp_path / "out"
  out.mkdir()
  _fill_disk_at(out / f".{name}.incomplete")
  line = error_line(run_tool("prepare_corpus", f"--input_file={small}",
                             f"--output_file={out}/{name}"))
  assert (f"Cannot write output file {out}/{name}: No space left on device"
          in line), line
  assert os.listdir(out) == []


def test_inspect_tfrecord_refuses_another_model(spm_corpus, data_dir,
                                                tmp_path):
  model, _ = spm_corpus
  data = f"{data_dir}/corpus.tfrecord"
  other = other_model_same_size(model, tmp_path / "other.model")
  line = error_line(run_tool("inspect_tfrecord", f"--input_file={data}",
                             f"--spm_model_file={other}"))
  assert (f"--spm_model_file {other} is not the model that wrote {data} "
          f"({data}.summary.json records {model}, sha256") in line, line
  # The same model elsewhere (same content) is the model.
  copy = tmp_path / "copy.model"
  copy.write_bytes(open(model, "rb").read())
  proc = run_tool("inspect_tfrecord", f"--input_file={data}",
                  f"--spm_model_file={copy}", "--max_examples=1")
  assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr
  assert "=== example 0" in proc.stdout


def test_inspect_tfrecord_with_a_summary_without_hash(spm_corpus, data_dir,
                                                      tmp_path):
  """Older summaries: the vocabulary size is compared, a path warned about."""
  model, _ = spm_corpus
  shutil.copy(f"{data_dir}/corpus.tfrecord", tmp_path / "old.tfrecord")
  with open(f"{data_dir}/corpus.tfrecord.summary.json") as f:
    summary = json.load(f)
  del summary["config"]["spm_model_sha256"], summary["config"]["vocab_sha256"]
  summary["records_per_file"] = {"old.tfrecord": 1}
  summary_path = tmp_path / "old.tfrecord.summary.json"
  summary_path.write_text(json.dumps(summary))
  data = str(tmp_path / "old.tfrecord")
  other = other_model_same_size(model, tmp_path / "other.model")
  proc = run_tool("inspect_tfrecord", f"--input_file={data}",
                  f"--spm_model_file={other}", "--max_examples=1")
  assert proc.returncode == 0
  assert (f"warning: {summary_path} records {model} (no content hash): if "
          f"{other} is another model of the same size") in proc.stderr
  summary["config"]["vocab_size"] = summary["vocab_size"] = 999
  summary_path.write_text(json.dumps(summary))
  line = error_line(run_tool("inspect_tfrecord", f"--input_file={data}",
                             f"--spm_model_file={model}"))
  assert "with 999 pieces; this one has 3000" in line, line
