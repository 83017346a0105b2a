"""Strict command lines of the data_prep tools (albert_toolkit/command_line.py and
the Beam option check): words that are not flags, flags typed with dashes,
an output name that is only `@N`, NaN/infinite floats. Each was accepted (or
misreported) before.
"""

import os
import subprocess
import sys

import pytest
from absl import flags

from data_prep import beam_options
from albert_toolkit import command_line
from albert_toolkit import tfrecord_io
from tests.testing import tool_server
from tests.testing.botchan_testlib import botchan_spm
from tests.testing.repo_paths import ROOT

ENV = tool_server.tool_env()
IN_MEMORY = ["--runner=DirectRunner", "--direct_num_workers=1"]


@pytest.fixture(scope="module")
def spm_corpus(tmp_path_factory):
  return botchan_spm(tmp_path_factory)


@pytest.fixture(scope="module")
def two_inputs(spm_corpus, tmp_path_factory):
  """Two text files: what the shell gives for an unquoted `in/*.txt`."""
  _, corpus = spm_corpus
  directory = tmp_path_factory.mktemp("in")
  text = open(corpus, encoding="utf-8").read()[:4000]
  paths = [directory / "a.txt", directory / "b.txt"]
  for path in paths:
    path.write_text(text, encoding="utf-8")
  return [str(p) for p in paths]


def start(module, *args):
  return tool_server.start([sys.executable, "-m", f"data_prep.{module}",
                            *args], env=ENV, cwd=ROOT,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)


def one_line_error(proc):
  """The single error line of a finished tool (exit 1, no traceback)."""
  _, err = proc.communicate(timeout=180)
  assert proc.returncode == 1, err
  assert "Traceback" not in err, err
  lines = [l for l in err.splitlines()
           if ": error:" in l or "Flags parsing error" in l]
  assert len(lines) == 1, err
  return lines[0]


def test_every_tool_refuses_words_that_are_not_flags(spm_corpus, two_inputs,
                                                     tmp_path):
  """`--input_file in/*.txt` unquoted: the second file was silently unused."""
  model, _ = spm_corpus
  first, second = two_inputs
  out = str(tmp_path / "out")
  create = ["--output_file=" + out, "--spm_model_file=" + model,
            "--max_seq_length=64", "--input_file", first, second]
  procs = [
      start("create_pretraining_data", *create),
      start("beam_pretraining_data", *create, *IN_MEMORY),
      start("prepare_corpus", "--output_file=" + out, "--input_file", first,
            second),
      start("train_sentencepiece", "--model_prefix=" + out, "--input_file",
            first, second),
      start("inspect_tfrecord", "--spm_model_file=" + model, "--input_file",
            first, second),
      # `dupe_factor=5` without dashes: Beam dropped it, the run used 40.
      start("beam_pretraining_data", "--input_file=" + first, *create[:3],
            "dupe_factor=5", *IN_MEMORY),
  ]
  named = [second] * 5 + ["dupe_factor=5"]
  for proc, word in zip(procs, named):
    line = one_line_error(proc)
    assert f"not a flag: {word!r}" in line, line
  assert os.listdir(tmp_path) == []


def test_a_flag_typed_with_dashes_is_named_as_typed(spm_corpus, two_inputs,
                                                    tmp_path):
  """Beam reported `--dupe-factor=5` as "unknown flag --dupe_factor"."""
  model, _ = spm_corpus
  args = ["--input_file=" + two_inputs[0], "--spm_model_file=" + model,
          "--output_file=" + str(tmp_path / "o.tfrecord"),
          "--max_seq_length=64", "--dupe-factor=5"]
  beam = one_line_error(start("beam_pretraining_data", *args, *IN_MEMORY))
  assert ("unknown flag --dupe-factor (flag names use underscores: "
          "--dupe_factor)") in beam
  local = one_line_error(start("create_pretraining_data", *args))
  assert "'dupe-factor'" in local
  with pytest.raises(ValueError, match="unknown flag --dupe-factor "):
    beam_options.pipeline_options(["--dupe-factor=5"])
  # Beam's own options with their values as separate words still pass.
  _, runner, _ = beam_options.pipeline_options(["--runner", "DirectRunner"])
  assert runner == "DirectRunner"


def test_output_file_without_a_name_is_refused(spm_corpus, two_inputs,
                                               tmp_path):
  """`--output_file=@3` wrote `-00000-of-00003` into the working directory."""
  for spec in ("@3", "out/@3", "out/"):
    with pytest.raises(ValueError, match="no file name"):
      tfrecord_io.expand_output_files(spec)
  assert tfrecord_io.expand_output_files("out/t@2") == [
      "out/t-00000-of-00002", "out/t-00001-of-00002"]
  model, _ = spm_corpus
  args = ["--input_file=" + two_inputs[0], "--spm_model_file=" + model,
          "--max_seq_length=64", "--output_file=@3"]
  procs = [tool_server.start(
      [sys.executable, "-m", f"data_prep.{tool}", *args, *extra],
      env=ENV, cwd=str(tmp_path), stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, text=True)
           for tool, extra in (("create_pretraining_data", []),
                               ("beam_pretraining_data", IN_MEMORY))]
  for proc in procs:
    assert "--output_file=@3" in one_line_error(proc)
  assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("tool,flag", [
    ("create_pretraining_data", "--short_seq_prob=nan"),
    ("create_pretraining_data", "--masked_lm_prob=nan"),
    ("create_pretraining_data", "--progress_interval=inf"),
    ("beam_pretraining_data", "--short_seq_prob=nan"),
    ("train_sentencepiece", "--character_coverage=nan"),
])
def test_non_finite_floats_are_refused(spm_corpus, two_inputs, tmp_path,
                                       tool, flag):
  """`nan` passes every range check; the summary then held invalid JSON."""
  model, _ = spm_corpus
  out = str(tmp_path / "o")
  if tool == "train_sentencepiece":
    args = ["--model_prefix=" + out]
  else:
    args = ["--output_file=" + out, "--spm_model_file=" + model,
            "--max_seq_length=64"]
  line = one_line_error(start(tool, "--input_file=" + two_inputs[0], *args,
                              flag, *(IN_MEMORY if "beam" in tool else [])))
  assert f"{flag}: not a finite number" in line
  assert os.listdir(tmp_path) == []


def test_non_finite_flags_reads_every_float_flag():
  values = flags.FlagValues()
  flags.DEFINE_float("rate", 0.5, "", flag_values=values)
  flags.DEFINE_multi_float("rates", [1.0], "", flag_values=values)
  flags.DEFINE_integer("n", 1, "", flag_values=values)
  values(["tool", "--rate=1e400", "--rates=2", "--rates=-inf", "--n=3"])
  assert command_line.non_finite_flags(values) == ["--rate=inf",
                                                   "--rates=-inf"]
  assert command_line.stray_words_error([str(i) for i in range(5)]).startswith(
      "not a flag: '0', '1', '2' and 2 more")
