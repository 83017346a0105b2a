"""What a SQuAD file must satisfy before it is trained or scored on.

Each check raises `SquadFormatError` (a ValueError) in one line naming the
file and, where there is one, the JSON path or question id:
  * the file is JSON in UTF-8, UTF-16 or UTF-32 (as `json.loads` detects
    them from the bytes; the SQuAD files are UTF-8);
  * the context, the question and each answer's text are JSON strings,
    `answers` is a list of objects, a training `answer_start` a whole
    number (errors name the question id and the field);
  * `is_impossible` is a JSON boolean: the string "false" is true in Python;
  * a question id is a JSON string or number, keyed as text
    (`question_key`) by the predictions and the scorer alike; ids are
    unique: a repeated id silently drops a question from the evaluation
    total;
  * a training file whose answerable questions all lost their answer (not
    in its context) would train on unanswerable windows only.
"""

import json


class SquadFormatError(ValueError):
  """A SQuAD JSON record that cannot be read (message names file + path)."""


def load_json(path):
  """The parsed file; errors name it."""
  try:
    with open(path, "rb") as f:
      raw = f.read()
  except OSError as e:
    raise SquadFormatError(f"{path}: cannot read: {e.strerror or e}") from e
  try:
    return json.loads(raw)  # detects UTF-8/16/32 from the first bytes
  except UnicodeDecodeError as e:
    raise SquadFormatError(f"{path}: not UTF-8/16/32 text ({e.reason} at "
                           f"byte {e.start})") from e
  except json.JSONDecodeError as e:
    raise SquadFormatError(f"{path}: not valid JSON: {e}") from e


def is_impossible(qa, path, where):
  """The question's `is_impossible` (default False); only a JSON boolean
  (or 0/1) is accepted."""
  value = qa.get("is_impossible", False)
  if isinstance(value, int) and value in (0, 1):  # a bool is an int
    return bool(value)
  raise SquadFormatError(f"{path}: {where}.is_impossible is {value!r}; it "
                         "must be true or false (a JSON boolean)")


def _short(value):
  """repr of a bad value, cut to fit one line."""
  text = repr(value)
  return text if len(text) <= 40 else text[:37] + "..."


def field(obj, key, path, where, qas_id=None):
  """obj[key]; a missing field (or obj not an object) is refused."""
  if not isinstance(obj, dict) or key not in obj:
    of = "" if qas_id is None else f" (question {qas_id!r})"
    raise SquadFormatError(f"{path}: {where}: missing field {key!r}{of}")
  return obj[key]


def text_field(obj, key, path, where, qas_id):
  """obj[key], a JSON string (the context, a question, an answer's text)."""
  value = field(obj, key, path, where, qas_id)
  if not isinstance(value, str):
    raise SquadFormatError(f"{path}: {where}.{key} (question {qas_id!r}) is "
                           f"{_short(value)}; it must be a JSON string")
  return value


def answer_texts(qa, path, where, qas_id):
  """The texts of the question's `answers` (default none): a list of
  objects with a `text` string."""
  answers = qa.get("answers", [])
  if not isinstance(answers, list):
    raise SquadFormatError(
        f"{path}: {where}.answers (question {qas_id!r}) is {_short(answers)}"
        "; it must be a list of {\"text\", \"answer_start\"} objects")
  return [text_field(answer, "text", path, f"{where}.answers[{i}]", qas_id)
          for i, answer in enumerate(answers)]


def answer_start(qa, path, where, qas_id):
  """The first answer's `answer_start`: a whole number (a character offset;
  10.0 is 10, 10.7 and "10" are refused)."""
  at = f"{where}.answers[0]"
  value = field(qa["answers"][0], "answer_start", path, at, qas_id)
  if isinstance(value, float) and value.is_integer():
    value = int(value)
  if isinstance(value, bool) or not isinstance(value, int):
    raise SquadFormatError(f"{path}: {at}.answer_start (question {qas_id!r}) "
                           f"is {_short(value)}; it must be a whole number "
                           "(a character offset in the context)")
  return value


def question_key(qas_id):
  """The key of a question id in predictions and scores: its text (a file
  may number its questions; the predictions' JSON keys are text)."""
  return qas_id if isinstance(qas_id, str) else str(qas_id)


def question_id(qa, path, where):
  """The question's `id` as its key; a missing id or one that is not a
  JSON string or number is refused."""
  value = field(qa, "id", path, where)
  if isinstance(value, bool) or not isinstance(value, (str, int, float)):
    raise SquadFormatError(f"{path}: {where}.id is {value!r}; a question id "
                           "is a JSON string or number")
  return question_key(value)


def check_new_id(seen, qas_id, path, where):
  """Records `qas_id` (in `seen`: id -> JSON path); refuses a repeat."""
  if qas_id in seen:
    raise SquadFormatError(f"{path}: {where}: question id {qas_id!r} is "
                           f"also {seen[qas_id]}; ids must be unique")
  seen[qas_id] = where


def check_answers_found(path, answerable, skipped):
  """Refuses a training file none of whose `answerable` questions kept its
  answer (`skipped` were not found in their contexts)."""
  if answerable and skipped >= answerable:
    raise SquadFormatError(
        f"{path}: none of the {answerable} answerable questions has its "
        "answer text in its context (all skipped); training would see only "
        "unanswerable windows. Are the answers from another file?")
