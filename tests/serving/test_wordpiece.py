"""BERT WordPiece vocabularies (`vocab_file`) in text-in SavedModels: the
preprocessing export's ids equal the original `FullTokenizer`'s (Model
Garden's copy) on a table of tricky Chinese and mixed strings, each serving
kind's text signature equals its ids signature on the reference's ids, the
refusals, and (slow) every code point against the reference."""

import sys
import unicodedata

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # pylint: disable=unused-import  (SavedModel text ops)
import tf_keras
from official.nlp.tools import tokenization as bert_tokenization

from albert_tf.serving import export_lib
from albert_tf.serving import preprocessing
from albert_tf.serving import serving_params
from albert_tf.serving import wordpiece
from albert_tf.tasks import export as tasks_export
from data_prep import wordpiece as data_prep_wordpiece
from tests.testing import export_testlib as lib

SEQ = 24
LONG = "a" * 201  # one character over the original's 200: [UNK]
TABLE = [
    "我爱北京天安门。",
    "BERT模型很好用!!! 中国人",
    "ＡＢＣ　ａｂｃ（测试）１２３ ①",  # full-width forms, U+3000 space
    "\uf900 \u8c48 \U00020000\U00020001 \u3400 \U00030000",  # CJK blocks
    "Café CAFÉ naïve RÉSUMÉS é",
    "İstanbul STRASSE ß ﬁ",
    "ΟΔΟΣ ΑΣ. Σ ΑΣ\x01Β α\u00adΣ ΑΣ\u0301",  # final sigma and its context
    "the\x00man\x01is\u200beat\ufeffing a\u00adfood \x7f\ufffd",
    "tab\tnew\nline\rcr \x0b\x0c\x1c\x85 \u2028 \u00a0nbsp",
    "emoji 👍🏽 ❤️ 🇯🇵 家👨‍👩‍👧",
    "unaffable unaffx ## #the a##a eat##ing",
    "ひらがな カタカナ 한국어",
    LONG, "a" * 200, "é" * 150 + " " + "\U00020000" * 3,
    "\U0001d400" * 201,  # 201 four-byte letters: over the byte limit too
    "",
    "   ",
    "\x01\x02",
]
PAIR = [TABLE[-i - 1] for i in range(len(TABLE))]


@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
  return lib.write_wordpiece_vocab(str(tmp_path_factory.mktemp("wordpiece")))


def reference(vocab_file, lower):
  """The original FullTokenizer, with the original release's 200-character
  word limit (Model Garden's copy says 400)."""
  tok = bert_tokenization.FullTokenizer(vocab_file, do_lower_case=lower)
  tok.wordpiece_tokenizer.max_input_chars_per_word = 200
  return tok


def reference_ids(tok, text):
  return tok.convert_tokens_to_ids(tok.tokenize(text))


def reference_pack(tok, a, b=None, seq_length=SEQ, max_first=None):
  """run_classifier's packing of the reference's ids (lists)."""
  ids_a, ids_b = reference_ids(tok, a), reference_ids(tok, b or "")
  cls, sep = tok.vocab["[CLS]"], tok.vocab["[SEP]"]
  if b is None:
    ids = [cls] + ids_a[:seq_length - 2] + [sep]
    types = [0] * len(ids)
  else:
    if max_first is not None:
      ids_a = ids_a[:max_first]
      ids_b = ids_b[:seq_length - 3 - len(ids_a)]
    while len(ids_a) + len(ids_b) > seq_length - 3:
      (ids_a if len(ids_a) > len(ids_b) else ids_b).pop()
    ids = [cls] + ids_a + [sep] + ids_b + [sep]
    types = [0] * (len(ids_a) + 2) + [1] * (len(ids_b) + 1)
  pad = seq_length - len(ids)
  return {"input_word_ids": np.array(ids + [0] * pad, np.int32),
          "input_mask": np.array([1] * len(ids) + [0] * pad, np.int32),
          "input_type_ids": np.array(types + [0] * pad, np.int32)}


def stacked(rows):
  return {k: np.stack([r[k] for r in rows]) for k in rows[0]}


