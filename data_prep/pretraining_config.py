"""Flags and run configuration of create_pretraining_data.

Shared by the local tool and the Beam pipeline (beam_pretraining_data), which
define the same flags by calling `define_flags()`. Every flag's range is
checked when the command line is parsed, with a one-line error naming it.
Each tool's `main` turns the parsed flags into a `RunConfig` (and the run
options) with the functions below, passing its FlagValues in: nothing below
`main` reads FLAGS.
"""

import dataclasses
import os
import typing

from absl import app
from absl import flags

from albert_toolkit import output_files
from data_prep import flag_config
from data_prep import pretraining_instances as pi
from data_prep import shard_sets
from albert_toolkit import tfrecord_io
from data_prep import tokenization

def define_flags():
  """Defines the command-line flags (only when run as a program)."""
  # Original flags, same names and defaults.
  flags.DEFINE_string("input_file", None,
                      "Input text file(s): comma-separated list of files or glob "
                      "patterns (plain or .gz). One sentence per line, blank line "
                      "between documents.")
  flags.DEFINE_string("output_file", None,
                      "Output TFRecord file(s): comma-separated list, or a sharded "
                      "pattern PATH@N that expands to PATH-0000i-of-0000N. Instances "
                      "are written round-robin across the files.")
  flags.DEFINE_integer("vocab_size", None,
                       "If set, the vocabulary must have exactly this many "
                       "pieces (e.g. the model config's vocab_size); the run "
                       "stops with an error otherwise.", lower_bound=1)
  flags.DEFINE_string("vocab_file", None,
                      "BERT WordPiece vocabulary, one token a line (the "
                      "original's Chinese models: vocab_chinese.txt); give it "
                      "or --spm_model_file, not both.")
  flags.DEFINE_string("spm_model_file", None,
                      "SentencePiece model file (from train_sentencepiece.py); "
                      "give it or --vocab_file, not both.")
  flags.DEFINE_bool("do_lower_case", True,
                    "Lowercase the text (SentencePiece: before encoding; "
                    "WordPiece: also strips accents); must match the model.")
  flags.DEFINE_bool("do_whole_word_mask", True,
                    "Mask whole words (pieces continuing a word join its unit).")
  flags.DEFINE_bool("do_permutation", False,
                    "Also permute extra n-gram spans among themselves (original's "
                    "experimental option); permuted spans share the prediction "
                    "budget max_predictions_per_seq.")
  flags.DEFINE_bool("favor_shorter_ngram", True,
                    "Draw n-gram length n with p(n) ~ 1/n (else reversed, favouring "
                    "longer n-grams).")
  flags.DEFINE_bool("random_next_sentence", False,
                    "Original's switch for NSP instead of SOP; same as "
                    "--sentence_pair_task=nsp.")
  flags.DEFINE_integer("max_seq_length", 512, "Maximum sequence length.",
                       lower_bound=3)
  flags.DEFINE_integer("ngram", 3, "Maximum n-gram length (in word units) to mask.",
                       lower_bound=1)
  flags.DEFINE_integer("max_predictions_per_seq", 20,
                       "Maximum number of masked LM predictions per sequence.",
                       lower_bound=1)
  flags.DEFINE_integer("random_seed", 12345, "Random seed for data generation.")
  flags.DEFINE_integer("dupe_factor", 40,
                       "Number of times to duplicate the input data (with "
                       "different masks and pairings).", lower_bound=1)
  flags.DEFINE_float("masked_lm_prob", 0.15, "Masked LM probability.",
                     lower_bound=0.0, upper_bound=1.0)
  flags.DEFINE_float("short_seq_prob", 0.1,
                     "Probability of creating sequences shorter than the maximum "
                     "length.", lower_bound=0.0, upper_bound=1.0)
  # Additions.
  flags.DEFINE_enum("sentence_pair_task", None, ["sop", "nsp", "none"],
                    "Inter-sentence objective (paper Table 5): sop = sentence "
                    "order prediction (default), nsp = next sentence prediction "
                    "(B from another document; = --random_next_sentence), none = "
                    "single-segment examples '[CLS] A [SEP]' with label 0 (not to be "
                    "used as a pair label). Default: nsp if --random_next_sentence "
                    "else sop.")
  flags.DEFINE_integer("num_workers", 1,
                       "Worker processes. Output is byte-identical for any value.",
                       lower_bound=1)
  flags.DEFINE_enum("compression", "NONE", ["NONE", "GZIP"],
                    "TFRecord compression of the output files.")
  flags.DEFINE_bool("v2_feature_names", False,
                    "Write Model Garden v2 names input_word_ids/input_type_ids "
                    "instead of input_ids/segment_ids.")
  flags.DEFINE_integer("shuffle_buffer_size", 10000,
                       "Instances held in the seeded shuffle buffer before writing "
                       "(replaces the original's in-RAM global shuffle; 0 = write "
                       "in creation order).", lower_bound=0)
  flags.DEFINE_integer("docs_per_block", 64,
                       "Maximum documents per unit of work (a block also ends "
                       "after 100k characters). NSP negatives are drawn from the "
                       "other documents of the same block. Changing it changes "
                       "the output; --num_workers does not.", lower_bound=1)
  flags.DEFINE_integer("max_line_chars", 100000,
                       "Lines longer than this are split at whitespace (counted).",
                       lower_bound=1)
  flags.DEFINE_integer("max_lines_per_document", 20000,
                       "Documents with more lines are cut into pieces (counted), "
                       "bounding memory per document.", lower_bound=1)
  flags.DEFINE_string("summary_file", None,
                      "JSON summary path, in the directory of the outputs and "
                      "named *.summary.json, where readers look for it "
                      "(default: <first output file>.summary.json).")
  flags.DEFINE_float("progress_interval", 5.0,
                     "Seconds between progress lines on stderr (0 = none).",
                     lower_bound=0.0)
  # Range checks beyond the flags' bounds (one-line errors naming flags).
  flags.register_validator("output_file", _check_output_file)
  flags.register_validator(
      "masked_lm_prob", lambda p: p is None or not p <= 0,  # nan: below
      message="--masked_lm_prob must be > 0 (" + pi.MASK_BUDGET_RULE +
      "; 0 wrote instances without masks)")
  flags.register_multi_flags_validator(
      ["max_seq_length", "max_predictions_per_seq", "sentence_pair_task",
       "random_next_sentence"], _check_lengths)
  flags.register_multi_flags_validator(["spm_model_file", "vocab_file"],
                                       check_one_vocabulary_flags)


