"""Runs one pytest file under Bazel: the `main` of every py_test in tests/BUILD.

Usage (by //tools:pytest.bzl): pytest_runner.py tests/test_x.py [pytest args]

Bazel's sandbox is read-only except its temporary directories, so temporary
files (pytest's tmp_path, tempfile, Keras' cache) go under TEST_TMPDIR, and
pytest's cache and bytecode writing are turned off. The JUnit XML goes where
Bazel asks (XML_OUTPUT_FILE) and `bazel test --test_filter=expr` becomes
`pytest -k expr`.
"""
import os
import sys


def pytest_args(argv, environ):
  """The pytest command line for `pytest_runner.py <test file> [args...]`."""
  if not argv:
    raise SystemExit("usage: pytest_runner.py <test file> [pytest args]")
  args = [argv[0], "-p", "no:cacheprovider", "-q"] + list(argv[1:])
  if environ.get("XML_OUTPUT_FILE"):
    args.append("--junitxml=" + environ["XML_OUTPUT_FILE"])
  if environ.get("TESTBRIDGE_TEST_ONLY"):
    args += ["-k", environ["TESTBRIDGE_TEST_ONLY"]]
  return args


def main(argv):
  tmp = os.environ.get("TEST_TMPDIR")
  if tmp:
    # Children (subprocess tests) inherit these too.
    for name in ("TMPDIR", "TEMP", "TMP"):
      os.environ[name] = tmp
    os.environ.setdefault("KERAS_HOME", os.path.join(tmp, "keras"))
    if not os.access(os.environ.get("HOME", "/nonexistent"), os.W_OK):
      os.environ["HOME"] = tmp
  os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
  sys.dont_write_bytecode = True
  import pytest  # pylint: disable=g-import-not-at-top
  return pytest.main(pytest_args(argv, os.environ))


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
