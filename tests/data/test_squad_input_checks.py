"""A SQuAD file is checked before it is trained or scored on: the string
"false" was read as is_impossible=true, a file whose answers are not in their
contexts trained on negatives only, a repeated question id dropped a question
from the evaluation total, and a UTF-16 file failed without its name."""

import json

import pytest

from albert_tf.data import squad_data
from albert_tf.tasks import metrics as finetune_metrics

CONTEXT = "Denver Broncos defeated the Carolina Panthers."


def write(path, qas, encoding="utf-8"):
  text = json.dumps({"version": "v2.0", "data": [{"title": "t", "paragraphs": [
      {"context": CONTEXT, "qas": qas}]}]}, ensure_ascii=False)
  with open(path, "w", encoding=encoding) as f:
    f.write(text)
  return str(path)


def qa(qid, answer="Denver Broncos", start=0, **extra):
  answers = [{"text": answer, "answer_start": start}] if answer else []
  return {"id": qid, "question": "Who won?", "answers": answers, **extra}


@pytest.mark.parametrize("value", ["false", "False", "no", None, 2, 0.0])
def test_is_impossible_must_be_a_json_boolean(tmp_path, value):
  path = write(tmp_path / "train.json", [qa("a", is_impossible=value)])
  with pytest.raises(squad_data.SquadFormatError,
                     match=r"train.json: data\[0\].paragraphs\[0\].qas\[0\]"
                           r".is_impossible is .* must be true or false"):
    squad_data.read_squad_examples(path, True, True)


def test_boolean_is_impossible_is_read_as_given(tmp_path):
  path = write(tmp_path / "train.json", [
      qa("a", is_impossible=False), qa("b", answer=None, is_impossible=True),
      qa("c", is_impossible=0)])
  examples = squad_data.read_squad_examples(path, True, True)
  assert [e.is_impossible for e in examples] == [False, True, False]


def test_training_file_without_any_findable_answer_is_refused(tmp_path):
  path = write(tmp_path / "train.json", [
      qa("a", answer="Seattle"), qa("b", answer="Green Bay", start=5),
      qa("c", answer=None, is_impossible=True)])
  with pytest.raises(squad_data.SquadFormatError,
                     match=r"train.json: none of the 2 answerable questions "
                           r"has its answer text in its context"):
    squad_data.read_squad_examples(path, True, True)
  # One findable answer is enough (the others are skipped and counted).
  path = write(tmp_path / "ok.json", [qa("a", answer="Seattle"), qa("b")])
  stats = squad_data.ReadStats()
  examples = squad_data.read_squad_examples(path, True, True, stats)
  assert [e.qas_id for e in examples] == ["b"]
  assert stats.skipped == 1 and stats.answerable == 2


def test_repeated_question_id_is_refused_naming_it(tmp_path):
  qas = [qa("q1"), qa("q2"), qa("q1", answer="Carolina Panthers", start=28)]
  path = write(tmp_path / "dev.json", qas)
  # Without the check the second q1 replaced the first in the score: the
  # total was 2 questions for 3 in the file.
  data = [{"paragraphs": [{"context": CONTEXT, "qas": qas}]}]
  assert finetune_metrics.squad_metrics(
      data, {"q1": "x", "q2": "x"}, {"q1": 0.0, "q2": 0.0})["total"] == 2
  for training in (True, False):
    with pytest.raises(squad_data.SquadFormatError,
                       match=r"dev.json: data\[0\].paragraphs\[0\].qas\[2\]: "
                             r"question id 'q1' is also data\[0\]"
                             r".paragraphs\[0\].qas\[0\]"):
      squad_data.read_squad_examples(path, training, True)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-8-sig", "utf-32"])
def test_unicode_encodings_json_allows_are_read(tmp_path, encoding):
  path = write(tmp_path / "dev.json", [qa("ü", answer="Broncos", start=7)],
               encoding=encoding)
  examples = squad_data.read_squad_examples(path, True, True)
  assert examples[0].qas_id == "ü" and examples[0].answer_start == 7


def test_undecodable_file_is_an_error_naming_it(tmp_path):
  path = tmp_path / "latin1.json"
  path.write_bytes(b'{"data": "caf\xe9"}')
  with pytest.raises(squad_data.SquadFormatError,
                     match=r"latin1.json: not UTF-8/16/32 text"):
    squad_data.read_squad_examples(str(path), False)
