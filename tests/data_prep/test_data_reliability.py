"""Reliability of the data_prep tools: clobbered inputs, interrupted runs,
giant lines, flag ranges, corrupt TFRecords, vocabulary size in the summary.

Each test here fails on the code before the fix it covers.
"""

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import sentencepiece as spm

from data_prep import create_pretraining_data as cpd
from data_prep import pretraining_config
from data_prep import inspect_tfrecord
from albert_toolkit import output_files
from data_prep import prepare_corpus
from data_prep import pretraining_instances as pi
from data_prep import text_reader
from albert_toolkit import tfrecord_io
from data_prep import tokenization
from data_prep import train_sentencepiece
from tests.testing import tool_server
from tests.testing import wordpiece_testlib
from tests.testing.data_prep_tools import ROOT, error_line, run_tool
from tests.testing.botchan_testlib import BOTCHAN, botchan_spm


def small_cfg(model, seq=64, dupe=1):
  return pretraining_config.RunConfig(
      spm_model_file=model, do_lower_case=True,
      instance=pi.InstanceConfig(max_seq_length=seq, max_predictions_per_seq=10),
      dupe_factor=dupe)


@pytest.fixture(scope="module")
def spm_corpus(tmp_path_factory):
  return botchan_spm(tmp_path_factory)


@pytest.fixture(scope="module")
def small_corpus(spm_corpus, tmp_path_factory):
  """60 sentences of each of the first 5 botchan documents (~40 KB)."""
  _, corpus = spm_corpus
  with open(corpus, encoding="utf-8") as f:
    docs = f.read().split("\n\n")[:5]
  path = tmp_path_factory.mktemp("small") / "small.txt"
  path.write_text("\n\n".join("\n".join(d.split("\n")[:60]) for d in docs)
                  + "\n", encoding="utf-8")
  return str(path)


# ------------------------------------------------- outputs vs inputs ----
def test_output_equal_to_input_is_refused_and_input_kept(spm_corpus,
                                                         small_corpus,
                                                         tmp_path):
  model, _ = spm_corpus
  victim = tmp_path / "corpus.txt"
  victim.write_bytes(open(small_corpus, "rb").read())
  before = victim.read_bytes()
  proc = run_tool("create_pretraining_data", f"--input_file={victim}",
                  f"--output_file={victim}", f"--spm_model_file={model}",
                  "--max_seq_length=64", "--dupe_factor=1")
  assert str(victim) in error_line(proc)
  proc = run_tool("prepare_corpus", f"--input_file={victim}",
                  f"--output_file={victim}")
  assert str(victim) in error_line(proc)
  # SentencePiece would write <prefix>.vocab over the training text.
  prefix = str(victim)[:-len(".txt")]
  vocab_input = tmp_path / "corpus.vocab"
  vocab_input.write_bytes(before)
  with pytest.raises(ValueError, match="corpus.vocab"):
    train_sentencepiece.train(
        [str(vocab_input)], prefix,
        train_sentencepiece.SentencePieceConfig(vocab_size=100))
  assert victim.read_bytes() == before
  assert vocab_input.read_bytes() == before


def _cpd(*args):
  return run_tool("create_pretraining_data", "--max_seq_length=64",
                  "--max_predictions_per_seq=10", "--dupe_factor=1", *args)


def test_vocabulary_and_corpus_are_never_outputs(spm_corpus, small_corpus,
                                                 tmp_path):
  """--output_file or --summary_file naming the vocabulary (also through a
  symlink) replaced or deleted it; --summary_file naming the corpus was
  refused under --output_file's name."""
  model = tmp_path / "s.model"
  model.write_bytes(open(spm_corpus[0], "rb").read())
  os.symlink(model, tmp_path / "link.model")
  vocab = wordpiece_testlib.write_vocab(tmp_path)
  corpus = tmp_path / "c.txt"
  corpus.write_bytes(open(small_corpus, "rb").read())
  before = {n: (tmp_path / n).read_bytes() for n in ("s.model", "vocab.txt",
                                                     "c.txt")}
  out = tmp_path / "o.tfrecord"
  for args, want in (
      ([f"--output_file={tmp_path}/link.model", f"--spm_model_file={model}"],
       f"--output_file {tmp_path}/link.model is also an input "
       f"(--spm_model_file {model})"),
      ([f"--output_file={out}@2", f"--summary_file={model}",
        f"--spm_model_file={tmp_path}/link.model"],
       f"--summary_file {model} is also an input (--spm_model_file "
       f"{tmp_path}/link.model)"),
      ([f"--output_file={vocab}", f"--vocab_file={vocab}"],
       f"--output_file {vocab} is also an input (--vocab_file {vocab})"),
      ([f"--output_file={out}", f"--summary_file={corpus}",
        f"--spm_model_file={model}"],
       f"--summary_file {corpus} is also an input (--input_file matched "
       f"{corpus})")):
    line = error_line(_cpd(f"--input_file={corpus}", *args))
    assert line.endswith(want + "; refusing to overwrite it"), line
  assert {n: (tmp_path / n).read_bytes() for n in before} == before
  assert _names(tmp_path) == ["c.txt", "link.model", "s.model", "vocab.txt"]


