"""tests/testing/tool_server.py: a tool run in a fork of the preloaded server
behaves as the same run in a fresh `python` process (output, exit codes,
flags, working directory, environment, signals), a server's imports saw the
run's environment and are its family's (the data_prep tools' imports no
TensorFlow, a user's process nothing of ours), console scripts run as
python does, and runs that a fork could get wrong go to a real
subprocess."""

import os
import shutil
import signal
import subprocess
import sys
import tempfile

import pytest

from tests.testing import tool_server
from tests.testing import user_env
from tests.testing.repo_paths import ROOT

# Ten seconds or more in all: handed out first (tests/conftest.py).
pytestmark = pytest.mark.slow

# What a process saw: its argv, cwd, sys.path[0], an environment variable,
# whether albert_tf's run_pretraining module was imported, and stdin.
PROBE = r"""
import os, sys
print(sys.argv, os.getcwd(), sys.path[0], os.environ.get("PROBE"),
      "albert_tf.run_pretraining" in sys.modules, sys.stdin.read())
print("to stderr", file=sys.stderr)
code = sys.argv[1]
if code == "raise":
  raise ValueError("probe failed")
sys.exit(int(code) if code.isdigit() else code)
"""


def both(args, **kwargs):
  """(fork, subprocess) results of the same run."""
  forked = tool_server.run(args, **kwargs)
  real = subprocess.run(args, **kwargs)
  return forked, real


@pytest.mark.parametrize("code", ["0", "3", "raise", "a message"])
def test_a_fork_prints_and_exits_like_a_process(tmp_path, code):
  env = tool_server.tool_env(PROBE="x")
  assert tool_server.forkable([sys.executable, "-c", PROBE], env)
  forked, real = both([sys.executable, "-c", PROBE, code], cwd=str(tmp_path),
                      env=env, capture_output=True, text=True, input="in",
                      timeout=120)
  assert forked.returncode == real.returncode == {
      "0": 0, "3": 3, "raise": 1, "a message": 1}[code]
  assert forked.stdout == real.stdout
  assert f"'-c', '{code}'] {tmp_path}  x False in" in real.stdout
  if code == "raise":  # the traceback's frames differ; its last line not
    assert forked.stderr.splitlines()[-1] == real.stderr.splitlines()[-1]
  else:
    assert forked.stderr == real.stderr


def test_a_script_and_a_module_see_what_python_gives_them(tmp_path):
  script = tmp_path / "probe.py"
  script.write_text(PROBE)
  env = tool_server.tool_env(PROBE="y")
  forked, real = both([sys.executable, str(script), "0"], cwd=ROOT,
                      env=env, capture_output=True, text=True, timeout=120)
  assert forked.stdout == real.stdout and forked.returncode == 0
  assert f"{tmp_path} y False" in forked.stdout  # sys.path[0]: its folder
  # `-m`: every flag of the tool, as in a fresh process (the server
  # defined none of its own).
  forked, real = both([sys.executable, "-m", "albert_tf.plot_metrics",
                       "--helpfull"], cwd=str(tmp_path), env=env,
                      capture_output=True, text=True, timeout=120)
  assert forked.stdout == real.stdout and "--metrics_file" in forked.stdout
  assert forked.returncode == real.returncode


def test_signals_reach_the_fork():
  env = tool_server.tool_env()
  sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
  proc = tool_server.start(sleeper, env=env, stdout=subprocess.PIPE)
  assert isinstance(proc, tool_server.ForkedTool)
  proc.send_signal(signal.SIGTERM)
  assert proc.wait(timeout=30) == -signal.SIGTERM
  proc = tool_server.start(sleeper, env=env, stdout=subprocess.PIPE)
  with pytest.raises(subprocess.TimeoutExpired):
    proc.communicate(timeout=0.5)
  assert proc.poll() is None  # still running, as with Popen
  proc.kill()
  assert proc.wait(timeout=30) == -signal.SIGKILL
  with pytest.raises(subprocess.TimeoutExpired):
    tool_server.run(sleeper, env=env, timeout=0.5)  # and killed


