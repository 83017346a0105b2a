"""checkpoints.hf_tokenizer: Hugging Face tokenizer files read and written.

The reference is transformers itself: tests/testdata/hf/tokenizer_strings.json
holds the ids transformers 5.24's AlbertTokenizer gave on the fixture
tokenizers (tools/make_hf_fixtures.py), one loaded from `spiece.model`, one
saved as `tokenizer.json` only.
"""

import json
import os
import shutil

import pytest
from sentencepiece import sentencepiece_model_pb2

from albert_tf.checkpoints import hf_tokenizer
from data_prep import tokenization
from tests.testing.repo_paths import HF_FIXTURES

SPIECE_DIR = os.path.join(HF_FIXTURES, "tokenizer_spiece")
JSON_DIR = os.path.join(HF_FIXTURES, "tokenizer_json")

# docs/conversion.md "Differences from transformers' tokenizer": transformers
# cuts the SentencePiece user-defined pieces ( ) " - . – £ € out of the text
# before its Unigram model, so the word-start marker U+2581 moves around
# them; the pieces' characters are the same.
DIFFERENT = ('He said: "No, thank you."',
             "(parenthesised) - dash – en dash £5 €10",
             "e-mail: a.b@c.d")


def _table():
  with open(os.path.join(HF_FIXTURES, "tokenizer_strings.json"),
            encoding="utf-8") as f:
    return json.load(f)


def _ours(read):
  tokenizer = tokenization.FullTokenizer(
      read.source, do_lower_case=read.do_lower_case, model_proto=read.spm_model)
  return tokenizer, lambda text: ([tokenizer.cls_id] +
                                  tokenizer.encode_ids(text) +
                                  [tokenizer.sep_id])


@pytest.mark.parametrize("fixture,source", [
    ("tokenizer_spiece", "spiece.model"), ("tokenizer_json", "tokenizer.json")])
def test_ids_are_transformers_ids(fixture, source):
  read = hf_tokenizer.read_tokenizer(os.path.join(HF_FIXTURES, fixture))
  assert os.path.basename(read.source) == source
  assert (read.do_lower_case, read.keep_accents) == (True, False)
  tokenizer, encode = _ours(read)
  table = _table()
  different = []
  for text, ids in zip(table["strings"], table[fixture]["ids"]):
    ours = encode(text)
    if ours == ids:
      continue
    different.append(text)
    # Only where the word-start marker sits differs: the same characters.
    chars = lambda i: "".join(tokenizer.convert_ids_to_tokens(i)).replace(
        tokenization.SPIECE_UNDERLINE, "")
    assert chars(ours) == chars(ids), text
  assert tuple(different) == DIFFERENT
  # The accents, LaTeX quotes, digit commas, spaces and full-width forms
  # agree (the other strings).
  assert len(table["strings"]) - len(DIFFERENT) == 14


def _proto(data):
  proto = sentencepiece_model_pb2.ModelProto()
  proto.ParseFromString(data)
  return proto


def test_tokenizer_json_rebuilds_the_spiece_model():
  """tokenizer.json was saved from spiece.model: the rebuilt model has its
  pieces, scores, types, charsmap and special ids."""
  rebuilt = _proto(hf_tokenizer.read_tokenizer(JSON_DIR).spm_model)
  with open(os.path.join(SPIECE_DIR, "spiece.model"), "rb") as f:
    original = _proto(f.read())
  assert [(p.piece, p.score, p.type) for p in rebuilt.pieces] == [
      (p.piece, p.score, p.type) for p in original.pieces]
  types = {p.type for p in original.pieces}
  assert types == {1, 2, 3, 4}  # normal, unknown, control, user-defined
  for field in ("precompiled_charsmap", "add_dummy_prefix",
                "remove_extra_whitespaces", "escape_whitespaces"):
    assert (getattr(rebuilt.normalizer_spec, field) ==
            getattr(original.normalizer_spec, field)), field
  assert len(rebuilt.normalizer_spec.precompiled_charsmap) > 100_000
  for field in ("pad_id", "unk_id", "bos_id", "eos_id", "model_type"):
    assert (getattr(rebuilt.trainer_spec, field) ==
            getattr(original.trainer_spec, field)), field


def test_write_tokenizer_round_trip(tmp_path):
  hf_tokenizer.write_tokenizer(str(tmp_path),
                               os.path.join(SPIECE_DIR, "spiece.model"),
                               do_lower_case=False, model_max_length=64)
  assert sorted(os.listdir(tmp_path)) == [
      "special_tokens_map.json", "spiece.model", "tokenizer_config.json"]
  read = hf_tokenizer.read_tokenizer(str(tmp_path))
  with open(os.path.join(SPIECE_DIR, "spiece.model"), "rb") as f:
    assert read.spm_model == f.read()
  assert (read.do_lower_case, read.keep_accents) == (False, False)
  with open(tmp_path / "tokenizer_config.json") as f:
    config = json.load(f)
  assert config["tokenizer_class"] == "AlbertTokenizer"
  assert (config["keep_accents"], config["remove_space"],
          config["model_max_length"]) == (False, True, 64)
  assert (config["pad_token"], config["unk_token"], config["cls_token"],
          config["sep_token"], config["mask_token"]["content"]) == (
              "<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]")
  with open(tmp_path / "special_tokens_map.json") as f:
    assert json.load(f)["mask_token"]["lstrip"] is True


