"""The data_prep tools take their settings as config dataclasses: the
command line and a library call with the same config give the same output,
the flags' defaults are the configs' defaults, and bad values are one-line
errors naming the field."""

import dataclasses
import json
import subprocess
import sys

import pytest
from sentencepiece import sentencepiece_model_pb2

from data_prep import prepare_corpus
from data_prep import train_sentencepiece
from tests.testing import tool_server
from tests.testing.repo_paths import BOTCHAN, ROOT

ENV = tool_server.tool_env()
CHAPTER = r"^CHAPTER [IVXLC]+\.?$"


def _tool(module, *args):
  proc = tool_server.run([sys.executable, "-m", f"data_prep.{module}", *args],
                         capture_output=True, text=True, env=ENV, cwd=ROOT,
                         timeout=600, check=False)
  assert proc.returncode == 0, proc.stderr
  return proc


def _model(path):
  model = sentencepiece_model_pb2.ModelProto()
  model.ParseFromString(path.read_bytes())
  return model


def _flag_defaults(module, names):
  """{flag: default} of the flags the tool defines (in a fresh process: the
  tools define their flags only when run)."""
  code = ("import json, sys\n"
          "from absl import flags\n"
          f"from data_prep import {module} as tool\n"
          "tool.define_flags()\n"
          f"json.dump({{n: flags.FLAGS[n].default for n in {names!r}}}, "
          "sys.stdout)\n")
  proc = subprocess.run([sys.executable, "-c", code], capture_output=True,
                        text=True, env=ENV, cwd=ROOT, timeout=300, check=False)
  assert proc.returncode == 0, proc.stderr
  return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  base = tmp_path_factory.mktemp("corpus")
  by_cli = str(base / "cli.txt")
  _tool("prepare_corpus", f"--input_file={BOTCHAN}", f"--output_file={by_cli}",
        "--doc_boundary=regex", f"--doc_regex={CHAPTER}",
        "--drop_boundary_lines", "--min_sentences_per_doc=2")
  return by_cli, base


def test_prepare_corpus_command_line_equals_the_library_call(corpus):
  by_cli, base = corpus
  by_call = str(base / "call.txt")
  prepare_corpus.prepare([BOTCHAN], by_call, prepare_corpus.CorpusConfig(
      doc_boundary="regex", doc_regex=CHAPTER, drop_boundary_lines=True,
      min_sentences_per_doc=2))
  with open(by_cli, "rb") as a, open(by_call, "rb") as b:
    cli_bytes = a.read()
    assert cli_bytes == b.read()
  assert b"\nCHAPTER" not in cli_bytes  # the headings were dropped


def test_train_sentencepiece_command_line_equals_the_library_call(corpus,
                                                                  tmp_path):
  text, _ = corpus
  _tool("train_sentencepiece", f"--input_file={text}",
        f"--model_prefix={tmp_path / 'cli'}", "--vocab_size=300",
        "--num_threads=1", "--input_sentence_size=0", "--split_digits",
        "--user_defined_symbols=(,)")
  model = train_sentencepiece.train(
      [text], str(tmp_path / "call"), train_sentencepiece.SentencePieceConfig(
          vocab_size=300, num_threads=1, input_sentence_size=0,
          split_digits=True, user_defined_symbols=["(", ")"]))
  assert model == str(tmp_path / "call.model")
  # SentencePiece's scores differ between runs in their last bits, so the
  # models are compared field by field, not byte by byte.
  cli, call = _model(tmp_path / "cli.model"), _model(tmp_path / "call.model")
  for spec in (cli.trainer_spec, call.trainer_spec):
    spec.ClearField("model_prefix")  # the (temporary) output prefix
  assert cli.trainer_spec == call.trainer_spec
  assert cli.normalizer_spec == call.normalizer_spec
  assert [p.piece for p in cli.pieces] == [p.piece for p in call.pieces]
  assert [p.score for p in cli.pieces] == pytest.approx(
      [p.score for p in call.pieces], abs=1e-4)
  assert call.trainer_spec.split_digits and call.trainer_spec.vocab_size == 300
  pieces = [p.piece for p in call.pieces]
  assert len(pieces) == 300 and pieces[5:7] == ["(", ")"]


@pytest.mark.parametrize("module,config_cls", [
    ("prepare_corpus", prepare_corpus.CorpusConfig),
    ("train_sentencepiece", train_sentencepiece.SentencePieceConfig),
])
def test_every_flag_default_is_the_config_default(module, config_cls):
  fields = dataclasses.fields(config_cls)
  shown = _flag_defaults(module, [f.name for f in fields])
  for field in fields:
    default = field.default
    if isinstance(default, tuple):  # a list flag
      default = list(default)
    assert shown[field.name] == default, field.name


@pytest.mark.parametrize("make,field", [
    (lambda: prepare_corpus.CorpusConfig(doc_boundary="chapter"),
     "doc_boundary"),
    (lambda: prepare_corpus.CorpusConfig(doc_boundary="regex",
                                         doc_regex="(unclosed"), "doc_regex"),
    (lambda: prepare_corpus.CorpusConfig(max_line_chars=0), "max_line_chars"),
    (lambda: train_sentencepiece.SentencePieceConfig(model_type="bpe2"),
     "model_type"),
    (lambda: train_sentencepiece.SentencePieceConfig(vocab_size=4),
     "vocab_size"),
])
def test_a_bad_setting_is_an_error_naming_the_field(make, field):
  with pytest.raises(ValueError, match=field):
    make()
