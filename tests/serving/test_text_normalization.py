"""In-graph text preprocessing vs data_prep.tokenization on nasty bytes.

Serving (`serving/preprocessing.py`, TF ops) and the corpus/fine-tuning
tokenizer (`data_prep.tokenization`, Python) must give the same ids for the
same bytes, or a served model sees other ids than it was trained on.
"""

import pytest
import tensorflow as tf

from tests.testing import export_testlib as lib
from albert_tf.data import squad_alignment
from albert_tf.serving import preprocessing
from data_prep import tokenization

NASTY = [
    b"the cat sat\x00 on the mat",  # NUL mid-text
    b"\x00", b"a\x00\x00b", b"end\x00",
    "soft\u00adhyphen".encode(),
    "zero\u200bwidth\u200cnon\u200djoiner".encode(),
    "\ufeffbom at start".encode(),
    b"bad \xff\xfe utf8 \xc3",  # invalid bytes, truncated sequence at end
    b"\xc0\x80 overlong nul", b"\xed\xa0\x80 surrogate",
    b"\xf4\x90\x80\x80 big",
    b"\xe2\x82 cut euro \xe2\x82\xac",
    "cafe\u0301 na\u0308ive A\u0300\u0301\u0302".encode(),  # combining marks
    "\u4e2d\u6587 text \u1100\u1161\u11a8".encode(),  # CJK, Hangul jamo
    "emoji \U0001F600\ufe0f ok".encode(),
    b"tab\there\r\nline\nx\x0b\x0c",
    b"many       spaces    here   ", "\u00a0nbsp\u2009thin\u3000ideo".encode(),
    "\u0085nel\u2028line sep".encode(),
    b"ctrl\x01\x07\x1b\x7f x \x1c\x1d\x1e\x1f",
    "Ma\u00dfe \u0130stanbul \u03a3\u03a3 \u03a3\x00x".encode(),  # casing
    "\ufb01 \u2460 \u00bd".encode(),  # NFKD compatibility forms
    b"",
]


@pytest.fixture(scope="module")
def spm_file(tmp_path_factory):
  return lib.train_spm(str(tmp_path_factory.mktemp("norm")))


@pytest.mark.parametrize("lower", [True, False])
def test_in_graph_ids_equal_data_prep_on_nasty_bytes(spm_file, lower):
  python = tokenization.FullTokenizer(spm_file, do_lower_case=lower)
  graph = preprocessing.TextPreprocessor(spm_file, do_lower_case=lower)
  got = graph.tokenize_ids(tf.constant(NASTY)).to_list()
  for text, ids in zip(NASTY, got):
    assert ids == python.encode_ids(text), text
  # The NUL case keeps the whole text (main's code served 4 of its tokens).
  assert len(got[0]) == len(python.encode_ids(b"the cat sat\x00 on the mat"))
  assert len(got[0]) > len(python.encode_ids(b"the cat sat"))


def test_lower_utf8_keeps_text_after_nul():
  texts = ["A\x00B C\x00", "", "\x00\x00X", "\u0130\x00\u03a3\u03a3",
           "\u03a3\u03a3\x00", "NO NUL \u00c9"]
  got = preprocessing.lower_utf8(tf.constant([t.encode() for t in texts]))
  # Lists, not NumPy bytes arrays (those drop trailing NULs).
  assert got.numpy().tolist() == [t.lower().encode() for t in texts]


def test_one_quote_table_for_data_prep_serving_and_squad(monkeypatch):
  """The quote rule is tokenization.QUOTE_REPLACEMENTS: data prep, the
  in-graph normalisation and SQuAD's alignment replay all follow a change
  to it (before, serving and the replay had their own copies)."""
  monkeypatch.setattr(tokenization, "QUOTE_REPLACEMENTS",
                      tokenization.QUOTE_REPLACEMENTS + (("<<", "\u00ab"),))
  text = "Say <<Caf\u00e9>> and ``that''"
  want = tokenization.normalize_text(text)
  assert want == 'say \u00abcafe>> and "that"'
  got = preprocessing.normalize_text(tf.constant([text.encode()]))
  assert got.numpy()[0].decode() == want

  class Tokenizer:  # what normalize_with_map uses of a FullTokenizer
    do_lower_case = True
    normalize = staticmethod(tokenization.normalize_text)

  norm, source = squad_alignment.normalize_with_map(Tokenizer, text)
  assert norm == want
  assert [text[slice(*source[i])] for i in (4, 5)] == ["<<", "C"]
