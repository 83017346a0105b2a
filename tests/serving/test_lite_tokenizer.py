"""The folded SentencePiece normaliser of .tflite exports equals data_prep's
normalisation followed by the model's own normaliser, character for
character (compared as normalised strings, so no vocabulary hides a
difference), for both casings."""

import random
import sys
import unicodedata

import pytest
import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2

from albert_tf.serving import lite_tokenizer
from data_prep import tokenization
from tests.serving.test_export_text import TRICKY
from tests.testing import export_testlib as lib

MORE_TRICKY = [
    "x\x00y \x00",                       # NUL: dropped by pre_rules
    "ΟΔΟΣ ΣΟΦΟΣ, Σ. ΑΣ\u0301 μΣ",         # final sigma after cased letters
    unicodedata.normalize("NFD", "한국어 텍스트 각"),  # conjoining jamo
    "\uac00\u11a8 \u1100\u1161\u11a8",    # syllable + final jamo, L V T
    "\u09c7\u09be \u09cb",                # Bengali vowel sign composition
    "``a`\u00ad`b'''",                    # quotes around a dropped char
    "１,０００,０００ ｆｕｌｌ－ｗｉｄｔｈ",
    "\ufb01\ufb02 \u2163 \u33a1 \u2460",  # ligatures, numerals, squares
    "\u05e2\u05d1\u05e8\u05d9\u05ea \u0627\u0644\u0639\u0631\u0628\u064a\u0629",
    b"bad \xff\xfe utf-8".decode("utf-8", "replace"),
    "\U0001F600\U0001F44D\U0001F3FD \U0001F1EF\U0001F1F5",
    "\u00a0\u2007\u202f\u3000\u1680",     # no-break and other spaces
    "\u0130\u0131 I\u0307 \u1e9e \u01c5",
]


def _assigned():
  return [chr(c) for c in range(1, sys.maxunicode + 1)
          if not 0xD800 <= c <= 0xDFFF and
          unicodedata.category(chr(c)) not in ("Cn", "Co")]


@pytest.fixture(scope="module")
def spm_file(tmp_path_factory):
  return lib.train_spm(str(tmp_path_factory.mktemp("lite_tokenizer")))


def _normalizers(spm_file, lower):
  flags = dict(add_dummy_prefix=True, escape_whitespaces=True,
               remove_extra_whitespaces=True)
  with open(spm_file, "rb") as f:
    own = spm.SentencePieceNormalizer(model_proto=f.read(), **flags)
  folded = spm.SentencePieceNormalizer(
      model_proto=lite_tokenizer.folded_model(spm_file, lower), **flags)
  return own, folded


@pytest.mark.parametrize("lower", [True, False])
def test_folded_normaliser_equals_data_prep(spm_file, lower):
  own, folded = _normalizers(spm_file, lower)

  def expected(text):
    return own.normalize(tokenization.normalize_text(text, lower=lower))

  def got(text):
    return folded.normalize(lite_tokenizer.pre_rules(text, lower))

  for text in TRICKY + MORE_TRICKY:
    assert got(text) == expected(text), repr(text)
  # Random strings over every assigned character (and the tricky ones
  # again, so compositions and quotes meet their neighbours).
  rng = random.Random(7)
  pool = _assigned()
  tricky = "".join(TRICKY + MORE_TRICKY) + " " * 40
  for _ in range(1500):
    text = "".join(rng.choice(pool) if rng.random() < 0.5 else
                   rng.choice(tricky) for _ in range(rng.randint(0, 10)))
    assert got(text) == expected(text), repr(text)


def test_without_pre_rules_only_nul_and_final_sigma_differ(spm_file):
  """The two rules pre_rules carries are the ones the map cannot hold."""
  own, folded = _normalizers(spm_file, True)
  for text in ("x\x00y", "ΟΔΟΣ"):
    assert (folded.normalize(text) !=
            own.normalize(tokenization.normalize_text(text)))
  assert lite_tokenizer.pre_rules("a\x00b ΟΔΟΣ Σ", True) == "ab ΟΔΟς Σ"
  assert lite_tokenizer.pre_rules("ΟΔΟΣ", False) == "ΟΔΟΣ"


def test_model_keeping_extra_whitespace_is_refused(spm_file, tmp_path):
  proto = sentencepiece_model_pb2.ModelProto()
  with open(spm_file, "rb") as f:
    proto.ParseFromString(f.read())
  proto.normalizer_spec.remove_extra_whitespaces = False
  path = tmp_path / "keeps_spaces.model"
  path.write_bytes(proto.SerializeToString())
  with pytest.raises(ValueError, match="keeps_spaces.model.*extra whitespace"):
    lite_tokenizer.folded_model(str(path), True)


def test_folded_model_keeps_pieces(spm_file):
  """Same pieces and ids: only the normaliser changes."""
  with open(spm_file, "rb") as f:
    own = sentencepiece_model_pb2.ModelProto.FromString(f.read())
  folded = sentencepiece_model_pb2.ModelProto.FromString(
      lite_tokenizer.folded_model(spm_file, True))
  assert [p.piece for p in folded.pieces] == [p.piece for p in own.pieces]
  assert folded.normalizer_spec.name == "albert_lower+nmt_nfkc"
  assert (folded.normalizer_spec.precompiled_charsmap !=
          own.normalizer_spec.precompiled_charsmap)


def test_models_trained_alike_share_one_folded_map(spm_file, tmp_path):
  """The folded map depends on the model's normaliser alone: a model of
  other pieces with the same normaliser reuses the one computed in this
  process; a change to the normaliser is another key."""
  with open(spm_file, "rb") as f:
    own = sentencepiece_model_pb2.ModelProto.FromString(f.read())
  other = sentencepiece_model_pb2.ModelProto()
  other.CopyFrom(own)
  other.pieces[5].score -= 1.0
  other.trainer_spec.input[:] = ["elsewhere.txt"]
  path = tmp_path / "other.model"
  path.write_bytes(other.SerializeToString())
  lite_tokenizer.folded_model(spm_file, True)
  hits = lite_tokenizer.folded_charsmap.cache_info().hits
  folded = [sentencepiece_model_pb2.ModelProto.FromString(
      lite_tokenizer.folded_model(p, True)) for p in (spm_file, str(path))]
  assert lite_tokenizer.folded_charsmap.cache_info().hits == hits + 2
  assert folded[0].normalizer_spec == folded[1].normalizer_spec
  assert folded[1].pieces[5].score == other.pieces[5].score
  part = lite_tokenizer.normalizer_part(own)
  assert lite_tokenizer.normalizer_part(other) == part
  for field, value in (("name", "nfkc"), ("precompiled_charsmap", b"x"),
                       ("remove_extra_whitespaces", False)):
    changed = sentencepiece_model_pb2.ModelProto()
    changed.CopyFrom(own)
    setattr(changed.normalizer_spec, field, value)
    assert lite_tokenizer.normalizer_part(changed) != part, field
  changed.CopyFrom(own)
  changed.trainer_spec.treat_whitespace_as_suffix = True
  assert lite_tokenizer.normalizer_part(changed) != part
