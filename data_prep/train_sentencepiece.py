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
import os
import sys

from absl import app
from absl import flags
import sentencepiece as spm

from data_prep import command_line
from data_prep import output_files
from data_prep import text_reader
from data_prep import tfrecord_io
from data_prep import tokenization

FLAGS = flags.FLAGS

DEFAULT_USER_SYMBOLS = ["(", ")", '"', "-", ".", "\u2013", "\u00a3", "\u20ac"]
CONTROL_SYMBOLS = ["[CLS]", "[SEP]", "[MASK]"]

def define_flags():
  """Defines the command-line flags (only when run as a program)."""
  flags.DEFINE_string("input_file", None,
                      "Training text: comma-separated files or globs (plain or "
                      ".gz), e.g. the output of prepare_corpus.py.")
  flags.DEFINE_string("model_prefix", None,
                      "Output prefix; writes <prefix>.model and <prefix>.vocab.")
  flags.DEFINE_integer("vocab_size", 30000, "Vocabulary size (release: 30000).",
                       lower_bound=8)
  flags.DEFINE_enum("model_type", "unigram", ["unigram", "bpe", "char", "word"],
                    "SentencePiece model type (release: unigram).")
  flags.DEFINE_float("character_coverage", 0.99995,
                     "Fraction of characters covered by the model (release: "
                     "0.99995).")
  flags.DEFINE_list("user_defined_symbols", DEFAULT_USER_SYMBOLS,
                    "Pieces always kept whole (comma-separated; release: "
                    "( ) \" - . \u2013 \u00a3 \u20ac).")
  flags.DEFINE_bool("do_lower_case", True,
                    "Lowercase training text (must match create_pretraining_data "
                    "--do_lower_case).")
  flags.DEFINE_bool("normalize_input", True,
                    "Apply tokenization.normalize_text (whitespace, NFKD, drop "
                    "combining marks) to the training text.")
  flags.DEFINE_integer("input_sentence_size", 10000000,
                       "Maximum number of sentences sampled for training "
                       "(0 = all).")
  flags.DEFINE_bool("shuffle_input_sentence", True,
                    "Sample sentences at random when input_sentence_size applies.")
  flags.DEFINE_integer("max_sentence_length", 4192,
                       "Longer training sentences are skipped by the trainer "
                       "(bytes).")
  flags.DEFINE_integer("num_threads", 2, "Trainer threads.", lower_bound=1)
  flags.DEFINE_integer("seed_sentencepiece_size", 1000000,
                       "Initial seed vocabulary size for the unigram trainer.")
  flags.DEFINE_string("normalization_rule_name", "nmt_nfkc",
                      "SentencePiece's own normalisation rule (its default).")
  flags.DEFINE_bool("split_digits", False, "Split numbers into single digits.")
  flags.DEFINE_integer("random_seed", 12345,
                       "Seed for SentencePiece's sentence sampling.")


def _sentences(input_files, normalize, lower, stats):
  for path in input_files:
    for line in text_reader.iter_clean_lines(path, stats):
      if normalize:
        line = tokenization.normalize_text(line, lower=lower)
      elif lower:
        line = line.lower()
      if line.strip():
        stats["sentences"] += 1
        yield line


def _spm_train(model_prefix, **kwargs):
  spm.SentencePieceTrainer.train(model_prefix=model_prefix, **kwargs)


def train(input_files, model_prefix, vocab_size=30000, model_type="unigram",
          character_coverage=0.99995, user_defined_symbols=None,
          do_lower_case=True, normalize_input=True,
          input_sentence_size=10000000, shuffle_input_sentence=True,
          max_sentence_length=4192, num_threads=2,
          seed_sentencepiece_size=1000000, normalization_rule_name="nmt_nfkc",
          split_digits=False, random_seed=12345):
  """Trains and writes <model_prefix>.model/.vocab; returns the model path."""
  if user_defined_symbols is None:
    user_defined_symbols = DEFAULT_USER_SYMBOLS
  for path in input_files:
    if not os.path.isfile(path):
      raise FileNotFoundError(f"Training text not found: {path}")
  finals = [model_prefix + ".model", model_prefix + ".vocab"]
  output_files.check_disjoint(input_files, finals, output_flag="--model_prefix")
  # Trained under a temporary prefix, renamed when both files exist.
  staged = output_files.StagedOutputs(finals)
  tmp_prefix = output_files.temp_path(model_prefix)
  staged.temp_paths = [tmp_prefix + ".model", tmp_prefix + ".vocab"]
  stats = collections.Counter()
  spm.set_random_generator_seed(random_seed)
  try:
    _spm_train(
        tmp_prefix,
        sentence_iterator=_sentences(input_files, normalize_input, do_lower_case,
                                     stats),
        vocab_size=vocab_size,
        model_type=model_type,
        character_coverage=character_coverage,
        pad_id=0, unk_id=1, bos_id=-1, eos_id=-1,
        pad_piece="<pad>", unk_piece="<unk>",
        control_symbols=CONTROL_SYMBOLS,
        user_defined_symbols=[s for s in user_defined_symbols if s],
        input_sentence_size=input_sentence_size,
        shuffle_input_sentence=shuffle_input_sentence,
        max_sentence_length=max_sentence_length,
        num_threads=num_threads,
        seed_sentencepiece_size=seed_sentencepiece_size,
        normalization_rule_name=normalization_rule_name,
        split_digits=split_digits,
        minloglevel=2)
  except BaseException:
    staged.abort()
    raise
  staged.commit()
  sys.stderr.write(f"[train_sentencepiece] {stats['sentences']} sentences -> "
                   f"{model_prefix}.model, {model_prefix}.vocab\n")
  return model_prefix + ".model"


def main(argv):
  del argv
  if not FLAGS.input_file or not FLAGS.model_prefix:
    raise app.UsageError("--input_file and --model_prefix are required")
  try:
    train(tfrecord_io.expand_input_files(FLAGS.input_file), FLAGS.model_prefix,
          FLAGS.vocab_size, FLAGS.model_type, FLAGS.character_coverage,
          FLAGS.user_defined_symbols, FLAGS.do_lower_case,
          FLAGS.normalize_input, FLAGS.input_sentence_size,
          FLAGS.shuffle_input_sentence, FLAGS.max_sentence_length,
          FLAGS.num_threads, FLAGS.seed_sentencepiece_size,
          FLAGS.normalization_rule_name, FLAGS.split_digits,
          FLAGS.random_seed)
  except (OSError, RuntimeError, ValueError) as e:
    sys.stderr.write(f"train_sentencepiece: error: {e}\n")
    sys.exit(1)


def cli():
  """Console-script entry point (pyproject.toml)."""
  define_flags()
  app.run(main, flags_parser=command_line.parse_flags)


if __name__ == "__main__":
  cli()
