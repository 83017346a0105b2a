"""Test setup: quiet TensorFlow logs, no GPU, no Keras 3, one core's threads
per worker, long tests first.

The tests are packages (tests/__init__.py, tests/<area>/__init__.py), so
pytest puts the repository root on sys.path itself; helpers are imported as
`tests.testing.<module>`.

The environment set here reaches the tools tests start as subprocesses too:
- TF_USE_LEGACY_KERAS=1: `import tensorflow` otherwise imports Keras 3 (and
  through it scikit-learn) eagerly, 1.5-2 s of every process start (4.5 s
  instead of 6.2 s for `import albert_tf.run_pretraining`, idle machine).
  albert_tf uses `tf_keras` only, which the variable makes `tf.keras` as
  well; tests that run a tool or served model as a user would take their
  environment from tests/testing/user_env.py, which leaves it out.
- Parallel runs (`make test`: pytest-xdist): each worker's TensorFlow gets
  cores / workers intra-op threads. By default every worker sizes its pool
  to all cores, and 2 workers on 2 cores run 4 busy threads: 201 s -> 163 s
  for the same three test files.
- Python's garbage collector leaves alone what the imports made, once the
  tests are collected (tests/testing/suite_gc.py).
- What a test or a test file sets in os.environ, itself or through a
  library it runs in-process (Dask's nannies copy their workers' variables
  into this process; importing OpenCV extends LD_LIBRARY_PATH), is undone
  when it ends: later tests' tools run in the suite's environment, and
  reuse the tool servers started in it (tests/testing/tool_server.py).
- Files holding a test marked `slow` come first in the collection, so with
  `make test`'s `--dist loadfile --no-loadscope-reorder` they are handed
  out first and the long ones do not finish alone at the end. A file whose
  tests are short but take ten seconds or more together marks them all
  (`pytestmark`).
"""
import contextlib
import os

import pytest

from tests.testing import suite_gc

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")


def _threads_per_worker(environ, cpu_count):
  """Intra-op threads for one of PYTEST_XDIST_WORKER_COUNT workers, or None
  outside xdist (TensorFlow's default then)."""
  workers = int(environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
  if workers < 2:
    return None
  return max(1, (cpu_count or 1) // workers)


_THREADS = _threads_per_worker(os.environ, os.cpu_count())
if _THREADS is not None:
  os.environ.setdefault("TF_NUM_INTRAOP_THREADS", str(_THREADS))


# Set by pytest itself for the running test and phase.
_PYTEST_OWN = frozenset({"PYTEST_CURRENT_TEST"})


@contextlib.contextmanager
def environ_restored(environ=os.environ):
  """Puts every variable of `environ` but pytest's own back as it was."""
  before = dict(environ)
  try:
    yield
  finally:
    for name in (set(before) | set(environ)) - _PYTEST_OWN:
      if name not in before:
        del environ[name]
      elif environ.get(name) != before[name]:
        environ[name] = before[name]


@pytest.fixture(scope="module", autouse=True)
def _environment_of_each_file():
  with environ_restored():
    yield


@pytest.fixture(autouse=True)
def _environment_of_each_test():
  with environ_restored():
    yield


def pytest_configure(config):
  config.addinivalue_line(
      "markers", "slow: a test of tens of seconds, or a file whose tests "
      "take ten seconds or more in all; its file is handed out first")


def slow_files_first(items):
  """Files holding a `slow` test first; stable, and whole files keep
  pytest's order inside them, which groups a parametrized module fixture's
  tests by parameter (sorting the tests themselves set each one up twice)."""
  slow = {item.path for item in items if item.get_closest_marker("slow")}
  items.sort(key=lambda item: item.path not in slow)


def pytest_collection_finish(session):
  del session
  suite_gc.settle()


def pytest_collection_modifyitems(items):
  # Every worker collects the same order, which xdist requires.
  slow_files_first(items)
