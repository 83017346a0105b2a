"""The tokenizer files of a Hugging Face ALBERT directory, read and written.

A Hugging Face (transformers) ALBERT directory carries its SentencePiece
vocabulary as `spiece.model` (the original release's model file, renamed),
as `tokenizer.json` (the `tokenizers` library's description: a Unigram model
with every piece and score, the SentencePiece normaliser's
`precompiled_charsmap`, a Metaspace pre-tokenizer; transformers 5 saves only
this one), or both; `tokenizer_config.json` says `do_lower_case` and
`keep_accents`. `read_tokenizer` gives the SentencePiece model our tokenizer
(data_prep/tokenization.py) loads, rebuilding it from `tokenizer.json` when
there is no `spiece.model`; `write_tokenizer` writes the files transformers'
`AutoTokenizer.from_pretrained` reads.
"""

import dataclasses
import os

import sentencepiece as spm

from albert_toolkit import output_files
from albert_toolkit import text_files
from albert_tf.checkpoints import hf_tokenizer_json
from albert_tf.checkpoints.hf_files import CONFIG_NAME
from albert_tf.checkpoints.hf_files import SPECIAL_TOKENS_MAP
from albert_tf.checkpoints.hf_files import SPIECE_MODEL
from albert_tf.checkpoints.hf_files import TOKENIZER_CONFIG
from albert_tf.checkpoints.hf_files import TOKENIZER_JSON
from albert_tf.checkpoints.hf_tokenizer_json import bool_field
from albert_tf.checkpoints.hf_tokenizer_json import json_field
from albert_tf.checkpoints.hf_tokenizer_json import PAD_ID
from albert_tf.checkpoints.hf_tokenizer_json import SPECIAL_PIECES
from albert_tf.checkpoints.hf_tokenizer_json import UNK_ID



@dataclasses.dataclass(frozen=True)
class HfTokenizer:
  """A Hugging Face directory's tokenizer, as albert_tf uses it.

  Attributes:
    spm_model: a serialized SentencePiece ModelProto (what `spiece.model`
      holds); load it with data_prep.tokenization's `FullTokenizer(source,
      do_lower_case, model_proto=spm_model)` or write it out as a `.model`
      file.
    do_lower_case: lower-case text before SentencePiece.
    keep_accents: keep combining marks (always False: see read_tokenizer).
    source: the file the model came from (`spiece.model` or
      `tokenizer.json`).
  """
  spm_model: bytes
  do_lower_case: bool
  keep_accents: bool
  source: str
  kind = "sentencepiece"  # as data_prep's tokenizers (hf_wordpiece: wordpiece)


def _load(source, spm_model, vocab_size):
  """A SentencePiece processor of `spm_model`, checked to be ALBERT's: the
  special pieces at ALBERT's ids, `vocab_size` pieces (None: not checked)."""
  sp = spm.SentencePieceProcessor()
  try:
    sp.LoadFromSerializedProto(spm_model)
  except Exception as e:  # sentencepiece raises a bare RuntimeError/OSError.
    raise ValueError(f"{source}: not a SentencePiece model "
                     f"({type(e).__name__}: {(str(e).splitlines() or [''])[0]})"
                     ) from None
  pieces = sp.get_piece_size()
  if vocab_size is not None and pieces != vocab_size:
    raise ValueError(
        f"{source}: {pieces} pieces but {CONFIG_NAME} vocab_size is "
        f"{vocab_size}; not the model's tokenizer (every token id would be "
        "another piece's)")
  found = tuple(sp.id_to_piece(i) if i < pieces else None
                for i in range(len(SPECIAL_PIECES)))
  if found != SPECIAL_PIECES or sp.unk_id() != UNK_ID or (
      sp.pad_id() not in (PAD_ID, -1)):
    raise ValueError(
        f"{source}: special pieces at ids 0-4 are {list(found)}, not "
        f"{list(SPECIAL_PIECES)}; not an ALBERT tokenizer")
  return sp


def _vocab_size(hf_dir):
  """config.json's vocab_size, or None when there is no config.json or it
  leaves the field out (the converter checks transformers' default)."""
  path = os.path.join(hf_dir, CONFIG_NAME)
  if not os.path.exists(path):
    return None
  config = text_files.read_json_object(path)
  if "vocab_size" not in config:
    return None
  return json_field(config, "vocab_size", int, path)