def _copy(src, tmp_path, *names):
  for name in names:
    shutil.copyfile(os.path.join(src, name), tmp_path / name)
  return tmp_path


def _write(path, text):
  path.write_text(text, encoding="utf-8")


def _tokenizer_json(tmp_path, edit):
  with open(os.path.join(JSON_DIR, "tokenizer.json"), encoding="utf-8") as f:
    data = json.load(f)
  edit(data)
  _write(tmp_path / "tokenizer.json", json.dumps(data))
  return tmp_path


def _swap_specials(data):
  vocab = data["model"]["vocab"]
  vocab[0], vocab[2] = vocab[2], vocab[0]
  for token in data["added_tokens"]:
    token["id"] = {0: 2, 2: 0}.get(token["id"], token["id"])


def _error(hf_dir):
  with pytest.raises(ValueError) as e:
    hf_tokenizer.read_tokenizer(str(hf_dir))
  message = str(e.value)
  assert "\n" not in message
  return message


def test_missing_files(tmp_path):
  assert _error(tmp_path) == (f"{tmp_path}: no spiece.model or tokenizer.json "
                              "(the model's SentencePiece tokenizer)")


def test_config_errors(tmp_path):
  _copy(SPIECE_DIR, tmp_path, "spiece.model")
  config = tmp_path / "tokenizer_config.json"
  _write(config, '{"do_lower_case": true,')
  assert _error(tmp_path).startswith(f"{config}:1: not valid JSON (")
  _write(config, '{"do_lower_case": "yes"}')
  assert _error(tmp_path) == (f"{config}: field do_lower_case must be true or "
                              "false, got 'yes'")
  _write(config, '{"keep_accents": true}')
  assert _error(tmp_path).startswith(
      f"{config}: field keep_accents is true; albert_tf's tokenization always "
      "drops accents")


def test_not_the_models_vocabulary(tmp_path):
  _copy(SPIECE_DIR, tmp_path, "spiece.model")
  _write(tmp_path / "config.json", '{"vocab_size": 30000}')
  assert _error(tmp_path).startswith(
      f"{tmp_path / 'spiece.model'}: 600 pieces but config.json vocab_size "
      "is 30000; not the model's tokenizer")
  (tmp_path / "spiece.model").write_bytes(b"not a model")
  assert _error(tmp_path).startswith(
      f"{tmp_path / 'spiece.model'}: not a SentencePiece model")


@pytest.mark.parametrize("edit,expected", [
    (_swap_specials, ": special pieces at ids 0-4 are ['[CLS]', '<unk>', "
     "'<pad>', '[SEP]', '[MASK]'], not ['<pad>', '<unk>', '[CLS]', '[SEP]', "
     "'[MASK]']; not an ALBERT tokenizer"),
    (lambda d: d.update(model={"type": "WordPiece", "vocab": {"a": 0}}),
     ": a WordPiece vocabulary (model.type WordPiece), not the SentencePiece "
     "(Unigram) model this reader rebuilds (hf_wordpiece.py reads "
     "WordPiece)"),
    (lambda d: d["model"].update(type="BPE"),
     ": field model.type is 'BPE'; only Unigram (SentencePiece) ALBERT "
     "tokenizers are supported"),
    (lambda d: d["model"].pop("vocab"), ": field model.vocab is missing"),
    (lambda d: d["model"]["vocab"].__setitem__(7, ["x"]),
     ": field model.vocab[7] is not a [piece, score] pair"),
    (lambda d: d.update(pre_tokenizer=None),
     ": field pre_tokenizer has no Metaspace pre-tokenizer; not a "
     "SentencePiece tokenizer"),
])
def test_tokenizer_json_errors(tmp_path, edit, expected):
  _tokenizer_json(tmp_path, edit)
  assert _error(tmp_path) == f"{tmp_path / 'tokenizer.json'}{expected}"


def test_both_files_must_hold_one_vocabulary(tmp_path):
  _copy(SPIECE_DIR, tmp_path, "spiece.model")
  _copy(JSON_DIR, tmp_path, "tokenizer.json")
  read = hf_tokenizer.read_tokenizer(str(tmp_path))  # the same: spiece.model
  assert read.source == str(tmp_path / "spiece.model")
  _tokenizer_json(tmp_path, lambda d: d["model"]["vocab"][100].__setitem__(
      1, d["model"]["vocab"][100][1] - 1.0))
  assert _error(tmp_path) == (
      f"{tmp_path / 'tokenizer.json'}: field model.vocab differs from "
      f"{tmp_path / 'spiece.model'} (600 vs 600 pieces, first difference at "
      "id 100); transformers reads tokenizer.json, albert_tf spiece.model: "
      "remove the one that is not the model's")


def test_malformed_tokenizer_json(tmp_path):
  _write(tmp_path / "tokenizer.json", '{"model": [}')
  assert _error(tmp_path).startswith(
      f"{tmp_path / 'tokenizer.json'}:1: not valid JSON (") and _error(
          tmp_path).endswith("column 12)")


def test_write_refuses_keep_accents(tmp_path):
  with pytest.raises(ValueError, match="^keep_accents=True: albert_tf's "):
    hf_tokenizer.write_tokenizer(str(tmp_path),
                                 os.path.join(SPIECE_DIR, "spiece.model"),
                                 do_lower_case=True, keep_accents=True)
  assert not os.listdir(tmp_path)