def test_each_import_environment_gets_a_server_of_its_own(monkeypatch):
  env = tool_server.tool_env()
  probe = [sys.executable, "-c", "pass"]
  assert tool_server.run(probe, env=env).returncode == 0
  server = tool_server.server_for(env)
  # Read at run time (or emulated per run): the same server.
  assert tool_server.server_for(dict(env, TF_CONFIG="{}",
                                     PYTHONUNBUFFERED="")) is server
  # Read while importing TensorFlow: a server whose imports saw it.
  changed = dict(env, TF_PROBE_SETTING="1")
  assert tool_server.run(probe, env=changed).returncode == 0
  other = tool_server.server_for(changed)
  assert other is not server and server.proc.poll() is None  # both kept
  assert other.import_env["TF_PROBE_SETTING"] == "1"
  assert tool_server.server_for(env) is server
  # Beyond MAX_SERVERS the least recently used ones stop. Checked on these
  # two alone: the worker's other servers stay up for the tests after this.
  servers = tool_server._servers  # pylint: disable=protected-access
  other_key = next(k for k, v in servers.items() if v is other)
  monkeypatch.setattr(tool_server, "_servers", {
      k: v for k, v in servers.items() if v in (server, other)})
  monkeypatch.setattr(tool_server, "MAX_SERVERS", 1)
  assert tool_server.server_for(env) is server
  assert other.proc.poll() is not None and server.proc.poll() is None
  assert list(tool_server._servers.values()) == [server]  # pylint: disable=protected-access
  del servers[other_key]
  assert all(s.proc.poll() is None for s in servers.values()
             if isinstance(s, tool_server._Server))  # pylint: disable=protected-access


def test_a_data_prep_tool_is_forked_from_its_own_familys_server(tmp_path):
  python = sys.executable
  assert [tool_server.family(args, ROOT) for args in (
      [python, "-m", "data_prep.prepare_corpus"],
      [python, "data_prep/create_pretraining_data.py"],
      [python, "-m", "data_prep.inspect_tfrecord"],
      [python, "-m", "albert_tf.run_pretraining"],
      [python, "-c", "import data_prep"])] == [
          "data_prep", "data_prep", "tensorflow", "tensorflow", "tensorflow"]
  env = tool_server.tool_env()
  # Every flag of the tool and no other (TensorFlow's are not defined in
  # this family's server), as in a fresh process.
  forked, real = both([python, "-m", "data_prep.prepare_corpus",
                       "--helpfull"], cwd=str(tmp_path), env=env,
                      capture_output=True, text=True, timeout=120)
  assert forked.stdout == real.stdout and "--doc_boundary" in forked.stdout
  assert forked.returncode == real.returncode
  assert tool_server.server_for(env, "data_prep") is not (
      tool_server.server_for(env))


# Which of our packages (and TF Text) a process has imported, whether it
# started with TensorFlow imported (a fork of a server), and that it can
# import the rest as a fresh process does.
USER_PROBE = r"""
import sys
print(sorted({m.split(".")[0] for m in sys.modules} & {
    "albert_tf", "albert_toolkit", "data_prep", "official", "tf_keras",
    "tensorflow_text"}), "tensorflow" in sys.modules)
import tensorflow_text
import albert_tf
print(albert_tf.__file__)
"""


def test_a_users_process_is_forked_from_a_server_of_tensorflow_alone():
  """A run without the repository on PYTHONPATH (a served model's client,
  TensorFlow's own tools) imports nothing of ours from the server; run
  from the repository, it imports albert_tf from there as python does."""
  env = user_env.environ()
  args = [sys.executable, "-c", USER_PROBE]
  assert tool_server.family(args, ROOT, env) == "user"
  assert tool_server.forkable(args, env)
  forked, real = both(args, cwd=ROOT, env=env, capture_output=True,
                      text=True, timeout=120)
  assert forked.returncode == real.returncode == 0, forked.stderr[-3000:]
  init = os.path.join(ROOT, "albert_tf", "__init__.py")
  assert real.stdout.splitlines() == ["[] False", init]
  assert forked.stdout.splitlines() == ["[] True", init]


