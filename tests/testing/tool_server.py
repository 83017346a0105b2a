"""The suite's tool runs without paying `import tensorflow` each time.

Tests run the command-line tools (`python -m albert_tf.run_pretraining
...`) as a user does, in a process of their own; ~4 CPU-s of each such run
is importing TensorFlow, tf_keras, TF Text and albert_tf. `run` and `start`
take the arguments of `subprocess.run` / `subprocess.Popen` and run the tool
in a fork of a per-worker server that has imported those modules once and
nothing more: no TensorFlow runtime (the eager context is created in the
fork, so logical devices, XLA and strategies are configured there as in a
fresh process), no flag of any tool, no tool module. The fork is a process
of its own (signals, kill -9 and exit codes as for a subprocess) and gets the
request's argv, working directory, environment and standard streams, runs
the tool the way `python -m` / `-c` / `python script.py` does (sys.path[0],
`__main__`, SystemExit codes, tracebacks, atexit) and its exit status
comes back as the process's.

Servers come in three families (FAMILIES): the TensorFlow tools', the
data_prep tools' (which import no TensorFlow; TensorFlow defines absl flags
of its own, which a tool that does not import it must not accept), and a
user's process (the repository not on PYTHONPATH: a served model's client,
TensorFlow's own tools), whose server imported TensorFlow alone, so that
a fork imports TF Text and anything of ours as a fresh process would. A run
goes to its family's server (`family`). The server's imports saw the
environment of the run: a run whose variables read while importing
(PYTHON*, TF_*, XLA_*, LD_*, ... but not RUNTIME_ENV's) differ from the
server's gets a server started in its own.
A console script of this interpreter (`#!<python>`) runs as `python script`,
as the kernel runs it. A run goes to a real subprocess instead when a fork
could differ from it otherwise: another interpreter, interpreter options
other than -m / -c, a data_prep tool without the repository on PYTHONPATH.
A tool that runs tools itself through `run` / `start`
(benchmarks/run_all.py under BENCH_RUN) has them forked from the same
server.

The server is tests/testing/fork_server.py.
"""

import atexit
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import typing

from tests.testing.repo_paths import ROOT

# Environment variables a process reads while importing the preloaded modules
# (or may: the prefixes): a run is forked by a server started with its own...
IMPORT_ENV_PREFIXES = ("PYTHON", "TF_", "XLA_", "KERAS", "OMP_", "MKL_",
                       "OPENBLAS", "LD_", "MALLOC", "TCMALLOC",
                       # tempfile's directory, which absl's --test_tmpdir
                       # default is made of when TensorFlow is imported.
                       "TMP", "TEMP")
# ...except these, read when a run uses them (or emulated per run).
RUNTIME_ENV = frozenset({"TF_CONFIG", "PYTHONUNBUFFERED",
                         "CUDA_VISIBLE_DEVICES"})


class Family(typing.NamedTuple):
  """What a family's server imports: what every process of the family
  imports (`theirs`), then the project's shared modules they import
  (`ours`, which must define no flag); `never`: top-level packages the
  server refuses to have imported."""
  theirs: typing.Tuple[str, ...]
  ours: typing.Tuple[str, ...] = ()
  never: typing.Tuple[str, ...] = ()


FAMILIES = {
    "tensorflow": Family(
        ("absl.app", "tensorflow", "tf_keras", "tensorflow_text"),
        ("albert_tf.cli_flags",)),
    "data_prep": Family(
        ("absl.app", "numpy", "sentencepiece", "apache_beam"),
        ("albert_toolkit.command_line", "albert_toolkit.tfrecord_io"),
        never=("tensorflow",)),
    "user": Family(
        ("tensorflow",),
        never=("albert_tf", "albert_toolkit", "data_prep", "official",
               "tf_keras", "tensorflow_text", "tensorflow_hub")),
}
# The data_prep tools that import TensorFlow: of the first family.
DATA_PREP_TF_TOOLS = frozenset({"inspect_tfrecord"})
READY = "tool_server ready"


def _import_env(env):
  return {k: v for k, v in env.items()
          if k.startswith(IMPORT_ENV_PREFIXES) and k not in RUNTIME_ENV}


def _server_key(env, family_name):
  """Which server a run of `family_name` in `env` goes to: the family's
  with the run's import-time variables."""
  return family_name, frozenset(_import_env(env).items())


