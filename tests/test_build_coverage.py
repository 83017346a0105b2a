"""Every Python source file is in the srcs of some Bazel target, and the
targets' deps encode (and match) the package layering.

The files: `git ls-files` (tracked plus untracked, non-ignored) when git
works, else a walk of the tree; benchmarks/ is not built. Under `bazel test`
the sandbox holds only declared files, so the test walks its runfiles, which
//tests:test_build_coverage fills with every BUILD file and a glob of every
*.py (a .py file in a directory without a BUILD file falls under the
top-level package's glob).

BUILD files are Starlark, which for BUILD files is (nearly) Python: each one
is executed with stub rules that record their `srcs` and `main`, so list
comprehensions and shared lists work; glob() counts for nothing, because the
project's convention is that each .py file is listed by name.
"""
import ast
import builtins
import os
import subprocess

import pytest

EXCLUDED_DIRS = ("benchmarks",)
BUILD_NAMES = ("BUILD", "BUILD.bazel")


def _under_bazel():
  return bool(os.environ.get("TEST_SRCDIR") and
              os.environ.get("TEST_WORKSPACE"))


def repo_root():
  if _under_bazel():
    return os.path.join(os.environ["TEST_SRCDIR"],
                        os.environ["TEST_WORKSPACE"])
  return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _skip_dir(rel_dir, name):
  return (name.startswith(".") or name.startswith("bazel-") or
          name in ("__pycache__", "demo_output") or
          (rel_dir == "" and name in EXCLUDED_DIRS))


def walk_files(root, predicate):
  """Repo-relative paths (with "/") of files under root matching predicate."""
  found = []
  for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
    rel_dir = os.path.relpath(dirpath, root).replace(os.sep, "/")
    rel_dir = "" if rel_dir == "." else rel_dir
    dirnames[:] = sorted(d for d in dirnames if not _skip_dir(rel_dir, d))
    for name in filenames:
      if predicate(name):
        found.append(f"{rel_dir}/{name}" if rel_dir else name)
  return sorted(found)


def git_python_files(root):
  """Tracked and untracked non-ignored *.py, or None when git is unusable."""
  try:
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard",
         "-z", "--", "*.py"],
        cwd=root, capture_output=True, check=True, timeout=60).stdout
  except (OSError, subprocess.SubprocessError):
    return None
  paths = {p for p in out.decode("utf-8").split("\0") if p}
  # Deleted-but-tracked files are listed by --cached; only real files count.
  return sorted(p for p in paths
                if os.path.isfile(os.path.join(root, p)) and
                p.split("/")[0] not in EXCLUDED_DIRS)


def python_files(root):
  if not _under_bazel() and os.path.isdir(os.path.join(root, ".git")):
    files = git_python_files(root)
    if files is not None:
      return files
  return walk_files(root, lambda name: name.endswith(".py"))


def build_files(root):
  return walk_files(root, lambda name: name in BUILD_NAMES)


class _Rule:
  """Records (rule name, srcs + main) of every call."""

  def __init__(self, name, sink):
    self.name = name
    self.sink = sink

  def __call__(self, *args, **kwargs):
    names = []
    for key in ("srcs", "main"):
      value = kwargs.get(key)
      if isinstance(value, str):
        value = [value]
      names += [item for item in value or () if isinstance(item, str)]
    self.sink.append((self.name, names, kwargs))


class _Stubs(dict):
  """Globals for exec'ing a BUILD file: any unknown name is a rule."""

  def __init__(self, sink):
    super().__init__()
    self.sink = sink
    self["load"] = self._load
    self["glob"] = lambda *a, **k: []  # by-name listing only
    self["select"] = lambda d, **k: sorted(
        {x for v in d.values() for x in (v if isinstance(v, list) else [v])})
    self["package_name"] = lambda: ""
    self["Label"] = str
    self["native"] = self  # rare in BUILD files; attribute access below

  def _load(self, _bzl, *symbols, **aliases):
    for name in list(symbols) + list(aliases):
      self[name] = _Rule(name, self.sink)

  def __missing__(self, name):
    # Non-dict-exact globals are asked before builtins (len, sorted, ...).
    if hasattr(builtins, name):
      return getattr(builtins, name)
    rule = _Rule(name, self.sink)
    self[name] = rule
    return rule

  def __getattr__(self, name):
    return self[name]