def read_tokenizer(hf_dir):
  """The tokenizer of the Hugging Face ALBERT directory `hf_dir`.

  Reads `spiece.model` when present (a `tokenizer.json` beside it must hold
  the same pieces and scores), else rebuilds it from `tokenizer.json` (a
  Unigram model); `do_lower_case` / `keep_accents` from
  `tokenizer_config.json` (defaults as transformers' AlbertTokenizer: True,
  False). The vocabulary must be the model's (as many pieces as
  `config.json`'s `vocab_size`, when there is a config.json) with ALBERT's
  special pieces <pad> <unk> [CLS] [SEP] [MASK] at ids 0-4.

  Args:
    hf_dir: the directory.

  Returns:
    HfTokenizer.

  Raises:
    ValueError: one line naming the file and field: missing files,
      malformed JSON, a WordPiece or other non-Unigram tokenizer.json, a
      vocabulary that is not the model's, `keep_accents` true (albert_tf
      always drops accents, as the original release).
  """
  config_path = os.path.join(hf_dir, TOKENIZER_CONFIG)
  config = (text_files.read_json_object(config_path)
            if os.path.exists(config_path) else {})
  do_lower_case = bool_field(config, "do_lower_case", True, config_path)
  keep_accents = bool_field(config, "keep_accents", False, config_path)
  if keep_accents:
    raise ValueError(
        f"{config_path}: field keep_accents is true; albert_tf's tokenization "
        "always drops accents (NFKD without combining marks), so accented "
        "text would get other ids than the model was trained on")
  vocab_size = _vocab_size(hf_dir)
  spiece = os.path.join(hf_dir, SPIECE_MODEL)
  tokenizer_json = os.path.join(hf_dir, TOKENIZER_JSON)
  if os.path.exists(spiece):
    with open(spiece, "rb") as f:
      spm_model = f.read()
    sp = _load(spiece, spm_model, vocab_size)
    if os.path.exists(tokenizer_json):
      hf_tokenizer_json.check_same_vocabulary(sp, spiece, tokenizer_json)
    source = spiece
  elif os.path.exists(tokenizer_json):
    proto, vocab = hf_tokenizer_json.proto_from_tokenizer_json(tokenizer_json)
    spm_model = proto.SerializeToString()
    sp = _load(tokenizer_json, spm_model, vocab_size)
    hf_tokenizer_json.check_rebuilt(sp, vocab, tokenizer_json)
    source = tokenizer_json
  else:
    raise ValueError(f"{hf_dir}: no {SPIECE_MODEL} or {TOKENIZER_JSON} (the "
                     "model's SentencePiece tokenizer)")
  return HfTokenizer(spm_model=spm_model, do_lower_case=do_lower_case,
                     keep_accents=False, source=source)


def _special(content, lstrip=False):
  return {"content": content, "lstrip": lstrip, "normalized": False,
          "rstrip": False, "single_word": False, "special": True}


def tokenizer_config(do_lower_case, model_max_length=512):
  """tokenizer_config.json of transformers' AlbertTokenizer for our
  tokenization (accents dropped, whitespace collapsed)."""
  return {
      "tokenizer_class": "AlbertTokenizer",
      "do_lower_case": do_lower_case,
      "keep_accents": False,
      "remove_space": True,
      "model_max_length": model_max_length,
      **special_tokens_map(),
  }


def special_tokens_map():
  """special_tokens_map.json: ALBERT's special tokens ([MASK] takes the
  space before it, as transformers' AlbertTokenizer)."""
  pad, unk, cls, sep, mask = SPECIAL_PIECES
  return {"bos_token": cls, "eos_token": sep, "unk_token": unk,
          "sep_token": sep, "pad_token": pad, "cls_token": cls,
          "mask_token": _special(mask, lstrip=True)}


def write_tokenizer(hf_dir, spm_model_file, do_lower_case, keep_accents=False,
                    model_max_length=512):
  """Writes the tokenizer files of a Hugging Face ALBERT directory.

  `spiece.model` (the SentencePiece model, byte for byte),
  `tokenizer_config.json` and `special_tokens_map.json`, each atomically;
  transformers' `AutoTokenizer.from_pretrained(hf_dir)` then tokenizes as
  albert_tf does (see docs/conversion.md for the differences).

  Args:
    hf_dir: an existing directory.
    spm_model_file: our SentencePiece model (ALBERT's special pieces at ids
      0-4).
    do_lower_case: whether the model's text is lower-cased.
    keep_accents: must be False: albert_tf always drops accents.
    model_max_length: the longest input (max_position_embeddings).

  Raises:
    ValueError: keep_accents, or a model that is not ALBERT's.
  """
  if keep_accents:
    raise ValueError("keep_accents=True: albert_tf's tokenization always "
                     "drops accents; a Hugging Face tokenizer keeping them "
                     "would give other ids")
  with open(spm_model_file, "rb") as f:
    spm_model = f.read()
  _load(spm_model_file, spm_model, None)
  output_files.atomic_write(os.path.join(hf_dir, SPIECE_MODEL), spm_model)
  output_files.write_json(os.path.join(hf_dir, TOKENIZER_CONFIG),
                          tokenizer_config(do_lower_case, model_max_length))
  output_files.write_json(os.path.join(hf_dir, SPECIAL_TOKENS_MAP),
                          special_tokens_map())