def call(fn, **inputs):
  return {k: v.numpy() for k, v in fn(**{k: tf.constant(v) for k, v in
                                         inputs.items()}).items()}


@pytest.mark.parametrize("lower", [True, False])
def test_preprocessing_export_ids_equal_full_tokenizer(vocab, lower,
                                                       tmp_path):
  path = export_lib.export_preprocessing(
      "", str(tmp_path), seq_length=SEQ, do_lower_case=lower,
      vocab_file=vocab)
  assert (tmp_path / "1" / "assets" / "vocab.txt").read_text(
      encoding="utf-8") == open(vocab, encoding="utf-8").read()
  loaded = tf.saved_model.load(path)
  tok = reference(vocab, lower)
  texts = np.array(TABLE + [b"caf\xc3 ok \xff\xfe ok"], dtype=object)
  got = call(loaded.signatures["tokenize"], text=texts)
  wants = [reference_ids(tok, t) for t in texts]
  for i, (text, want) in enumerate(zip(texts, wants)):
    assert got["token_ids"][i, :got["num_tokens"][i]].tolist() == want, (
        repr(text))
  # The table reaches the rules it is for: "##" pieces, [UNK] (unknown
  # and over-long words), CJK and the final sigma.
  flat = sum(wants, [])
  unk = tok.vocab["[UNK]"]
  assert tok.vocab["##a"] in flat and unk in flat and tok.vocab["门"] in flat
  assert wants[TABLE.index(LONG)] == [unk]
  assert (tok.vocab["##ς"] in flat) == lower
  packed = call(loaded.signatures["text_pair"], text_a=np.array(TABLE),
                text_b=np.array(PAIR))
  want = stacked([reference_pack(tok, a, b) for a, b in zip(TABLE, PAIR)])
  for key, value in want.items():
    np.testing.assert_array_equal(packed[key], value, err_msg=key)


@pytest.fixture(scope="module")
def kinds(vocab, tmp_path_factory):
  """Each serving kind exported text-in with the WordPiece vocabulary."""
  tmp = tmp_path_factory.mktemp("wordpiece_kinds")
  tf_keras.utils.set_random_seed(5)
  settings = {
      "classification": dict(num_labels=3, num_text_fields=2),
      "regression": dict(num_text_fields=1),
      "multiple_choice": dict(num_choices=2),
      "squad": dict(doc_stride=0, max_query_length=6, max_answer_length=5),
      "squad_windows": dict(max_query_length=6, max_answer_length=5,
                            doc_stride=8),
      "tagging": dict(label_names=["O", "B-X", "I-X"]),
      "encoder": {},
  }
  out = {}
  for name, extra in settings.items():
    task_cls, params = tasks_export.task_for_flags(
        name.replace("_windows", ""), "serving",
        dict(vocab_file=vocab, max_seq_length=SEQ, **extra))
    model = tasks_export.model_for_flags(
        task_cls, "serving",
        lib.tiny_config(lib.WORDPIECE_VOCAB_SIZE), params)
    path = tasks_export.export_model(task_cls, "serving", model, params,
                                     str(tmp / name))
    out[name] = (tf.saved_model.load(path), params)
  return out


@pytest.mark.slow  # seven exports
@pytest.mark.parametrize("kind", ["classification", "regression",
                                  "multiple_choice", "squad", "encoder"])