def label_to_path(label, package):
  """A srcs entry of a BUILD file in `package` -> repo-relative path."""
  if label.startswith("@"):
    if not label.startswith("@//"):
      return None  # another repository
    label = label[1:]
  if label.startswith("//"):
    pkg, _, name = label[2:].partition(":")
    if not name:  # //pkg/foo.py is not a file label; //a/b means //a/b:b
      return None
  else:
    pkg, name = package, label.lstrip(":")
  return f"{pkg}/{name}" if pkg else name


def build_rules(root, build_paths):
  """[(BUILD path, rule name, [repo paths in its srcs/main], kwargs)]."""
  rules = []
  for build_path in build_paths:
    package = os.path.dirname(build_path)
    with open(os.path.join(root, build_path), encoding="utf-8") as f:
      code = f.read()
    sink = []
    stubs = _Stubs(sink)
    # Comprehension scopes look names up in globals, so rules known by name
    # must be present up front; __missing__ covers module-level names.
    for name in ("py_library", "py_binary", "py_test", "filegroup",
                 "exports_files", "package", "pytest_test", "test_suite"):
      stubs[name] = _Rule(name, sink)
    exec(compile(code, build_path, "exec"), stubs)  # pylint: disable=exec-used
    for rule, labels, kwargs in sink:
      paths = [label_to_path(label, package) for label in labels]
      rules.append((build_path, rule, [p for p in paths if p], kwargs))
  return rules


def rule_sources(root, build_paths):
  """[(rule name, [repo-relative paths in its srcs/main])] of all BUILD files."""
  return [(rule, paths) for _, rule, paths, _ in build_rules(root, build_paths)]


def covered_sources(root, build_paths):
  """Repo-relative paths named in the srcs/main of any rule."""
  return {p for _, paths in rule_sources(root, build_paths) for p in paths}


def uncovered(root):
  builds = build_files(root)
  assert "BUILD" in builds, f"no top-level BUILD file under {root}"
  covered = covered_sources(root, builds)
  return [p for p in python_files(root) if p not in covered]


def test_every_python_file_is_in_some_target_srcs():
  missing = uncovered(repo_root())
  assert not missing, (
      "Python files not in the srcs of any Bazel target (add each to a "
      "py_library/py_binary/pytest_test in its directory's BUILD file, see "
      f"docs/bazel.md): {missing}")


def test_every_test_file_has_its_own_py_test():
  root = repo_root()
  test_files = [p for p in python_files(root)
                if p.startswith("tests/") and
                os.path.basename(p).startswith("test_")]
  first_srcs = {paths[0] for rule, paths in rule_sources(root, build_files(root))
                if rule in ("py_test", "pytest_test") and paths}
  missing = [p for p in test_files if p not in first_srcs]
  assert not missing, (
      "test files without a pytest_test(name = ..., srcs = [<file>]) in "
      f"tests/BUILD: {missing}")


def imported_test_files(source):
  """Repo paths of the test files (tests/**/test_*.py) `source` imports."""
  found = set()
  for node in ast.walk(ast.parse(source)):
    if isinstance(node, ast.ImportFrom) and node.module:
      names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    elif isinstance(node, ast.Import):
      names = [a.name for a in node.names]
    else:
      continue
    found |= {name.replace(".", "/") + ".py" for name in names
              if name.split(".")[0] == "tests" and
              name.rsplit(".", 1)[-1].startswith("test_")}
  return found