def test_a_console_script_of_this_python_runs_as_python_script(tmp_path):
  ours = tmp_path / "tool"
  ours.write_text(f"#!{sys.executable}\nimport os, sys\n"
                  "print(sys.argv[1:], sys.path[0] == os.path.dirname("
                  "__file__), 'tensorflow' in sys.modules)\n")
  other = tmp_path / "other"
  other.write_text("#!/bin/sh\necho sh \"$@\"\n")
  for script in (ours, other):
    script.chmod(0o755)
  assert tool_server.as_python_run([str(ours), "a"]) == [
      sys.executable, str(ours), "a"]
  assert tool_server.as_python_run([str(other), "a"]) == [str(other), "a"]
  forked, real = both([str(ours), "a"], env=tool_server.tool_env(),
                      capture_output=True, text=True, timeout=120)
  assert real.stdout == "['a'] True False\n"
  assert forked.stdout == "['a'] True True\n"
  shell = tool_server.run([str(other), "a"], capture_output=True, text=True,
                          timeout=60)
  assert (shell.returncode, shell.stdout) == (0, "sh a\n")


# A tool that runs a tool through tool_server (benchmarks/run_all.py under
# BENCH_RUN): which server the inner run went to, and whether the inner
# process had TensorFlow imported before it started (a fork of a server).
NESTED = r"""
import os
import sys
from tests.testing import tool_server
inner = tool_server.run(
    [sys.executable, "-c", "import sys; print('tensorflow' in sys.modules)"],
    capture_output=True, text=True)
print(inner.returncode, inner.stdout.strip(),
      tool_server.server_for(os.environ).socket_path)
"""


def test_a_tool_running_tools_has_them_forked_from_the_same_server():
  env = tool_server.tool_env()
  outer = tool_server.run([sys.executable, "-c", NESTED], env=env,
                          capture_output=True, text=True, timeout=120)
  assert outer.returncode == 0, outer.stderr
  assert outer.stdout.split() == [
      "0", "True", tool_server.server_for(env).socket_path]
  # A real python process starts without TensorFlow.
  fresh = subprocess.run(
      [sys.executable, "-c", "import sys; print('tensorflow' in sys.modules)"],
      env=env, capture_output=True, text=True, timeout=120)
  assert fresh.stdout.strip() == "False"


def test_runs_a_fork_could_get_wrong_go_to_a_subprocess():
  env = tool_server.tool_env()
  assert tool_server.forkable([sys.executable, "-m", "albert_tf.x"], env)
  # The data_prep family's server imported our modules from the
  # repository: a process that cannot must not get them from a fork.
  assert not tool_server.forkable(
      [sys.executable, "-m", "data_prep.prepare_corpus"],
      dict(env, PYTHONPATH="/elsewhere"))
  for args in (["/usr/bin/python3", "-m", "albert_tf.x"],
               [sys.executable, "-X", "importtime", "-m", "albert_tf.x"],
               [sys.executable, "tool.sh"], "python -m albert_tf.x"):
    assert not tool_server.forkable(args, env)
  proc = tool_server.start([sys.executable, "-X", "dev", "-c", "pass"],
                           env=env)
  assert isinstance(proc, subprocess.Popen) and proc.wait(timeout=60) == 0
  os.environ["TOOL_SERVER"] = "0"
  try:
    assert not tool_server.forkable([sys.executable, "-m", "albert_tf.x"],
                                    env)
  finally:
    del os.environ["TOOL_SERVER"]


def test_a_socket_goes_to_tmp_when_the_temporary_directory_is_too_deep():
  """`bazel test`'s TMPDIR is deeper than an AF_UNIX path may be."""
  base = tempfile.mkdtemp(dir="/tmp")
  try:
    short = tool_server._socket_dir(base)  # pylint: disable=protected-access
    assert os.path.dirname(short) == base
    deep = os.path.join(base, "d" * 100)
    os.mkdir(deep)
    moved = tool_server._socket_dir(deep)  # pylint: disable=protected-access
    assert os.path.dirname(moved) == "/tmp"
    assert len(os.path.join(moved, "socket")) <= tool_server.SOCKET_PATH_MAX
    os.rmdir(moved)
  finally:
    shutil.rmtree(base)