def test_text_signature_equals_reference_ids(kinds, vocab, kind):
  """serving_default(text) == serve_ids(the reference's packed ids)."""
  loaded, params = kinds[kind]
  tok = reference(vocab, True)
  a, b = np.array(TABLE), np.array(PAIR)
  if kind == "classification":
    text = dict(text_a=a, text_b=b)
    ids = stacked([reference_pack(tok, x, y) for x, y in zip(a, b)])
  elif kind == "multiple_choice":
    text = dict(context=a, choices=np.stack([b, a], 1))
    ids = stacked([stacked([reference_pack(tok, x, y),
                            reference_pack(tok, x, x)])
                   for x, y in zip(a, b)])
  elif kind == "squad":
    text = dict(question=a, context=b)
    ids = stacked([reference_pack(tok, x, y, max_first=6)
                   for x, y in zip(a, b)])
  else:
    text = dict(text=a)
    ids = stacked([reference_pack(tok, x) for x in a])
  got = call(loaded.signatures["serving_default"], **text)
  want = call(loaded.signatures["serve_ids"], **ids)
  for key in want:
    if want[key].dtype.kind == "f":
      np.testing.assert_allclose(got[key], want[key], atol=1e-5, rtol=0,
                                 err_msg=key)
    else:
      np.testing.assert_array_equal(got[key], want[key], err_msg=key)
  if kind == "squad":
    # The span's pieces joined: a "##" piece to the one before (a first
    # one loses its "##"), others after a space.
    inv = {i: t for t, i in tok.vocab.items()}
    for row, text_b in enumerate(b):
      start, end = want["answer_start"][row], want["answer_end"][row]
      # Context positions: after [CLS] question [SEP] (segment 0).
      offset = int(((ids["input_type_ids"][row] == 0) &
                    (ids["input_mask"][row] == 1)).sum())
      pieces = [inv[i] for i in ids["input_word_ids"][
          row, offset + start:offset + end + 1]]
      # (-1, -1): no span inside the passage.
      words = (" ".join(pieces).replace(" ##", "").removeprefix("##")
               if (start, end) != (-1, -1) else "")
      assert got["answer_text"][row].decode() == words, repr(text_b)
  assert params.vocab_file == vocab


@pytest.mark.slow  # the exports above
def test_squad_windows_and_tagging_serve_text(kinds, vocab):
  tok = reference(vocab, True)
  windows, _ = kinds["squad_windows"]
  out = call(windows.signatures["serving_default"],
             question=np.array(TABLE[:3]),
             context=np.array([" ".join(TABLE[:6])] * 3))
  assert out["num_windows"].tolist() == [out["num_windows"][0]] * 3
  assert out["num_windows"][0] > 1
  tagging, _ = kinds["tagging"]
  texts = np.array(["我爱 北京 unaffable", "Café \x01 ΟΔΟΣ"])
  got = call(tagging.signatures["serving_default"], text=texts)
  for row, text in enumerate(texts):
    words = text.split()
    # A word of which nothing is left is one [UNK], as in training.
    pieces = [reference_ids(tok, w) or [tok.vocab["[UNK]"]] for w in words]
    ids = [tok.vocab["[CLS]"]] + sum(pieces, []) + [tok.vocab["[SEP]"]]
    mask = (np.arange(SEQ) < len(ids)).astype(np.int32)[None]
    ids = np.array(ids + [0] * (SEQ - len(ids)), np.int32)[None]
    labels = call(tagging.signatures["serve_ids"], input_word_ids=ids,
                  input_mask=mask,
                  input_type_ids=np.zeros_like(ids))["label"][0]
    first = 1 + np.cumsum([0] + [len(p) for p in pieces[:-1]])
    want = [labels[f] for f in first]
    assert got["num_words"][row] == len(words)
    assert got["label"][row, :len(words)].tolist() == want, repr(text)


def test_both_or_neither_tokenizer_refused(vocab, tmp_path):
  spm = lib.train_spm(str(tmp_path))
  config_file = str(tmp_path / "albert_config.json")
  lib.tiny_config(lib.WORDPIECE_VOCAB_SIZE).to_json_file(config_file)
  for settings, word in ((dict(spm_model_file=spm, vocab_file=vocab),
                          "both are set"), ({}, "neither is set")):
    with pytest.raises(ValueError) as e:
      lib.export(str(tmp_path / word.split()[0]),
                 settings=dict(settings, max_seq_length=8),
                 task="classification", random_init=True,
                 config_files=[config_file])
    message = str(e.value)
    assert "--spm_model_file" in message and "--vocab_file" in message
    assert word in message and "\n" not in message
    assert not (tmp_path / word.split()[0]).exists()
  with pytest.raises(ValueError, match="exactly one"):
    preprocessing.make_preprocessor(spm, vocab)
  with pytest.raises(ValueError, match="exactly one"):
    serving_params.ServingParams().check_text_in("x", lib.tiny_config())


