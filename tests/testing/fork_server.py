"""The server of tests/testing/tool_server.py: imports its family's modules
once, then forks a process for each tool run a client sends (a fork per
connection, which forks the tool and reports its pid and exit status).

  python -m tests.testing.fork_server SOCKET FAMILY   (started by the client)
"""

import atexit
import importlib
import json
import os
import runpy
import select
import socket
import sys
import threading
import traceback
import types

from absl import flags

from tests.testing import suite_gc
from tests.testing import tool_server


def _preload(family_name):
  """Imports the family's modules; refuses to serve if ours defined a flag
  (a tool run in a fork would accept it), if a package the family must not
  have was imported (TensorFlow in the data_prep family, anything of ours
  in a user's process), or if anything started the TensorFlow runtime (a
  fork would then not be a fresh process)."""
  family = tool_server.FAMILIES[family_name]
  # In this process only: every fork inherits them.
  for name in family.theirs:
    importlib.import_module(name)
  before = set(flags.FLAGS)
  for name in family.ours:
    importlib.import_module(name)
  added = set(flags.FLAGS) - before
  if added:
    raise RuntimeError(f"preloading defined flags {sorted(added)}")
  refused = sorted({m.split(".")[0] for m in sys.modules} & set(family.never))
  if refused:
    raise RuntimeError(f"preloading the {family_name} family imported "
                       f"{', '.join(refused)}")
  if "tensorflow" not in family.theirs:
    return
  from tensorflow.python.eager import context  # pylint: disable=g-import-not-at-top
  if context.context()._context_handle is not None:  # pylint: disable=protected-access
    raise RuntimeError("preloading started the TensorFlow runtime")


def _run_tool(request):
  """In the fork: becomes the requested process; never returns."""
  code = 1
  try:
    os.setpgrp()  # the client's kill reaches the tool's own children
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    if request["env"].get("PYTHONUNBUFFERED"):
      sys.stdout.reconfigure(write_through=True)
      sys.stderr.reconfigure(write_through=True)
    atexit._clear()  # pylint: disable=protected-access
    sys.modules["__main__"] = types.ModuleType("__main__")  # not the server's
    args = request["args"]
    if args[0] == "-c":
      sys.argv = ["-c"] + args[2:]
      sys.path[0] = ""
      exec(compile(args[1], "<string>", "exec"),  # pylint: disable=exec-used
           sys.modules["__main__"].__dict__)
    elif args[0] == "-m":
      sys.argv = [args[1]] + args[2:]  # runpy puts the file in argv[0]
      sys.path[0] = request["cwd"]
      runpy._run_module_as_main(args[1], alter_argv=True)  # pylint: disable=protected-access
    else:
      path = os.path.abspath(args[0])
      sys.argv = [args[0]] + args[1:]
      sys.path[0] = os.path.dirname(path)
      runpy.run_path(path, run_name="__main__")
    code = 0
  except SystemExit as e:
    if e.code is None:
      code = 0
    elif isinstance(e.code, int):
      code = e.code
    else:
      print(e.code, file=sys.stderr)
      code = 1
  except BaseException:  # pylint: disable=broad-except
    traceback.print_exc()
    code = 1
  try:
    threading._shutdown()  # pylint: disable=protected-access
    atexit._run_exitfuncs()  # pylint: disable=protected-access
    sys.stdout.flush()
    sys.stderr.flush()
  finally:
    os._exit(code & 0xFF)  # pylint: disable=protected-access


def _serve_connection(conn):
  """In the first fork: forks the tool, reports its pid, then its status;
  never returns (whatever fails, this fork must not go on as a server)."""
  try:
    data, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
    request = json.loads(data)
    pid = os.fork()
    if pid == 0:
      conn.close()
      for fd, target in zip(fds, (0, 1, 2)):
        os.dup2(fd, target)
      for fd in fds:
        os.close(fd)
      _run_tool(request)
    try:
      os.setpgid(pid, pid)  # also done in the fork: whichever runs first
    except OSError:
      pass  # the fork did it (or has already exited)
    for fd in fds:
      os.close(fd)
    conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    _, status = os.waitpid(pid, 0)
    conn.sendall(json.dumps({"returncode": os.waitstatus_to_exitcode(status)})
                 .encode() + b"\n")
    conn.close()
  finally:
    os._exit(0)  # pylint: disable=protected-access


def serve(socket_path, family_name):
  _preload(family_name)
  suite_gc.settle()  # the forks inherit it
  # The client a forked tool imports sends the tool's own runs here.
  tool_server.register_own_server(socket_path, family_name)
  listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
  listener.bind(socket_path)
  listener.listen(16)
  print(tool_server.READY, flush=True)
  children = set()
  while True:
    # Stops when the client (the pytest worker) closes our stdin or dies.
    ready, _, _ = select.select([listener, sys.stdin], [], [], 1.0)
    if sys.stdin in ready and not os.read(sys.stdin.fileno(), 1):
      break
    if listener in ready:
      conn, _ = listener.accept()
      sys.stdout.flush()
      sys.stderr.flush()
      pid = os.fork()
      if pid == 0:
        listener.close()
        _serve_connection(conn)
      conn.close()
      children.add(pid)
    _reap(children)
  _reap(children)  # their CPU time counts in the client's RUSAGE_CHILDREN


def _reap(children):
  for pid in list(children):
    if os.waitpid(pid, os.WNOHANG)[0]:
      children.discard(pid)


if __name__ == "__main__":
  serve(sys.argv[1], sys.argv[2])
