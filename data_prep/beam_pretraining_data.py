r"""create_pretraining_data on Apache Beam (Dataflow, Flink, Spark, Dask,
Direct).

Same flags as create_pretraining_data plus Beam's pipeline options, and the
same instances as the local tool (the transforms: data_prep/beam_pipeline.py).
The outputs are claimed first, as the local tool claims them (a hidden lock
file naming this process; a second run onto them stops with one line naming
the output and its owner). Shards go to a hidden temporary directory next to
the output; this launcher renames them after the pipeline succeeded and writes
the summary last (counts and skip counters computed in the pipeline).

Example (local, 2 processes):
  python -m data_prep.beam_pretraining_data --input_file=corpus/*.txt \
    --output_file=out/train.tfrecord@16 --spm_model_file=30k-clean.model \
    --max_seq_length=512 --dupe_factor=40 \
    --runner=DirectRunner --direct_running_mode=multi_processing \
    --direct_num_workers=2
"""

import collections
import json
import sys
import time

from absl import app
from absl import flags
import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from data_prep import beam_options
from data_prep import beam_pipeline
from data_prep import create_pretraining_data as cpd
from albert_toolkit import command_line
from albert_toolkit import output_files
from data_prep import pretraining_config
from data_prep import pretraining_summary
from data_prep import shard_sets
from data_prep import text_reader
from albert_toolkit import tfrecord_io

FLAGS = flags.FLAGS
TOOL = beam_pipeline.TOOL


def _load_model(run_cfg):
  """The vocabulary file's bytes (SentencePiece model or WordPiece
  vocabulary) from any filesystem, checked by loading them."""
  path = run_cfg.vocab_path
  try:
    with beam_pipeline.open_any(path) as f:
      data = f.read()
  except Exception as e:  # Beam raises its own IOError/BeamIOError types.
    what = ("WordPiece vocabulary" if run_cfg.vocab_file else
            "SentencePiece model")
    raise OSError(f"Cannot read {what} {path}: {e}") from e
  return data, run_cfg.tokenizer(data).vocab_size


def _finalize(temp_dir, input_files, output_paths, stale_summaries):
  """Temporary shards -> final names. Returns (records per file, stats).

  Refuses, before any rename, a run that made no instance or left a shard
  without a record (as the local tool does); then deletes the
  `stale_summaries` of the outputs it replaces, before replacing them.
  """
  with FileSystems.open(f"{temp_dir}/{beam_pipeline.RESULT}") as f:
    result = json.loads(f.read().decode())
  counts = {int(k): v for k, v in result["counts"].items()}
  stats = collections.Counter(result["stats"])
  if not stats["instances"]:
    raise ValueError(cpd.no_instances_message(input_files, stats))
  records_per_file = {p: counts.get(i, 0) for i, p in enumerate(output_paths)}
  shard_sets.check_no_empty_shards(records_per_file, stats["instances"],
                                   hashed=True)
  for stale in stale_summaries:
    _delete(stale)
  FileSystems.rename([f"{temp_dir}/shard-{i:05d}"
                      for i in range(len(output_paths))], list(output_paths))
  return records_per_file, stats


def _sizes(paths):
  """{path: size in bytes} of files on any filesystem."""
  return {path: FileSystems.match([path])[0].metadata_list[0].size_in_bytes
          for path in paths}


def _delete(path):
  if FileSystems.exists(path):
    FileSystems.delete([path])


