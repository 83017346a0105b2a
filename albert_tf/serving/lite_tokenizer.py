"""ALBERT's text normalisation folded into a SentencePiece model, for TFLite.

A .tflite file has no string ops but TF Text's kernels, so the rules
`data_prep.tokenization.normalize_text` applies before SentencePiece cannot
run as regexes there. They are compiled instead into the SentencePiece
model's own normaliser: its `precompiled_charsmap`, a longest-match map from
character sequences to replacements that `FastSentencepieceTokenizer`
applies inside its TFLite kernel, followed by the model's whitespace rules
(extra spaces removed, a dummy prefix added).

The folded map sends every character `c` to `own(rule(c))`: `rule` is
`tokenization.character_rule` (invisible characters dropped, word breaks to
a space, NFKD without combining marks, lower-casing when the run
lower-cases) and `own` the model's own normaliser
(e.g. `nmt_nfkc`), so the folded model's pieces are those of `own` applied to
`normalize_text`'s output. Keys of several characters carry what is not
per character: the quote rule (`tokenization.QUOTE_REPLACEMENTS`, also
with one invisible character inside the pair) and the compositions `own` makes across characters (Hangul jamo; canonical pairs of
two starters such as Bengali vowel signs).

Two rules are not a map of character sequences and are applied by
`pre_rules` before text reaches the interpreter (the Python runner does;
on a device the caller does, docs/lite.md): NUL (U+0000) cannot be a key and
is dropped, and a capital sigma that `str.lower` makes final ("ς", decided
by the characters after it) is replaced by "ς".
"""

import functools
import io
import os
import tempfile
import unicodedata

import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2

from data_prep import tokenization

_SURROGATES = range(0xD800, 0xE000)
_HANGUL_L = range(0x1100, 0x1113)
_HANGUL_V = range(0x1161, 0x1176)
_HANGUL_T = range(0x11A8, 0x11C3)
_SIGMA_CONTEXT = 64
_KEPT_CATEGORIES = ("Cn", "Co")  # characters either side that decide a final sigma


def pre_rules(text, lower):
  """The two rules the folded model cannot hold (see module doc)."""
  text = text.replace("\x00", "")
  if lower and "\u03a3" in text:
    chars = list(text)
    for i, c in enumerate(text):
      if c != "\u03a3":
        continue
      start = max(0, i - _SIGMA_CONTEXT)
      before = text[start:i].lower()
      window = text[start:i + 1 + _SIGMA_CONTEXT].lower()
      if window[len(before)] == "\u03c2":
        chars[i] = "\u03c2"
    text = "".join(chars)
  return text


@functools.lru_cache(maxsize=1)
def _compositions():
  """(first, second) -> composed, for canonical compositions of two
  characters with combining class 0 (the ones combining-mark dropping keeps),
  Hangul included."""
  pairs = {}
  for cp in range(0x110000):
    if cp in _SURROGATES:
      continue
    decomposition = unicodedata.decomposition(chr(cp))
    if not decomposition or decomposition.startswith("<"):
      continue
    parts = [chr(int(x, 16)) for x in decomposition.split()]
    if (len(parts) == 2 and not any(map(unicodedata.combining, parts)) and
        unicodedata.normalize("NFC", "".join(parts)) == chr(cp)):
      pairs[tuple(parts)] = chr(cp)
  return pairs


