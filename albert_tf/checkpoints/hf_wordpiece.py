"""The WordPiece tokenizer files of a Hugging Face ALBERT directory.

Chinese ALBERT models on the Hugging Face hub carry a BERT WordPiece
vocabulary: `vocab.txt` (one token a line), `tokenizer_config.json` naming
`BertTokenizer` / `BertTokenizerFast` (transformers' AlbertTokenizer is
SentencePiece only), and often `tokenizer.json` whose model is WordPiece.
`read_wordpiece` gives the vocabulary and lower-casing our WordPiece
tokenizer (data_prep/wordpiece.py, the original release's FullTokenizer)
loads; settings it cannot honour are refused. `write_wordpiece` writes the
files transformers' `AutoTokenizer.from_pretrained` reads.

Our tokenizer (as the original's) makes every CJK ideograph a word, and
strips accents exactly when it lower-cases. One difference is accepted:
transformers' WordPiece turns a word of over 100 characters into [UNK],
ours (the original's) one of over 200. The tokenizer.json written here
records ours (200), which the `tokenizers` library honours; transformers
5's BertTokenizer builds its model with its own 100 (docs/conversion.md).
"""

import dataclasses
import os

from albert_toolkit import output_files
from albert_toolkit import text_files
from albert_toolkit import wordpiece_vocab
from albert_toolkit.wordpiece_vocab import CLS
from albert_toolkit.wordpiece_vocab import CONTINUATION
from albert_toolkit.wordpiece_vocab import MASK
from albert_toolkit.wordpiece_vocab import MAX_INPUT_CHARS_PER_WORD
from albert_toolkit.wordpiece_vocab import PAD
from albert_toolkit.wordpiece_vocab import SEP
from albert_toolkit.wordpiece_vocab import SPECIAL_TOKENS
from albert_toolkit.wordpiece_vocab import UNK
from albert_tf.checkpoints.hf_files import CONFIG_NAME
from albert_tf.checkpoints.hf_files import SPECIAL_TOKENS_MAP
from albert_tf.checkpoints.hf_files import SPIECE_MODEL
from albert_tf.checkpoints.hf_files import TOKENIZER_CONFIG
from albert_tf.checkpoints.hf_files import TOKENIZER_JSON
from albert_tf.checkpoints.hf_files import VOCAB_TXT
from albert_tf.checkpoints.hf_tokenizer_json import bool_field
from albert_tf.checkpoints.hf_tokenizer_json import json_field

# transformers' longest word (ours is the original's, 200).
HF_MAX_INPUT_CHARS_PER_WORD = 100


@dataclasses.dataclass(frozen=True)
class HfWordPiece:
  """A Hugging Face directory's WordPiece tokenizer, as albert_tf uses it.

  Attributes:
    tokens: the vocabulary in id order.
    vocab_text: the vocabulary file's bytes (vocab.txt as it is, or the
      tokens one a line when rebuilt from tokenizer.json).
    do_lower_case: lower-case and strip accents (our rule ties the two).
    source: the file the vocabulary came from.
  """
  tokens: tuple
  vocab_text: bytes
  do_lower_case: bool
  source: str
  kind = "wordpiece"


# transformers' tokenizer classes of each kind we read.
SENTENCEPIECE_CLASSES = ("AlbertTokenizer", "AlbertTokenizerFast")
WORDPIECE_CLASSES = ("BertTokenizer", "BertTokenizerFast")
# A class defined by tokenizer.json alone (its model says the kind).
JSON_CLASS = "PreTrainedTokenizerFast"


def tokenizer_class(hf_dir):
  """(tokenizer_class, the file giving it) as AutoTokenizer looks it up:
  tokenizer_config.json's, else config.json's; (None, None) when neither
  names one."""
  for name in (TOKENIZER_CONFIG, CONFIG_NAME):
    path = os.path.join(hf_dir, name)
    if os.path.exists(path):
      value = text_files.read_json_object(path).get("tokenizer_class")
      if value is not None:
        return json_field({"tokenizer_class": value}, "tokenizer_class", str,
                          path), path
  return None, None


def _json_model_type(hf_dir):
  path = os.path.join(hf_dir, TOKENIZER_JSON)
  if not os.path.exists(path):
    return None
  model = text_files.read_json_object(path).get("model")
  return model.get("type") if isinstance(model, dict) else None


