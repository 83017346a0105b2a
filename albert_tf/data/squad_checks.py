"""What a SQuAD file must satisfy before it is trained or scored on.

Each check raises `SquadFormatError` (a ValueError) in one line naming the
file and, where there is one, the JSON path or question id:
  * the file is JSON in UTF-8, UTF-16 or UTF-32 (as `json.loads` detects
    them from the bytes; the SQuAD files are UTF-8);
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


def question_key(qas_id):
  """The key of a question id in predictions and scores: its text (a file
  may number its questions; the predictions' JSON keys are text)."""
  return qas_id if isinstance(qas_id, str) else str(qas_id)


def question_id(qa, path, where):
  """The question's `id` as its key; a missing id or one that is not a
  JSON string or number is refused."""
  if not isinstance(qa, dict) or "id" not in qa:
    raise SquadFormatError(f"{path}: {where}: missing field 'id'")
  value = qa["id"]
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
