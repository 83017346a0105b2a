"""Hugging Face Chinese ALBERT directories (a BERT WordPiece vocabulary:
vocab.txt, BertTokenizer's tokenizer_config.json, a WordPiece
tokenizer.json) <-> albert_tf: the vocabulary and lower-casing carried, the
ids the tokenizer.json describes, the outputs of an independent NumPy
forward pass, the round trip, and the one-line refusals.

The directories are written by hand in transformers' formats (no
transformers here): config.json and model.safetensors by
tests/testing/hf_testlib.py, the tokenizer files as bert-base-chinese's.
"""

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401 pylint: disable=unused-import
from official.nlp.tools import tokenization as bert_tokenization
from safetensors import numpy as safetensors_numpy

from albert_tf.checkpoints import hf_wordpiece
from albert_tf.checkpoints.canonical_weights import CheckpointConversionError
from albert_tf.core import run_record
from albert_tf.tasks import all_tasks  # noqa: F401 (registers the tasks)
from albert_tf.tasks import hf_export
from albert_tf.tasks import hf_models
from albert_toolkit import output_files
from albert_toolkit import wordpiece_vocab
from data_prep import wordpiece
from tests.testing import converted_testlib as converted
from tests.testing import export_testlib
from tests.testing import hf_testlib
from tests.testing import wordpiece_testlib
from tests.testing.repo_paths import HF_FIXTURES

TOKENS = wordpiece_testlib.tokens()
# A SentencePiece model (the transformers-made fixtures').
SPM = os.path.join(HF_FIXTURES, "model", "spiece.model")
# Chinese, mixed and tricky strings (full-width forms, accents, CJK
# extension blocks, control characters, punctuation).
TABLE = [
    "我们喜欢学习中文。", "BERT模型很好用!!! 北京人", "ＡＢＣ　ａｂｃ（学生）",
    "\uf900 \U00020000\u3400 \U00030000", "Café CAFÉ naïve é",
    "the\x00cat\x01sat\u200bon a\u00admat", "unaffable playing ## #the a##a",
    "Hello, World! 你好…", "", "a" * 100 + " 我",
]


def _special(token_id, content):
  return {"id": token_id, "content": content, "single_word": False,
          "lstrip": False, "rstrip": False, "normalized": False,
          "special": True}


def _tokenizer_json(tokens, lower, strip_accents=None):
  """bert-base-chinese's tokenizer.json, for `tokens`."""
  ids = {t: i for i, t in enumerate(tokens)}
  return {
      "version": "1.0", "truncation": None, "padding": None,
      "added_tokens": [_special(ids[t], t)
                       for t in wordpiece_vocab.SPECIAL_TOKENS],
      "normalizer": {"type": "BertNormalizer", "clean_text": True,
                     "handle_chinese_chars": True,
                     "strip_accents": strip_accents, "lowercase": lower},
      "pre_tokenizer": {"type": "BertPreTokenizer"},
      "post_processor": {"type": "TemplateProcessing", "single": [
          {"SpecialToken": {"id": "[CLS]", "type_id": 0}},
          {"Sequence": {"id": "A", "type_id": 0}},
          {"SpecialToken": {"id": "[SEP]", "type_id": 0}}]},
      "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
      "model": {"type": "WordPiece", "unk_token": "[UNK]",
                "continuing_subword_prefix": "##",
                "max_input_chars_per_word": 100, "vocab": ids},
  }


def _write_json(path, obj):
  with open(path, "w", encoding="utf-8") as f:
    json.dump(obj, f, ensure_ascii=False)