def test_a_test_file_imported_by_another_is_in_its_srcs():
  """`bazel test` gives a test the files of its srcs and deps only: a test
  module it takes cases or helpers from must be among its srcs."""
  root = repo_root()
  missing = []
  for _, rule, paths, _ in build_rules(root, build_files(root)):
    if rule == "pytest_test" and paths:
      with open(os.path.join(root, paths[0]), encoding="utf-8") as f:
        imported = imported_test_files(f.read())
      missing += [f"{paths[0]} imports {p}" for p in sorted(imported)
                  if p not in paths]
  assert not missing, missing


def test_imported_test_files_are_found():
  source = ("from tests.tasks import test_run_finetuning as generic\n"
            "from tests.serving.test_export_text import TRICKY\n"
            "import tests.modeling.test_model\n"
            "from tests.testing import export_testlib\n")
  assert imported_test_files(source) == {
      "tests/tasks/test_run_finetuning.py", "tests/serving/test_export_text.py",
      "tests/modeling/test_model.py"}


def test_the_files_were_found():
  # Guards the test above against passing vacuously (e.g. an empty walk).
  root = repo_root()
  files = python_files(root)
  for must in ("albert_tf/modeling/albert_config.py",
               "data_prep/tokenization.py", "tests/test_build_coverage.py",
               "tests/modeling/test_model.py"):
    assert must in files, f"{must} not seen under {root}"
  assert not [p for p in files if p.startswith("benchmarks/")]


def test_checker_reports_a_missing_file(tmp_path):
  (tmp_path / "pkg").mkdir()
  (tmp_path / "pkg" / "a.py").write_text("")
  (tmp_path / "pkg" / "b.py").write_text("")
  (tmp_path / "pkg" / "c.py").write_text("")
  (tmp_path / "top.py").write_text("")
  (tmp_path / "benchmarks").mkdir()
  (tmp_path / "benchmarks" / "bench.py").write_text("")
  (tmp_path / "BUILD").write_text('py_library(name = "t", srcs = ["top.py"])\n')
  (tmp_path / "pkg" / "BUILD").write_text(
      'load("//tools:x.bzl", "my_test")\n'
      'TOOLS = ["b.py"]\n'
      '[py_binary(name = s[:-3], srcs = [s]) for s in TOOLS]\n'
      'my_test(name = "x", srcs = glob(["*.py"]))\n'
      '# c.py only in a comment\n'
      'py_library(name = "a", srcs = [":a.py"])\n')
  assert uncovered(str(tmp_path)) == ["pkg/c.py"]


@pytest.mark.parametrize("label,package,path", [
    ("a.py", "pkg", "pkg/a.py"),
    (":a.py", "pkg", "pkg/a.py"),
    ("//x/y:a.py", "pkg", "x/y/a.py"),
    ("@//:a.py", "pkg", "a.py"),
    ("sub/a.py", "", "sub/a.py"),
    ("@other//:a.py", "pkg", None),
])
def test_label_to_path(label, package, path):
  assert label_to_path(label, package) == path


# --- Layering -----------------------------------------------------------------

# What each albert_tf subpackage may depend on (docs/architecture.md). Data
# flows one way: modeling and optimization at the bottom, tasks at the top,
# entry points (the albert_tf package root) over everything. albert_toolkit
# (atomic files, output claims, TFRecord framing) imports nothing of ours;
# data_prep (text -> pieces -> TFRecords) only albert_toolkit: the layers that
# read text or pretraining data (data, serving, tasks) use its tokenization
# and summaries.
ALLOWED_DEPS = {
    "modeling": set(),
    "optimization": set(),
    "checkpoints": {"modeling", "albert_toolkit"},
    "data": {"modeling", "albert_toolkit", "data_prep"},
    "core": {"modeling", "optimization", "checkpoints", "albert_toolkit"},
    "serving": {"modeling", "checkpoints", "data", "core", "albert_toolkit",
                "data_prep"},
    "tasks": {"modeling", "optimization", "checkpoints", "data", "core",
              "serving", "albert_toolkit", "data_prep"},
}