def tool_env(**extra):
  """This process's environment for a tool of the repository: the
  repository on PYTHONPATH (as `make test` sets it), TensorFlow's C++ logs
  quiet, no GPU, unbuffered output; then `extra`."""
  return {**os.environ, "PYTHONPATH": ROOT, "TF_CPP_MIN_LOG_LEVEL": "2",
          "CUDA_VISIBLE_DEVICES": "", "PYTHONUNBUFFERED": "1", **extra}


def _repository_on_path(env):
  return ROOT in env.get("PYTHONPATH", "").split(os.pathsep)


def _data_prep_tool(args, cwd):
  """Whether `args` runs a data_prep tool that imports no TensorFlow."""
  if args[1] == "-m":
    package, _, tool = args[2].partition(".")
  elif args[1] == "-c":
    return False
  else:
    path = os.path.abspath(os.path.join(cwd or os.getcwd(), args[1]))
    package = (os.path.basename(os.path.dirname(path))
               if os.path.dirname(os.path.dirname(path)) == ROOT else None)
    tool = os.path.splitext(os.path.basename(path))[0]
  return package == "data_prep" and tool not in DATA_PREP_TF_TOOLS


def family(args, cwd=None, env=None):
  """The family of the run `args` (a subprocess argv) in `env`: "data_prep"
  for the data_prep tools that import no TensorFlow, "user" for another
  run whose PYTHONPATH lacks the repository (a user's process), else
  "tensorflow"."""
  if _data_prep_tool(args, cwd):
    return "data_prep"
  if env is not None and not _repository_on_path(env):
    return "user"
  return "tensorflow"


def _console_script(path):
  """Whether `path` is a script whose first line is `#!<this python>`."""
  if not os.path.isfile(path):
    return False
  with open(path, "rb") as f:
    first = f.readline(4096)
  if not first.startswith(b"#!"):
    return False
  interpreter = first[2:].strip().decode(errors="replace")
  return (os.path.basename(interpreter) == os.path.basename(sys.executable)
          and os.path.realpath(os.path.dirname(interpreter)) ==
          os.path.realpath(os.path.dirname(sys.executable)))


def as_python_run(args):
  """`args`, with a console script of this interpreter run as
  `python script ...`, the way the kernel runs it."""
  if (isinstance(args, (list, tuple)) and args and
      args[0] != sys.executable and _console_script(args[0])):
    return [sys.executable, *args]
  return args


# --- Client -------------------------------------------------------------------


# The longest path an AF_UNIX socket binds to on Linux (sun_path less its
# NUL); `bazel test`'s temporary directory, deep in its sandbox, is longer.
SOCKET_PATH_MAX = 107


def _socket_dir(base=None):
  """A new directory for a server's socket, in `base` (tempfile's
  directory), or in /tmp when that would make the socket's path too long."""
  base = base or tempfile.gettempdir()
  if len(os.fsencode(os.path.join(base, "tool_server_12345678",
                                  "socket"))) > SOCKET_PATH_MAX:
    base = "/tmp"
  return tempfile.mkdtemp(prefix="tool_server_", dir=base)


class _Server:
  """A server of `family_name` started in `env` (what its imports saw),
  stopped at exit."""

  def __init__(self, env, family_name):
    self.dir = _socket_dir()
    self.socket_path = os.path.join(self.dir, "socket")
    self.import_env = _import_env(env)
    self.proc = subprocess.Popen(
        [sys.executable, "-m", "tests.testing.fork_server", self.socket_path,
         family_name],
        cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True)
    line = self.proc.stdout.readline()
    if line.strip() != READY:
      self.proc.kill()
      raise RuntimeError(f"tool_server did not start: {line!r}")
    atexit.register(self.stop)

  def stop(self):
    if self.proc.poll() is None:
      self.proc.stdin.close()
      try:
        self.proc.wait(timeout=10)
      except subprocess.TimeoutExpired:
        self.proc.kill()
    shutil.rmtree(self.dir, ignore_errors=True)


class _Shared:
  """The server a tool was forked from, for the tools it runs in turn."""

  def __init__(self, socket_path):
    self.socket_path = socket_path

  def stop(self):
    pass  # the server's own client stops it


# Servers of this worker by family and the import-time variables they saw,
# least recently used first: the suite alternates between the three families
# and a few environments (its own, the benchmarks' TMPDIR, a tool's own
# changes), and a server costs its family's imports to start.
MAX_SERVERS = 5
_servers = {}
_server_lock = threading.Lock()


