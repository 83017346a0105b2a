"""What every benchmark shares: steady-state, alternating timing with the
machine's load recorded beside it, and data made the way users make it.

Timing protocol (`Alternation`): the compared sides are called in rounds,
one call each per round, in an order that flips every round (A B, B A, ...),
so load that comes and goes lands on both. Rounds are warm-up until each
side's median over the last `window` rounds agrees with its median over the
`window` rounds before within `tolerance` (a fresh process's first calls
trace, compile and fill caches; the ALBERT-base step takes about 5 steps to
settle), or until `max_warmup` rounds; then `rounds` timed rounds. The ratio
of two sides is the median of their per-round ratios: each round's pair ran
under nearly the same load.

`load()` records the load average and a dense float32 matmul rate measured
in the same process, so a figure can be read against the machine it ran on.

`bench_run` starts the scripts and children that import TensorFlow: a real
`python` process each, or (BENCH_RUN) a fork of one that imported it once.
"""

import importlib
import os
import platform
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BOTCHAN = os.path.join(ROOT, "tests", "testdata", "botchan.txt")


def window_settled(times, window, tolerance):
  """True when the medians of the last two `window`-long runs of `times`
  agree within `tolerance` (relative to the later one)."""
  if window < 1 or len(times) < 2 * window:
    return False
  before = statistics.median(times[-2 * window:-window])
  last = statistics.median(times[-window:])
  return abs(before - last) <= tolerance * last


class Alternation:
  """Per-round times of sides called alternately, warm-up then timed rounds.

  Use: `for order in alt: alt.add_round({name: seconds for name in order})`,
  or call `add_round` from wherever the rounds happen and stop at `done`.
  """

  def __init__(self, names, window=3, tolerance=0.05, max_warmup=12,
               rounds=5):
    self.names = list(names)
    self.window, self.tolerance = window, tolerance
    self.max_warmup, self.rounds = max_warmup, rounds
    self.warmup = {n: [] for n in self.names}
    self.timed = {n: [] for n in self.names}
    self.warming_up = True
    self.settled = False

  def order(self):
    """The sides in this round's call order (flips every round)."""
    done = len(self.warmup[self.names[0]]) + len(self.timed[self.names[0]])
    return self.names if done % 2 == 0 else self.names[::-1]

  def add_round(self, seconds):
    """Records one round: {name: seconds} for every side."""
    if not self.warming_up:
      for n in self.names:
        self.timed[n].append(seconds[n])
      return
    for n in self.names:
      self.warmup[n].append(seconds[n])
    self.settled = all(window_settled(self.warmup[n], self.window,
                                      self.tolerance) for n in self.names)
    if self.settled or len(self.warmup[self.names[0]]) >= self.max_warmup:
      self.warming_up = False

  @property
  def done(self):
    return not self.warming_up and len(self.timed[self.names[0]]) >= \
        self.rounds

  def __iter__(self):
    while not self.done:
      yield self.order()

  def ratio(self, a, b):
    """Median over timed rounds of time(a) / time(b)."""
    return statistics.median(x / y for x, y in zip(self.timed[a],
                                                   self.timed[b]))

  def summary(self):
    """Medians and spread per side, and how the warm-up ended."""
    out = {"warmup_rounds": len(self.warmup[self.names[0]]),
           "settled": self.settled, "timed_rounds": len(
               self.timed[self.names[0]]), "sides": {}}
    for n in self.names:
      t = sorted(self.timed[n])
      out["sides"][n] = {"median_s": statistics.median(t), "min_s": t[0],
                         "max_s": t[-1],
                         "warmup_s": [round(x, 4) for x in self.warmup[n]]}
    return out


def percentile(values, q):
  """q-th percentile (0-100) by linear interpolation, as numpy's default."""
  values = sorted(values)
  pos = (len(values) - 1) * q / 100.0
  lo = int(pos)
  hi = min(lo + 1, len(values) - 1)
  return values[lo] + (values[hi] - values[lo]) * (pos - lo)


# --smoke measures nothing: its matmul-rate checks only have to run.
SMOKE_MATMUL_SECONDS = 0.1


def matmul_gflops(seconds=2.0, dtype="float32"):
  """Dense GEMM rate (GFLOP/s) at training-like shapes, in `dtype`
  ("float32" or "bfloat16": what a mixed_bfloat16 model's matmuls run in)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  a = tf.cast(tf.random.normal([1024, 768]), dtype)
  b = tf.cast(tf.random.normal([768, 3072]), dtype)
  step = tf.function(lambda: tf.reduce_sum(tf.matmul(a, b)))
  step()
  n, start = 0, time.perf_counter()
  while time.perf_counter() - start < seconds:
    step().numpy()
    n += 1
  elapsed = time.perf_counter() - start
  return 2 * 1024 * 768 * 3072 * n / elapsed / 1e9


# The CPU features that decide low-precision speed: int8 dot products
# (VNNI), bfloat16 dot products (BF16), and Intel's matrix tiles (AMX).
CPU_FLAGS = ("avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16", "amx_int8")


def read_cpuinfo(cpuinfo="/proc/cpuinfo"):
  """(model name, [every flag]) of the first CPU in `cpuinfo`; ("unknown",
  []) where the file cannot be read."""
  model, flags = "unknown", None
  try:
    with open(cpuinfo, encoding="utf-8") as f:
      for line in f:
        key, _, value = line.partition(":")
        if key.strip() == "model name" and model == "unknown":
          model = value.strip()
        elif key.strip() == "flags" and flags is None:
          flags = value.split()
  except OSError:
    pass
  return model, flags or []


def cpu_info(cpuinfo="/proc/cpuinfo"):
  """{"model": the CPU's model name, "flags": {flag: present} for
  CPU_FLAGS}; the model is "unknown" and every flag False where the file
  cannot be read."""
  model, flags = read_cpuinfo(cpuinfo)
  return {"model": model, "flags": {f: f in flags for f in CPU_FLAGS}}


def machine():
  """"N cores, <CPU model>, Python x.y.z": where a result was measured."""
  model = cpu_info()["model"]
  if model == "unknown":
    model = platform.processor() or model
  return f"{os.cpu_count()} cores, {model}, Python {platform.python_version()}"


def stamp():
  """When and where: {"timestamp", "machine"} for a result file."""
  return {"timestamp": time.strftime("%Y-%m-%d %H:%M:%S"),
          "machine": machine()}


def load(matmul_seconds=2.0):
  """The machine's state now: 1-minute load average, CPUs, matmul rate."""
  return {"loadavg_1min": round(os.getloadavg()[0], 2),
          "cpu_count": os.cpu_count(),
          "matmul_gflops": round(matmul_gflops(matmul_seconds), 1)}


