"""tests/conftest.py's own helpers: each xdist worker's share of the cores,
the environment each test file leaves, and the order test files are handed
out in."""

from tests import conftest


def test_threads_per_worker_splits_the_cores():
  assert conftest._threads_per_worker({}, 8) is None  # not under xdist
  assert conftest._threads_per_worker(
      {"PYTEST_XDIST_WORKER_COUNT": "1"}, 8) is None
  assert conftest._threads_per_worker(
      {"PYTEST_XDIST_WORKER_COUNT": "2"}, 8) == 4
  assert conftest._threads_per_worker(
      {"PYTEST_XDIST_WORKER_COUNT": "2"}, 2) == 1
  # More workers than cores: still one thread each.
  assert conftest._threads_per_worker(
      {"PYTEST_XDIST_WORKER_COUNT": "3"}, 2) == 1


def test_environ_restored_undoes_all_but_pytests_own_variable():
  environ = {"KEPT": "1", "CHANGED": "2", "DELETED": "3",
             "PYTEST_CURRENT_TEST": "t.py::t (setup)"}
  with conftest.environ_restored(environ):
    environ["CHANGED"] = "two"
    del environ["DELETED"]
    environ["ADDED"] = "4"
    environ["PYTEST_CURRENT_TEST"] = "t.py::t (teardown)"
  assert environ == {"KEPT": "1", "CHANGED": "2", "DELETED": "3",
                     "PYTEST_CURRENT_TEST": "t.py::t (teardown)"}


class _Item:

  def __init__(self, path, name, slow=False):
    self.path, self.name, self.slow = path, name, slow

  def get_closest_marker(self, name):
    return object() if name == "slow" and self.slow else None


def test_files_with_a_slow_test_come_first_each_in_its_own_order():
  items = [_Item("a.py", "a1"), _Item("a.py", "a2"),
           _Item("b.py", "b1"), _Item("b.py", "b2", slow=True),
           _Item("c.py", "c1"), _Item("d.py", "d1", slow=True),
           _Item("d.py", "d2")]
  conftest.slow_files_first(items)
  # b1 stays before b2: a parametrized module fixture's tests stay grouped.
  assert [i.name for i in items] == ["b1", "b2", "d1", "d2", "a1", "a2",
                                     "c1"]
