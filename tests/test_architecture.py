"""The package's shape, checked on the source with `ast` (no imports run).

- No import cycles between our modules (albert_tf, albert_toolkit,
  data_prep, clients, examples): data flows one way (docs/architecture.md).
- No import hidden inside a function body, except of optional heavy
  third-party packages (plots, gRPC, Model Garden peers): a hidden import of
  our own code is how a cycle gets dodged.
- Flags are defined only by entry points (absl mains and cli_flags.py);
  in data_prep only `main` (and the flags parser) reads them and passes a
  config object down.
- `data_prep` and `albert_toolkit` import neither TensorFlow (at module
  level) nor albert_tf (Beam workers and corpus machines run them without).
- The demo's SavedModel client imports no model code (the standard
  library, NumPy, TensorFlow, TF Text, sentencepiece).
- No source file over 400 lines: one concept per file.
- `tf.train.latest_checkpoint` and `get_checkpoint_state` only in the
  checkpoint resolver (albert_tf/checkpoints/paths.py): which checkpoint a
  directory means is decided once.

The layering between albert_tf's subpackages is checked against the Bazel
deps in test_build_coverage.py.
"""
import ast
import os
import sys

import pytest

from tests.testing.repo_paths import ROOT

PACKAGES = ("albert_tf", "albert_toolkit", "data_prep", "clients",
            "examples")
# Third-party packages that may be imported lazily: optional extras or heavy
# peers used by one code path only.
OPTIONAL_IMPORTS = ("matplotlib", "grpc", "tensorflow_serving", "official",
                    "tensorflow_text", "keras_hub", "apache_beam", "tensorflow",
                    "sentencepiece", "psutil", "absl", "google", "torch")
MAX_LINES = 400
# Flags shared by several entry points live in one module each, imported only
# by those entry points.
SHARED_FLAG_MODULES = (os.path.join("albert_tf", "cli_flags.py"),
                       os.path.join("data_prep", "pretraining_config.py"))


def source_files():
  found = []
  for package in PACKAGES:
    for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, package)):
      dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
      found += [os.path.relpath(os.path.join(dirpath, f), ROOT)
                for f in sorted(filenames) if f.endswith(".py")]
  return found


def module_name(path):
  name = path[:-len(".py")].replace(os.sep, ".")
  return name[:-len(".__init__")] if name.endswith(".__init__") else name


def parse(path):
  with open(os.path.join(ROOT, path), encoding="utf-8") as f:
    return ast.parse(f.read(), path)


def imports_of(tree, modules):
  """(module-level imports of ours, imports inside functions) of a tree."""
  top, hidden = set(), []

  def ours(name, imported=()):
    """Our modules named by `import name` / `from name import imported`."""
    found = set()
    for candidate in [f"{name}.{i}" for i in imported] + [name]:
      if candidate in modules:
        found.add(candidate)
        if candidate == name:
          break
    return found

  def visit(node, in_function):
    for child in ast.iter_child_nodes(node):
      if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                            ast.Lambda)):
        visit(child, True)
        continue
      if isinstance(child, ast.Import):
        names = [(a.name, ()) for a in child.names]
      elif isinstance(child, ast.ImportFrom) and child.module and \
          not child.level:
        names = [(child.module, [a.name for a in child.names])]
      else:
        visit(child, in_function)
        continue
      for name, imported in names:
        if in_function:
          hidden.append((child.lineno, name))
        else:
          top.update(ours(name, imported))
  visit(tree, False)
  return top, hidden


def import_graph():
  files = source_files()
  modules = {module_name(p): p for p in files}
  graph, hidden = {}, {}
  for name, path in modules.items():
    top, lazy = imports_of(parse(path), modules)
    graph[name] = top - {name}
    hidden[path] = lazy
  return graph, hidden


def find_cycle(graph):
  """One import cycle as a list of modules, or None."""
  state = {}
  for start in sorted(graph):
    stack = [(start, iter(sorted(graph[start])))]
    path = [start]
    if state.get(start):
      continue
    state[start] = "open"
    while stack:
      node, children = stack[-1]
      child = next(children, None)
      if child is None:
        state[node] = "done"
        stack.pop()
        path.pop()
        continue
      if state.get(child) == "open":
        return path[path.index(child):] + [child]
      if child in graph and not state.get(child):
        state[child] = "open"
        stack.append((child, iter(sorted(graph[child]))))
        path.append(child)
  return None


def test_the_sources_were_found():
  files = source_files()
  for must in ("albert_tf/modeling/networks/albert_encoder.py",
               "data_prep/tokenization.py", "clients/serving_client.py",
               "examples/demo/demo.py"):
    assert must in files


def test_no_import_cycles():
  graph, _ = import_graph()
  cycle = find_cycle(graph)
  assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_cycle_finder_finds_a_cycle():
  assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c",
                                                               "a"]
  assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_no_hidden_imports():
  _, hidden = import_graph()
  bad = [f"{path}:{line} imports {name}"
         for path, found in sorted(hidden.items())
         for line, name in found
         if name.split(".")[0] not in OPTIONAL_IMPORTS]
  assert not bad, ("imports inside function bodies (move them to the top; "
                   "a cycle means a module sits in the wrong layer): "
                   f"{bad}")