def is_wordpiece(hf_dir):
  """Whether `hf_dir`'s tokenizer is WordPiece (vocab.txt, a WordPiece
  tokenizer.json) rather than SentencePiece (spiece.model, a Unigram
  tokenizer.json): its tokenizer_class says, and its files must have that
  kind; without a class, the kind of the files there (both kinds are
  refused)."""
  json_type = _json_model_type(hf_dir)
  spm_files = [n for n, there in (
      (SPIECE_MODEL, os.path.exists(os.path.join(hf_dir, SPIECE_MODEL))),
      (f"Unigram {TOKENIZER_JSON}", json_type == "Unigram")) if there]
  wp_files = [n for n, there in (
      (VOCAB_TXT, os.path.exists(os.path.join(hf_dir, VOCAB_TXT))),
      (f"WordPiece {TOKENIZER_JSON}", json_type == "WordPiece")) if there]
  cls, where = tokenizer_class(hf_dir)
  if cls is None or cls == JSON_CLASS:
    if spm_files and wp_files:
      raise ValueError(
          f"{os.path.join(hf_dir, TOKENIZER_CONFIG)}: no field "
          f"tokenizer_class to choose between the SentencePiece "
          f"({', '.join(spm_files)}) and the WordPiece "
          f"({', '.join(wp_files)}) tokenizer there")
    return bool(wp_files)
  for classes, wanted, kind in ((WORDPIECE_CLASSES, wp_files, "WordPiece"),
                                (SENTENCEPIECE_CLASSES, spm_files,
                                 "SentencePiece")):
    if cls in classes:
      if not wanted:
        raise ValueError(
            f"{where}: field tokenizer_class is {cls!r} but {hf_dir} has no "
            f"{kind} tokenizer ({', '.join(spm_files + wp_files) or 'none'}"
            " there)")
      return kind == "WordPiece"
  raise ValueError(
      f"{where}: field tokenizer_class is {cls!r}; albert_tf reads "
      f"{', '.join(SENTENCEPIECE_CLASSES + WORDPIECE_CLASSES)} (and "
      f"{JSON_CLASS} with a tokenizer.json)")


def _vocab_txt_tokens(path, text):
  """The tokens of vocab.txt by our rule (albert_toolkit/wordpiece_vocab.py),
  refused where transformers' rule (the whole line is the token) reads a
  line otherwise: the ids would shift or name other pieces."""
  tokens = wordpiece_vocab.parse_tokens(text, path)
  lines = text.decode("utf-8").split("\n")
  for number, (token, line) in enumerate(zip(tokens, lines), 1):
    if line.rstrip("\r") != token:
      raise ValueError(f"{path}:{number}: line {line!r} is token {token!r} "
                       "for the original's reader, but the whole line for "
                       "transformers'; one token a line, no whitespace")
  return tuple(tokens)


def _json_tokens(path, tokenizer):
  """(tokens in id order, model spec) of a WordPiece tokenizer.json."""
  model = json_field(tokenizer, "model", dict, path)
  if model.get("type") != "WordPiece":
    raise ValueError(f"{path}: field model.type is {model.get('type')!r}; "
                     "a vocab.txt beside it needs a WordPiece model")
  vocab = json_field(model, "vocab", dict, path, "model.")
  by_id = {}
  for token, i in vocab.items():
    if not isinstance(i, int) or i in by_id or not 0 <= i < len(vocab):
      raise ValueError(f"{path}: field model.vocab: id {i!r} of {token!r} is "
                       f"not one of 0..{len(vocab) - 1} once")
    by_id[i] = token
  tokens = tuple(by_id[i] for i in range(len(vocab)))
  bad = [t for t in tokens if not t or len(t.split()) != 1 or t != t.strip()]
  if bad:
    raise ValueError(f"{path}: field model.vocab: token {bad[0]!r} is empty "
                     "or holds whitespace (a vocab.txt line cannot hold it)")
  for field, want in (("continuing_subword_prefix", CONTINUATION),
                      ("unk_token", UNK)):
    if model.get(field, want) != want:
      raise ValueError(f"{path}: field model.{field} is "
                       f"{model.get(field)!r}; ours is {want!r}")
  return tokens, model


def _check_strip_accents(path, obj, where, lower_field, lower):
  """Refuses a `strip_accents` (None: follows lower-casing) other than
  `lower`: our tokenizer strips accents exactly when it lower-cases."""
  strip = obj.get("strip_accents")
  if strip is not None and strip != lower:
    raise ValueError(f"{path}: field {where}strip_accents is {strip!r} with "
                     f"{lower_field} {lower!r}; our tokenizer strips accents "
                     "exactly when it lower-cases")