def server_for(env, family_name="tensorflow"):
  """The worker's server of `family_name` for `env`'s import-time
  variables, started when none has them; beyond MAX_SERVERS the least
  recently used ones stop."""
  key = _server_key(env, family_name)
  with _server_lock:
    server = _servers.pop(key, None) or _Server(env, family_name)
    _servers[key] = server
    while len(_servers) > MAX_SERVERS:
      _servers.pop(next(iter(_servers))).stop()
    return server


def register_own_server(socket_path, family_name):
  """In a server (tests/testing/fork_server.py): the tools forked from it
  send their own runs of its family and environment to it."""
  _servers[_server_key(os.environ, family_name)] = _Shared(socket_path)


def forkable(args, env, cwd=None):
  """Whether `args` (a subprocess argv; see `as_python_run`) can run in a
  fork of a server."""
  if os.environ.get("TOOL_SERVER") == "0":
    return False
  if not isinstance(args, (list, tuple)) or len(args) < 2:
    return False
  if args[0] != sys.executable:
    return False
  if args[1] in ("-m", "-c"):
    if len(args) < 3:
      return False
  elif args[1].startswith("-") or not (args[1].endswith(".py") or
                                       _console_script(args[1])):
    return False
  # The families that preload our modules imported them from ROOT: so must
  # the process.
  return family(args, cwd, env) == "user" or _repository_on_path(env)


class ForkedTool:
  """A tool running in a fork of the server: the part of `subprocess.Popen`
  the tests use (wait, poll, communicate, send_signal, kill, returncode,
  pid, args)."""

  def __init__(self, args, cwd=None, env=None, stdin=None, stdout=None,
               stderr=None, text=False, input_bytes=None):
    self.args = list(args)
    self.text = text
    self.returncode = None
    self._files = {}
    fds = [self._stdin_fd(stdin, input_bytes)]
    for name, spec in (("stdout", stdout), ("stderr", stderr)):
      if spec == subprocess.STDOUT:
        fds.append(fds[1])
      elif spec == subprocess.PIPE:
        self._files[name] = tempfile.TemporaryFile()
        fds.append(self._files[name].fileno())
      elif spec == subprocess.DEVNULL:
        self._files[name + "_null"] = open(os.devnull, "wb")  # pylint: disable=consider-using-with
        fds.append(self._files[name + "_null"].fileno())
      elif spec is None:
        fds.append(1 if name == "stdout" else 2)
      else:  # a file object or descriptor
        fds.append(spec if isinstance(spec, int) else spec.fileno())
    env = dict(os.environ if env is None else env)
    request = {"args": self.args[1:], "cwd": os.path.abspath(cwd or os.getcwd()),
               "env": env}
    self._conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    self._conn.connect(server_for(
        env, family(self.args, request["cwd"], env)).socket_path)
    socket.send_fds(self._conn, [json.dumps(request).encode()], fds)
    self._buffer = b""
    self.pid = self._message(None)["pid"]

  def _stdin_fd(self, stdin, input_bytes):
    if input_bytes is not None:
      f = tempfile.TemporaryFile()
      f.write(input_bytes)
      f.seek(0)
      self._files["stdin"] = f
      return f.fileno()
    if stdin is None or stdin == subprocess.DEVNULL:
      self._files["stdin"] = open(os.devnull, "rb")  # pylint: disable=consider-using-with
      return self._files["stdin"].fileno()
    return stdin if isinstance(stdin, int) else stdin.fileno()

  def _message(self, timeout):
    """The server's next line (a dict), None once it closed the connection."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while b"\n" not in self._buffer:
      left = None if deadline is None else max(0, deadline - time.monotonic())
      if not select.select([self._conn], [], [], left)[0]:
        raise subprocess.TimeoutExpired(self.args, timeout)
      chunk = self._conn.recv(4096)
      if not chunk:
        return None
      self._buffer += chunk
    line, self._buffer = self._buffer.split(b"\n", 1)
    return json.loads(line)

  def wait(self, timeout=None):
    if self.returncode is None:
      message = self._message(timeout)
      # No status: the server's fork died, which a real process cannot.
      self.returncode = message["returncode"] if message else -1
      self._conn.close()
      # What the tool read from or wrote away is done with; its output
      # files stay for communicate().
      for name in ("stdin", "stdout_null", "stderr_null"):
        f = self._files.pop(name, None)
        if f:
          f.close()
    return self.returncode

  def poll(self):
    if self.returncode is None:
      ready, _, _ = select.select([self._conn], [], [], 0)
      if ready:
        self.wait()
    return self.returncode

  def send_signal(self, sig):
    """To the tool's process (its own handlers run, as in a subprocess)."""
    if self.returncode is None:
      try:
        os.kill(self.pid, sig)
      except ProcessLookupError:
        pass  # already gone

  def kill(self):
    """SIGKILL to the tool and whatever it started."""
    if self.returncode is None:
      try:
        os.killpg(self.pid, signal.SIGKILL)
      except ProcessLookupError:
        pass  # already gone

  def _read(self, name):
    f = self._files.get(name)
    if f is None:
      return None
    f.seek(0)
    data = f.read()
    f.close()
    return data.decode(errors="replace") if self.text else data

  def communicate(self, timeout=None):
    self.wait(timeout)  # TimeoutExpired leaves it running, as Popen's does
    return self._read("stdout"), self._read("stderr")

  def __enter__(self):
    return self

  def __exit__(self, *exc_info):
    if getattr(self, "stdout", None) is not None:
      self.stdout.close()
    self.wait()


