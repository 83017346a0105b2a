"""Tests for data_prep.tokenization and data_prep.train_sentencepiece."""


import pytest
import sentencepiece as spm

from data_prep import tokenization
from data_prep import train_sentencepiece
from tests.testing.botchan_testlib import botchan_spm


@pytest.fixture(scope="module")
def model(tmp_path_factory):
  return botchan_spm(tmp_path_factory)[0]


def test_normalize_text():
  assert tokenization.normalize_text("  Hello \t\n World  ") == "hello world"
  assert tokenization.normalize_text("Caf\u00e9 na\u00efve", lower=False) == "Cafe naive"
  assert tokenization.normalize_text("``Quote''", lower=False) == '"Quote"'
  # NFKD: compatibility forms decompose (ﬁ ligature -> fi, full-width A -> A).
  assert tokenization.normalize_text("\ufb01ne \uff21", lower=False) == "fine A"
  assert tokenization.normalize_text(b"ABC") == "abc"


def test_is_start_piece():
  assert tokenization.is_start_piece("\u2581the")
  assert tokenization.is_start_piece(",")
  assert tokenization.is_start_piece("19")          # digits: own unit
  assert tokenization.is_start_piece("\u00e9t")     # non a-z
  assert tokenization.is_start_piece("<unk>")
  assert not tokenization.is_start_piece("ing")
  assert not tokenization.is_start_piece("ING")


def test_release_recipe_layout(model):
  sp = spm.SentencePieceProcessor(model_file=model)
  assert sp.get_piece_size() == 3000
  assert [sp.id_to_piece(i) for i in range(5)] == [
      "<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
  assert sp.bos_id() == -1 and sp.eos_id() == -1
  assert all(sp.is_control(i) for i in (0, 2, 3, 4)) and sp.is_unknown(1)
  user = [sp.id_to_piece(i) for i in range(5, 13)]
  assert tuple(user) == train_sentencepiece.DEFAULT_USER_SYMBOLS
  with open(model[:-len(".model")] + ".vocab", encoding="utf-8") as f:
    vocab = [line.split("\t")[0] for line in f]
  assert vocab[:5] == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
  assert len(vocab) == 3000


def test_full_tokenizer(model):
  tok = tokenization.FullTokenizer(model, do_lower_case=True)
  assert (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id) == (
      0, 1, 2, 3, 4)
  assert tok.control_ids == [0, 1, 2, 3, 4]
  assert not set(tok.control_ids) & set(tok.replacement_ids.tolist())
  assert len(tok.replacement_ids) == tok.vocab_size - 5
  text = "The  Headmaster said,  ``Caf\u00e9!''"
  pieces = tok.tokenize(text)
  ids = tok.encode_ids(text)
  assert tok.convert_tokens_to_ids(pieces) == ids
  assert tok.convert_ids_to_tokens(ids) == pieces
  sp = spm.SentencePieceProcessor(model_file=model)
  assert ids == sp.encode(tokenization.normalize_text(text, True))
  assert tok.decode_ids(ids) == tokenization.normalize_text(text, True)
  assert tok.encode_ids_batch([text, "yes"]) == [ids, tok.encode_ids("yes")]
  assert tok.is_control_or_unknown(tok.mask_id)
  assert not tok.is_control_or_unknown(ids[0])


def test_digit_comma_split(model):
  tok = tokenization.FullTokenizer(model)
  sp = tok.sp_model
  raw = sp.encode("in 1905, he", out_type=str)
  pieces = tok.tokenize("in 1905, he")
  assert "," in pieces
  assert not any(len(p) > 1 and p.endswith(",") and p[-2].isdigit()
                 for p in pieces)
  assert "".join(pieces) == "".join(raw)  # same text, only re-split


def test_missing_or_bad_model(tmp_path):
  missing = str(tmp_path / "nope.model")
  with pytest.raises(FileNotFoundError, match="nope.model"):
    tokenization.FullTokenizer(missing)
  bad = tmp_path / "bad.model"
  bad.write_bytes(b"not a model")
  with pytest.raises(ValueError, match="bad.model"):
    tokenization.FullTokenizer(str(bad))


def test_one_vocabulary_check_for_config_fields_and_flags(model):
  """data prep's --vocab_size, fine-tuning's model.vocab_size and serving's
  export all refuse a model of another size through this one check."""
  tokenization.check_vocab_size(model, 3000, 3000, "model.vocab_size")
  tokenization.check_vocab_size(model, 3000, None, "model.vocab_size")
  with pytest.raises(ValueError, match=(
      f"^{model}: 3000 pieces but model.vocab_size is 30000; every token id "
      r"would be another piece's \(use the model's own vocabulary\)")):
    tokenization.check_vocab_size(model, 3000, 30000, "model.vocab_size")
  with pytest.raises(ValueError, match=" but --vocab_size=2999;"):
    tokenization.check_vocab_size(model, 3000, 2999, "--vocab_size")


def test_train_missing_input(tmp_path):
  with pytest.raises(FileNotFoundError, match="missing.txt"):
    train_sentencepiece.train([str(tmp_path / "missing.txt")],
                              str(tmp_path / "m"))
