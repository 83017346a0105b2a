r"""Trains the ALBERT SentencePiece vocabulary (release recipe by default).

Defaults reproduce the released `30k-clean.model` recipe: unigram model,
vocab 30000, pad_id 0, unk_id 1, no bos/eos, control symbols [CLS] [SEP] [MASK]
at ids 2, 3, 4, user symbols ( ) " - . – £ €, character_coverage 0.99995.
Input lines are normalised with `tokenization.normalize_text` (the same
normalisation applied when the model is used), streamed to the trainer.
Writes <model_prefix>.model and <model_prefix>.vocab.

Example:
  python -m data_prep.train_sentencepiece --input_file=corpus/*.txt \
    --model_prefix=out/30k-clean --vocab_size=30000
"""

import collections
import dataclasses
import os
import sys
from typing import Optional, Tuple

from absl import app
from absl import flags
import sentencepiece as spm

from albert_toolkit import command_line
from data_prep import flag_config
from albert_toolkit import output_files
from data_prep import text_reader
from albert_toolkit import tfrecord_io
from data_prep import tokenization

FLAGS = flags.FLAGS

DEFAULT_USER_SYMBOLS = ("(", ")", '"', "-", ".", "\u2013", "\u00a3", "\u20ac")
CONTROL_SYMBOLS = ["[CLS]", "[SEP]", "[MASK]"]
MODEL_TYPES = ("unigram", "bpe", "char", "word")
# SentencePieceConfig's fields that are not SentencePiece trainer arguments
# of the same name (the others are passed as they are).
_NOT_TRAINER_ARGS = ("user_defined_symbols", "do_lower_case",
                     "normalize_input", "random_seed")


@dataclasses.dataclass(frozen=True)
class SentencePieceConfig:
  """How the vocabulary is trained; the defaults are the release recipe (and
  the defaults of the command-line flags of the same names)."""
  vocab_size: int = 30000
  model_type: str = "unigram"
  # Fraction of characters covered by the model.
  character_coverage: float = 0.99995
  # Pieces always kept whole.
  user_defined_symbols: Tuple[str, ...] = DEFAULT_USER_SYMBOLS
  # Lower-case the training text (as create_pretraining_data --do_lower_case).
  do_lower_case: bool = True
  # tokenization.normalize_text (whitespace, NFKD, no combining marks).
  normalize_input: bool = True
  # Sentences sampled for training (0: all).
  input_sentence_size: int = 10000000
  shuffle_input_sentence: bool = True
  # Longer sentences (UTF-8 bytes) are left out of training (counted).
  max_sentence_length: int = 4192
  num_threads: int = 2
  # Initial seed vocabulary of the unigram trainer.
  seed_sentencepiece_size: int = 1000000
  # SentencePiece's own normalisation rule (its default).
  normalization_rule_name: str = "nmt_nfkc"
  split_digits: bool = False
  # Seed of SentencePiece's sentence sampling.
  random_seed: int = 12345

  def __post_init__(self):
    if self.model_type not in MODEL_TYPES:
      raise ValueError(f"model_type: unknown {self.model_type!r}; expected "
                       f"one of {MODEL_TYPES}")
    for name, minimum in (("vocab_size", 8), ("num_threads", 1),
                          ("input_sentence_size", 0),
                          ("max_sentence_length", 1)):
      if getattr(self, name) < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got "
                         f"{getattr(self, name)}")
    # The flag gives a list; a tuple keeps the frozen config immutable.
    object.__setattr__(self, "user_defined_symbols",
                       tuple(self.user_defined_symbols))