def _hf_dir(directory, arch="AlbertForSequenceClassification", lower=True,
            tokens=TOKENS, vocab_txt=True, tokenizer_json=True,
            tokenizer_config=None, **config_kw):
  """A Chinese ALBERT directory as the hub's (voidful/albert_chinese_*)."""
  os.makedirs(directory, exist_ok=True)
  config = hf_testlib.hf_config(arch, len(tokens), "relu", **config_kw)
  tensors = hf_testlib.hf_weights(config)
  safetensors_numpy.save_file(tensors, os.path.join(directory,
                                                    "model.safetensors"),
                              metadata={"format": "pt"})
  _write_json(os.path.join(directory, "config.json"), config)
  if vocab_txt:
    with open(os.path.join(directory, "vocab.txt"), "w",
              encoding="utf-8") as f:
      f.write("".join(t + "\n" for t in tokens))
  if tokenizer_json:
    _write_json(os.path.join(directory, "tokenizer.json"),
                _tokenizer_json(tokens, lower))
  _write_json(os.path.join(directory, "tokenizer_config.json"),
              tokenizer_config or {
                  "tokenizer_class": "BertTokenizer", "do_lower_case": lower,
                  "tokenize_chinese_chars": True, "strip_accents": None,
                  "model_max_length": 32})
  return config, tensors


def test_chinese_classifier_converts_and_round_trips(tmp_path):
  hf_dir, out = str(tmp_path / "hf"), str(tmp_path / "ours")
  config, tensors = _hf_dir(hf_dir, num_labels=3)
  hf_models.import_hf(hf_dir, out)
  # The run carries the vocabulary, its fingerprint and lower-casing.
  vocab = os.path.join(out, "vocab.txt")
  with open(vocab, "rb") as f, open(os.path.join(hf_dir, "vocab.txt"),
                                     "rb") as g:
    assert f.read() == g.read()
  facts = run_record.read(out).facts
  assert facts["vocab_file"] == vocab and not facts["spm_model_file"]
  assert facts["vocab_sha256"] == output_files.file_sha256(vocab)
  assert facts["do_lower_case"] is True
  task, model = converted.our_model(out)
  assert task.serving_params({}).vocab_file == vocab
  ids, mask, types = converted.inputs(len(TOKENS))
  ref = hf_testlib.forward(tensors, config, ids, mask, types)
  np.testing.assert_allclose(model(converted.feed(ids, mask, types))["logits"],
                             ref["logits"], atol=1e-5)

  # ours -> HF: the tensors, vocab.txt byte for byte, BertTokenizer files.
  back = str(tmp_path / "hf_back")
  hf_export.export_hf(out, back)
  written = safetensors_numpy.load_file(os.path.join(back,
                                                     "model.safetensors"))
  for name, value in tensors.items():
    np.testing.assert_array_equal(written[name], value, err_msg=name)
  with open(os.path.join(back, "vocab.txt"), "rb") as f, open(vocab,
                                                             "rb") as g:
    assert f.read() == g.read()
  assert not os.path.exists(os.path.join(back, "spiece.model"))
  with open(os.path.join(back, "tokenizer_config.json")) as f:
    tok_config = json.load(f)
  assert (tok_config["tokenizer_class"], tok_config["do_lower_case"],
          tok_config["tokenize_chinese_chars"],
          tok_config["strip_accents"]) == ("BertTokenizer", True, True, None)
  assert tok_config["model_max_length"] == config["max_position_embeddings"]
  with open(os.path.join(back, "tokenizer.json"), encoding="utf-8") as f:
    tok_json = json.load(f)
  hand = _tokenizer_json(TOKENS, True)
  for part in ("normalizer", "pre_tokenizer", "decoder"):
    assert tok_json[part] == hand[part], part
  assert tok_json["model"] == dict(hand["model"],
                                   max_input_chars_per_word=200)
  assert tok_json["post_processor"]["single"] == hand["post_processor"][
      "single"]
  # -> ours again: the same weights and vocabulary.
  again = str(tmp_path / "ours_again")
  hf_models.import_hf(back, again)
  first, second = converted.stored_tensors(out), converted.stored_tensors(again)
  assert sorted(first) == sorted(second)
  for name, value in first.items():
    np.testing.assert_array_equal(second[name], value, err_msg=name)
  assert run_record.read(again).facts["vocab_sha256"] == facts["vocab_sha256"]


