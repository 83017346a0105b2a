"""The data_prep tools run as their user runs them, for the data_prep tests:
a fork of the tool server of their family (tests/testing/tool_server.py),
and the one-line error they end with."""

import sys

from tests.testing import tool_server
from tests.testing.repo_paths import ROOT


def run_tool(module, *args, timeout=180):
  """`python -m data_prep.<module> args...` from the repository: the
  finished process, its output as text."""
  return tool_server.run([sys.executable, "-m", f"data_prep.{module}", *args],
                         capture_output=True, text=True,
                         env=tool_server.tool_env(), cwd=ROOT, timeout=timeout)


def error_line(proc):
  """The tool's error: exit code 1, one error line (the tool's or the flag
  parser's), no traceback."""
  assert proc.returncode == 1, proc.stderr
  assert "Traceback" not in proc.stderr, proc.stderr
  lines = [l for l in proc.stderr.splitlines()
           if ": error:" in l or "Flags parsing error" in l]
  assert len(lines) == 1, proc.stderr
  return lines[0]