def check_one_vocabulary_flags(values):
  """The flags validator of --spm_model_file and --vocab_file (exactly one:
  a one-line error naming both)."""
  try:
    tokenization.check_one_vocabulary(values["spm_model_file"],
                                      values["vocab_file"])
  except ValueError as e:
    raise flags.ValidationError(str(e)) from None
  return True


def _check_output_file(spec):
  if spec is not None:
    try:
      output_files.check_distinct(
          ("--output_file", p) for p in tfrecord_io.expand_output_files(spec))
    except ValueError as e:
      raise flags.ValidationError(str(e)) from e
  return True


def check_files(input_files, output_paths, summary_file, run_cfg,
                match=None):
  """Checks every output (the shards and the summary) against every input
  (the corpus files and the vocabulary), before anything is opened or
  deleted (output_files.check_disjoint: one-line ValueError naming both
  flags), and refuses shards of another count beside `PATH@N`'s
  (shard_sets.check_no_other_shard_counts; `match`: its file matcher).
  Returns the summary's path: `summary_file`, else
  <first output>.summary.json."""
  summary_flag = "--summary_file" if summary_file else "the summary"
  summary_file = summary_file or output_paths[0] + output_files.SUMMARY_SUFFIX
  output_files.check_disjoint(
      input_files, output_paths,
      inputs=[("--spm_model_file", run_cfg.spm_model_file),
              ("--vocab_file", run_cfg.vocab_file)],
      outputs=[(summary_flag, summary_file)])
  check_summary_place(output_paths, summary_file, summary_flag)
  shard_sets.check_no_other_shard_counts(output_paths, match)
  return summary_file


def _directory(path):
  if "://" in path:
    return path.rsplit("/", 1)[0]
  return os.path.realpath(os.path.dirname(os.path.abspath(path)))


