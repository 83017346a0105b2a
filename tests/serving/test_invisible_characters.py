"""One rule for invisible characters in data prep and in serving.

If the two sides differed, "word\\vword" could be the one word "wordword" in
the pretraining data and "word word" for the served model (in-graph
normalisation); the same for \\f, the information separators, U+0085 and the
zero-width space. The rule (data_prep/tokenization.py): whitespace and U+200B
separate words, every other control or format character (soft hyphen,
joiners, BOM, NUL) is dropped. The same strings go through both sides here.
"""

import collections

import pytest
import tensorflow as tf

from albert_tf.data import squad_alignment
from albert_tf.serving import preprocessing
from data_prep import text_reader
from data_prep import tokenization
from tests.testing import export_testlib as lib

# (raw text, its normalised form, written out by hand)
CASES = [
    ("word\vword", "word word"),
    ("word\fword", "word word"),
    ("a\x1cb\x1dc\x1ed\x1fe", "a b c d e"),
    ("next\x85line", "next line"),
    ("zero\u200bwidth space", "zero width space"),
    ("soft\u00adhyphen", "softhyphen"),
    ("non\u200cjoiner and\u200djoiner", "nonjoiner andjoiner"),
    ("word\u2060joiner", "wordjoiner"),
    ("\ufeffbom inside\ufeffword", "bom insideword"),
    ("nul\x00bell\x07 del\x7f", "nulbell del"),
    ("tab\there  \u00a0nbsp", "tab here nbsp"),
]


@pytest.fixture(scope="module")
def spm_file(tmp_path_factory):
  return lib.train_spm(str(tmp_path_factory.mktemp("invisible")))


def reader_lines(tmp_path, texts):
  """The lines the data tools tokenize (the shared reader)."""
  path = tmp_path / "corpus.txt"
  path.write_bytes("".join(t + "\n" for t in texts).encode("utf-8"))
  return list(text_reader.iter_clean_lines(str(path), collections.Counter()))


def test_both_sides_normalise_to_the_same_words(tmp_path):
  texts = [raw for raw, _ in CASES]
  expected = [norm for _, norm in CASES]
  prep = [tokenization.normalize_text(line, lower=False)
          for line in reader_lines(tmp_path, texts)]
  assert prep == expected
  assert [tokenization.normalize_text(t, lower=False) for t in texts] == (
      expected)
  served = preprocessing.normalize_text(
      tf.constant([t.encode() for t in texts]), lower=False)
  assert [s.decode() for s in served.numpy().tolist()] == expected


@pytest.mark.parametrize("lower", [True, False])
def test_data_prep_ids_equal_served_ids(spm_file, tmp_path, lower):
  texts = [raw for raw, _ in CASES]
  python = tokenization.FullTokenizer(spm_file, do_lower_case=lower)
  graph = preprocessing.TextPreprocessor(spm_file, do_lower_case=lower)
  served = graph.tokenize_ids(tf.constant([t.encode() for t in texts]))
  prepared = [python.encode_ids(line)
              for line in reader_lines(tmp_path, texts)]
  assert served.to_list() == prepared
  # And the words really are apart: same ids as the visible spelling.
  for (raw, norm), ids in zip(CASES, prepared):
    assert ids == python.encode_ids(norm), raw


def test_squad_offsets_follow_the_rule(spm_file):
  """An answer after dropped characters still maps to its source span."""
  tok = tokenization.FullTokenizer(spm_file, do_lower_case=True)
  context = "soft\u00adhyphen zero\u200bwidth word\vend"
  norm, source = squad_alignment.normalize_with_map(tok, context)
  assert norm == "softhyphen zero width word end"
  start = norm.index("end")
  assert context[source[start][0]:source[start + 2][1]] == "end"
  start = norm.index("hyphen")
  assert context[source[start][0]:source[start + 5][1]] == "hyphen"