@pytest.mark.parametrize("layout", ["albert_tf", "tf1", "model_garden"])
def test_pretrained_model_to_every_layout_carries_vocab_txt(tmp_path, layout):
  hf_dir, out = str(tmp_path / "hf"), str(tmp_path / "ours")
  # tokenizer.json only; one group (Model Garden's encoder has one).
  _hf_dir(hf_dir, arch="AlbertModel", vocab_txt=False, num_hidden_groups=1)
  hf_models.import_hf(hf_dir, out, to_layout=layout)
  with open(os.path.join(out, "vocab.txt"), encoding="utf-8") as f:
    assert f.read().split("\n")[:-1] == TOKENS
  if layout != "albert_tf":
    return
  back = str(tmp_path / "back")
  assert hf_export.export_hf(out, back)[1] == "AlbertModel"
  with open(os.path.join(back, "vocab.txt"), encoding="utf-8") as f:
    assert f.read().split("\n")[:-1] == TOKENS


def _hf_reference(tok_json, tmp_path):
  """The tokenizer a WordPiece tokenizer.json describes, by the original's
  code (Model Garden's copy): its vocabulary, lowercase and word limit."""
  model = tok_json["model"]
  path = str(tmp_path / "json_vocab.txt")
  with open(path, "w", encoding="utf-8") as f:
    f.write("".join(t + "\n" for t in sorted(model["vocab"],
                                             key=model["vocab"].get)))
  tok = bert_tokenization.FullTokenizer(
      path, do_lower_case=tok_json["normalizer"]["lowercase"])
  tok.wordpiece_tokenizer.max_input_chars_per_word = model[
      "max_input_chars_per_word"]
  return tok


@pytest.mark.parametrize("lower", [True, False])
def test_recorded_vocab_gives_the_tokenizer_json_ids(tmp_path, lower):
  # Specials not at 0-4 (bert-base-chinese: [PAD] 0, [UNK] 100, ...).
  tokens = (["[PAD]"] + [t for t in TOKENS if t not in
                         wordpiece_vocab.SPECIAL_TOKENS] + ["[UNK]", "[CLS]",
                                                       "[SEP]", "[MASK]"])
  hf_dir, out = str(tmp_path / "hf"), str(tmp_path / "ours")
  _hf_dir(hf_dir, lower=lower, tokens=tokens, num_labels=2)
  hf_models.import_hf(hf_dir, out)
  params = converted.our_model(out)[0].serving_params({})
  assert params.do_lower_case is lower
  ours = wordpiece.WordPieceTokenizer(params.vocab_file, params.do_lower_case)
  with open(os.path.join(hf_dir, "tokenizer.json"), encoding="utf-8") as f:
    tok_json = json.load(f)
  reference = _hf_reference(tok_json, tmp_path)
  for text in TABLE:
    want = reference.convert_tokens_to_ids(reference.tokenize(text))
    assert ours.encode_ids(text) == want, text
  # The one difference: a word of 101-200 characters is [UNK] to
  # transformers' WordPiece (100), pieces to ours and the original (200).
  long_word = "a" * 150
  assert reference.tokenize(long_word) == ["[UNK]"]
  assert ours.encode_ids(long_word) == [ours.vocab["a"]] + [
      ours.vocab["##a"]] * 149
  tok_json["model"]["max_input_chars_per_word"] = 200
  assert _hf_reference(tok_json, tmp_path).convert_tokens_to_ids(
      _hf_reference(tok_json, tmp_path).tokenize(long_word)) == (
          ours.encode_ids(long_word))


def _edit_json(name, edit):
  def apply(directory):
    path = os.path.join(directory, name)
    with open(path, encoding="utf-8") as f:
      obj = json.load(f)
    edit(obj)
    _write_json(path, obj)
  return apply


def _vocab_line(line):
  def apply(directory):
    with open(os.path.join(directory, "vocab.txt"), "a",
              encoding="utf-8") as f:
      f.write(line + "\n")
  return apply


def _spiece_beside(directory):
  """spiece.model too, and no tokenizer_class to choose."""
  shutil.copyfile(SPM, os.path.join(directory, "spiece.model"))
  _edit_json("tokenizer_config.json",
             lambda c: c.pop("tokenizer_class"))(directory)