def _normalizer_lowercase(path, tokenizer):
  """The BertNormalizer's lowercase, after checking the rest is ours (no
  normaliser: `tokenizers` would neither clean, split CJK nor lower-case)."""
  spec = tokenizer.get("normalizer")
  if spec is None:
    raise ValueError(f"{path}: field normalizer is null; `tokenizers` would "
                     "then neither clean the text, split CJK characters nor "
                     "lower-case (ours is BERT's BertNormalizer)")
  if not isinstance(spec, dict) or spec.get("type") != "BertNormalizer":
    raise ValueError(f"{path}: field normalizer is not a BertNormalizer "
                     f"({spec.get('type') if isinstance(spec, dict) else spec!r})"
                     "; ours is BERT's")
  lower = bool_field(spec, "lowercase", True, path)
  for field in ("clean_text", "handle_chinese_chars"):
    if not bool_field(spec, field, True, path):
      raise ValueError(f"{path}: field normalizer.{field} is false; our "
                       "tokenizer always does it (as the original release)")
  _check_strip_accents(path, spec, "normalizer.", "lowercase", lower)
  return lower


def _check_pipeline(path, tokenizer):
  """Refuses the tokenizer.json steps that give other ids than ours: a
  pre-tokenizer other than BERT's, a word limit other than ours (200) or
  transformers' (100, the accepted difference)."""
  spec = tokenizer.get("pre_tokenizer")
  if not isinstance(spec, dict) or spec.get("type") != "BertPreTokenizer":
    raise ValueError(
        f"{path}: field pre_tokenizer is "
        f"{spec.get('type') if isinstance(spec, dict) else spec!r}, not "
        "BertPreTokenizer; ours splits at whitespace and punctuation as BERT's")
  limit = tokenizer["model"].get("max_input_chars_per_word",
                                 HF_MAX_INPUT_CHARS_PER_WORD)
  if limit not in (MAX_INPUT_CHARS_PER_WORD, HF_MAX_INPUT_CHARS_PER_WORD):
    raise ValueError(
        f"{path}: field model.max_input_chars_per_word is {limit!r}; ours is "
        f"{MAX_INPUT_CHARS_PER_WORD} (transformers' "
        f"{HF_MAX_INPUT_CHARS_PER_WORD} is the one difference accepted)")


def _config_lowercase(path, config):
  """tokenizer_config.json's do_lower_case (BertTokenizer's default: true),
  after refusing the settings our tokenizer cannot honour."""
  lower = bool_field(config, "do_lower_case", True, path)
  if not bool_field(config, "tokenize_chinese_chars", True, path):
    raise ValueError(f"{path}: field tokenize_chinese_chars is false; our "
                     "tokenizer always makes each CJK character a word")
  if not bool_field(config, "do_basic_tokenize", True, path):
    raise ValueError(f"{path}: field do_basic_tokenize is false; our "
                     "tokenizer always splits at whitespace and punctuation")
  _check_strip_accents(path, config, "", "do_lower_case", lower)
  if config.get("never_split"):
    raise ValueError(f"{path}: field never_split is set; our tokenizer "
                     "splits every word")
  return lower


def read_wordpiece(hf_dir, vocab_size=None):
  """The WordPiece tokenizer of the Hugging Face directory `hf_dir`.

  Reads `vocab.txt` (a `tokenizer.json` beside it must hold the same
  tokens), else the WordPiece model of `tokenizer.json`; do_lower_case
  from `tokenizer_config.json` (its `strip_accents`,
  `tokenize_chinese_chars`, `do_basic_tokenize`, `never_split` checked)
  and the tokenizer.json's BertNormalizer, which must agree.

  Args:
    hf_dir: the directory.
    vocab_size: the model's vocab_size (None: not checked).

  Returns:
    HfWordPiece.

  Raises:
    ValueError: one line naming the file and field.
  """
  config_path = os.path.join(hf_dir, TOKENIZER_CONFIG)
  config = (text_files.read_json_object(config_path)
            if os.path.exists(config_path) else {})
  lower = _config_lowercase(config_path, config)
  vocab_path = os.path.join(hf_dir, VOCAB_TXT)
  json_path = os.path.join(hf_dir, TOKENIZER_JSON)
  tokens = vocab_text = None
  if os.path.exists(vocab_path):
    with open(vocab_path, "rb") as f:
      vocab_text = f.read()
    tokens, source = _vocab_txt_tokens(vocab_path, vocab_text), vocab_path
  if os.path.exists(json_path):
    tokenizer = text_files.read_json_object(json_path)
    json_tokens, _ = _json_tokens(json_path, tokenizer)
    if tokens is not None and json_tokens != tokens:
      first = next((i for i, (a, b) in enumerate(zip(tokens, json_tokens))
                    if a != b), min(len(tokens), len(json_tokens)))
      raise ValueError(f"{json_path}: field model.vocab differs from "
                       f"{vocab_path} (from id {first}); not one tokenizer")
    json_lower = _normalizer_lowercase(json_path, tokenizer)
    _check_pipeline(json_path, tokenizer)
    if json_lower != lower:
      raise ValueError(f"{json_path}: field normalizer.lowercase is "
                       f"{json_lower} but {config_path} do_lower_case is "
                       f"{lower}; transformers would use the json's")
    if tokens is None:
      source = json_path
      vocab_text = "".join(t + "\n" for t in json_tokens).encode("utf-8")
      tokens = tuple(wordpiece_vocab.parse_tokens(vocab_text, json_path))
  if tokens is None:
    raise ValueError(f"{hf_dir}: no {VOCAB_TXT} or WordPiece {TOKENIZER_JSON}")
  if vocab_size is not None and len(tokens) != vocab_size:
    raise ValueError(f"{source}: {len(tokens)} tokens but config.json "
                     f"vocab_size is {vocab_size}; not the model's tokenizer "
                     "(every token id would be another piece's)")
  return HfWordPiece(tokens, vocab_text, lower, source)


