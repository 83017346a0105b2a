"""Tests for albert_tf.data.race_data: the RACE JSON layout, malformed files,
`[CLS] article [SEP] question+option [SEP]` features, answer files."""

import json
import os
import re

import pytest

from albert_tf.data import race_data
from tests.testing import finetune_testlib

ARTICLE = "Tom lives in a small town. He walks to school every day."


def write_race(root, split, level, name, obj):
  d = os.path.join(root, split, level)
  os.makedirs(d, exist_ok=True)
  with open(os.path.join(d, name), "w", encoding="utf-8") as f:
    f.write(obj if isinstance(obj, str) else json.dumps(obj))
  return os.path.join(d, name)


def good(file_id):
  return {"id": file_id, "article": ARTICLE,
          "questions": ["Where does Tom live?", "Tom goes to school _ ."],
          "options": [["In a city", "In a small town", "On a farm",
                       "Abroad"], ["by bus", "by car", "on foot", "by bike"]],
          "answers": ["B", "C"]}


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
  return finetune_testlib.tokenizer(tmp_path_factory)


def test_reads_levels_in_order(tmp_path):
  root = str(tmp_path)
  write_race(root, "dev", "middle", "2.txt", good("2.txt"))
  write_race(root, "dev", "high", "10.txt", good("10.txt"))
  write_race(root, "dev", "middle", "1.txt", good("1.txt"))
  examples = race_data.read_examples(root, "dev")
  assert [e.example_id for e in examples] == [
      "middle/1.txt-0", "middle/1.txt-1", "middle/2.txt-0", "middle/2.txt-1",
      "high/10.txt-0", "high/10.txt-1"]
  assert [e.label for e in examples[:2]] == [1, 2]
  assert examples[-1].level == "high"
  with pytest.raises(FileNotFoundError, match="no RACE files"):
    race_data.read_examples(root, "test")


def test_question_with_option():
  assert race_data.question_with_option("Tom goes _ .", "home") == (
      "Tom goes home .")
  assert race_data.question_with_option("Why?", "Because") == "Why? Because"


@pytest.mark.parametrize("content,message", [
    ("{not json", "not valid JSON"),
    ({"article": "a", "questions": ["q"]},
     r"missing field\(s\) \['options', 'answers'\] \(pass"),
    ({"article": "a", "questions": ["q"], "options": [["a", "b", "c"]],
      "answers": ["A"]}, "question 0: expected 4 option strings"),
    ({"article": "a", "questions": ["q"], "options": [["a", "b", "c", "d"]],
      "answers": ["E"]}, "question 0: answer 'E' is not one of A-D"),
    # Other JSON types: one line each (they were tracebacks, or "None" and
    # one-character questions).
    ("5", "expected a JSON object, got a int"),
    (dict(good("x"), article=None), "field article is a NoneType, expected "
     "a string"),
    (dict(good("x"), questions="What?"), "field questions is a str, "
     "expected a list"),
    (dict(good("x"), options=[["a", "b", "c", None], ["a", "b", "c", "d"]]),
     r"question 0: expected 4 option strings, got \['a', 'b', 'c', None\]"),
    (dict(good("x"), questions=[3, "q"]), "question 0: expected a string, "
     "got 3"),
    # Trained on, so its answers are needed.
    ({k: v for k, v in good("x").items() if k != "answers"},
     r"missing field\(s\) \['answers'\] \(this split is trained or scored "
     "against its answers\)"),
    # The id of another file: the predictions are keyed by it.
    (good("ok.txt"), "question id high/ok.txt-0 is also one of .*ok.txt's "
     r"\(its field id\); every file needs its own id"),
])
def test_malformed_files(tmp_path, content, message):
  root = str(tmp_path)
  write_race(root, "train", "high", "a_ok.txt", good("ok.txt"))
  path = write_race(root, "train", "high", "bad.txt", content)
  with pytest.raises(race_data.RaceFormatError,
                     match=f"{re.escape(path)}: .*{message}"):
    race_data.read_examples(root, "train", require_answers=True)
  stats = race_data.ReadStats()
  examples = race_data.read_examples(root, "train", skip_malformed=True,
                                     stats=stats, require_answers=True)
  # The good file's questions are kept; the bad file's first question is
  # skipped and counted (a second question, if it has one, is kept).
  ids = [e.example_id for e in examples]
  assert stats.skipped == 1 and ids[:2] == ["high/ok.txt-0", "high/ok.txt-1"]
  assert ids[2:] in ([], ["high/x-1"])