def test_bad_vocabularies_refused(vocab, tmp_path):
  lines = open(vocab, encoding="utf-8").read().splitlines()
  cases = {
      "dup": (lines + ["the"], r"dup\.txt:77: token 'the' repeats line 6"),
      "nounk": ([t for t in lines if t != "[UNK]"], r"no \[UNK\] token"),
  }
  for name, (content, pattern) in cases.items():
    path = tmp_path / f"{name}.txt"
    path.write_text("\n".join(content) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=pattern):
      wordpiece.read_vocab(str(path))
  with pytest.raises(ValueError, match="76 tokens, but the model's "
                     "vocab_size is 500"):
    export_lib.export_preprocessing(
        "", str(tmp_path / "size"), seq_length=8, config=lib.tiny_config(),
        vocab_file=vocab)
  with pytest.raises(ValueError, match="no such WordPiece vocabulary"):
    wordpiece.read_vocab(str(tmp_path / "missing.txt"))


def test_scored_lines_and_a_blank_line_read_as_in_data_prep(vocab, tmp_path):
  """The original's vocabulary rule, which data prep and fine-tuning use
  (albert_toolkit/wordpiece_vocab.py): a line's first field is its token
  (`piece<TAB>score`), a blank line is the token " ". The export reads the
  file alike, and its ids equal data prep's tokenizer's on the table (the
  blank line's " " must not match the spaces of a text)."""
  lines = open(vocab, encoding="utf-8").read().splitlines()
  scored = tmp_path / "scored.txt"
  scored.write_text("\n".join(lines[:4] + [""] + [
      f"{t}\t-{i}.5" for i, t in enumerate(lines[4:])]) + "\n",
                    encoding="utf-8")
  for lower in (True, False):
    ours = data_prep_wordpiece.WordPieceTokenizer(str(scored), lower)
    assert wordpiece.read_vocab(str(scored)) == lines[:4] + [" "] + lines[4:]
    graph = preprocessing.WordPiecePreprocessor(str(scored),
                                                do_lower_case=lower)
    texts = TABLE + ["the  a", " a ", "a \t b", " "]
    got = graph.tokenize_ids(tf.constant(texts)).to_list()
    assert got == [ours.encode_ids(t) for t in texts]
    assert 4 not in {i for ids in got for i in ids}


@pytest.mark.slow
@pytest.mark.parametrize("lower", [True, False])
def test_every_code_point(tmp_path, lower):
  """"x<c>y" for every code point c: the graph's ids are the reference's
  but where Python's Unicode tables (Unicode 14 in Python 3.11) leave c
  unassigned and the tokenizer's newer ICU tables make it punctuation."""
  path = tmp_path / "xy.txt"
  path.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nx\ny\n##y\n[MASK]\n",
                  encoding="utf-8")
  tok = reference(str(path), lower)
  graph = preprocessing.WordPiecePreprocessor(str(path), do_lower_case=lower)
  chars = [chr(cp) for cp in range(sys.maxunicode + 1)
           if not 0xD800 <= cp <= 0xDFFF]
  got = graph.tokenize_ids(tf.constant(
      [("x" + c + "y").encode("utf-8") for c in chars]))
  # Rows as slices of the flat ids (RaggedTensor.to_list is slower).
  flat = got.flat_values.numpy().tolist()
  splits = got.row_splits.numpy().tolist()
  differ = {}
  for i, c in enumerate(chars):
    ids, want = flat[splits[i]:splits[i + 1]], reference_ids(tok, "x" + c + "y")
    if ids != want:
      differ[c] = (want, ids)
  assert differ, "the tables no longer differ: update the docs"
  for c, (want, ids) in differ.items():
    assert unicodedata.category(c) == "Cn", f"U+{ord(c):04X}"
    assert (want, ids) == ([1], [4, 1, 5]), f"U+{ord(c):04X}"
  print(f"lower={lower}: {len(chars) - len(differ)} of {len(chars)} code "
        f"points equal; split as punctuation: {len(differ)}")