def test_an_output_given_twice_is_refused_when_the_flags_are_read(
    spm_corpus, small_corpus, tmp_path):
  """--output_file=a,a took over its own claim and failed after the work,
  half the records left under the final name."""
  model, _ = spm_corpus
  out = tmp_path / "a.tfrecord"
  common = [f"--input_file={small_corpus}", f"--spm_model_file={model}"]
  line = error_line(_cpd(*common,
                         f"--output_file={out},{tmp_path}/x/../a.tfrecord"))
  assert "Flags parsing error" in line and (
      f"--output_file names one file twice ({out} and {tmp_path}/x/../"
      "a.tfrecord); give each output once") in line, line
  line = error_line(_cpd(*common, f"--output_file={out}",
                         f"--summary_file={out}"))
  assert line.endswith(f"--summary_file {out} is the same file as "
                       f"--output_file {out}; give each output its own "
                       "file"), line
  assert _names(tmp_path) == []


@pytest.mark.parametrize("tool", ["create_pretraining_data", "prepare_corpus",
                                  "train_sentencepiece",
                                  "beam_pretraining_data"])
@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_an_output_that_is_not_a_regular_file_is_refused_first(
    spm_corpus, small_corpus, tmp_path, tool, kind):
  """A directory output failed after all the work, leaving its temporary
  file; a device (/dev/full, as root) was renamed over."""
  model, _ = spm_corpus
  target = tmp_path / ("o.model" if tool == "train_sentencepiece" else "o")
  if kind == "directory":
    target.mkdir()
  else:
    os.mkfifo(target)
  args = [f"--input_file={small_corpus}"]
  if tool == "train_sentencepiece":
    args += [f"--model_prefix={tmp_path}/o", "--vocab_size=100"]
    flag = "--model_prefix"
  else:
    args += [f"--output_file={target}"]
    flag = "--output_file"
  if tool.endswith("pretraining_data"):
    args += [f"--spm_model_file={model}", "--max_seq_length=64",
             "--max_predictions_per_seq=10", "--dupe_factor=1"]
  if tool == "beam_pretraining_data":
    args += ["--runner=DirectRunner", "--direct_num_workers=1"]
  line = error_line(run_tool(tool, *args))
  what = "a directory" if kind == "directory" else "not a regular file"
  assert f"error: {flag} {target} is {what}" in line, line
  assert _names(tmp_path) == [target.name]  # no temporary, lock or summary
  assert os.path.isdir(target) if kind == "directory" else (
      os.path.exists(target) and not os.path.isfile(target))


def test_glob_never_reads_our_summary_or_temp_files(spm_corpus, small_corpus,
                                                    tmp_path):
  model, _ = spm_corpus
  src = tmp_path / "g2.txt"
  src.write_bytes(open(small_corpus, "rb").read())
  out = tmp_path / "out" / "g2.tfrecord"
  cpd.run([str(src)], [str(out)], small_cfg(model), progress_interval=0)
  # A summary and a leftover temporary file next to the corpus.
  os.replace(str(out) + ".summary.json", tmp_path / "g2.summary.json")
  (tmp_path / output_files.temp_path("g2b.txt")).write_text("partial")
  pattern = str(tmp_path / "g2*")
  assert tfrecord_io.expand_input_files(pattern) == [str(src)]
  with pytest.raises(ValueError, match="summary"):
    output_files.check_disjoint([str(tmp_path / "g2.summary.json")], [])


