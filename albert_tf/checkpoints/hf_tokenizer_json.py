"""A Hugging Face `tokenizer.json` (a Unigram model) as a SentencePiece model.

transformers 5 saves an ALBERT tokenizer as `tokenizer.json` only: the
`tokenizers` library's Unigram model (every piece with its score), the
SentencePiece normaliser's `precompiled_charsmap` and a Metaspace
pre-tokenizer (U+2581 before each word). `proto_from_tokenizer_json` builds
the equivalent SentencePiece ModelProto (what `spiece.model` holds), and
`check_rebuilt` checks it segments ordinary text as the json's vocabulary.
"""

import base64
import math

import numpy as np
from sentencepiece import sentencepiece_model_pb2

from albert_toolkit import text_files

# ALBERT's special pieces at their ids (the release's 30k-clean.model, ours:
# data_prep/train_sentencepiece.py).
SPECIAL_PIECES = ("<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]")
SPIECE_UNDERLINE = "\u2581"
PAD_ID, UNK_ID = 0, 1

# SentencePiece ModelProto.SentencePiece.Type values.
_NORMAL, _UNKNOWN, _CONTROL, _USER_DEFINED = 1, 2, 3, 4

# Ordinary text the rebuilt model must segment as the json's Unigram
# vocabulary does (see check_rebuilt).
_CHECK_TEXTS = (
    "the quick brown fox jumps over the lazy dog",
    "i am a cat and i have no name yet",
    "he said that he would come back in the morning",
    "there was nothing to be done about it",
    "what is the matter with you",
)


def bool_field(obj, name, default, path):
  """obj[name] (a JSON true/false; `default` when absent)."""
  value = obj.get(name, default)
  if not isinstance(value, bool):
    raise ValueError(f"{path}: field {name} must be true or false, got "
                     f"{value!r}")
  return value


def json_field(obj, name, kind, path, where=""):
  """obj[name] of type `kind`; one-line ValueError naming path and field
  (`where`: the enclosing fields, e.g. "model.")."""
  if not isinstance(obj, dict) or name not in obj:
    raise ValueError(f"{path}: field {where}{name} is missing")
  value = obj[name]
  if not isinstance(value, kind) or (isinstance(value, bool) and
                                     kind is not bool):
    raise ValueError(f"{path}: field {where}{name} has the wrong type "
                     f"({type(value).__name__})")
  return value


def _normalizers(spec):
  """The normalizer and its members (a Sequence's `normalizers`)."""
  if not isinstance(spec, dict):
    return []
  members = spec.get("normalizers")
  if spec.get("type") == "Sequence" and isinstance(members, list):
    return [m for m in members if isinstance(m, dict)]
  return [spec]


def _charsmap(tokenizer, path):
  """The SentencePiece normaliser's precompiled_charsmap (bytes; b"" when
  the json has no Precompiled normaliser)."""
  for member in _normalizers(tokenizer.get("normalizer")):
    if member.get("type") == "Precompiled":
      value = member.get("precompiled_charsmap")
      if value is None:
        return b""
      try:
        # tokenizers writes it base64-encoded; some writers as a byte list.
        return (bytes(value) if isinstance(value, list) else
                base64.b64decode(value, validate=True))
      except (TypeError, ValueError):
        raise ValueError(f"{path}: field normalizer.precompiled_charsmap is "
                         "neither base64 nor a byte list") from None
  return b""


def _add_dummy_prefix(tokenizer, path):
  """Whether words get the leading U+2581 (the Metaspace pre-tokenizer)."""
  spec = tokenizer.get("pre_tokenizer")
  members = (spec.get("pretokenizers", []) if isinstance(spec, dict) and
             spec.get("type") == "Sequence" else [spec])
  for member in members:
    if isinstance(member, dict) and member.get("type") == "Metaspace":
      if member.get("replacement", SPIECE_UNDERLINE) != (
          SPIECE_UNDERLINE):
        raise ValueError(f"{path}: field pre_tokenizer.replacement is "
                         f"{member.get('replacement')!r}, not U+2581; not a "
                         "SentencePiece tokenizer")
      scheme = member.get("prepend_scheme",
                          "always" if member.get("add_prefix_space", True)
                          else "never")
      return scheme != "never"
  raise ValueError(f"{path}: field pre_tokenizer has no Metaspace "
                   "pre-tokenizer; not a SentencePiece tokenizer")


def _piece_types(tokenizer, vocab, unk_id, path):
  """id -> SentencePiece type from the json's added tokens: special ones
  are control pieces (<unk> the unknown one), the others user-defined (as
  transformers' converter added the model's own control and user-defined
  pieces)."""
  types = {unk_id: _UNKNOWN} if unk_id is not None else {}
  added = tokenizer.get("added_tokens") or []
  if not isinstance(added, list):
    raise ValueError(f"{path}: field added_tokens must be a list")
  for token in added:
    token_id = json_field(token, "id", int, path, "added_tokens[].")
    content = json_field(token, "content", str, path, "added_tokens[].")
    if not 0 <= token_id < len(vocab) or vocab[token_id][0] != content:
      raise ValueError(
          f"{path}: field added_tokens: {content!r} has id {token_id}, "
          "not its piece's in model.vocab (tokens added after the vocabulary "
          "are not supported)")
    if token_id != unk_id:
      types[token_id] = _CONTROL if token.get("special") else _USER_DEFINED
  return types


