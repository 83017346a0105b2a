"""No Python file of the repository uses a name it never defines.

pyflakes reads every file (no import runs) and reports names that are
neither assigned, imported nor builtins. Such a name is a NameError waiting
in a path no other test takes: a benchmark's mode that `make bench` alone
runs, an error branch. The files: `git ls-files` (tracked plus untracked,
non-ignored) when git works, else a walk of the tree (under `bazel test`, the
runfiles: every *.py the BUILD files' globs see).
"""
import ast
import os
import subprocess

from pyflakes import checker
from pyflakes import messages

from tests.testing.repo_paths import ROOT

UNDEFINED = (messages.UndefinedName, messages.UndefinedLocal,
             messages.UndefinedExport)


def undefined_names(source, filename="<source>"):
  """["file:line: message"] of every undefined name in `source`."""
  tree = ast.parse(source, filename=filename)
  found = checker.Checker(tree, filename=filename).messages
  return sorted(f"{m.filename}:{m.lineno}: {m.message % m.message_args}"
                for m in found if isinstance(m, UNDEFINED))


def python_files():
  """Every *.py of the repository, benchmarks/ included."""
  try:
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard",
         "-z", "--", "*.py"], cwd=ROOT, capture_output=True, check=True,
        timeout=60).stdout.decode("utf-8")
    return sorted(p for p in out.split("\0")
                  if p and os.path.isfile(os.path.join(ROOT, p)))
  except (OSError, subprocess.SubprocessError):
    pass
  found = []
  for dirpath, dirnames, filenames in os.walk(ROOT, followlinks=True):
    dirnames[:] = [d for d in dirnames if not d.startswith((".", "bazel-"))
                   and d != "__pycache__"]
    found += [os.path.relpath(os.path.join(dirpath, name), ROOT)
              for name in filenames if name.endswith(".py")]
  return sorted(found)


def test_every_file_defines_the_names_it_uses():
  files = python_files()
  assert {"albert_tf/__init__.py", "benchmarks/bench_data_prep.py",
          "tests/conftest.py"} <= set(files), files[:5]
  problems = []
  for path in files:
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
      problems += undefined_names(f.read(), path)
  assert not problems, "\n".join(problems)


def test_the_check_finds_an_undefined_name():
  source = ("import json\n\n"
            "def machine():\n  return json.dumps(run_all.machine())\n")
  assert undefined_names(source, "bench.py") == [
      "bench.py:4: undefined name 'run_all'"]
  assert undefined_names("import run_all\nrun_all.machine()\n") == []
