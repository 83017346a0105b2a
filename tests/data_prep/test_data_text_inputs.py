"""Text the data tools are given: files that are not text, line ends, other
encodings, a vocabulary of other text, files given twice. Each test fails on
the code before its fix."""

import collections
import gzip
import io
import os
import random

import pytest

from data_prep import create_pretraining_data as cpd
from data_prep import pretraining_config
from data_prep import pretraining_instances as pi
from data_prep import pretraining_summary
from data_prep import text_reader
from albert_toolkit import tfrecord_io
from data_prep import tokenization
from data_prep import train_sentencepiece
from tests.testing.data_prep_tools import run_tool
from tests.testing.botchan_testlib import botchan_spm


@pytest.fixture(scope="module")
def spm_corpus(tmp_path_factory):
  return botchan_spm(tmp_path_factory)


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


def test_train_sentencepiece_counts_sentences_over_the_length_limit(
    tmp_path, capfd):
  """SentencePiece skips sentences over --max_sentence_length bytes with a
  log line only: the tool reported them as trained on, and a corpus of only
  long lines stopped with `Internal: ... [!sentences_.empty()]`."""
  limit = 200
  rng = random.Random(0)
  words = ["abc", "bad", "cab", "dab", "ace", "bead", "deed", "ebb"]

  def line(n):
    text = ""
    while len(text) < n:
      text += rng.choice(words) + " "
    return text[:n - 1] + "e"  # n characters, no space at either end

  lines = ["", "  "] + [line(rng.randrange(20, 120)) for _ in range(60)]
  lines[10] = line(limit)            # exactly `limit` bytes: kept
  lines[12] = line(limit + 1)        # one byte over
  lines[20] = "\u0436" * 101         # 101 characters, 202 bytes (UTF-8)
  lines[30] = line(5 * limit)
  text = tmp_path / "corpus.txt"
  text.write_text("\n".join(lines) + "\n", encoding="utf-8")
  too_long = [l for l in lines if len(l.encode()) > limit]
  kept = [l for l in lines if l.strip() and len(l.encode()) <= limit]
  assert len(too_long) == 3 and len(lines[10].encode()) == limit
  config = train_sentencepiece.SentencePieceConfig(
      vocab_size=30, num_threads=1, max_sentence_length=limit)
  train_sentencepiece.train([str(text)], str(tmp_path / "m"), config)
  err = capfd.readouterr().err.splitlines()
  assert err == [
      f"warning: 3 sentence(s) longer than --max_sentence_length={limit} "
      f"bytes left out of training (first: {text}:13); raise "
      "--max_sentence_length to train on them",
      f"[train_sentencepiece] {len(kept)} sentences -> {tmp_path}/m.model, "
      f"{tmp_path}/m.vocab"]
  only_long = tmp_path / "long.txt"
  only_long.write_text("\n\n".join(too_long) + "\n", encoding="utf-8")
  proc = run_tool("train_sentencepiece", f"--input_file={only_long}",
                  f"--model_prefix={tmp_path / 'n'}", "--vocab_size=30",
                  f"--max_sentence_length={limit}")
  assert proc.returncode == 1
  assert proc.stderr.strip().splitlines() == [
      "train_sentencepiece: error: no text to train on: all 3 non-blank "
      f"lines of {only_long} are longer than --max_sentence_length={limit} "
      f"bytes (first: {only_long}:1); raise --max_sentence_length or split "
      "the lines (prepare_corpus --max_line_chars)"]
  assert not os.path.exists(tmp_path / "n.model")
  # The pieces of a line split by the reader carry its number.
  split = tmp_path / "split.txt"
  split.write_text("a\n" + "xy " * 100 + "\n\nb")
  numbered = list(text_reader.iter_numbered_lines(str(split),
                                                  collections.Counter(),
                                                  max_line_chars=100))
  assert [n for n, _ in numbered] == [1, 2, 2, 2, 2, 3, 4]
  assert [t for _, t in numbered] == list(text_reader.iter_clean_lines(
      str(split), collections.Counter(), max_line_chars=100))


def _documents(path, stats, **kw):
  return list(text_reader.iter_documents([str(path)], stats, **kw))


def test_a_bare_cr_ends_a_line(spm_corpus, tmp_path):
  """CR-only and mixed CRLF / CR / LF files read 3 documents as 1, so
  sentence-order pairs spanned unrelated documents."""
  docs = [["First one.", "Two."], ["Second doc."], ["Third a.", "Third b."]]
  lf = "\n\n".join("\n".join(d) for d in docs) + "\n"
  mixed = "First one.\r\nTwo.\r\r\nSecond doc.\n\rThird a.\rThird b.\r\n"
  for name, text in (("lf", lf), ("cr", lf.replace("\n", "\r")),
                     ("crlf", lf.replace("\n", "\r\n")), ("mixed", mixed)):
    path = tmp_path / f"{name}.txt"
    path.write_bytes(text.encode("utf-8"))
    stats = collections.Counter()
    assert _documents(path, stats) == docs, name
    assert stats["bare_cr_line_ends"] == {"lf": 0, "cr": 7, "crlf": 0,
                                          "mixed": 3}[name], name
  # A CRLF cut by the read limit is one line end, not two.
  path = tmp_path / "cut.txt"
  path.write_bytes(b"x" * 15 + b"\r\nnext\r\n\r\nlast\n")
  stats = collections.Counter()
  assert _documents(path, stats, max_line_chars=16) == [["x" * 15, "next"],
                                                        ["last"]]
  assert stats["bare_cr_line_ends"] == 0
  # Through create_pretraining_data: three documents, counted in the summary.
  model, _ = spm_corpus
  out = tmp_path / "cr.tfrecord"
  summary = cpd.run([str(tmp_path / "cr.txt")], [str(out)],
                    pretraining_config.RunConfig(
                        spm_model_file=model, do_lower_case=True,
                        instance=pi.InstanceConfig(max_seq_length=16,
                                                   max_predictions_per_seq=2)),
                    progress_interval=0)
  assert summary["documents_read"] == 3
  assert summary["skipped_or_repaired"]["bare_cr_line_ends"] == 7


