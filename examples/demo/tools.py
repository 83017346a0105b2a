"""Running the project's command-line tools as subprocesses (the demo uses
them the way a user would), and reading what they leave behind."""

import importlib
import json
import os
import re
import resource
import subprocess
import sys
import time


_ABSL_PREFIX = re.compile(r"^[IWEF]\d{4} [\d:.]+\s+\d+ ([\w.]+):\d+\] ")
_TF_PREFIX = re.compile(r"^\d{4}-\d\d-\d\d [\d:.]+: [IWE] \S+\] ")
# Start-up chatter of TensorFlow on CPU: kept in the log file, not shown.
_NOISE = ("Could not find cuda", "oneDNN custom operations",
          "cpu_feature_guard", "To enable the following instructions",
          "absl::InitializeLog", "rebuild TensorFlow", "cuda_executor",
          "failed call to cuInit", "computation placer",
          "Unable to register cu", "TF-TRT Warning", "E0000 00:00",
          "All log messages before", "WARNING: All log messages",
          "oneDNN", "tensorflow/core/util/port.cc",
          "Preparing metadata", "Collecting ", "Saved ", "Successfully",
          "Sharding callback duration", "with unsupported characters")


class ToolError(RuntimeError):
  pass


def _shown(line):
  if any(n in line for n in _NOISE):
    return None
  line = _ABSL_PREFIX.sub("", line)
  line = _TF_PREFIX.sub("", line)
  return line


def child_cpu_seconds():
  r = resource.getrusage(resource.RUSAGE_CHILDREN)
  s = resource.getrusage(resource.RUSAGE_SELF)
  return r.ru_utime + r.ru_stime + s.ru_utime + s.ru_stime


def _popen():
  """subprocess.Popen, or what DEMO_POPEN ("module:function", same
  arguments) names: the test suite runs the tools in forks of a process that
  imported TensorFlow once (tests/testing/tool_server.py)."""
  module, _, name = os.environ.get("DEMO_POPEN", "").partition(":")
  return getattr(importlib.import_module(module), name) if module else (
      subprocess.Popen)


def run_tool(args, log_path, env=None, show=True, show_filter=None,
             cwd=None):
  """Runs `python -m <args...>`, streaming its output (indented) and saving it.

  Returns the captured output lines. Raises ToolError with the command, the
  exit code and the last lines of output when it fails.
  """
  cmd = [sys.executable] + list(args)
  full_env = dict(os.environ)
  full_env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  # The tools use tf_keras only; without this `import tensorflow` imports
  # Keras 3 too (and with it scikit-learn and matplotlib): ~1.5 s a tool.
  full_env.setdefault("TF_USE_LEGACY_KERAS", "1")
  full_env["PYTHONUNBUFFERED"] = "1"
  repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  full_env["PYTHONPATH"] = os.pathsep.join(
      [repo] + [p for p in full_env.get("PYTHONPATH", "").split(os.pathsep)
                if p and p != repo])
  full_env.update(env or {})
  os.makedirs(os.path.dirname(log_path), exist_ok=True)
  print("  $ python " + " ".join(_quote(a) for a in args), flush=True)
  lines = []
  start = time.time()
  with open(log_path, "w", encoding="utf-8") as log, _popen()(
      cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
      env=full_env, cwd=cwd, bufsize=1, errors="replace") as proc:
    log.write("$ " + " ".join(cmd) + "\n")
    for raw in proc.stdout:
      raw = raw.rstrip("\n")
      log.write(raw + "\n")
      lines.append(raw)
      if not show:
        continue
      line = _shown(raw)
      if line is None or not line.strip():
        continue
      if show_filter is not None and not show_filter(line):
        continue
      print(f"  | {line}", flush=True)
    code = proc.wait()
  if code:
    tail = "\n".join("    " + l for l in lines[-25:])
    raise ToolError(f"command failed (exit code {code}, "
                    f"{time.time() - start:.0f} s): {' '.join(cmd)}\n"
                    f"last output lines (full log: {log_path}):\n{tail}")
  return lines


def _quote(a):
  return f"'{a}'" if any(c in a for c in " *?$\"'()") else a


# --- Metrics and files --------------------------------------------------------


def read_metrics(model_dir, mode):
  """Records of `mode` ("train" / "eval") in <model_dir>/metrics.jsonl."""
  path = os.path.join(model_dir, "metrics.jsonl")
  out = []
  if not os.path.exists(path):
    return out
  with open(path, encoding="utf-8") as f:
    for line in f:
      if line.strip():
        rec = json.loads(line)
        if rec.get("mode") == mode:
          out.append(rec)
  return out


def dir_size(path):
  if os.path.isfile(path):
    return os.path.getsize(path)
  total = 0
  for root, _, files in os.walk(path):
    for name in files:
      total += os.path.getsize(os.path.join(root, name))
  return total


def human_bytes(n):
  for unit in ("B", "KB", "MB", "GB"):
    if n < 1024 or unit == "GB":
      return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
    n /= 1024.0
  return f"{n:.1f} GB"