# -------------------------------------------------- interrupted runs ----
def _names(directory):
  return sorted(os.listdir(directory))


def test_failure_mid_run_leaves_nothing_complete_looking(spm_corpus,
                                                         small_corpus,
                                                         tmp_path,
                                                         monkeypatch):
  model, _ = spm_corpus
  out = tmp_path / "o" / "t.tfrecord"
  spec = tfrecord_io.expand_output_files(str(out) + "@2")
  cpd.run([small_corpus], spec, small_cfg(model), progress_interval=0,
          docs_per_block=1, shuffle_buffer_size=0)
  summary = spec[0] + ".summary.json"
  assert os.path.exists(summary)
  real = cpd.process_block
  calls = []

  def failing(task):
    calls.append(1)
    if len(calls) == 3:  # after two blocks were written
      raise OSError("No space left on device (injected)")
    return real(task)

  monkeypatch.setattr(cpd, "process_block", failing)
  with pytest.raises(OSError, match="injected"):
    cpd.run([small_corpus], spec, small_cfg(model, dupe=2),
            progress_interval=0, docs_per_block=1, shuffle_buffer_size=0)
  # The previous run's summary is gone (it no longer describes the files) and
  # no temporary file remains.
  assert _names(out.parent) == sorted(os.path.basename(p) for p in spec)
  fresh = tmp_path / "fresh"
  calls.clear()
  with pytest.raises(OSError, match="injected"):
    cpd.run([small_corpus], [str(fresh / "t.tfrecord")], small_cfg(model),
            progress_interval=0, docs_per_block=1, shuffle_buffer_size=0)
  assert _names(fresh) == []


def test_sigkill_leaves_no_final_shard_or_summary(spm_corpus, tmp_path):
  model, corpus = spm_corpus
  out = tmp_path / "k" / "t.tfrecord"
  proc = tool_server.start(
      [sys.executable, "-m", "data_prep.create_pretraining_data",
       f"--input_file={corpus}", f"--output_file={out}@2",
       f"--spm_model_file={model}", "--max_seq_length=64",
       "--dupe_factor=200", "--shuffle_buffer_size=0", "--docs_per_block=1",
       "--progress_interval=0"],
      env=tool_server.tool_env(), cwd=ROOT, stderr=subprocess.DEVNULL)
  temp = output_files.temp_path(f"{out}-00000-of-00002")
  deadline = time.time() + 60
  while time.time() < deadline and proc.poll() is None:
    if os.path.exists(temp) and os.path.getsize(temp) > 0:
      break
    time.sleep(0.05)
  assert proc.poll() is None, "finished before it could be killed"
  assert os.path.getsize(temp) > 0
  proc.send_signal(signal.SIGKILL)
  proc.wait()
  assert not [n for n in _names(out.parent) if not n.startswith(".")]


def test_prepare_corpus_failure_leaves_no_output(tmp_path):
  bad = tmp_path / "bad.txt.gz"
  bad.write_bytes(b"\x1f\x8b\x08\x00" + b"\x00" * 20)  # truncated gzip
  good = tmp_path / "good.txt"
  good.write_text("One sentence here. Another one.\n", encoding="utf-8")
  out = tmp_path / "out" / "corpus.txt"
  with pytest.raises(OSError, match="bad.txt.gz"):
    prepare_corpus.prepare([str(good), str(bad)], str(out))
  assert _names(out.parent) == []


# ------------------------------------------------------- giant lines ----
def test_giant_line_tokens_are_used_and_losses_counted(spm_corpus, tmp_path):
  model, _ = spm_corpus
  with open(BOTCHAN, encoding="utf-8") as f:
    text = " ".join(f.read().split())[:150000]
  line = tmp_path / "one_line.txt"
  line.write_text(text, encoding="utf-8")  # no newline at all
  summary = cpd.run([str(line)], [str(tmp_path / "o.tfrecord")],
                    small_cfg(model, seq=128), max_line_chars=50000,
                    progress_interval=0)
  skipped = summary["skipped_or_repaired"]
  assert skipped["huge_lines_split"] == 1
  assert skipped["long_lines_split_into_sentences"] >= 3
  used = summary["tokens"] - 3 * summary["instances"]  # minus [CLS] [SEP] x2
  # Every token is either in an instance or counted as truncated.
  assert used + skipped["tokens_truncated"] >= summary["document_tokens"]
  assert used >= 0.85 * summary["document_tokens"]


