"""data_prep.wordpiece against Model Garden's FullTokenizer (the reference),
and whole-word masking over WordPiece units."""

import collections
import random

import pytest

from albert_toolkit import wordpiece_vocab
from data_prep import pretraining_instances as pi
from data_prep import tokenization
from data_prep import wordpiece
from tests.testing import botchan_testlib
from tests.testing import wordpiece_testlib

mg_tokenization = pytest.importorskip("official.nlp.tools.tokenization")

TRICKY = [
    "我们喜欢学习中文。",
    "我们love学习bert，今天天气很好！",
    "Hello World! The cat sat on the mat.",
    "unaffable playing played plays",
    "Café naïve ÅNGSTRÖM",                    # accents
    "ＡＢＣ ａｂｃ，ＡＢＣ。",                  # full-width forms
    "ΟΔΟΣ οδοσ",                               # final sigma when lower-cased
    "İstanbul",                                # lower() adds a combining dot
    "\U00020000\U0002a700\U0002b740\U0002b820\u3400\uf900\U0002f800 ext",
    "\U0002ceb0\U00031350 after the extension blocks",
    "the\x00cat\u200bsat\u00adon\x1fmat\ufffd",  # dropped control characters
    "the\tcat\nsat\r\u3000on\u2028mat\u00a0x",   # whitespace of all kinds
    "😀 ok😀 😀ok",                              # emoji
    "## ### un##able #hash ##aff able",          # "##" edge cases
    "a" * 150 + " " + "a" * 201 + " " + "b" * 101,  # long words
    "xyz" * 40 + " qqq",                           # unknown words
    "“引号”《书名》……（括号）、顿号：冒号；",       # CJK punctuation
    "e\u0301 n\u0303 \u212b \ufb01",               # combining, Angstrom, ligature
    "",
    "   \t  ",
    "(the)[cat]{sat}'on'\"mat\"-a@b$c%d^e&f*g",
]


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
  return wordpiece_testlib.write_vocab(tmp_path_factory.mktemp("wp"))


def reference(vocab_file, lower):
  ref = mg_tokenization.FullTokenizer(vocab_file, do_lower_case=lower)
  # The original release's limit (Model Garden's default is 400).
  ref.wordpiece_tokenizer.max_input_chars_per_word = (
      wordpiece_vocab.MAX_INPUT_CHARS_PER_WORD)
  return ref


@pytest.mark.parametrize("lower", [True, False])
def test_ids_equal_model_garden(vocab_file, lower):
  ours = wordpiece.WordPieceTokenizer(vocab_file, do_lower_case=lower)
  ref = reference(vocab_file, lower)
  for text in TRICKY:
    want = ref.convert_tokens_to_ids(ref.tokenize(text))
    assert ours.encode_ids(text) == want, text
    assert ours.tokenize(text) == ref.tokenize(text), text


def test_long_word_limit_and_unknown(vocab_file):
  tok = wordpiece.WordPieceTokenizer(vocab_file)
  assert tok.encode_ids("a" * 200) == [tok.vocab["a"]] + [tok.vocab["##a"]] * 199
  assert tok.encode_ids("a" * 201) == [tok.unk_id]
  assert tok.encode_ids("able") == [tok.unk_id]  # only "##able" exists
  assert tok.tokenize("Unaffable") == ["un", "##aff", "##able"]
  cased = wordpiece.WordPieceTokenizer(vocab_file, do_lower_case=False)
  assert cased.tokenize("Café café") == ["Café", "café"]


def test_offsets_round_trip(vocab_file):
  tok = wordpiece.WordPieceTokenizer(vocab_file)
  text = "他是老师，她是Café  naïve unaffable ΟΔΟΣ\u200bİstanbul😀"
  ids, starts, ends = tok.encode_with_offsets(text)
  assert ids == tok.encode_ids(text)
  pieces = tok.convert_ids_to_tokens(ids)
  got = [text[s:e] for s, e in zip(starts, ends)]
  assert got[:7] == list("他是老师，她是")
  assert got[7:9] == ["Café", "naïve"]
  assert got[9:12] == ["un", "aff", "able"] and pieces[9:12] == [
      "un", "##aff", "##able"]
  # A word the lower-casing lengthens (İ -> i + dot) keeps its whole span.
  assert "".join(got[12:]) .startswith("ΟΔΟΣ")
  for s, e in zip(starts, ends):
    assert 0 <= s < e <= len(text)


def test_special_ids_and_controls(vocab_file):
  tok = wordpiece.WordPieceTokenizer(vocab_file)
  assert (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id) == (
      0, 1, 2, 3, 4)
  controls = set(tok.convert_ids_to_tokens(tok.control_ids))
  # Never produced from text: specials, unused, <S>, "##"+CJK, "##", "###",
  # upper case when lower-casing.
  assert {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused1]", "<S>",
          "<T>", "##中", "##", "###", "Hello", "ＡＢＣ"} <= controls
  assert {"我", "##aff", "hello", "，", "😀", "ａｂｃ"}.isdisjoint(controls)
  assert not controls & set(tok.convert_ids_to_tokens(tok.replacement_ids))
  assert len(tok.replacement_ids) + len(tok.control_ids) == tok.vocab_size
  cased = wordpiece.WordPieceTokenizer(vocab_file, do_lower_case=False)
  assert not cased.is_control_or_unknown(cased.vocab["Hello"])