def test_hidden_import_detector(tmp_path):
  tree = ast.parse("import os\nfrom albert_tf.core import trainer\n"
                   "def f():\n  from albert_tf.tasks import pretraining\n"
                   "  import matplotlib\n")
  top, hidden = imports_of(tree, {"albert_tf.core.trainer",
                                  "albert_tf.tasks.pretraining"})
  assert top == {"albert_tf.core.trainer"}
  assert hidden == [(4, "albert_tf.tasks"), (5, "matplotlib")]


def _defines_flags(tree):
  for node in ast.walk(tree):
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        and node.func.attr.startswith("DEFINE_")):
      return True
  return False


def test_only_entry_points_define_flags():
  """Library modules define no flags: an entry point is a file that can run
  as a program (it has `if __name__ == "__main__"`); the flags several
  entry points share are in SHARED_FLAG_MODULES."""
  bad = []
  for path in source_files():
    source = open(os.path.join(ROOT, path), encoding="utf-8").read()
    is_entry_point = ('if __name__ == "__main__"' in source or
                      path in SHARED_FLAG_MODULES)
    if not is_entry_point and _defines_flags(ast.parse(source, path)):
      bad.append(path)
  assert not bad, f"library modules defining flags: {bad}"


# Functions that may read FLAGS: the entry point and absl's flags parser.
FLAG_READERS = ("main", "parse_flags")


def flag_reads_below_main(tree):
  """`function:line` of every read of FLAGS (or flags.FLAGS) inside a
  function other than FLAG_READERS."""
  found = []
  for node in ast.walk(tree):
    if (not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or
        node.name in FLAG_READERS):
      continue
    for child in ast.walk(node):
      if ((isinstance(child, ast.Name) and child.id == "FLAGS") or
          (isinstance(child, ast.Attribute) and child.attr == "FLAGS")):
        found.append(f"{node.name}:{child.lineno}")
  return sorted(set(found))


def test_data_prep_functions_below_main_read_no_flags():
  """Each data_prep tool turns its flags into a config object in `main` and
  passes it down, so its functions run the same from code (tests, the demo,
  Beam workers) as from the command line."""
  bad = [f"{path}: {where}" for path in source_files()
         if path.startswith("data_prep")
         for where in flag_reads_below_main(parse(path))]
  assert not bad, f"functions below main reading FLAGS: {bad}"


def test_flag_read_detector():
  tree = ast.parse("FLAGS = flags.FLAGS\n"
                   "def main(argv):\n  run(FLAGS.x)\n"
                   "def helper():\n  return FLAGS.y + flags.FLAGS.z\n"
                   "def pure(flag_values):\n  return flag_values.y\n")
  assert flag_reads_below_main(tree) == ["helper:5"]


def imported_names(node):
  """The modules an import statement names ("." for `from . import x`);
  none for any other node."""
  if isinstance(node, ast.Import):
    return [a.name for a in node.names]
  if isinstance(node, ast.ImportFrom):
    return [node.module or "."]
  return []


def test_data_prep_and_the_toolkit_need_no_tensorflow():
  """Not at module level, that is: a tool may use TensorFlow lazily for an
  optional path (inspect_tfrecord reads compressed files with it)."""
  bad = []
  for path in source_files():
    if not path.startswith(("data_prep", "albert_toolkit")):
      continue
    for node in parse(path).body:
      bad += [f"{path}: {n}" for n in imported_names(node)
              if n.split(".")[0] in ("tensorflow", "albert_tf", "tf_keras")]
  assert not bad, f"imports TensorFlow or albert_tf: {bad}"


# The demo's SavedModel client shows that an export needs no model code: it
# may import the standard library and these only (the suite runs it in a
# fork of a process that imported albert_tf, so this is where it is checked).
SAVEDMODEL_CLIENT = os.path.join("examples", "demo", "savedmodel_client.py")
SAVEDMODEL_CLIENT_IMPORTS = ("numpy", "tensorflow", "tensorflow_text",
                             "sentencepiece")


def foreign_imports(tree, allowed):
  """Every import (module level or in a function) of a package that is
  neither in the standard library nor in `allowed`, as "line: name"."""
  found = []
  for node in ast.walk(tree):
    found += [f"{node.lineno}: {name}" for name in imported_names(node)
              if name.split(".")[0] not in sys.stdlib_module_names and
              name.split(".")[0] not in allowed]
  return found


def test_the_savedmodel_client_imports_no_model_code():
  bad = foreign_imports(parse(SAVEDMODEL_CLIENT), SAVEDMODEL_CLIENT_IMPORTS)
  assert not bad, f"{SAVEDMODEL_CLIENT} imports {bad}"
  assert sorted(foreign_imports(ast.parse(
      "import os\nimport numpy\ndef f():\n  from albert_tf import x\n"
      "from . import y\n"), SAVEDMODEL_CLIENT_IMPORTS)) == [
          "4: albert_tf", "5: ."]