def run(input_files, output_paths, run_cfg, pipeline_args=(),
        compression="NONE", docs_per_block=64, max_line_chars=100000,
        max_lines_per_document=20000, summary_file=None,
        progress_interval=5.0, num_workers=None):
  """Runs the pipeline; returns the summary dict (also written as JSON).

  `pipeline_args` are Beam's command-line options; `num_workers`, when not
  None, the runner's worker count (beam_options.pipeline_options).
  """
  options, runner_name, beam_args = beam_options.pipeline_options(
      pipeline_args, num_workers)
  summary_file = pretraining_config.check_files(
      input_files, output_paths, summary_file, run_cfg,
      beam_pipeline.match_any)
  model_bytes, vocab_size = _load_model(run_cfg)
  run_cfg.check_vocab_size(vocab_size)
  # Claimed as the local tool claims them, before anything is deleted: a
  # second run onto the same outputs would delete this one's temporary
  # shards (one temporary directory per output name) or mix its files in.
  with output_files.OutputClaim(output_paths):
    _delete(summary_file)  # a stale summary must not describe new files
    for path in input_files:  # here, not in a worker: one line
      text_reader.check_text_file(path, beam_pipeline.open_any)
    temp_dir = output_files.temp_path(output_paths[0] + ".beam")
    _delete(temp_dir)
    start = time.time()
    pipeline = beam.Pipeline(runner=beam_options.make_runner(runner_name),
                             options=options)
    try:
      with pipeline as p:
        beam_pipeline.build_pipeline(
            p, input_files, run_cfg, model_bytes, len(output_paths),
            temp_dir, compression, docs_per_block, max_line_chars,
            max_lines_per_document, progress_interval,
            beam_options.direct_workers(options, runner_name),
            beam_options.partitions(options, runner_name))
      records_per_file, stats = _finalize(
          temp_dir, input_files, output_paths,
          pretraining_summary.stale_summaries(output_paths, summary_file))
    finally:
      beam_options.release(pipeline)  # before the temporary shards go
      _delete(temp_dir)
    summary = pretraining_summary.build(
        stats, input_files, records_per_file, run_cfg, vocab_size,
        time.time() - start,
        {"compression": compression, "docs_per_block": docs_per_block,
         "runner": runner_name, "pipeline_args": beam_args},
        bytes_per_file=_sizes(output_paths))
    tmp = output_files.temp_path(summary_file)
    with FileSystems.create(tmp) as f:
      f.write(json.dumps(summary, indent=2, sort_keys=True).encode())
    FileSystems.rename([tmp], [summary_file])
    summary["summary_file"] = summary_file
    return summary


def parse_flags(argv):
  """Our flags (shared with create_pretraining_data); the rest go to Beam,
  whose options are checked here, before any input is read."""
  rest = command_line.parse_flags(argv, known_only=True)
  with command_line.exit_on_error(TOOL):
    beam_options.pipeline_options(
        rest[1:], FLAGS.num_workers if FLAGS["num_workers"].present else None)
  return rest


def main(argv):
  run_cfg = pretraining_config.run_config_from_flags(FLAGS)
  try:
    with command_line.exit_on_error(TOOL):
      if FLAGS["shuffle_buffer_size"].present:
        raise ValueError("--shuffle_buffer_size is not used by " + TOOL +
                         ": every shard is already a hash-ordered sample of "
                         "the whole corpus")
      summary = run(
          tfrecord_io.expand_input_files(FLAGS.input_file,
                                         beam_pipeline.match_any),
          tfrecord_io.expand_output_files(FLAGS.output_file), run_cfg,
          pipeline_args=argv[1:],
          num_workers=(FLAGS.num_workers if FLAGS["num_workers"].present
                       else None),
          **pretraining_config.common_run_kwargs(FLAGS))
  except Exception as e:  # pylint: disable=broad-except
    # Runners wrap worker errors in their own types with long multi-line
    # texts: the last line names the cause (e.g. the unreadable file); the
    # type, what happened (Dask's KilledWorker: workers died).
    lines = [l.strip() for l in str(e).splitlines() if l.strip()]
    sys.stderr.write(f"{TOOL}: error: pipeline failed: {type(e).__name__}"
                     f"{': ' + lines[-1] if lines else ''}\n")
    sys.exit(1)
  pretraining_summary.report(summary, TOOL)


def cli():
  """Console-script entry point (pyproject.toml)."""
  pretraining_config.define_flags()
  app.run(main, flags_parser=parse_flags)


if __name__ == "__main__":
  cli()