@pytest.mark.parametrize("edit,expected", [
    (_edit_json("tokenizer_config.json",
                lambda c: c.update(tokenize_chinese_chars=False)),
     "tokenizer_config.json: field tokenize_chinese_chars is false; our "
     "tokenizer always makes each CJK character a word"),
    (_edit_json("tokenizer_config.json",
                lambda c: c.update(do_lower_case=False, strip_accents=True)),
     "tokenizer_config.json: field strip_accents is True with do_lower_case "
     "False; our tokenizer strips accents exactly when it lower-cases"),
    (_edit_json("tokenizer.json",
                lambda c: c["normalizer"].update(lowercase=False)),
     "tokenizer.json: field normalizer.lowercase is False but "),
    (_edit_json("tokenizer.json",
                lambda c: c["normalizer"].update(handle_chinese_chars=False)),
     "tokenizer.json: field normalizer.handle_chinese_chars is false"),
    (_edit_json("tokenizer.json", lambda c: c["model"]["vocab"].update(
        {"[MASK]": 0, "[PAD]": c["model"]["vocab"]["[MASK]"]})),
     "tokenizer.json: field model.vocab differs from "),
    (_edit_json("config.json", lambda c: c.update(vocab_size=7)),
     f"vocab.txt: {len(TOKENS)} tokens but config.json vocab_size is 7"),
    # Lines transformers reads otherwise than the original (and we) do.
    (_vocab_line("zz\t-1.5"), f"vocab.txt:{len(TOKENS) + 1}: line "
     "'zz\\t-1.5' is token 'zz' for the original's reader, but the whole "
     "line for transformers'"),
    (_vocab_line(""), f"vocab.txt:{len(TOKENS) + 1}: line '' is token ' ' "),
    # tokenizer.json steps that change the ids.
    (_edit_json("tokenizer.json", lambda c: c.update(normalizer=None)),
     "tokenizer.json: field normalizer is null; "),
    (_edit_json("tokenizer.json",
                lambda c: c.update(pre_tokenizer={"type": "Whitespace"})),
     "tokenizer.json: field pre_tokenizer is 'Whitespace', not "
     "BertPreTokenizer"),
    (_edit_json("tokenizer.json", lambda c: c["model"].update(
        max_input_chars_per_word=50)),
     "tokenizer.json: field model.max_input_chars_per_word is 50; ours is "
     "200"),
    # tokenizer_class and the files there disagree.
    (_edit_json("tokenizer_config.json",
                lambda c: c.update(tokenizer_class="AlbertTokenizer")),
     "tokenizer_config.json: field tokenizer_class is 'AlbertTokenizer' but "),
    (_edit_json("tokenizer_config.json",
                lambda c: c.update(tokenizer_class="XLNetTokenizer")),
     "tokenizer_config.json: field tokenizer_class is 'XLNetTokenizer'; "
     "albert_tf reads "),
    (_spiece_beside, "tokenizer_config.json: no field tokenizer_class to "
     "choose between the SentencePiece (spiece.model) and the WordPiece "
     "(vocab.txt, WordPiece tokenizer.json) tokenizer there"),
])
def test_refusals_are_one_line(tmp_path, edit, expected):
  hf_dir, out = str(tmp_path / "hf"), str(tmp_path / "ours")
  _hf_dir(hf_dir, num_labels=2)
  edit(hf_dir)
  with pytest.raises(CheckpointConversionError) as e:
    hf_models.import_hf(hf_dir, out)
  message = str(e.value)
  assert "\n" not in message and os.path.join(hf_dir, "") in message
  assert expected in message, message
  assert not os.path.exists(os.path.join(out, "vocab.txt"))


@pytest.mark.parametrize("where", ["tokenizer_config.json", "config.json"])
def test_tokenizer_class_chooses_between_two_vocabularies(tmp_path, where):
  """spiece.model beside vocab.txt: BertTokenizer (in tokenizer_config.json,
  else config.json, as AutoTokenizer looks) makes it WordPiece."""
  hf_dir, out = str(tmp_path / "hf"), str(tmp_path / "ours")
  _hf_dir(hf_dir, arch="AlbertModel")
  shutil.copyfile(SPM, os.path.join(hf_dir, "spiece.model"))
  if where == "config.json":
    _edit_json("tokenizer_config.json",
               lambda c: c.pop("tokenizer_class"))(hf_dir)
    _edit_json("config.json",
               lambda c: c.update(tokenizer_class="BertTokenizer"))(hf_dir)
  hf_models.import_hf(hf_dir, out)
  assert sorted(n for n in os.listdir(out) if "ckpt" not in n) == [
      "albert_config.json", "checkpoint", "vocab.txt"]
  with open(os.path.join(out, "vocab.txt"), encoding="utf-8") as f:
    assert f.read().split("\n")[:-1] == TOKENS


