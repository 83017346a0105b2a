"""`pytest_test`: a py_test that runs its test file under pytest.

Each test file is run by the shared //tests:pytest_runner.py, which is the
py_test's `main` and gets the test file's path as its first argument.
"""

_RUNNER = "//tests:pytest_runner.py"

def pytest_test(name, srcs, deps = [], data = [], args = [], **kwargs):
    """Declares py_test `name` running pytest on srcs[0].

    Args:
      name: target name, by convention the test file's name without ".py".
      srcs: the test file first, then any helper modules only it uses.
      deps: py_library targets it imports (third-party packages come from
        the venv interpreter, see //tools:python_toolchain.bzl).
      data: files read at run time.
      args: extra pytest arguments.
      **kwargs: passed to py_test (size, timeout, tags, ...).

    Without size or timeout the timeout is "long" (900 s): TensorFlow tests
    on the shared 2-core machine can pass Bazel's 300 s default under load
    (test_model took 220 s there).
    """
    if "size" not in kwargs and "timeout" not in kwargs:
        kwargs["timeout"] = "long"
    native.py_test(
        name = name,
        srcs = srcs + [_RUNNER],
        main = _RUNNER,
        args = ["$(location %s)" % srcs[0]] + args,
        deps = deps + ["//tests:conftest", "//tests:pytest_runner",
                       "//tests:test_packages"],
        data = data,
        python_version = "PY3",
        srcs_version = "PY3",
        **kwargs
    )
