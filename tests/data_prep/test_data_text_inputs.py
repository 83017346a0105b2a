"""Text the data tools are given: files that are not text, line ends, other
encodings, a vocabulary of other text, files given twice. Each test fails on
the code before its fix."""

import os
import subprocess
import sys

import pytest

from data_prep import tfrecord_io
from data_prep import train_sentencepiece
from tests.testing.botchan_testlib import botchan_spm

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = {**os.environ, "PYTHONPATH": ROOT, "TF_CPP_MIN_LOG_LEVEL": "2"}


@pytest.fixture(scope="module")
def spm_corpus(tmp_path_factory):
  return botchan_spm(tmp_path_factory)


def run_tool(module, *args):
  return subprocess.run([sys.executable, "-m", f"data_prep.{module}", *args],
                        capture_output=True, text=True, env=ENV, cwd=ROOT,
                        timeout=120)


def test_train_sentencepiece_names_a_file_that_is_not_text(spm_corpus,
                                                           tmp_path):
  """Each stopped with SentencePiece's `Internal: trainer_interface.cc(433)
  [!sentences_.empty()]`."""
  _, corpus = spm_corpus
  tfrecord = tmp_path / "train.tfrecord"
  with open(corpus, "rb") as f:
    payload = f.read(100)
  tfrecord.write_bytes(tfrecord_io.frame_record(payload))
  utf16 = tmp_path / "utf16.txt"
  utf16.write_text("Some text.\nMore text.\n", encoding="utf-16")
  utf16_no_bom = tmp_path / "utf16le.txt"
  utf16_no_bom.write_bytes("Some text.\nMore text.\n".encode("utf-16-le"))
  binary = tmp_path / "blob.bin"
  binary.write_bytes(bytes(range(256)) * 8)
  empty = tmp_path / "empty.txt"
  empty.write_bytes(b"\n\n  \n")
  cases = {
      tfrecord: "is a TFRecord file, not text",
      utf16: r"is UTF-16 text, not UTF-8; convert it first \(iconv -f "
             r"UTF-16 -t UTF-8\)",
      utf16_no_bom: "is UTF-16 text, not UTF-8",
      binary: "is a binary file",
      empty: "no text to train on: .* holds no non-blank line"}
  for path, what in cases.items():
    with pytest.raises(ValueError, match=f"{path} {what}" if path != empty
                       else what.replace(".*", str(path))):
      train_sentencepiece.train([str(path)], str(tmp_path / "m"),
                                train_sentencepiece.SentencePieceConfig(
                                    vocab_size=10, num_threads=1))
    assert not os.path.exists(tmp_path / "m.model")
  proc = run_tool("train_sentencepiece", f"--input_file={empty}",
                  f"--model_prefix={tmp_path / 'm'}", "--vocab_size=10")
  assert proc.returncode == 1
  assert proc.stderr.strip().splitlines() == [
      f"train_sentencepiece: error: no text to train on: {empty} holds no "
      "non-blank line"]
