"""Pretraining data with a BERT WordPiece vocabulary (--vocab_file): the
local tool and Beam, the summary's vocabulary record and checks, whole-word
masks over WordPiece words and CJK characters."""

import collections
import json
import os
import sys

import pytest

from data_prep import beam_pretraining_data as bpd
from data_prep import create_pretraining_data as cpd
from albert_toolkit import output_files
from data_prep import pretraining_config
from data_prep import pretraining_instances as pi
from data_prep import pretraining_summary
from data_prep import wordpiece
from data_prep.inspect_tfrecord import iter_examples
from tests.testing import tool_server
from tests.testing import wordpiece_testlib
from tests.testing.beam_testlib import read_records
from tests.testing.repo_paths import ROOT

ENV = tool_server.tool_env()
SEQ, PRED = 48, 8
MIXED = "The cat sat on the mat, unaffable playing 北京。\nhello world 上海!\n\n"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
  base = tmp_path_factory.mktemp("wp_data")
  vocab = wordpiece_testlib.write_vocab(base)
  corpus = base / "zh.txt"
  corpus.write_text(MIXED + wordpiece_testlib.chinese_corpus(12),
                    encoding="utf-8")
  return vocab, str(corpus), base


def run_cfg(vocab, **kw):
  return pretraining_config.RunConfig(
      spm_model_file="", vocab_file=vocab, do_lower_case=True,
      instance=pi.InstanceConfig(max_seq_length=SEQ,
                                 max_predictions_per_seq=PRED,
                                 masked_lm_prob=0.2),
      dupe_factor=3, **kw)


@pytest.fixture(scope="module")
def local_run(inputs):
  vocab, corpus, base = inputs
  out = str(base / "local.tfrecord")
  summary = cpd.run([corpus], [out], run_cfg(vocab), progress_interval=0)
  return out, summary


def test_summary_records_the_vocabulary(inputs, local_run):
  vocab, _, _ = inputs
  out, _ = local_run
  with open(out + ".summary.json", encoding="utf-8") as f:
    summary = json.load(f)
  tok = wordpiece.WordPieceTokenizer(vocab)
  config = summary["config"]
  assert config["vocab_kind"] == "wordpiece"
  assert config["vocab_file"] == vocab
  assert config["vocab_sha256"] == output_files.file_sha256(vocab)
  assert config["spm_model_file"] == "" and config["spm_model_sha256"] is None
  assert summary["vocab_size"] == tok.vocab_size == len(
      open(vocab, encoding="utf-8").read().splitlines())
  assert summary["masking"] == {
      "cls_id": 2, "sep_id": 3, "mask_id": 4,
      "excluded_ids": list(tok.control_ids)}
  assert summary["unknown_tokens"] == 0


def test_masks_are_whole_words_and_replacements_are_text(inputs, local_run):
  vocab, _, _ = inputs
  out, summary = local_run
  tok = wordpiece.WordPieceTokenizer(vocab)
  examples = list(iter_examples(out))
  assert len(examples) == summary["instances"] > 50
  replaced = collections.Counter()
  words_seen = 0
  for ex in examples:
    n = sum(ex["input_mask"])
    boundary = ex["token_boundary"][:n]
    positions = {p for p, w in zip(ex["masked_lm_positions"],
                                   ex["masked_lm_weights"]) if w}
    original = list(ex["input_ids"][:n])
    for p, label in zip(ex["masked_lm_positions"], ex["masked_lm_ids"]):
      original[p] = label
    starts = [i for i in range(n) if boundary[i]] + [n]
    for s, e in zip(starts, starts[1:]):
      hit = positions & set(range(s, e))
      assert not hit or len(hit) == e - s
      words_seen += e - s > 1
      piece = tok.convert_ids_to_tokens([original[s]])[0]
      if wordpiece.is_cjk_char(piece[0]):
        assert e - s == 1  # each CJK character is a word
    for i in range(n):
      assert boundary[i] == (original[i] in (tok.cls_id, tok.sep_id) or
                             bool(tok.is_start[original[i]]))
    for p in positions:
      got = ex["input_ids"][p]
      if got not in (tok.mask_id, original[p]):
        replaced[got] += 1
        assert not tok.is_control_or_unknown(got)
  assert words_seen and sum(replaced.values()) > 5