def _folded_rules(normalizer_proto, lower):
  """Key -> replacement of the folded map (keys that change)."""
  own = spm.SentencePieceNormalizer(model_proto=normalizer_proto)

  def normalize(text):
    return own.normalize(text) if text else ""

  compositions = _compositions()
  firsts = {first for first, _ in compositions}
  seconds = {second for _, second in compositions}
  rules = {}
  ends_with = {}  # a composition's first half -> [c whose rule ends in it]
  starts_with = {}  # its second half -> [c whose rule starts with it]
  for cp in range(1, 0x110000):  # NUL: see pre_rules
    if cp in _SURROGATES:
      continue
    c = chr(cp)
    # Unassigned and private-use characters have no decomposition or case
    # and are not invisible: the rule keeps them (the model's own map may
    # not, e.g. one built on a newer Unicode).
    ruled = (c if unicodedata.category(c) in _KEPT_CATEGORIES else
             tokenization.character_rule(c, lower))
    folded = normalize(ruled)
    if folded != c:
      rules[c] = folded
    if ruled and ruled[-1] in firsts:
      ends_with.setdefault(ruled[-1], []).append(c)
    if ruled and ruled[0] in seconds:
      starts_with.setdefault(ruled[0], []).append(c)
  dropped = [c for c, ruled_c in rules.items() if ruled_c == ""]
  for old, new in tokenization.QUOTE_REPLACEMENTS:
    rules[old] = normalize(new)
    # The rule runs after invisible characters are dropped: one between
    # the two quote characters still makes the pair.
    for c in dropped:
      rules[old[0] + c + old[1:]] = normalize(new)

  def add(key):
    ruled = "".join(tokenization.character_rule(c, lower) for c in key)
    folded = normalize(ruled)
    piecewise = "".join(rules.get(c, c) for c in key)
    if folded != piecewise:
      rules[key] = folded

  # Compositions across characters: the first character's rule ends with
  # the pair's first half, the second's starts with its second half.
  for first, second in compositions:
    for a in ends_with.get(first, ()):
      for b in starts_with.get(second, ()):
        add(a + b)
  # Hangul (composed by rule, not listed in unicodedata): conjoining jamo
  # as typed in NFD text, and a syllable followed by a final jamo.
  for l in map(chr, _HANGUL_L):
    for v in map(chr, _HANGUL_V):
      add(l + v)
      for t in map(chr, _HANGUL_T):
        add(l + v + t)
  for lv in range(0xAC00, 0xD7A4, len(_HANGUL_T) + 1):
    for t in map(chr, _HANGUL_T):
      add(chr(lv) + t)
  return rules


def _hex(text):
  return " ".join(f"{ord(c):X}" for c in text)


def compile_charsmap(rules):
  """The `precompiled_charsmap` bytes of `rules` (SentencePiece's own
  builder, reached through training a throwaway model on the rules TSV:
  the normaliser API cannot return its compiled form)."""
  with tempfile.TemporaryDirectory(prefix="albert_lite_") as tmp:
    tsv = os.path.join(tmp, "rules.tsv")
    with open(tsv, "w", encoding="utf-8") as f:
      for key, value in sorted(rules.items()):
        f.write(f"{_hex(key)}\t{_hex(value)}\n")
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(["a b c"] * 4), model_writer=model,
        vocab_size=8, model_type="char", normalization_rule_tsv=tsv,
        hard_vocab_limit=False, minloglevel=3, num_threads=1)
  return sentencepiece_model_pb2.ModelProto.FromString(
      model.getvalue()).normalizer_spec.precompiled_charsmap


def normalizer_part(proto):
  """What of the ModelProto `proto` its normaliser reads (the normalizer
  spec, and whether whitespace is a piece suffix), serialized: models
  trained with the same normalisation rule share it, whatever their pieces."""
  part = sentencepiece_model_pb2.ModelProto()
  part.normalizer_spec.CopyFrom(proto.normalizer_spec)
  part.trainer_spec.treat_whitespace_as_suffix = (
      proto.trainer_spec.treat_whitespace_as_suffix)
  return part.SerializeToString(deterministic=True)


@functools.lru_cache(maxsize=4)
def folded_charsmap(normalizer_proto, lower):
  """The `precompiled_charsmap` of the folded map of a normaliser
  (`normalizer_part`), computed once a process (seconds: every code point
  goes through the model's normaliser)."""
  return compile_charsmap(_folded_rules(normalizer_proto, lower))


def folded_model(spm_model_file, do_lower_case):
  """The serialized SentencePiece model of `spm_model_file` with ALBERT's
  normalisation folded into its normaliser (same pieces and ids)."""
  with open(spm_model_file, "rb") as f:
    own_proto = f.read()
  proto = sentencepiece_model_pb2.ModelProto.FromString(own_proto)
  spec = proto.normalizer_spec
  if not spec.remove_extra_whitespaces:  # the model's own, once folded
    raise ValueError(
        f"{spm_model_file}: the SentencePiece model keeps extra whitespace "
        "(normalizer_spec.remove_extra_whitespaces is false), which ALBERT's "
        "normalisation collapses; a .tflite cannot tokenize its text as the "
        "data tools do")
  spec.precompiled_charsmap = folded_charsmap(normalizer_part(proto),
                                              bool(do_lower_case))
  spec.name = f"albert_{'lower' if do_lower_case else 'cased'}+{spec.name}"
  spec.normalization_rule_tsv = ""
  return proto.SerializeToString()