def _unigram_vocab(tokenizer, path):
  """(model spec, [(piece, score)]) of a Unigram tokenizer.json."""
  model = json_field(tokenizer, "model", dict, path)
  kind = model.get("type")
  if kind == "WordPiece":
    raise ValueError(f"{path}: a WordPiece vocabulary (model.type "
                     "WordPiece), not the SentencePiece (Unigram) model this "
                     "reader rebuilds (hf_wordpiece.py reads WordPiece)")
  if kind != "Unigram":
    raise ValueError(f"{path}: field model.type is {kind!r}; only Unigram "
                     "(SentencePiece) ALBERT tokenizers are supported")
  if model.get("byte_fallback"):
    raise ValueError(f"{path}: field model.byte_fallback is true; ALBERT's "
                     "SentencePiece models have no byte pieces")
  raw = json_field(model, "vocab", list, path, "model.")
  vocab = []
  for i, entry in enumerate(raw):
    if (not isinstance(entry, list) or len(entry) != 2 or
        not isinstance(entry[0], str) or
        not isinstance(entry[1], (int, float)) or isinstance(entry[1], bool)
        or not math.isfinite(entry[1])):
      raise ValueError(f"{path}: field model.vocab[{i}] is not a "
                       "[piece, score] pair")
    vocab.append((entry[0], float(entry[1])))
  return model, vocab


def check_same_vocabulary(sp, source, path):
  """The tokenizer.json at `path` has the pieces and scores of the
  SentencePiece processor `sp` (of `source`): transformers reads
  tokenizer.json when a directory has both, albert_tf spiece.model."""
  _, vocab = _unigram_vocab(text_files.read_json_object(path), path)
  theirs = [(p, float(np.float32(s))) for p, s in vocab]
  ours = [(sp.id_to_piece(i), sp.get_score(i))
          for i in range(sp.get_piece_size())]
  if theirs == ours:
    return
  first = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b),
               min(len(ours), len(theirs)))
  raise ValueError(
      f"{path}: field model.vocab differs from {source} ({len(theirs)} vs "
      f"{len(ours)} pieces, first difference at id {first}); transformers "
      "reads tokenizer.json, albert_tf spiece.model: remove the one that is "
      "not the model's")


def proto_from_tokenizer_json(path):
  """A SentencePiece ModelProto equivalent to the Unigram model of the
  tokenizer.json at `path` (pieces, scores, types, the normaliser's
  precompiled_charsmap, ALBERT's pad 0 / unk 1 and no bos/eos)."""
  tokenizer = text_files.read_json_object(path)
  model, vocab = _unigram_vocab(tokenizer, path)
  unk_id = model.get("unk_id")
  if unk_id is not None and (not isinstance(unk_id, int) or
                             not 0 <= unk_id < len(vocab)):
    raise ValueError(f"{path}: field model.unk_id is {unk_id!r}, not an id "
                     "of model.vocab")
  types = _piece_types(tokenizer, vocab, unk_id, path)
  proto = sentencepiece_model_pb2.ModelProto()
  for i, (piece, score) in enumerate(vocab):
    proto.pieces.add(piece=piece, score=score, type=types.get(i, _NORMAL))
  charsmap = _charsmap(tokenizer, path)
  norm = proto.normalizer_spec
  norm.name = "nmt_nfkc" if charsmap else "identity"
  norm.precompiled_charsmap = charsmap
  norm.add_dummy_prefix = _add_dummy_prefix(tokenizer, path)
  norm.remove_extra_whitespaces = True
  norm.escape_whitespaces = True
  trainer = proto.trainer_spec
  trainer.model_type = sentencepiece_model_pb2.TrainerSpec.UNIGRAM
  trainer.vocab_size = len(vocab)
  trainer.pad_id, trainer.unk_id, trainer.bos_id, trainer.eos_id = (
      PAD_ID, UNK_ID, -1, -1)
  trainer.pad_piece = SPECIAL_PIECES[PAD_ID]
  trainer.unk_piece = SPECIAL_PIECES[UNK_ID]
  return proto, vocab


def _viterbi(text, scores, max_len):
  """Highest-scoring segmentation of `text` into pieces of `scores` (the
  Unigram model's rule), or None when some character is no piece."""
  best = [(0.0, None)] + [(-math.inf, None)] * len(text)
  for end in range(1, len(text) + 1):
    for start in range(max(0, end - max_len), end):
      score = scores.get(text[start:end])
      if score is not None and best[start][0] + score > best[end][0]:
        best[end] = (best[start][0] + score, start)
  if best[-1][1] is None:
    return None
  pieces, end = [], len(text)
  while end:
    start = best[end][1]
    pieces.append(text[start:end])
    end = start
  return pieces[::-1]


def check_rebuilt(sp, vocab, path):
  """The rebuilt model segments ordinary text as the json's vocabulary and
  scores do (a mistake in the rebuild, e.g. a wrong piece type, shows)."""
  scores = {p: s for p, s in vocab if p not in SPECIAL_PIECES}
  max_len = max(len(p) for p in scores)
  for text in _CHECK_TEXTS:
    expected = _viterbi(
        SPIECE_UNDERLINE +
        text.replace(" ", SPIECE_UNDERLINE), scores, max_len)
    if expected is None:
      continue  # a character the vocabulary lacks: no reference here
    got = sp.encode(text, out_type=str)
    if got != expected:
      raise ValueError(f"{path}: the SentencePiece model rebuilt from it "
                       f"segments {text!r} as {got}, its Unigram vocabulary "
                       f"as {expected}")