def check_summary_place(output_paths, summary_file, flag):
  """Raises ValueError (one line naming the flag and the files) when a
  reader could not find the summary: readers look for a file's summary
  beside it, as a `*.summary.json` (pretraining_summary.find).

  Args:
    output_paths: the output files.
    summary_file: the summary's path.
    flag: how the summary was given, for the error ("--summary_file").
  """
  suffix = output_files.SUMMARY_SUFFIX
  name = os.path.basename(summary_file)
  if not name.endswith(suffix):
    name = os.path.splitext(name)[0] + suffix
  # What to give instead: the name made readable, beside the outputs.
  instead = os.path.join(os.path.dirname(output_paths[0]), name)
  if not summary_file.endswith(suffix):
    raise ValueError(f"{flag} {summary_file}: readers find a summary by its "
                     f"name ending in {suffix}; give e.g. {flag}={instead}")
  where = _directory(summary_file)
  for path in output_paths:
    if _directory(path) == where:
      continue
    if flag == "--summary_file":
      raise ValueError(f"--summary_file {summary_file} is not in the "
                       f"directory of --output_file {path}: readers find a "
                       f"file's summary beside it; give e.g. "
                       f"--summary_file={instead}")
    raise ValueError(f"--output_file {output_paths[0]} and {path} are in "
                     "different directories: readers find a file's summary "
                     "beside it; write the outputs to one directory")


def _check_lengths(values):
  task = values["sentence_pair_task"] or (
      "nsp" if values["random_next_sentence"] else "sop")
  minimum = 3 if task == "none" else 5
  if values["max_seq_length"] < minimum:
    raise flags.ValidationError(
        f"--max_seq_length={values['max_seq_length']} is too small: "
        f"--sentence_pair_task={task} needs >= {minimum}")
  if values["max_predictions_per_seq"] > values["max_seq_length"]:
    raise flags.ValidationError(
        f"--max_predictions_per_seq={values['max_predictions_per_seq']} "
        f"exceeds --max_seq_length={values['max_seq_length']}")
  return True


@dataclasses.dataclass(frozen=True)
class RunConfig:
  """A run's settings. The vocabulary: exactly one of `spm_model_file`
  (SentencePiece) and `vocab_file` (BERT WordPiece)."""
  spm_model_file: str
  do_lower_case: bool
  instance: pi.InstanceConfig
  random_seed: int = 12345
  dupe_factor: int = 40
  v2_feature_names: bool = False
  expected_vocab_size: typing.Optional[int] = None  # --vocab_size
  vocab_file: str = ""

  def __post_init__(self):
    tokenization.check_one_vocabulary(self.spm_model_file, self.vocab_file)

  @property
  def vocab_path(self):
    """The vocabulary file, of either kind."""
    return self.spm_model_file or self.vocab_file

  @property
  def vocab_kind(self):
    return "wordpiece" if self.vocab_file else "sentencepiece"

  def tokenizer(self, file_bytes=None):
    """The run's tokenizer; file_bytes: the vocabulary's contents, read by
    the caller (a Beam worker has no file)."""
    return tokenization.load_tokenizer(self.spm_model_file, self.vocab_file,
                                       self.do_lower_case, file_bytes)

  def check_vocab_size(self, pieces):
    """Raises ValueError if --vocab_size disagrees with the vocabulary."""
    tokenization.check_vocab_size(self.vocab_path, pieces,
                                  self.expected_vocab_size or None,
                                  "--vocab_size")


def run_config_from_flags(flag_values):
  """RunConfig from the parsed `flag_values` (shared with
  beam_pretraining_data); app.UsageError for a missing or conflicting flag."""
  for name in ("input_file", "output_file"):
    if not flag_values[name].value:
      raise app.UsageError(f"--{name} is required")
  vocab = {name: flag_values[name].value or ""
           for name in ("spm_model_file", "vocab_file")}
  task = flag_values.sentence_pair_task or (
      "nsp" if flag_values.random_next_sentence else "sop")
  if flag_values.random_next_sentence and task != "nsp":
    raise app.UsageError("--random_next_sentence conflicts with "
                         f"--sentence_pair_task={task}")
  instance_cfg = flag_config.from_flags(pi.InstanceConfig, flag_values,
                                        sentence_pair_task=task)
  return flag_config.from_flags(RunConfig, flag_values, instance=instance_cfg,
                                expected_vocab_size=flag_values.vocab_size,
                                **vocab)


def common_run_kwargs(flag_values):
  """Keyword arguments both tools' run() take, from the parsed
  `flag_values`."""
  return {name: flag_values[name].value for name in (
      "compression", "docs_per_block", "max_line_chars",
      "max_lines_per_document", "summary_file", "progress_interval")}