def test_written_tokenizer_json_is_read_back(tmp_path):
  """Our writer's files are what our reader takes (either lower-casing)."""
  vocab = wordpiece_testlib.write_vocab(tmp_path)
  for lower in (True, False):
    out = tmp_path / f"hf_{lower}"
    out.mkdir()
    hf_wordpiece.write_wordpiece(str(out), vocab, lower, 64)
    read = hf_wordpiece.read_wordpiece(str(out), len(TOKENS))
    assert (read.tokens, read.do_lower_case) == (tuple(TOKENS), lower)
    os.remove(out / "vocab.txt")  # the json alone
    read = hf_wordpiece.read_wordpiece(str(out), len(TOKENS))
    assert read.tokens == tuple(TOKENS) and read.source.endswith(
        "tokenizer.json")


# transformers 5.24's own BertTokenizer saved (tokenizer.json and
# tokenizer_config.json only, as transformers 5 saves) with its ids on a
# table of strings (tools/hf_wordpiece_parity.py --make_fixture).
SAVED = os.path.join(HF_FIXTURES, "tokenizer_wordpiece")


def test_transformers_own_bert_tokenizer_directory(tmp_path):
  read = hf_wordpiece.read_wordpiece(SAVED)
  assert read.source.endswith("tokenizer.json") and read.do_lower_case
  vocab = tmp_path / "vocab.txt"
  vocab.write_bytes(read.vocab_text)
  ours = wordpiece.WordPieceTokenizer(str(vocab), read.do_lower_case)
  assert ours.unk_id == len(read.tokens) - 4  # bert-base-chinese's layout
  with open(os.path.join(SAVED, "expected_ids.json"), encoding="utf-8") as f:
    expected = json.load(f)["ids"]
  differ = [text for text, ids in expected if ours.encode_ids(text) != ids]
  # transformers' 100-character word limit (ours 200), and its per-character
  # lower-casing of a word-final capital sigma (Python's, the original's,
  # gives the final form): the only differences.
  assert differ == [t for t, _ in expected if t.startswith("ΟΔΟΣ") or
                    t.startswith("a" * 101) and len(t.split()[0]) <= 200]
  assert len(differ) == 4


@pytest.mark.slow
def test_converted_chinese_classifier_serves_text(tmp_path):
  """A converted Hugging Face Chinese classifier exports as a text-in
  SavedModel whose in-graph WordPiece gives the converted model's outputs on
  the ids of our Python tokenizer."""
  hf_dir, out = str(tmp_path / "hf"), str(tmp_path / "ours")
  _hf_dir(hf_dir, num_labels=3)
  hf_models.import_hf(hf_dir, out)
  path = export_testlib.export(str(tmp_path / "export"), model_dir=out)
  texts = ["我们喜欢学习中文。", "BERT模型很好用!!! 北京人", "Café 你好…"]
  served = tf.saved_model.load(path).signatures["serving_default"](
      text=tf.constant(texts))
  _, model = converted.our_model(out)
  tokenizer = wordpiece.WordPieceTokenizer(os.path.join(out, "vocab.txt"),
                                           do_lower_case=True)
  cls, sep = (TOKENS.index(t) for t in ("[CLS]", "[SEP]"))
  for i, text in enumerate(texts):
    ids = np.array([[cls, *tokenizer.encode_ids(text), sep]], np.int32)
    logits = model(converted.feed(ids, np.ones_like(ids),
                         np.zeros_like(ids)))["logits"][0]
    np.testing.assert_allclose(served["logits"][i], logits, atol=1e-5,
                               err_msg=text)