def test_beam_writes_the_same_records(inputs, local_run, tmp_path):
  vocab, corpus, _ = inputs
  local, _ = local_run
  out = [str(tmp_path / "beam.tfrecord")]
  summary = bpd.run([corpus], out, run_cfg(vocab),
                    ["--runner=DirectRunner", "--direct_num_workers=1"],
                    progress_interval=0)
  assert collections.Counter(read_records(out[0])) == collections.Counter(
      read_records(local))
  assert summary["config"]["vocab_kind"] == "wordpiece"
  assert summary["config"]["vocab_sha256"] == output_files.file_sha256(vocab)


def test_vocab_size_and_one_vocabulary_checks(inputs, local_run, tmp_path):
  vocab, corpus, _ = inputs
  with pytest.raises(ValueError, match=f"{vocab}: .* pieces but "
                     "--vocab_size=30000"):
    cpd.run([corpus], [str(tmp_path / "x.tfrecord")],
            run_cfg(vocab, expected_vocab_size=30000), progress_interval=0)
  other = wordpiece_testlib.write_vocab(tmp_path, "other.txt", extra=["zzz"])
  out = str(tmp_path / "other.tfrecord")
  cpd.run([corpus], [out], run_cfg(other), progress_interval=0)
  local, _ = local_run
  described = [(p,) + pretraining_summary.find(p) for p in (local, out)]
  with pytest.raises(ValueError, match="WordPiece vocabulary .*vocab.txt.*"
                     "WordPiece vocabulary .*other.txt"):
    pretraining_summary.check_one_tokenizer(described, "data.input_path")


@pytest.mark.parametrize("given,problem", [
    (["--spm_model_file=a.model", "--vocab_file=v.txt"], "both are set"),
    ([], "neither is set")])
def test_both_or_neither_vocabulary_flag(inputs, tmp_path, given, problem):
  _, corpus, _ = inputs
  proc = tool_server.run(
      [sys.executable, "-m", "data_prep.create_pretraining_data",
       f"--input_file={corpus}", f"--output_file={tmp_path}/o.tfrecord",
       *given], env=ENV, cwd=ROOT, capture_output=True, text=True,
      timeout=120)
  assert proc.returncode == 1 and "Traceback" not in proc.stderr
  errors = [l for l in proc.stderr.splitlines() if "error" in l.lower()]
  assert len(errors) == 1, proc.stderr
  assert errors[0].endswith(
      "give exactly one of --spm_model_file (SentencePiece) and --vocab_file "
      f"(BERT WordPiece): {problem}"), proc.stderr
  assert not os.listdir(tmp_path)


def test_cli_with_vocab_file(inputs, tmp_path):
  vocab, corpus, _ = inputs
  out = tmp_path / "cli.tfrecord"
  proc = tool_server.run(
      [sys.executable, "-m", "data_prep.create_pretraining_data",
       f"--input_file={corpus}", f"--output_file={out}",
       f"--vocab_file={vocab}", "--max_seq_length=32",
       "--max_predictions_per_seq=5", "--dupe_factor=1",
       "--progress_interval=0"], env=ENV, cwd=ROOT, capture_output=True,
      text=True, timeout=120)
  assert proc.returncode == 0, proc.stderr
  summary = json.loads((tmp_path / "cli.tfrecord.summary.json").read_text())
  assert summary["config"]["vocab_file"] == vocab
  assert summary["instances"] == len(read_records(str(out))) > 0


def test_inspect_tfrecord_with_vocab_file(inputs, local_run, tmp_path):
  vocab, _, _ = inputs
  out, _ = local_run

  def inspect(*flags):
    return tool_server.run(
        [sys.executable, "-m", "data_prep.inspect_tfrecord",
         f"--input_file={out}", "--max_examples=2", *flags], env=ENV,
        cwd=ROOT, capture_output=True, text=True, timeout=180)

  proc = inspect(f"--vocab_file={vocab}")
  assert proc.returncode == 0, proc.stderr
  assert "warning" not in proc.stderr
  assert any(wordpiece.is_cjk_char(c) for c in proc.stdout)
  other = wordpiece_testlib.write_vocab(tmp_path, "other.txt", extra=["zzz"])
  proc = inspect(f"--vocab_file={other}")
  assert proc.returncode == 1
  assert f"--vocab_file {other} is not the model that wrote {out}" in (
      proc.stderr)
