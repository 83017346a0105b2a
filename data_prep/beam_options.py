"""Beam pipeline options for beam_pretraining_data, checked before a run.

Our flags are parsed first and Beam gets whatever is left. Beam drops the
arguments it does not know (`--dupe-factor=5`, or `dupe_factor=5` without
dashes) with a log line, and its DirectRunner quietly runs
one thread when several workers are asked for in the default `in_memory`
mode. Either way a run would go ahead with a setting the user did not get (a
mistyped `--dupe_factor` would fall back to 40), so both are refused here
with a one-line ValueError, and our `--num_workers` becomes the runner's own
worker option. The DaskRunner (the optional dask extra) is known by its
short name here; the Dask options this pipeline would not use are refused.
"""

import os

from apache_beam.options.pipeline_options import DirectOptions
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability.fn_api_runner import fn_runner
from apache_beam.runners.runner import PipelineState

from albert_toolkit import command_line

try:  # The optional extra apache-beam[dask]; imported, it defines --dask_*.
  from apache_beam.runners.dask import dask_runner
except ImportError:
  dask_runner = None

_DIRECT = ("directrunner", "direct")
_DATAFLOW = ("dataflowrunner", "dataflow")
_DASK = ("daskrunner", "dask",
         "apache_beam.runners.dask.dask_runner.daskrunner")
# Dask partitions of the read and instance stages without --dask_npartitions:
# a few per worker process of a small cluster (beam_pipeline._read_partitions).
DASK_PARTITIONS = 16


def is_direct(runner_name):
  return runner_name.lower() in _DIRECT


def is_dask(runner_name):
  return runner_name.lower() in _DASK


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
  """Checked options of `beam_args` (the arguments our flags did not take):
  (PipelineOptions, runner name, the arguments used). `num_workers` (our
  --num_workers when given, else None) becomes --direct_num_workers on the
  DirectRunner and --num_workers on Dataflow; other runners have their own
  settings (Flink: --parallelism)."""
  args = list(beam_args)
  _check_all_parsed(args)
  known = PipelineOptions(args).get_all_options()
  runner = known.get("runner") or "DirectRunner"
  if is_direct(runner):
    args += _direct_worker_args(args, known, num_workers)
  elif is_dask(runner):
    _check_dask(args, known, num_workers)
  elif num_workers is not None:
    if runner.lower() not in _DATAFLOW:
      raise ValueError(f"--num_workers is not used by {runner}: set the "
                       "runner's own parallelism (Flink: --parallelism)")
    args.append(f"--num_workers={num_workers}")
  return PipelineOptions(args), runner, args


def _check_dask(args, known, num_workers):
  """ValueError for a DaskRunner run that would not do what it says."""
  if dask_runner is None:
    raise ValueError("--runner=DaskRunner needs the dask extra: pip install "
                     "-e '.[dask]' (apache-beam[dask], dask and distributed "
                     "as requirements.txt pins them)")
  if num_workers is not None:
    raise ValueError("--num_workers is not used by DaskRunner: the Dask "
                     "cluster has its worker processes (dask worker "
                     "--nworkers; docs/data_prep.md)")
  if _given(args, "dask_partition_size"):
    raise ValueError("--dask_partition_size is not used by this pipeline "
                     "(its Creates have one element each): set "
                     "--dask_npartitions, the read and instance partitions")
  if known.get("npartitions") is not None and known["npartitions"] < 1:
    raise ValueError(f"--dask_npartitions={known['npartitions']}: must be "
                     "at least 1")


def direct_workers(options, runner_name):
  """The DirectRunner's worker count (0 means one per CPU); else None."""
  if not is_direct(runner_name):
    return None
  return options.view_as(DirectOptions).direct_num_workers or os.cpu_count()


def partitions(options, runner_name):
  """Collections the blocks are dealt into: the DaskRunner's partitions of
  the instance stage (--dask_npartitions), 1 on other runners."""
  if not is_dask(runner_name):
    return 1
  return (options.view_as(dask_runner.DaskOptions).npartitions
          or DASK_PARTITIONS)


def make_runner(runner_name):
  """The DirectRunner means Beam's FnApiRunner here, DaskRunner Beam's
  DaskRunner (Beam knows it only by its full class name); others as named.

  Beam 2.77's DirectRunner first tries the Prism runner, which it downloads
  from GitHub and which ignores --direct_num_workers; the FnApiRunner (its
  fallback) runs offline and honours --direct_num_workers and
  --direct_running_mode. None: Beam builds the runner from the options.
  """
  if is_direct(runner_name):
    return fn_runner.FnApiRunner()
  return dask_runner.DaskRunner() if is_dask(runner_name) else None


def release(pipeline):
  """Stops what a run left on a cluster: the DaskRunner's client, which Beam
  leaves open (it would keep reconnecting to a cluster that shut down) with
  the run's tasks still scheduled when it failed. No-op for other runners."""
  result = getattr(pipeline, "result", None)
  client = getattr(result, "client", None)
  if client is None:
    return
  if result.state != PipelineState.DONE:
    result.cancel()
  client.close()
