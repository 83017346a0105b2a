"""Tests for data_prep.prepare_corpus, text_reader and tfrecord_io."""

import collections
import gzip
import os

import pytest
import tensorflow as tf

from data_prep import prepare_corpus
from albert_toolkit import tfrecord_io
from tests.testing.data_prep_tools import error_line, run_tool
from tests.testing.repo_paths import BOTCHAN


def _docs(path):
  with open(path, encoding="utf-8") as f:
    return [d.split("\n") for d in f.read().strip("\n").split("\n\n")]


def test_split_sentences():
  s = prepare_corpus.split_sentences
  assert s("Mr. Smith met Dr. Brown. They talked!  Then?  \"Yes,\" he said.") == [
      "Mr. Smith met Dr. Brown.", "They talked!", "Then?", "\"Yes,\" he said."]
  assert s("Revised by J. R. Kennedy in 1919. It sold.") == [
      "Revised by J. R. Kennedy in 1919.", "It sold."]
  assert s("no capital. after a period") == ["no capital. after a period"]
  assert s("") == []


def test_blank_line_boundaries_and_wrapped_lines(tmp_path):
  src = tmp_path / "in.txt"
  src.write_text("First line is\nwrapped here. Second one.\n\n\nNew doc.\n")
  out = tmp_path / "out.txt"
  stats = prepare_corpus.prepare([str(src)], str(out))
  assert _docs(out) == [["First line is wrapped here.", "Second one."],
                        ["New doc."]]
  assert stats["documents"] == 2 and stats["sentences"] == 3


def test_file_boundaries_gzip_in_and_out(tmp_path):
  a, b = tmp_path / "a.txt.gz", tmp_path / "b.txt"
  with gzip.open(a, "wt") as f:
    f.write("Para one. Still one.\n\nPara two.\n")
  b.write_text("Other file.\n")
  out = tmp_path / "out.txt.gz"
  prepare_corpus.prepare([str(a), str(b)], str(out),
                         prepare_corpus.CorpusConfig(doc_boundary="file"))
  with gzip.open(out, "rt") as f:
    docs = [d.split("\n") for d in f.read().strip("\n").split("\n\n")]
  assert docs == [["Para one.", "Still one.", "Para two."], ["Other file."]]


def test_regex_boundaries_on_botchan(tmp_path):
  out = tmp_path / "botchan.txt"
  stats = prepare_corpus.prepare([BOTCHAN], str(out),
                                 prepare_corpus.CorpusConfig(
                                     doc_boundary="regex",
                                     doc_regex=r"^CHAPTER [IVXLC]+\.?$",
                                     drop_boundary_lines=True))
  docs = _docs(out)
  assert len(docs) == 12 and stats["boundary_lines"] == 11
  assert docs[1][0].startswith("Because of an hereditary recklessness")
  assert all(not line.startswith("CHAPTER") for d in docs for line in d)
  assert "control_char_lines" not in stats  # the byte-order mark: dropped
  assert not docs[0][0].startswith("\ufeff")
  with open(BOTCHAN, encoding="utf-8-sig") as f:
    words = len(f.read().split())
  assert sum(len(l.split()) for d in docs for l in d) == words - 11 * 2


def test_empty_or_blank_input_is_refused_and_nothing_written(tmp_path):
  """An empty corpus was written with exit 0 (and a 0-byte file counted as 2
  empty documents); create_pretraining_data and train_sentencepiece refuse
  such input."""
  empty, blank = tmp_path / "empty.txt", tmp_path / "blank.txt"
  empty.write_bytes(b"")
  blank.write_bytes(b"\n  \n\t\n\xef\xbb\xbf\n")
  out = tmp_path / "out" / "corpus.txt"
  for files in ([empty], [empty, blank]):
    with pytest.raises(ValueError) as e:
      prepare_corpus.prepare([str(f) for f in files], str(out))
    assert str(e.value) == (
        f"no sentences: the input ({', '.join(str(f) for f in files)}) holds "
        "no text; nothing written")
  one = tmp_path / "one.txt"
  one.write_text("Only one sentence here.\n\nAnd one more.\n")
  with pytest.raises(ValueError, match=(
      r"^no sentences: every document of the input \(.*one.txt\) had fewer "
      r"than min_sentences_per_doc=2 sentences \(2 dropped\); nothing "
      "written$")):
    prepare_corpus.prepare([str(one)], str(out),
                           prepare_corpus.CorpusConfig(min_sentences_per_doc=2))
  assert os.listdir(out.parent) == []
  assert empty.read_bytes() == b"" and one.read_text().startswith("Only")
  proc = run_tool("prepare_corpus", f"--input_file={empty}",
                  f"--output_file={out}")
  assert error_line(proc) == ("prepare_corpus: error: no sentences: the input "
                              f"({empty}) holds no text; nothing written")


def test_empty_documents_are_counted_once(tmp_path):
  src = tmp_path / "in.txt"
  src.write_text("One.\n\n\n\nTwo.\n\n")  # two extra blank lines
  stats = prepare_corpus.prepare([str(src)], str(tmp_path / "o.txt"))
  assert stats["documents"] == 2 and stats["empty_documents"] == 2
  # k blank lines in a row enclose k - 1 empty documents, at the start and
  # the end of a file too (the file's edges enclose none).
  src.write_text("\n\nOne.\n\n\nTwo.\n\n\n")
  stats = prepare_corpus.prepare([str(src), str(src)], str(tmp_path / "b.txt"))
  assert stats["documents"] == 4 and stats["empty_documents"] == 6
  stats = prepare_corpus.prepare([str(src), str(src)], str(tmp_path / "f.txt"),
                                 prepare_corpus.CorpusConfig(
                                     doc_boundary="file"))
  assert stats["documents"] == 2 and "empty_documents" not in stats