def _special(content):
  return {"content": content, "lstrip": False, "normalized": False,
          "rstrip": False, "single_word": False, "special": True}


def tokenizer_config(do_lower_case, model_max_length=512):
  """tokenizer_config.json of transformers' BertTokenizer for our
  tokenization."""
  return {
      "tokenizer_class": "BertTokenizer",
      "do_lower_case": do_lower_case,
      "do_basic_tokenize": True,
      "never_split": None,
      "tokenize_chinese_chars": True,
      "strip_accents": None,  # follows do_lower_case, as ours
      "clean_up_tokenization_spaces": True,
      "model_max_length": model_max_length,
      **special_tokens_map(),
  }


def special_tokens_map():
  return {"unk_token": UNK, "sep_token": SEP, "pad_token": PAD,
          "cls_token": CLS, "mask_token": MASK}


def tokenizer_json(tokens, do_lower_case):
  """The `tokenizers` library's description of our WordPiece tokenizer
  (BERT's: BertNormalizer, BertPreTokenizer, [CLS] A [SEP] (B [SEP])),
  with our longest word (MAX_INPUT_CHARS_PER_WORD)."""
  ids = {t: i for i, t in enumerate(tokens)}

  def special(token, type_id):
    return {"SpecialToken": {"id": token, "type_id": type_id}}

  def sequence(name, type_id):
    return {"Sequence": {"id": name, "type_id": type_id}}

  return {
      "version": "1.0",
      "truncation": None,
      "padding": None,
      "added_tokens": [dict(_special(t), id=ids[t]) for t in
                       sorted(SPECIAL_TOKENS, key=ids.get)],
      "normalizer": {"type": "BertNormalizer", "clean_text": True,
                     "handle_chinese_chars": True, "strip_accents": None,
                     "lowercase": do_lower_case},
      "pre_tokenizer": {"type": "BertPreTokenizer"},
      "post_processor": {
          "type": "TemplateProcessing",
          "single": [special(CLS, 0), sequence("A", 0), special(SEP, 0)],
          "pair": [special(CLS, 0), sequence("A", 0), special(SEP, 0),
                   sequence("B", 1), special(SEP, 1)],
          "special_tokens": {t: {"id": t, "ids": [ids[t]], "tokens": [t]}
                             for t in (CLS, SEP)}},
      "decoder": {"type": "WordPiece", "prefix": CONTINUATION,
                  "cleanup": True},
      "model": {"type": "WordPiece", "unk_token": UNK,
                "continuing_subword_prefix": CONTINUATION,
                "max_input_chars_per_word": MAX_INPUT_CHARS_PER_WORD,
                "vocab": ids},
  }


def write_wordpiece(hf_dir, vocab_file, do_lower_case, model_max_length=512):
  """Writes vocab.txt (our vocabulary, byte for byte), tokenizer_config.json
  (BertTokenizer), special_tokens_map.json and tokenizer.json, each
  atomically.

  Args:
    hf_dir: an existing directory.
    vocab_file: our WordPiece vocabulary (one token a line).
    do_lower_case: whether the model's text is lower-cased.
    model_max_length: the longest input (max_position_embeddings).

  Raises:
    ValueError: a vocabulary transformers would read otherwise.
  """
  with open(vocab_file, "rb") as f:
    text = f.read()
  tokens = _vocab_txt_tokens(vocab_file, text)
  output_files.atomic_write(os.path.join(hf_dir, VOCAB_TXT), text)
  output_files.write_json(os.path.join(hf_dir, TOKENIZER_CONFIG),
                          tokenizer_config(do_lower_case, model_max_length))
  output_files.write_json(os.path.join(hf_dir, SPECIAL_TOKENS_MAP),
                          special_tokens_map())
  output_files.write_json(os.path.join(hf_dir, TOKENIZER_JSON),
                          tokenizer_json(tokens, do_lower_case))