def _dep_name(label):
  """//albert_tf/core -> core, //data_prep -> data_prep, else None."""
  label = label.split(":")[0]
  if label.startswith("//albert_tf/"):
    return label[len("//albert_tf/"):]
  if label in ("//data_prep", "//albert_toolkit"):
    return label[2:]
  return None


def subpackage_libraries(root):
  """{subpackage: (set of its py_library deps, [its source paths])}."""
  libs = {}
  for build_path, rule, paths, kwargs in build_rules(root, build_files(root)):
    package = os.path.dirname(build_path)
    if rule != "py_library" or not package.startswith("albert_tf/"):
      continue
    name = package[len("albert_tf/"):]
    deps = {_dep_name(d) for d in kwargs.get("deps", [])} - {None}
    libs[name] = (deps, paths)
  return libs


def imported_packages(path):
  """Our top-level packages imported by a file: albert_tf.<sub> -> <sub>."""
  with open(path, encoding="utf-8") as f:
    tree = ast.parse(f.read(), path)
  found = set()
  for node in ast.walk(tree):
    names = []
    if isinstance(node, ast.Import):
      names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
      names = [node.module]
    for name in names:
      parts = name.split(".")
      if parts[0] == "albert_tf" and len(parts) > 1:
        found.add(parts[1])
      elif parts[0] == "albert_tf":
        found.add("albert_tf")
      elif parts[0] in ("data_prep", "albert_toolkit"):
        found.add(parts[0])
  return found


def test_every_subpackage_has_its_library():
  libs = subpackage_libraries(repo_root())
  assert set(ALLOWED_DEPS) <= set(libs), (
      f"albert_tf subpackages without a py_library in their BUILD file: "
      f"{sorted(set(ALLOWED_DEPS) - set(libs))}")


@pytest.mark.parametrize("subpackage", sorted(ALLOWED_DEPS))
def test_build_deps_follow_the_layering(subpackage):
  deps, _ = subpackage_libraries(repo_root())[subpackage]
  upward = deps - ALLOWED_DEPS[subpackage]
  assert not upward, (
      f"//albert_tf/{subpackage} depends on {sorted(upward)}, which sit above "
      f"it (allowed: {sorted(ALLOWED_DEPS[subpackage])}; docs/architecture.md)")


@pytest.mark.parametrize("subpackage", sorted(ALLOWED_DEPS))
def test_imports_are_declared_deps(subpackage):
  """The BUILD deps are the truth: a file imports only its own subpackage
  and the subpackages its py_library depends on."""
  root = repo_root()
  deps, paths = subpackage_libraries(root)[subpackage]
  bad = []
  for path in paths:
    extra = imported_packages(os.path.join(root, path)) - deps - {subpackage}
    if extra:
      bad.append(f"{path} imports {sorted(extra)}")
  assert not bad, (f"imports outside //albert_tf/{subpackage}'s deps "
                   f"{sorted(deps)}: {bad}")


def test_layering_checker_catches_an_upward_import(tmp_path):
  # Guards the two tests above against passing vacuously.
  (tmp_path / "m.py").write_text(
      "import os\nfrom albert_tf.tasks import pretraining\n"
      "def f():\n  from data_prep import tokenization\n")
  assert imported_packages(str(tmp_path / "m.py")) == {"tasks", "data_prep"}
  deps, paths = subpackage_libraries(repo_root())["modeling"]
  assert deps == set() and "albert_tf/modeling/albert_config.py" in paths


def test_rule_names_are_unique_in_each_build_file():
  """Bazel refuses a package with two rules of one name (two test files of
  one name in different folders need names of their own)."""
  seen, twice = set(), []
  for build_path, _, _, kwargs in build_rules(repo_root(),
                                              build_files(repo_root())):
    key = (build_path, kwargs.get("name"))
    if key[1] is not None and key in seen:
      twice.append(f"{build_path}: {key[1]}")
    seen.add(key)
  assert not twice, f"rule names defined twice: {twice}"