def _fork_args(args, env, cwd):
  """`args` as a fork runs them (`as_python_run`), or None when the run
  goes to a real subprocess."""
  python_args = as_python_run(args)
  return (python_args if forkable(python_args,
                                  os.environ if env is None else env, cwd)
          else None)


def start(args, *, cwd=None, env=None, stdin=None, stdout=None, stderr=None,
          text=False):
  """`subprocess.Popen(args, ...)`, in a fork of the server when it can be."""
  python_args = _fork_args(args, env, cwd)
  if python_args:
    return ForkedTool(python_args, cwd=cwd, env=env, stdin=stdin,
                      stdout=stdout, stderr=stderr, text=text)
  return subprocess.Popen(args, cwd=cwd, env=env, stdin=stdin, stdout=stdout,  # pylint: disable=consider-using-with
                          stderr=stderr, text=text)


def popen_streaming(args, *, env=None, cwd=None, errors="strict", **kwargs):
  """`subprocess.Popen(args, stdout=PIPE, stderr=STDOUT, text=True, ...)`
  as the demo streams a tool's output (examples/demo/tools.py, through
  DEMO_POPEN): a tool or one of the demo's clients runs in a fork of its
  family's server, its output read from a pipe as it comes. That the
  SavedModel client needs no albert_tf is checked on its source
  (tests/test_architecture.py)."""
  env = os.environ if env is None else env
  python_args = _fork_args(args, env, cwd)
  if not python_args:
    return subprocess.Popen(args, env=env, cwd=cwd, errors=errors, **kwargs)  # pylint: disable=consider-using-with
  read_fd, write_fd = os.pipe()
  try:
    proc = ForkedTool(python_args, cwd=cwd, env=env, stdout=write_fd,
                      stderr=subprocess.STDOUT)
  finally:
    os.close(write_fd)
  proc.stdout = open(read_fd, encoding="utf-8", errors=errors)  # pylint: disable=consider-using-with
  return proc


def run(args, *, cwd=None, env=None, input=None, capture_output=False,  # pylint: disable=redefined-builtin
        stdout=None, stderr=None, text=False, timeout=None, check=False):
  """`subprocess.run(args, ...)`, in a fork of the server when it can be."""
  python_args = _fork_args(args, env, cwd)
  if not python_args:
    return subprocess.run(args, cwd=cwd, env=env, input=input,
                          capture_output=capture_output, stdout=stdout,
                          stderr=stderr, text=text, timeout=timeout,
                          check=check)
  if capture_output:
    stdout = stderr = subprocess.PIPE
  data = input.encode() if isinstance(input, str) else input
  proc = ForkedTool(python_args, cwd=cwd, env=env, stdout=stdout,
                    stderr=stderr, text=text, input_bytes=data)
  try:
    out, err = proc.communicate(timeout=timeout)
  except subprocess.TimeoutExpired:
    proc.kill()  # as subprocess.run does
    proc.wait()
    raise
  result = subprocess.CompletedProcess(args, proc.returncode, out, err)
  if check:
    result.check_returncode()
  return result
