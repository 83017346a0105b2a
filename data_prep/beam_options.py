"""Beam pipeline options for beam_pretraining_data, checked before a run.

Our flags are parsed first and Beam gets whatever is left. Beam drops the
arguments it does not know (`--dupe-factor=5`, or `dupe_factor=5` without
dashes) with a log line, and its DirectRunner quietly runs
one thread when several workers are asked for in the default `in_memory`
mode. Either way a run would go ahead with a setting the user did not get (a
mistyped `--dupe_factor` would fall back to 40), so both are refused here
with a one-line ValueError, and our `--num_workers` becomes the runner's own
worker option.
"""

import os

from apache_beam.options.pipeline_options import DirectOptions
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability.fn_api_runner import fn_runner

from data_prep import command_line

_DIRECT = ("directrunner", "direct")
_DATAFLOW = ("dataflowrunner", "dataflow")


def is_direct(runner_name):
  return runner_name.lower() in _DIRECT


def _given(args, name):
  """True if `--name` is among `args` (as `--name=V` or `--name V`)."""
  flag = f"--{name}"
  return any(a == flag or a.startswith(flag + "=") for a in args)


def _direct_worker_args(args, known, num_workers):
  """Arguments to add so the DirectRunner runs the workers asked for."""
  extra = []
  workers = known.get("direct_num_workers")
  if num_workers is not None:
    if _given(args, "direct_num_workers") and workers != num_workers:
      raise ValueError(f"--num_workers={num_workers} and "
                       f"--direct_num_workers={workers} disagree")
    if not _given(args, "direct_num_workers"):
      extra.append(f"--direct_num_workers={num_workers}")
    workers = num_workers
  if workers != 1:  # 0 means one per CPU
    mode = known.get("direct_running_mode")
    if not _given(args, "direct_running_mode"):
      # The work is CPU-bound Python: threads would share one core.
      extra.append("--direct_running_mode=multi_processing")
    elif mode == "in_memory":
      raise ValueError(f"--direct_running_mode=in_memory runs one worker, "
                       f"not the {workers or 'one per CPU'} asked for; use "
                       "--direct_running_mode=multi_processing")
  return extra


def _unparsed(args):
  """The words of `args` that Beam's option parser does not take, as typed
  (Beam itself drops them with a log line)."""
  parsers = []
  PipelineOptions(args).get_all_options(add_extra_args_fn=parsers.append)
  return parsers[0].parse_known_args(args)[1]


def _check_all_parsed(args):
  """ValueError naming the unknown flags and the words that are not flags."""
  unparsed = _unparsed(args)
  unknown = [command_line.unknown_flag_name(w) for w in unparsed
             if w.startswith("-")]
  strays = [w for w in unparsed if not w.startswith("-")]
  problems = []
  if unknown:
    problems.append(f"unknown flag {', '.join(unknown)}: neither a flag of "
                    "this tool nor a Beam pipeline option")
  if strays:
    problems.append(command_line.stray_words_error(strays))
  if problems:
    raise ValueError("; ".join(problems))


def pipeline_options(beam_args, num_workers=None):
  """Checked options: (PipelineOptions, runner name, the arguments used).

  Args:
    beam_args: the command-line arguments our flags did not take.
    num_workers: our --num_workers when it was given, else None. It becomes
      --direct_num_workers on the DirectRunner and --num_workers on Dataflow;
      other runners have their own settings (Flink: --parallelism).
  """
  args = list(beam_args)
  _check_all_parsed(args)
  known = PipelineOptions(args).get_all_options()
  runner = known.get("runner") or "DirectRunner"
  if is_direct(runner):
    args += _direct_worker_args(args, known, num_workers)
  elif num_workers is not None:
    if runner.lower() not in _DATAFLOW:
      raise ValueError(f"--num_workers is not used by {runner}: set the "
                       "runner's own parallelism (Flink: --parallelism)")
    args.append(f"--num_workers={num_workers}")
  return PipelineOptions(args), runner, args


def direct_workers(options, runner_name):
  """The DirectRunner's worker count (0 means one per CPU); else None."""
  if not is_direct(runner_name):
    return None
  return options.view_as(DirectOptions).direct_num_workers or os.cpu_count()


def make_runner(runner_name):
  """The DirectRunner means Beam's FnApiRunner here; others as named.

  Beam 2.77's DirectRunner first tries the Prism runner, which it downloads
  from GitHub and which ignores --direct_num_workers; the FnApiRunner (its
  fallback) runs offline and honours --direct_num_workers and
  --direct_running_mode. None: Beam builds the runner from the options.
  """
  return fn_runner.FnApiRunner() if is_direct(runner_name) else None