def test_answers_only_where_needed(tmp_path):
  """A file without answers is read for predictions (label None)."""
  root = str(tmp_path)
  write_race(root, "test", "high", "1.txt", {
      k: v for k, v in good("1.txt").items() if k != "answers"})
  examples = race_data.read_examples(root, "test")
  assert [e.label for e in examples] == [None, None]


def test_features(tokenizer):
  example = race_data.RaceExample(
      "middle/x-0", "middle", ARTICLE, "Tom goes to school _ .",
      ["by bus", "by car", "on foot", "by bike"], 2)
  max_seq = 24
  feats, = list(race_data.convert_examples([example], tokenizer, max_seq,
                                           max_qa_length=8))
  assert len(feats["input_word_ids"]) == 4 * max_seq
  assert feats["label_ids"] == [2]
  article = tokenizer.encode_ids(ARTICLE)
  for c, option in enumerate(example.options):
    ids = feats["input_word_ids"][c * max_seq:(c + 1) * max_seq]
    types = feats["input_type_ids"][c * max_seq:(c + 1) * max_seq]
    qa = tokenizer.encode_ids(f"Tom goes to school {option} .")[-8:]
    room = max_seq - len(qa) - 3
    expected = ([tokenizer.cls_id] + article[:room] + [tokenizer.sep_id] + qa
                + [tokenizer.sep_id])
    assert ids[:len(expected)] == expected
    assert types[:len(expected)] == [0] * (room + 2) + [1] * (len(qa) + 1)
  # A question and option that cannot fit beside [CLS] and two [SEP]s:
  # named, with the settings to change (it was "N tokens do not fit").
  qa = len(tokenizer.encode_ids("Tom goes to school by bike ."))
  with pytest.raises(race_data.RaceFormatError, match=(
      rf"^question middle/x-0: its question and an option are {qa} tokens, "
      rf"more than data.max_seq_length - 3 \({qa - 1}\); lower "
      r"data.max_qa_length \(now 128\) or raise data.max_seq_length$")):
    list(race_data.convert_examples([example], tokenizer, qa + 2))


def test_write_predictions(tmp_path):
  examples = [race_data.RaceExample("high/1.txt-0", "high", "a", "q",
                                    ["1", "2", "3", "4"], 0),
              race_data.RaceExample("high/1.txt-1", "high", "a", "q",
                                    ["1", "2", "3", "4"], None)]
  path = str(tmp_path / "race_predictions.json")
  race_data.write_predictions(path, examples, [3, 1])
  with open(path) as f:
    assert json.load(f) == {"high/1.txt-0": "D", "high/1.txt-1": "B"}
  with open(str(tmp_path / "race_predictions.tsv")) as f:
    assert f.read().splitlines()[1] == "high/1.txt-0\tD"


def test_file_with_a_byte_order_mark_is_read(tmp_path):
  """A RACE file saved with a byte-order mark was 'not valid JSON'."""
  root = str(tmp_path)
  path = write_race(root, "train", "high", "bom.txt", good("bom.txt"))
  data = open(path, "rb").read()
  with open(path, "wb") as f:
    f.write(b"\xef\xbb\xbf" + data)
  assert len(race_data.read_examples(root, "train")) == len(
      good("bom.txt")["questions"])