def test_the_end_of_a_file_ends_a_document_with_every_boundary(tmp_path):
  """With --doc_boundary=regex the second file's text joined the first
  file's last chapter (sentence pairs spanned two books), and a heading on
  a file's first line counted an empty document."""
  a, b = tmp_path / "a.txt", tmp_path / "b.txt"
  a.write_text("CHAPTER 1\nAlpha one. Alpha two.")
  b.write_text("Beta one from another book. Beta two.")
  for boundary in prepare_corpus.DOC_BOUNDARIES:
    out = tmp_path / f"{boundary}.txt"
    stats = prepare_corpus.prepare(
        [str(a), str(b)], str(out),
        prepare_corpus.CorpusConfig(doc_boundary=boundary,
                                    doc_regex="^CHAPTER"))
    # Elsewhere the heading is a wrapped line of the first paragraph.
    first = (["CHAPTER 1", "Alpha one."] if boundary == "regex"
             else ["CHAPTER 1 Alpha one."])
    assert _docs(out) == [first + ["Alpha two."],
                          ["Beta one from another book.", "Beta two."]]
    assert stats["documents"] == 2 and "empty_documents" not in stats
  # Two headings in a row (their lines dropped) enclose an empty document;
  # the text before a file's first heading is a document of its own.
  a.write_text("Preface here.\nCHAPTER 1\nCHAPTER 2\nText.\n")
  stats = prepare_corpus.prepare(
      [str(a), str(b)], str(tmp_path / "d.txt"),
      prepare_corpus.CorpusConfig(doc_boundary="regex", doc_regex="^CHAPTER",
                                  drop_boundary_lines=True))
  assert _docs(tmp_path / "d.txt") == [
      ["Preface here."], ["Text."],
      ["Beta one from another book.", "Beta two."]]
  assert stats["documents"] == 3 and stats["empty_documents"] == 1


def test_text_without_sentence_ends_is_cut_at_max_line_chars(tmp_path):
  """Text without sentence ends was written as sentences of a whole
  paragraph (1,099,949 characters with --max_paragraph_chars=1000000)."""
  words = [f"w{i % 997}" for i in range(3000)]
  src = tmp_path / "in.txt"
  src.write_text(" ".join(words) + "\n")
  out = tmp_path / "o.txt"
  stats = prepare_corpus.prepare([str(src)], str(out),
                                 prepare_corpus.CorpusConfig(
                                     max_line_chars=1000,
                                     max_paragraph_chars=5000))
  lines = out.read_text().splitlines()
  assert max(len(l) for l in lines) <= 1000 and len(lines) > 10
  assert " ".join(lines).split() == words  # every word, in order
  assert stats["long_sentences_split"] >= 1
  assert prepare_corpus.cut_long("ab cd", 3, collections.Counter()) == [
      "ab", "cd"]
  assert prepare_corpus.cut_long("abcdefg", 3, collections.Counter()) == [
      "abc", "def", "g"]


def test_unreadable_input_names_file(tmp_path):
  with pytest.raises(OSError, match="absent.txt"):
    prepare_corpus.prepare([str(tmp_path / "absent.txt")],
                           str(tmp_path / "o.txt"))
  with pytest.raises(FileNotFoundError, match="nomatch"):
    tfrecord_io.expand_input_files(str(tmp_path / "nomatch*.txt"))


def test_crc32c_and_example_encoding(tmp_path):
  assert tfrecord_io.crc32c(b"123456789") == 0xE3069283   # standard check value
  assert tfrecord_io.crc32c(b"") == 0
  assert tfrecord_io.crc32c(b"\x00" * 32) == 0x8A9136AA   # RFC 3720 B.4
  enc = tfrecord_io.ExampleEncoder(100)
  ints = [("input_ids", [0, 1, 127, 128, 300, 70000, 2**40]),
          ("input_mask", [1, 1, 0])]
  floats = [("masked_lm_weights", [1.0, 0.5, 0.0])]
  ex = tf.train.Example.FromString(enc.encode(ints, floats))
  f = ex.features.feature
  assert list(f["input_ids"].int64_list.value) == ints[0][1]
  assert list(f["input_mask"].int64_list.value) == [1, 1, 0]
  assert list(f["masked_lm_weights"].float_list.value) == [1.0, 0.5, 0.0]
  path = str(tmp_path / "r.tfrecord")
  w = tfrecord_io.RecordWriter(path)
  payloads = [enc.encode(ints, floats), b"x" * 3000, b"ab"]
  for p in payloads:
    w.write(tfrecord_io.frame_record(p))
  w.close()
  # TFRecordDataset verifies both CRCs of every record.
  assert [r.numpy() for r in tf.data.TFRecordDataset(path)] == payloads
  # split_framed undoes concatenation, and refuses a record cut short.
  framed = [tfrecord_io.frame_record(p) for p in payloads]
  with open(path, "rb") as f:
    written = f.read()
  assert tfrecord_io.split_framed(written) == framed
  assert tfrecord_io.split_framed(b"..." + written, 3) == framed
  for cut in (1, 5, len(framed[-1]) - 1):
    with pytest.raises(ValueError, match="truncated TFRecord"):
      tfrecord_io.split_framed(written[:-cut])
  assert tfrecord_io.expand_output_files("a,b") == ["a", "b"]
  assert tfrecord_io.expand_output_files("d/x@2") == [
      "d/x-00000-of-00002", "d/x-00001-of-00002"]