def _small_cfg(model):
  return pretraining_config.RunConfig(
      spm_model_file=model, do_lower_case=True,
      instance=pi.InstanceConfig(max_seq_length=32, max_predictions_per_seq=4))


def test_unknown_pieces_are_counted_and_warned_about(spm_corpus, tmp_path):
  """CJK text with an English model gave instances of almost all <unk>, and
  no warning."""
  model, corpus = spm_corpus
  tok = tokenization.FullTokenizer(model, True)
  cjk = tmp_path / "cjk.txt"
  rng = random.Random(0)
  cjk.write_text("\n\n".join(
      "\n".join("".join(chr(rng.randrange(0x4E00, 0x9FA0)) for _ in range(12))
                + "\u3002" for _ in range(4)) for _ in range(5)) + "\n",
                 encoding="utf-8")
  english = tmp_path / "english.txt"
  with open(corpus, encoding="utf-8") as f:
    english.write_text("".join(f.readlines()[:300]), encoding="utf-8")
  results = {}
  for name, path in (("english", str(english)), ("cjk", str(cjk))):
    summary = cpd.run([path], [str(tmp_path / f"{name}.tfrecord")],
                      _small_cfg(model), progress_interval=0)
    summary["summary_file"] = "s.json"
    out = io.StringIO()
    pretraining_summary.report(summary, "create_pretraining_data", out)
    results[name] = summary, out.getvalue()
  # The counts against an independent encoding of the same lines.
  with open(cjk, encoding="utf-8") as f:
    ids = [tok.encode_ids(line) for line in f.read().split("\n") if line]
  unknown = sum(i.count(tok.unk_id) for i in ids)
  summary, report = results["cjk"]
  assert summary["unknown_tokens"] == unknown > 0
  assert summary["unknown_token_fraction"] == pytest.approx(
      unknown / sum(map(len, ids)), abs=1e-6)
  assert summary["unknown_token_fraction"] > 0.3
  assert (f"create_pretraining_data: warning: "
          f"{summary['unknown_token_fraction']:.1%} of the tokens ({unknown}) "
          f"are <unk>: the SentencePiece model {model} does not cover this "
          "text") in report
  summary, report = results["english"]
  assert summary["unknown_token_fraction"] < 0.001
  assert "warning" not in report


def test_a_file_given_twice_is_read_once(spm_corpus, tmp_path):
  """`--input_file=a.txt,a.txt` or two overlapping globs read a.txt twice
  (every instance twice, no word said)."""
  _, corpus = spm_corpus
  text = tmp_path / "in" / "a.txt"
  text.parent.mkdir()
  with open(corpus, encoding="utf-8") as f:
    text.write_text("".join(f.readlines()[:200]), encoding="utf-8")
  link = tmp_path / "in" / "link.txt"
  link.symlink_to(text)
  spec = f"{text},{tmp_path}/in/*.txt,{tmp_path}/in/a*"
  assert tfrecord_io.expand_input_files(spec) == [str(text)]
  out = tmp_path / "corpus.txt"
  proc = run_tool("prepare_corpus", f"--input_file={spec}",
                  f"--output_file={out}")
  assert proc.returncode == 0, proc.stderr
  warnings = [l for l in proc.stderr.splitlines() if "warning" in l]
  assert warnings == [
      f"warning: input file {tmp_path}/in/a.txt is given more than once "
      f"(also as {text}); reading it once",
      f"warning: input file {link} is given more than once (also as "
      f"{text}); reading it once",
      f"warning: input file {tmp_path}/in/a.txt is given more than once "
      f"(also as {text}); reading it once"]
  once = tmp_path / "once.txt"
  assert run_tool("prepare_corpus", f"--input_file={text}",
                  f"--output_file={once}").returncode == 0
  assert out.read_bytes() == once.read_bytes()


def test_a_byte_order_mark_is_dropped_not_counted_as_a_repair(tmp_path):
  """A UTF-8 BOM starting a file was reported as control_char_lines=1."""
  plain = tmp_path / "bom.txt"
  plain.write_bytes(b"\xef\xbb\xbfFirst line.\r\nSecond\n")
  packed = tmp_path / "bom.txt.gz"
  packed.write_bytes(gzip.compress(plain.read_bytes()))
  for path in (plain, packed):
    stats = collections.Counter()
    assert list(text_reader.iter_clean_lines(str(path), stats)) == [
        "First line.", "Second"]
    assert not +stats, stats  # nothing repaired
  # Only a mark starting the file is one; inside a line it is counted.
  middle = tmp_path / "middle.txt"
  middle.write_bytes(b"\xef\xbb\xbfOne\nTw\xef\xbb\xbfo\n")
  stats = collections.Counter()
  assert list(text_reader.iter_clean_lines(str(middle), stats)) == ["One",
                                                                    "Two"]
  assert stats == {"control_char_lines": 1}