def define_flags():
  """Defines the command-line flags (only when run as a program); their
  defaults are SentencePieceConfig's."""
  d = SentencePieceConfig
  flags.DEFINE_string("input_file", None,
                      "Training text: comma-separated files or globs (plain or "
                      ".gz), e.g. the output of prepare_corpus.py.")
  flags.DEFINE_string("model_prefix", None,
                      "Output prefix; writes <prefix>.model and <prefix>.vocab.")
  flags.DEFINE_integer("vocab_size", d.vocab_size,
                       "Vocabulary size (release: 30000).", lower_bound=8)
  flags.DEFINE_enum("model_type", d.model_type, MODEL_TYPES,
                    "SentencePiece model type (release: unigram).")
  flags.DEFINE_float("character_coverage", d.character_coverage,
                     "Fraction of characters covered by the model (release: "
                     "0.99995).")
  flags.DEFINE_list("user_defined_symbols", list(d.user_defined_symbols),
                    "Pieces always kept whole (comma-separated; release: "
                    "( ) \" - . \u2013 \u00a3 \u20ac).")
  flags.DEFINE_bool("do_lower_case", d.do_lower_case,
                    "Lowercase training text (must match create_pretraining_data "
                    "--do_lower_case).")
  flags.DEFINE_bool("normalize_input", d.normalize_input,
                    "Apply tokenization.normalize_text (whitespace, NFKD, drop "
                    "combining marks) to the training text.")
  flags.DEFINE_integer("input_sentence_size", d.input_sentence_size,
                       "Maximum number of sentences sampled for training "
                       "(0 = all).", lower_bound=0)
  flags.DEFINE_bool("shuffle_input_sentence", d.shuffle_input_sentence,
                    "Sample sentences at random when input_sentence_size applies.")
  flags.DEFINE_integer("max_sentence_length", d.max_sentence_length,
                       "Longer training sentences (UTF-8 bytes) are left out "
                       "of training, counted and reported.", lower_bound=1)
  flags.DEFINE_integer("num_threads", d.num_threads, "Trainer threads.",
                       lower_bound=1)
  flags.DEFINE_integer("seed_sentencepiece_size", d.seed_sentencepiece_size,
                       "Initial seed vocabulary size for the unigram trainer.")
  flags.DEFINE_string("normalization_rule_name", d.normalization_rule_name,
                      "SentencePiece's own normalisation rule (its default).")
  flags.DEFINE_bool("split_digits", d.split_digits,
                    "Split numbers into single digits.")
  flags.DEFINE_integer("random_seed", d.random_seed,
                       "Seed for SentencePiece's sentence sampling.")


class _TooLong:
  """Sentences over max_sentence_length bytes: SentencePiece skips them with
  only a log line, so they are kept out here, counted and reported."""

  def __init__(self, max_bytes):
    self.max_bytes = max_bytes
    self.count = 0
    self.first = None  # "file:line" of the first one

  def check(self, line, path, lineno):
    """True if `line` is too long (then counted)."""
    # Cheap first: a line of n characters has at most 4n UTF-8 bytes.
    if 4 * len(line) <= self.max_bytes or (
        len(line.encode("utf-8", "surrogatepass")) <= self.max_bytes):
      return False
    self.count += 1
    self.first = self.first or f"{path}:{lineno}"
    return True

  def warning(self):
    return (f"warning: {self.count} sentence(s) longer than "
            f"--max_sentence_length={self.max_bytes} bytes left out of "
            f"training (first: {self.first}); raise --max_sentence_length "
            "to train on them")


def _sentences(input_files, normalize, lower, stats, too_long):
  for path in input_files:
    for lineno, line in text_reader.iter_numbered_lines(path, stats):
      if normalize:
        line = tokenization.normalize_text(line, lower=lower)
      elif lower:
        line = line.lower()
      if line.strip() and not too_long.check(line, path, lineno):
        stats["sentences"] += 1
        yield line


class _Feed:
  """The sentence iterator handed to SentencePiece, keeping the error it
  raises: SentencePiece swallows it and reports only its own
  `Internal: ... [!sentences_.empty()]`."""

  def __init__(self, sentences):
    self._sentences = sentences
    self.error = None

  def __iter__(self):
    try:
      yield from self._sentences
    except Exception as e:  # re-raised by train() after SentencePiece stops
      self.error = e


