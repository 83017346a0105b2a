"""A SQuAD file is checked before it is trained or scored on: the string
"false" was read as is_impossible=true, a file whose answers are not in their
contexts trained on negatives only, a repeated question id dropped a question
from the evaluation total, numeric ids scored 0, and a UTF-16 file failed
without its name."""

import json
import logging

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


def test_numeric_question_ids_are_scored(tmp_path):
  """A dev file whose ids are JSON numbers scored every question 0: the
  predictions are keyed by the id's text, the scorer looked up the number."""
  path = write(tmp_path / "dev.json", [
      qa(7), qa(8, answer="Carolina Panthers", start=28),
      qa(9, answer=None, is_impossible=True)])
  examples = squad_data.read_squad_examples(path, False, True)
  assert [e.qas_id for e in examples] == ["7", "8", "9"]
  predictions = {e.qas_id: (e.gold_answers or [""])[0] for e in examples}
  with open(path, encoding="utf-8") as f:
    data = json.load(f)["data"]
  assert finetune_metrics.squad_metrics(data, dict(predictions, **{
      "8": "x"})) == {"exact_match": pytest.approx(200 / 3),
                      "f1": pytest.approx(200 / 3)}
  null_odds = {"7": -1.0, "8": -1.0, "9": 1.0}
  out = finetune_metrics.squad_metrics(data, predictions, null_odds)
  assert (out["exact"], out["HasAns_exact"], out["NoAns_exact"]) == (
      100.0, 100.0, 100.0)
  # The threshold search sees the same keys: answering 7 and 8 is best.
  assert (out["best_exact"], out["best_exact_thresh"]) == (100.0, -1.0)


@pytest.mark.parametrize("value", [None, True, [1], {"id": 1}])
def test_question_id_must_be_a_string_or_number(tmp_path, value):
  path = write(tmp_path / "dev.json", [qa(value)])
  with pytest.raises(squad_data.SquadFormatError) as e:
    squad_data.read_squad_examples(path, False, True)
  assert str(e.value) == (f"{path}: data[0].paragraphs[0].qas[0].id is "
                          f"{value!r}; a question id is a JSON string or "
                          "number")


def test_a_question_without_prediction_is_warned_about(caplog):
  data = [{"paragraphs": [{"context": CONTEXT, "qas": [
      qa("q1"), qa("q2"), qa("q3")]}]}]
  with caplog.at_level(logging.WARNING, logger="absl"):
    out = finetune_metrics.squad_metrics(data, {"q1": "Denver Broncos"})
  assert out == {"exact_match": pytest.approx(100 / 3),
                 "f1": pytest.approx(100 / 3)}
  assert [r.getMessage() for r in caplog.records] == [
      "SQuAD scoring: 2 of 3 questions have no prediction (e.g. id 'q2'); "
      "they score 0"]


def _paragraph_with(tmp_path, context=CONTEXT, **fields):
  question = dict(qa("q1"), **fields)
  path = tmp_path / "train.json"
  path.write_text(json.dumps({"data": [{"paragraphs": [
      {"context": context, "qas": [question]}]}]}), encoding="utf-8")
  return str(path)


Q = "data[0].paragraphs[0].qas[0]"


@pytest.mark.parametrize("fields,context,message", [
    ({}, None, "data[0].paragraphs[0].context (question 'q1') is None; it "
     "must be a JSON string"),
    ({"question": None}, CONTEXT, f"{Q}.question (question 'q1') is None; "
     "it must be a JSON string"),
    ({"answers": {"text": "Denver", "answer_start": 0}}, CONTEXT,
     f"{Q}.answers (question 'q1') is {{'text': 'Denver', 'answer_start': "
     "0}; it must be a list of {\"text\", \"answer_start\"} objects"),
    ({"answers": ["Denver"]}, CONTEXT, f"{Q}.answers[0]: missing field "
     "'text' (question 'q1')"),
    ({"answers": [{"text": "Denver"}]}, CONTEXT, f"{Q}.answers[0]: missing "
     "field 'answer_start' (question 'q1')"),
    ({"answers": [{"text": 5, "answer_start": 0}]}, CONTEXT,
     f"{Q}.answers[0].text (question 'q1') is 5; it must be a JSON string"),
    ({"answers": [{"text": "Denver", "answer_start": "ten"}]}, CONTEXT,
     f"{Q}.answers[0].answer_start (question 'q1') is 'ten'; it must be a "
     "whole number (a character offset in the context)"),
    ({"answers": [{"text": "Denver", "answer_start": 0.5}]}, CONTEXT,
     f"{Q}.answers[0].answer_start (question 'q1') is 0.5; it must be a "
     "whole number (a character offset in the context)"),
])
def test_a_malformed_field_is_one_line_naming_the_question(
    tmp_path, fields, context, message):
  """These crashed with AttributeError tracebacks while building features
  (or, for "ten", said only "invalid literal for int()")."""
  path = _paragraph_with(tmp_path, context, **fields)
  with pytest.raises(squad_data.SquadFormatError) as e:
    squad_data.read_squad_examples(path, True)
  assert str(e.value) == f"{path}: {message}"


def test_answer_start_is_only_read_for_training(tmp_path):
  path = _paragraph_with(tmp_path, answers=[
      {"text": "Denver Broncos", "answer_start": 0.0},
      {"text": "Broncos", "answer_start": "ten"}])
  example, = squad_data.read_squad_examples(path, True)
  assert (example.answer_text, example.answer_start) == ("Denver Broncos", 0)
  example, = squad_data.read_squad_examples(path, False)
  assert example.gold_answers == ["Denver Broncos", "Broncos"]


def test_negative_answer_start_is_skipped_and_moves_are_reported(
    tmp_path, caplog):
  """A negative answer_start found its text through Python's negative
  indexing (counted from the end) and was kept at that offset; moved
  answers were counted but never reported."""
  path = write(tmp_path / "train.json", [
      qa("neg", answer="Carolina Panthers", start=-len("Carolina Panthers.")),
      qa("moved", answer="Carolina", start=3), qa("ok")])
  stats = squad_data.ReadStats()
  with caplog.at_level(logging.WARNING, logger="absl"):
    examples = squad_data.read_squad_examples(path, True, True, stats)
  assert [(e.qas_id, e.answer_start) for e in examples] == [
      ("moved", CONTEXT.index("Carolina")), ("ok", 0)]
  assert (stats.skipped, stats.negative_starts, stats.realigned) == (1, 1, 1)
  where = "data[0].paragraphs[0].qas[0]"
  assert [r.getMessage() for r in caplog.records] == [
      f"{path}: {where}: answer_start -18 is negative; skipped",
      f"{path}: skipped 1 of 3 questions: 0 whose answer is not in the "
      "context, 1 with a negative answer_start",
      f"{path}: moved 1 of 3 answers to the occurrence of their text nearest "
      "their answer_start, which did not point at it (e.g. question 'moved')"]
