"""CoNLL features of the `tagging` task without a model: words that
normalise to no piece keep their place, sentences longer than the sequence
are split into windows with each word labelled once (where it has the most
context), and a file that is not UTF-8 is refused naming its line."""

import itertools

import pytest

from albert_tf.data import conll_data
from tests.testing import finetune_testlib

# Characters ALBERT's normalisation drops entirely: soft hyphen, a lone
# combining accent, zero-width joiner, a byte-order mark inside a line.
NO_PIECES = ("\u00ad", "\u0301", "\u200d", "\ufeff")


def _read(tmp_path, text, name="train.txt", labelled=True):
  path = tmp_path / name
  path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
  return conll_data.read_sentences(str(path), labelled)


def _labelled_positions(features):
  """{(feature, position): label id} of every labelled position."""
  return {(i, p): label for i, f in enumerate(features)
          for p, label in enumerate(f["label_ids"]) if label != conll_data.IGNORE}


def test_a_word_without_pieces_is_unk_and_keeps_the_labels_in_place(
    tmp_path, tmp_path_factory):
  tokenizer = finetune_testlib.tokenizer(tmp_path_factory)
  assert all(tokenizer.encode_ids(c) == [] for c in NO_PIECES)
  words = ["Ann"] + list(NO_PIECES) + ["met", "Bob"]
  labels = ["B-PER", "O", "O", "O", "O", "O", "B-PER"]
  sentences = _read(tmp_path, "".join(f"{w} {l}\n"
                                      for w, l in zip(words, labels)))
  pieces = conll_data.word_pieces(tokenizer, sentences)[0]
  assert pieces[1:5] == [[tokenizer.unk_id]] * 4
  features = list(conll_data.convert_sentences(
      sentences, tokenizer, {"O": 0, "B-PER": 1}, 32))
  assert len(features) == 1
  ids, label_ids = features[0]["input_word_ids"], features[0]["label_ids"]
  # Each word's label sits on its own first piece, Bob's on "Bob"'s.
  first = 1
  for word, label, word_ids in zip(words, labels, pieces):
    assert ids[first:first + len(word_ids)] == word_ids, word
    assert label_ids[first] == {"O": 0, "B-PER": 1}[label], word
    first += len(word_ids)
  assert sum(l != conll_data.IGNORE for l in label_ids) == len(words)


def test_many_words_without_pieces_do_not_overflow_the_labels(
    tmp_path, tmp_path_factory):
  tokenizer = finetune_testlib.tokenizer(tmp_path_factory)
  sentences = _read(tmp_path, "Ann B-PER\n" + "\u00ad O\n" * 40)
  for f in conll_data.convert_sentences(sentences, tokenizer,
                                        {"O": 0, "B-PER": 1}, 16):
    assert all(len(v) == 16 for k, v in f.items() if k != "example_index")


def test_windows_are_squad_style():
  # 3x a budget of 10 pieces, stride 5.
  assert conll_data.windows(30, 10) == [(0, 10), (5, 10), (10, 10),
                                        (15, 10), (20, 10)]
  assert conll_data.windows(7, 10) == [(0, 7)]
  assert conll_data.windows(11, 10) == [(0, 10), (5, 6)]


def _max_context_windows(piece, spans):
  """The windows where `piece` has the most pieces on its shorter side."""
  context = [min(piece - s, s + n - 1 - piece) if s <= piece < s + n else -1
             for s, n in spans]
  return {w for w, c in enumerate(context) if c == max(context)}


def test_a_long_sentence_is_split_and_each_word_labelled_once(
    tmp_path, tmp_path_factory):
  tokenizer = finetune_testlib.tokenizer(tmp_path_factory)
  seq = 16
  # Words of one and of several pieces, and pieceless ones, each with a
  # label of its own, so a label id names its word.
  vocab = ["the", "cat", "Zyxwqk", "\u00ad", "sat", "on", "mat"]
  words = [vocab[i % len(vocab)] for i in range(40)]
  labels = [f"B-W{i}" for i in range(len(words))]
  sentences = _read(tmp_path, "".join(f"{w} X {l}\n"
                                      for w, l in zip(words, labels)))
  pieces = conll_data.word_pieces(tokenizer, sentences)[0]
  num_pieces = sum(map(len, pieces))
  assert num_pieces >= 3 * seq
  label_ids = {l: i for i, l in enumerate(labels)}
  features = list(conll_data.convert_sentences(sentences, tokenizer,
                                               label_ids, seq))
  spans = conll_data.windows(num_pieces, seq - 2)
  assert len(features) == len(spans) >= 3
  assert [f["example_index"] for f in features] == [[i] for i in
                                                    range(len(features))]
  flat = list(itertools.chain.from_iterable(pieces))
  firsts = list(itertools.accumulate(map(len, pieces), initial=0))[:-1]
  labelled = _labelled_positions(features)
  # Every word exactly once, on its own first piece, in a window where it
  # has the most context.
  assert sorted(labelled.values()) == list(range(len(words)))
  for (w, position), word in labelled.items():
    start, length = spans[w]
    ids = features[w]["input_word_ids"]
    assert ids[:length + 2] == ([tokenizer.cls_id] +
                                flat[start:start + length] +
                                [tokenizer.sep_id])
    assert position - 1 + start == firsts[word]
    assert w in _max_context_windows(firsts[word], spans)
  # word_positions (what predict reads back) names the same places.
  _, positions = conll_data.word_positions(pieces, seq - 2)
  assert {p: i for i, p in enumerate(positions)} == labelled


def test_a_file_that_is_not_utf8_is_refused_naming_its_line(tmp_path):
  with pytest.raises(ValueError, match=(
      r"train\.txt:3: not UTF-8 \(byte 0xe9 at column 4\); CoNLL files are "
      r"read as UTF-8$")):
    _read(tmp_path, "Ann B-PER\n\ncaf\xe9 O\n".encode("latin-1"))
  # A byte-order mark opening the file is not part of the first word.
  sentences = _read(tmp_path, "\ufeffAnn B-PER\nsat O\n")
  assert sentences[0].words == ["Ann", "sat"]