def test_cut_at_units_keeps_every_token():
  from data_prep import sentence_tokens  # pylint: disable=import-outside-toplevel
  is_start = [i % 3 == 0 for i in range(100)]
  ids = list(range(100)) * 3
  pieces = sentence_tokens.cut_at_units(ids, 10, is_start)
  assert [t for p in pieces for t in p] == ids
  assert max(len(p) for p in pieces) <= 10
  assert all(is_start[p[0]] for p in pieces[1:])
  # One unit longer than the limit is cut anyway.
  assert sentence_tokens.cut_at_units([0] + [1] * 25, 10, is_start)[-1] == [1] * 6


def test_zero_max_line_chars_is_an_error_not_a_hang(tmp_path):
  path = tmp_path / "x.txt"
  path.write_text("word " * 100)
  with pytest.raises(ValueError, match="max_line_chars"):
    list(text_reader.iter_clean_lines(str(path), {}, max_line_chars=0))


# ------------------------------------------------------- flag ranges ----
BAD_FLAGS = [
    ("max_line_chars", "0"), ("max_predictions_per_seq", "0"),
    ("masked_lm_prob", "2"), ("output_file", "{out}@abc"),
    ("max_seq_length", "3"), ("dupe_factor", "0"), ("short_seq_prob", "1.5"),
    ("short_seq_prob", "-0.1"), ("ngram", "0"), ("num_workers", "0"),
    ("docs_per_block", "0"), ("max_lines_per_document", "0"),
    ("shuffle_buffer_size", "-1"), ("max_predictions_per_seq", "100"),
    ("masked_lm_prob", "0"),
]


def test_every_bad_flag_is_a_one_line_error_naming_it(spm_corpus,
                                                      small_corpus, tmp_path):
  model, _ = spm_corpus
  out = str(tmp_path / "o.tfrecord")
  procs = []
  for name, value in BAD_FLAGS:
    args = {"input_file": small_corpus, "output_file": out,
            "spm_model_file": model, "max_seq_length": "64"}
    args[name] = value.format(out=out)
    procs.append(tool_server.start(
        [sys.executable, "-m", "data_prep.create_pretraining_data"] +
        [f"--{k}={v}" for k, v in args.items()],
        env=tool_server.tool_env(), cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True))
  for (name, value), proc in zip(BAD_FLAGS, procs):
    _, err = proc.communicate(timeout=120)
    proc.stderr = err
    line = error_line(proc)
    assert f"--{name}" in line, (name, value, err)
  assert not os.path.exists(out)