def test_interface_is_shared(vocab_file, tmp_path_factory):
  spm_model = botchan_testlib.botchan_spm(tmp_path_factory)[0]
  for tok, kind, path in (
      (tokenization.load_tokenizer(vocab_file=vocab_file), "wordpiece",
       vocab_file),
      (tokenization.load_tokenizer(spm_model_file=spm_model),
       "sentencepiece", spm_model)):
    assert tok.kind == kind and tok.vocab_path == path
    for name in tokenization.TOKENIZER_INTERFACE:
      assert hasattr(tok, name), (kind, name)
    text = "Hello, world"
    assert tok.convert_tokens_to_ids(tok.tokenize(text)) == tok.encode_ids(text)


@pytest.mark.parametrize("spm,vocab,problem", [
    ("a.model", "vocab.txt", "both are set"), ("", "", "neither is set")])
def test_exactly_one_vocabulary(spm, vocab, problem):
  with pytest.raises(ValueError) as e:
    tokenization.load_tokenizer(spm_model_file=spm, vocab_file=vocab)
  assert str(e.value) == (
      "give exactly one of --spm_model_file (SentencePiece) and --vocab_file "
      f"(BERT WordPiece): {problem}")


def test_bad_vocabularies(tmp_path):
  no_mask = tmp_path / "no_mask.txt"
  no_mask.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n", encoding="utf-8")
  with pytest.raises(ValueError, match=f"{no_mask}: no \\[MASK\\] token"):
    wordpiece.WordPieceTokenizer(str(no_mask))
  dup = tmp_path / "dup.txt"
  dup.write_text("[PAD]\nhello\nx\nhello\n", encoding="utf-8")
  with pytest.raises(ValueError, match=f"{dup}:4: token 'hello' repeats line 2"):
    wordpiece.WordPieceTokenizer(str(dup))
  binary = tmp_path / "bin.txt"
  binary.write_bytes(b"[PAD]\n\xff\xfe\n")
  with pytest.raises(ValueError, match=f"{binary}:2: not UTF-8"):
    wordpiece.WordPieceTokenizer(str(binary))
  with pytest.raises(FileNotFoundError, match="missing.txt"):
    wordpiece.WordPieceTokenizer(str(tmp_path / "missing.txt"))


def _words(tokens, tok):
  """[(start, end)] of each word: a start piece and its ## continuations."""
  spans, start = [], None
  for i, t in enumerate(tokens):
    if t in (tok.cls_id, tok.sep_id):
      if start is not None:
        spans.append((start, i))
      start = None
    elif tok.is_start[t]:
      if start is not None:
        spans.append((start, i))
      start = i
  if start is not None:
    spans.append((start, len(tokens)))
  return spans


def test_whole_word_masks_never_split_a_word(vocab_file):
  tok = wordpiece.WordPieceTokenizer(vocab_file)
  info = pi.TokenInfo.from_tokenizer(tok)
  cfg = pi.InstanceConfig(max_seq_length=64, max_predictions_per_seq=12,
                          masked_lm_prob=0.3, ngram=3)
  text_a = "我们喜欢学习中文 unaffable playing cafe 今天天气很好"
  text_b = "the cat played unaffable ok北京aaaa plays 上海"
  ids = ([tok.cls_id] + tok.encode_ids(text_a) + [tok.sep_id] +
         tok.encode_ids(text_b) + [tok.sep_id])
  words = _words(ids, tok)
  # Each CJK character is a word of its own.
  cjk = [i for i, t in enumerate(ids)
         if wordpiece.is_cjk_char(tok.convert_ids_to_tokens([t])[0][0])]
  assert cjk and all((i, i + 1) in words for i in cjk)
  assert (ids.index(tok.vocab["un"]), ids.index(tok.vocab["un"]) + 3) in words
  replacements = collections.Counter()
  for seed in range(400):
    stats = collections.Counter()
    out, positions, labels, boundary = pi.create_masked_lm_predictions(
        ids, cfg, info, random.Random(seed), stats)
    masked = set(positions)
    for s, e in words:
      covered = masked & set(range(s, e))
      assert not covered or len(covered) == e - s, (seed, s, e)
    assert [ids[p] for p in positions] == labels
    for p in positions:
      if out[p] not in (tok.mask_id, ids[p]):
        replacements[out[p]] += 1
        assert not tok.is_control_or_unknown(out[p])
    assert boundary == [int(t in (tok.cls_id, tok.sep_id) or tok.is_start[t])
                        for t in ids]
  assert sum(replacements.values()) > 50