@pytest.mark.parametrize("path", source_files())
def test_file_length(path):
  with open(os.path.join(ROOT, path), encoding="utf-8") as f:
    lines = sum(1 for _ in f)
  assert lines <= MAX_LINES, (
      f"{path} has {lines} lines (> {MAX_LINES}): split it by concept")


@pytest.mark.skipif(bool(os.environ.get("TEST_SRCDIR")),
                    reason="bazel test: the runfiles hold the package's "
                    "configs, not the source tree's link to them")
def test_official_configs_is_a_link_to_the_package_data():
  """The top-level official_configs/ (the paths the docs use) is the
  package's albert_tf/configs/, not a copy that could drift."""
  top = os.path.join(ROOT, "official_configs")
  assert os.path.islink(top)
  assert os.path.realpath(top) == os.path.realpath(
      os.path.join(ROOT, "albert_tf", "configs"))
  assert os.path.exists(os.path.join(top, "models", "albert_base_v2.yaml"))


def _registered_task_names():
  """Every name a task goes by, read from albert_tf/tasks/ (`name = "..."`
  and the keys of `serving_tasks = {...}` in class bodies)."""
  names = set()
  for path in source_files():
    if not path.startswith(os.path.join("albert_tf", "tasks")):
      continue
    for node in ast.walk(parse(path)):
      if not isinstance(node, ast.ClassDef):
        continue
      for stmt in node.body:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and
                isinstance(stmt.targets[0], ast.Name)):
          continue
        target, value = stmt.targets[0].id, stmt.value
        if target == "name" and isinstance(value, ast.Constant):
          names.add(value.value)
        elif target == "serving_tasks" and isinstance(value, ast.Dict):
          names.update(k.value for k in value.keys
                       if isinstance(k, ast.Constant))
  return names


def _string_constants(tree):
  """(line, value) of every string literal that is not a docstring."""
  docstrings = set()
  for node in ast.walk(tree):
    if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                         ast.AsyncFunctionDef)) and node.body:
      first = node.body[0]
      if isinstance(first, ast.Expr) and isinstance(first.value,
                                                    ast.Constant):
        docstrings.add(id(first.value))
  return [(node.lineno, node.value) for node in ast.walk(tree)
          if isinstance(node, ast.Constant) and isinstance(node.value, str)
          and id(node) not in docstrings]


def test_no_task_names_below_tasks():
  """What a task is lives in albert_tf/tasks/ (behind the registry): core/
  and the generic exporter name no task. "encoder" is also the name of a
  model part everywhere, so it is not counted."""
  names = _registered_task_names() - {"encoder"}
  assert {"pretraining", "sentence_prediction", "question_answering",
          "multiple_choice", "classification", "squad"} <= names
  checked = [p for p in source_files()
             if p.startswith(os.path.join("albert_tf", "core")) or
             p == os.path.join("albert_tf", "serving", "export_lib.py")]
  bad = [f"{path}:{line} {value!r}" for path in checked
         for line, value in _string_constants(parse(path))
         if value in names]
  assert not bad, f"task names below tasks/: {bad}"


def test_task_name_detector():
  tree = ast.parse('"""pretraining docs"""\nKIND = "pretraining"\n'
                   'def f():\n  """squad"""\n  return x == "squad"\n')
  assert [v for _, v in _string_constants(tree)] == ["pretraining", "squad"]


# The one place that asks TensorFlow which checkpoint a directory means.
CHECKPOINT_RESOLVER = os.path.join("albert_tf", "checkpoints", "paths.py")
LATEST_CHECKPOINT_ALLOWED = (CHECKPOINT_RESOLVER,)


def latest_checkpoint_calls(tree):
  """Line numbers of the readers of the `checkpoint` state file,
  `tf.train.latest_checkpoint` / `get_checkpoint_state` (any alias of tf),
  and of `from ...train import` either, in a tree."""
  readers = ("latest_checkpoint", "get_checkpoint_state")
  lines = []
  for node in ast.walk(tree):
    if (isinstance(node, ast.Attribute) and node.attr in readers
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "train"):
      lines.append(node.lineno)
    elif (isinstance(node, ast.ImportFrom) and node.module and
          node.module.split(".")[-1] == "train" and
          any(a.name in readers for a in node.names)):
      lines.append(node.lineno)
  return sorted(lines)


def test_latest_checkpoint_only_in_the_resolver():
  bad = [f"{path}:{line}" for path in source_files()
         if path not in LATEST_CHECKPOINT_ALLOWED
         for line in latest_checkpoint_calls(parse(path))]
  assert not bad, ("tf.train.latest_checkpoint / get_checkpoint_state outside "
                   f"{CHECKPOINT_RESOLVER} (use paths.latest_checkpoint or "
                   f"paths.resolve_checkpoint): {bad}")


def test_latest_checkpoint_detector():
  tree = ast.parse("import tensorflow as tf\n"
                   "a = tf.train.latest_checkpoint(d)\n"
                   "b = manager.latest_checkpoint\n"
                   "from tensorflow.train import latest_checkpoint\n"
                   "c = paths.latest_checkpoint(d)\n"
                   "d = tf.train.get_checkpoint_state(d)\n")
  assert latest_checkpoint_calls(tree) == [2, 4, 6]
