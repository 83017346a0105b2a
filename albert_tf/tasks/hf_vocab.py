"""The tokenizer of a Hugging Face conversion (hf_models.py, hf_export.py):
read from the directory (SentencePiece or WordPiece, as its files and
tokenizer_class say), checked against the model's vocab_size, written beside
the converted checkpoint, and written back as transformers reads it.
"""

import dataclasses
import os
import shutil
from typing import Any, Dict

import sentencepiece

from albert_tf.checkpoints import canonical_weights as cw
from albert_tf.checkpoints import hf_files
from albert_tf.checkpoints import hf_tokenizer
from albert_tf.checkpoints import hf_wordpiece
from albert_tf.checkpoints import paths
from albert_tf.checkpoints.canonical_weights import CheckpointConversionError
from albert_tf.core import run_record
from albert_tf.serving import preprocessing
from albert_tf.serving import wordpiece
from albert_toolkit import output_files
from data_prep import tokenization

SPM_NAME = hf_files.SPIECE_MODEL
WORDPIECE_NAME = hf_files.VOCAB_TXT


def _read_tokenizer(hf_dir: str, vocab_size: int):
  """The tokenizer of `hf_dir`: SentencePiece (spiece.model, or rebuilt
  from tokenizer.json) or WordPiece (vocab.txt / a WordPiece
  tokenizer.json); tokenizer_config.json's lower-casing."""
  try:
    if hf_wordpiece.is_wordpiece(hf_dir):
      return hf_wordpiece.read_wordpiece(hf_dir, vocab_size)
    return hf_tokenizer.read_tokenizer(hf_dir)
  except ValueError as e:
    raise CheckpointConversionError(str(e)) from None


def write_tokenizer(hf_dir: str, vocab_path: str, do_lower_case: bool,
                    model_max_length: int = 512) -> None:
  """The tokenizer files transformers' AutoTokenizer reads: spiece.model
  (AlbertTokenizer) for a SentencePiece model, vocab.txt and tokenizer.json
  (BertTokenizer) for a WordPiece vocabulary (a `.txt`)."""
  try:
    if vocab_path.endswith(".txt"):
      hf_wordpiece.write_wordpiece(hf_dir, vocab_path, do_lower_case,
                                   model_max_length)
    else:
      hf_tokenizer.write_tokenizer(hf_dir, vocab_path, do_lower_case,
                                   model_max_length=model_max_length)
  except ValueError as e:
    raise CheckpointConversionError(str(e)) from None


def checked_tokenizer(hf_dir: str, config):
  """The tokenizer of `hf_dir`, its piece count checked against the
  model's vocab_size (before anything is written)."""
  tokenizer = _read_tokenizer(hf_dir, config.vocab_size)
  if tokenizer.kind == "wordpiece":
    return tokenizer
  if tokenizer.keep_accents:
    raise CheckpointConversionError(
        f"{os.path.join(hf_dir, hf_files.TOKENIZER_CONFIG)}: keep_accents="
        "true; albert_tf's tokenization drops accents (the original's)")
  try:
    pieces = sentencepiece.SentencePieceProcessor(
        model_proto=tokenizer.spm_model).get_piece_size()
  except (RuntimeError, TypeError) as e:
    raise CheckpointConversionError(
        f"{tokenizer.source}: not a SentencePiece model ({cw.error_line(e)})"
    ) from None
  tokenization.check_vocab_size(tokenizer.source, pieces, config.vocab_size,
                                f"{hf_files.CONFIG_NAME} vocab_size")
  return tokenizer


@dataclasses.dataclass
class Output:
  """Where an import writes: `replace()` runs once the weights are checked
  (a failed conversion leaves the directory as it was)."""
  directory: str
  tokenizer: Any
  config: Any
  replaces_run: bool = False

  @property
  def is_wordpiece(self) -> bool:
    return self.tokenizer.kind == "wordpiece"

  @property
  def vocab(self) -> str:
    """The vocabulary file written beside the checkpoint."""
    return os.path.join(os.path.abspath(self.directory), WORDPIECE_NAME
                        if self.is_wordpiece else SPM_NAME)

  def vocab_settings(self) -> Dict[str, Any]:
    """The data settings naming the vocabulary and its lower-casing."""
    key = "vocab_file" if self.is_wordpiece else "spm_model_file"
    return {key: self.vocab, "do_lower_case": self.tokenizer.do_lower_case}

  def replace(self) -> None:
    """Removes the converted run being replaced; writes the vocabulary."""
    if self.replaces_run:
      shutil.rmtree(os.path.join(self.directory,
                                 paths.RUN_CHECKPOINT_SUBDIR))
      for name in (run_record.RECORD_NAME, run_record.CONFIG_NAME):
        os.remove(os.path.join(self.directory, name))
    if self.is_wordpiece:
      output_files.atomic_write(self.vocab, self.tokenizer.vocab_text)
      wordpiece.check_vocab(self.vocab, self.config.vocab_size)
      return
    output_files.atomic_write(self.vocab, self.tokenizer.spm_model)
    preprocessing.check_spm_model(self.vocab, self.config.vocab_size)