def run_tool(args, log_path=None):
  """Runs `python <args>` from the repository root; raises RuntimeError
  with the tail of its error output if it fails. With `log_path`, stdout
  and stderr go to that file (to follow a long run) instead of memory."""
  env = dict(os.environ, PYTHONPATH=ROOT)
  if log_path is None:
    proc = subprocess.run([sys.executable, *args], cwd=ROOT, text=True,
                          capture_output=True, env=env)
    tail = proc.stderr[-3000:]
  else:
    with open(log_path, "w", encoding="utf-8") as log:
      proc = subprocess.run([sys.executable, *args], cwd=ROOT, text=True,
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    with open(log_path, encoding="utf-8") as log:
      tail = log.read()[-3000:]
  if proc.returncode:
    raise RuntimeError(f"{' '.join(args[:2])} failed:\n{tail}")


def bench_run(cmd, **kwargs):
  """`subprocess.run(cmd, **kwargs)` for a `python` command importing
  TensorFlow, or what BENCH_RUN ("module:function", same arguments) names:
  the smoke test (tests/benchmarks) runs them in forks of a process that
  imported TensorFlow once (tests/testing/tool_server.py: a fork starts with
  that process's memory, so its peak RSS is not a fresh process's)."""
  module, _, name = os.environ.get("BENCH_RUN", "").partition(":")
  run = (getattr(importlib.import_module(module), name) if module
         else subprocess.run)
  return run(cmd, **kwargs)


def run_checked(cmd):
  """Runs `cmd` (a `python` command importing TensorFlow, from the
  repository root, which is on its PYTHONPATH); returns its stdout, or
  raises RuntimeError with its stderr's tail."""
  proc = bench_run(cmd, cwd=ROOT, text=True, capture_output=True,
                   env=dict(os.environ, PYTHONPATH=ROOT))
  if proc.returncode:
    raise RuntimeError(f"{' '.join(cmd[:3])} failed:\n{proc.stderr[-3000:]}")
  return proc.stdout


def _proc_status_mb(field):
  """A /proc/self/status memory field (VmRSS, VmHWM) in MB; None if absent."""
  try:
    with open("/proc/self/status", encoding="utf-8") as f:
      for line in f:
        if line.startswith(field + ":"):
          return int(line.split()[1]) / 1024
  except OSError:
    pass
  return None


def own_rss_mb():
  """This process's resident memory now (MB)."""
  return _proc_status_mb("VmRSS")


def own_peak_rss_mb():
  """This process's peak RSS: VmHWM, not ru_maxrss.

  ru_maxrss survives fork + exec: a child started by a 4 GB parent reports at
  least 4 GB, whatever it used itself. VmHWM belongs to the new address space.
  """
  peak = _proc_status_mb("VmHWM")
  if peak is None:
    import resource  # pylint: disable=g-import-not-at-top
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
  return peak


def sentencepiece_model(workdir, vocab_size):
  """botchan -> prepare_corpus -> train_sentencepiece, as users do.

  Returns (corpus path, model path); cached in `workdir`.
  """
  corpus = os.path.join(workdir, "botchan_corpus.txt")
  prefix = os.path.join(workdir, f"spm{vocab_size}")
  if not os.path.exists(corpus):
    run_tool(["-m", "data_prep.prepare_corpus", f"--input_file={BOTCHAN}",
               f"--output_file={corpus}", "--doc_boundary=regex",
               r"--doc_regex=^CHAPTER [IVXLC]+\.?$"])
  if not os.path.exists(prefix + ".model"):
    run_tool(["-m", "data_prep.train_sentencepiece",
               f"--input_file={corpus}", f"--model_prefix={prefix}",
               f"--vocab_size={vocab_size}", "--num_threads=2"])
  return corpus, prefix + ".model"


def pretraining_data(workdir, seq, predictions, vocab_size, dupe_factor=2):
  """Pretraining TFRecords made by the data_prep command-line tools (which
  also write the summary the trainer checks). Returns the record path."""
  corpus, model = sentencepiece_model(workdir, vocab_size)
  out = os.path.join(workdir, f"train_v{vocab_size}_s{seq}_p{predictions}"
                     f".tfrecord")
  if not os.path.exists(out):
    run_tool(["-m", "data_prep.create_pretraining_data",
               f"--input_file={corpus}", f"--output_file={out}",
               f"--spm_model_file={model}", f"--max_seq_length={seq}",
               f"--max_predictions_per_seq={predictions}",
               f"--dupe_factor={dupe_factor}", "--progress_interval=0"])
  return out