# ------------------------------------------------ corrupt TFRecords ----
def test_inspect_tfrecord_bad_files_are_one_line_errors(spm_corpus,
                                                        small_corpus,
                                                        tmp_path):
  model, _ = spm_corpus
  good = str(tmp_path / "good.tfrecord")
  cpd.run([small_corpus], [good], small_cfg(model), progress_interval=0)
  data = open(good, "rb").read()
  text = tmp_path / "text.tfrecord"
  text.write_text("this is not a tfrecord\n" * 20)
  truncated = tmp_path / "truncated.tfrecord"
  truncated.write_bytes(data[:len(data) // 2])
  other = tmp_path / "other.tfrecord"
  with open(other, "wb") as f:
    enc = tfrecord_io.ExampleEncoder()
    f.write(tfrecord_io.frame_record(enc.encode([("label", [1])])))
  tok = tokenization.FullTokenizer(model)
  for path, what in ((text, "not a readable TFRecord"),
                     (truncated, "not a readable TFRecord"),
                     (other, "not a pretraining example")):
    with open(os.devnull, "w") as sink, pytest.raises(ValueError,
                                                       match=what) as e:
      inspect_tfrecord.show(str(path), tok, max_examples=10**6, stream=sink)
    assert str(path) in str(e.value) and "\n" not in str(e.value)
  proc = run_tool("inspect_tfrecord", f"--input_file={truncated}",
                  f"--spm_model_file={model}", "--max_examples=100000")
  assert str(truncated) in error_line(proc)


def test_inspect_tfrecord_says_what_it_cannot_show(spm_corpus, small_corpus,
                                                  tmp_path):
  """--skip past the end printed nothing (exit 0), a glob was "Cannot read
  input file", and --do_lower_case was accepted and unused."""
  model, _ = spm_corpus
  spec = tfrecord_io.expand_output_files(str(tmp_path / "t.tfrecord@2"))
  cpd.run([small_corpus], spec, small_cfg(model), progress_interval=0)
  records = sum(1 for _ in tfrecord_io.read_records(spec[0]))
  common = [f"--spm_model_file={model}"]
  line = error_line(run_tool("inspect_tfrecord", f"--input_file={spec[0]}",
                             f"--skip={records}", *common))
  assert line == (f"inspect_tfrecord: error: --skip={records} is past the "
                  f"end of {spec[0]}: it holds {records} records")
  proc = run_tool("inspect_tfrecord", f"--input_file={spec[0]}",
                  f"--skip={records - 1}", *common)
  assert proc.returncode == 0 and proc.stdout.count("=== example") == 1
  pattern = str(tmp_path / "t.tfrecord-*")
  line = error_line(run_tool("inspect_tfrecord", f"--input_file={pattern}",
                             *common))
  assert line == (f"inspect_tfrecord: error: --input_file {pattern}: takes "
                  "one file, not a glob or a list (inspect one shard)")
  line = error_line(run_tool("inspect_tfrecord", f"--input_file={spec[0]}",
                             "--nodo_lower_case", *common))
  assert "Unknown command line flag 'nodo_lower_case'" in line


# ------------------------------------------------ summary and vocab ----
def test_vocab_size_flag_must_match_the_model(spm_corpus, small_corpus,
                                              tmp_path):
  model, _ = spm_corpus
  pieces = spm.SentencePieceProcessor(model_file=model).get_piece_size()
  out = tmp_path / "o.tfrecord"
  proc = run_tool("create_pretraining_data", f"--input_file={small_corpus}",
                  f"--output_file={out}", f"--spm_model_file={model}",
                  "--max_seq_length=64", "--dupe_factor=1",
                  f"--vocab_size={pieces + 1}")
  line = error_line(proc)
  assert f"--vocab_size={pieces + 1}" in line and f"{pieces} pieces" in line
  assert os.listdir(tmp_path) == []
  cfg = dataclasses.replace(small_cfg(model), expected_vocab_size=pieces)
  assert cpd.run([small_corpus], [str(out)], cfg,
                 progress_interval=0)["vocab_size"] == pieces


def test_summary_carries_what_a_trainer_checks(spm_corpus, small_corpus,
                                               tmp_path):
  model, _ = spm_corpus
  spec = tfrecord_io.expand_output_files(str(tmp_path / "v.tfrecord@3"))
  summary = cpd.run([small_corpus], spec, small_cfg(model, dupe=2),
                    progress_interval=0)
  with open(spec[0] + ".summary.json") as f:
    on_disk = json.load(f)
  pieces = spm.SentencePieceProcessor(model_file=model).get_piece_size()
  assert on_disk["vocab_size"] == on_disk["config"]["vocab_size"] == pieces
  assert (on_disk["max_seq_length"], on_disk["max_predictions_per_seq"]) == (
      64, 10)
  assert on_disk["compression"] == "NONE"
  assert on_disk["feature_names"][0] == "input_ids"
  counts = {p: sum(1 for _ in inspect_tfrecord.iter_examples(p)) for p in spec}
  assert on_disk["records_per_file"] == counts
  assert sum(counts.values()) == summary["instances"] > 50
  # Every id (random replacements included) is a real, non-control piece.
  tok = tokenization.FullTokenizer(model)
  control = set(tok.control_ids) - {tok.unk_id}
  for p in spec:
    for ex in inspect_tfrecord.iter_examples(p):
      ids, n = ex["input_ids"], sum(ex["input_mask"])
      assert max(ids) < pieces and max(ex["masked_lm_ids"]) < pieces
      for pos, orig, w in zip(ex["masked_lm_positions"], ex["masked_lm_ids"],
                              ex["masked_lm_weights"]):
        assert w == 0 or 0 < pos < n
        if w and ids[pos] not in (tok.mask_id, orig):
          assert ids[pos] not in control