def _train_error(error, feed, input_files, stats, too_long):
  """The one-line error for a failed SentencePiece run: the reader's, or
  no text at all (or only over-long lines), naming the files; else
  SentencePiece's own."""
  if feed.error is not None:
    return feed.error
  if not stats["sentences"] and too_long.count:
    return ValueError(
        f"no text to train on: all {too_long.count} non-blank lines of "
        f"{', '.join(input_files)} are longer than --max_sentence_length="
        f"{too_long.max_bytes} bytes (first: {too_long.first}); raise "
        "--max_sentence_length or split the lines (prepare_corpus "
        "--max_line_chars)")
  if not stats["sentences"]:
    return ValueError(
        f"no text to train on: {', '.join(input_files)} "
        f"{'holds' if len(input_files) == 1 else 'hold'} no non-blank line")
  return error


def train(input_files, model_prefix,
          config: Optional[SentencePieceConfig] = None):
  """Trains and writes <model_prefix>.model/.vocab; returns the model path.

  `config`: how (default: the release recipe, SentencePieceConfig()).
  """
  c = config or SentencePieceConfig()
  for path in input_files:
    if not os.path.isfile(path):
      raise FileNotFoundError(f"Training text not found: {path}")
  finals = [model_prefix + ".model", model_prefix + ".vocab"]
  output_files.check_disjoint(input_files, finals, output_flag="--model_prefix")
  for path in input_files:  # a TFRecord, binary or UTF-16 file: named
    text_reader.check_text_file(path)
  # Trained under a temporary prefix, renamed when both files exist.
  staged = output_files.StagedOutputs(finals)
  tmp_prefix = output_files.temp_path(model_prefix)
  staged.temp_paths = [tmp_prefix + ".model", tmp_prefix + ".vocab"]
  stats = collections.Counter()
  too_long = _TooLong(c.max_sentence_length)
  spm.set_random_generator_seed(c.random_seed)
  feed = _Feed(_sentences(input_files, c.normalize_input, c.do_lower_case,
                          stats, too_long))
  try:
    spm.SentencePieceTrainer.train(
        model_prefix=tmp_prefix,
        sentence_iterator=iter(feed),
        pad_id=0, unk_id=1, bos_id=-1, eos_id=-1,
        pad_piece="<pad>", unk_piece="<unk>",
        control_symbols=CONTROL_SYMBOLS,
        user_defined_symbols=[s for s in c.user_defined_symbols if s],
        minloglevel=2,
        **{k: v for k, v in dataclasses.asdict(c).items()
           if k not in _NOT_TRAINER_ARGS})
  except RuntimeError as e:
    staged.abort()
    error = _train_error(e, feed, input_files, stats, too_long)
    if error is e:
      raise
    raise error from None
  except BaseException:
    staged.abort()
    raise
  staged.commit()
  if too_long.count:
    sys.stderr.write(too_long.warning() + "\n")
  sys.stderr.write(f"[train_sentencepiece] {stats['sentences']} sentences -> "
                   f"{model_prefix}.model, {model_prefix}.vocab\n")
  return model_prefix + ".model"


def main(argv):
  del argv
  command_line.exit_on_sigterm()
  if not FLAGS.input_file or not FLAGS.model_prefix:
    raise app.UsageError("--input_file and --model_prefix are required")
  with command_line.exit_on_error("train_sentencepiece", RuntimeError):
    config = flag_config.from_flags(SentencePieceConfig, FLAGS)
    train(tfrecord_io.expand_input_files(FLAGS.input_file), FLAGS.model_prefix,
          config)


def cli():
  """Console-script entry point (pyproject.toml)."""
  define_flags()
  app.run(main, flags_parser=command_line.parse_flags)


if __name__ == "__main__":
  cli()
