"""RACE: reading the public JSON files, multiple-choice features, answers.

Layout of the RACE download: `RACE/{train,dev,test}/{middle,high}/*.txt`,
each file one JSON object

  {"id": "high123.txt", "article": "...", "questions": ["...", ...],
   "options": [["opt A", "opt B", "opt C", "opt D"], ...],
   "answers": ["B", ...]}

Every question becomes one example with 4 choices, each packed as
`[CLS] article [SEP] question+option [SEP]` (the original `run_race.py`):
a question containing the cloze blank "_" has it replaced by the option,
otherwise the option follows the question after a space. The question+option
part keeps at most `max_qa_length` tokens (the original's 128) and the
article fills the rest of `max_seq_length`.

A file that is not valid JSON or not an object, misses a field or holds
one of another type, has a question without 4 options (each text), an answer
other than A-D, no answers where the split is trained or scored, or the id
of another file, raises `RaceFormatError` naming the file (and question
index), unless `skip_malformed=True`: such files/questions are then skipped
and counted (`ReadStats`).
"""

import dataclasses
import glob
import json
import os
from typing import List, Optional

from absl import logging
import tensorflow as tf

from albert_tf.data import finetune_features
from albert_toolkit import output_files

LEVELS = ("middle", "high")
NUM_CHOICES = 4
ANSWER_LETTERS = "ABCD"


class RaceFormatError(ValueError):
  """A RACE file that cannot be read (message names the file)."""


@dataclasses.dataclass
class RaceExample:
  example_id: str        # "<level>/<file id>-<question index>"
  level: str             # "middle" or "high"
  article: str
  question: str
  options: List[str]
  label: Optional[int]   # 0..3 or None (no answer given)


@dataclasses.dataclass
class ReadStats:
  files: int = 0
  questions: int = 0
  skipped: int = 0


def _bad(stats, skip, message):
  if not skip:
    raise RaceFormatError(message + " (pass skip_malformed=True / "
                          "--skip_malformed_rows to skip it)")
  stats.skipped += 1
  logging.warning("Skipping: %s", message)


# The fields of a file and their JSON types ("answers" may be left out).
_FIELD_TYPES = (("article", str), ("questions", list), ("options", list),
                ("answers", list))


def _field_problem(data, require_answers):
  """What is wrong with the fields of a file's object (None: nothing)."""
  if not isinstance(data, dict):
    return f"expected a JSON object, got a {type(data).__name__}"
  missing = [k for k, _ in _FIELD_TYPES
             if k not in data and (k != "answers" or require_answers)]
  if missing:
    return (f"missing field(s) {missing}" + (
        " (this split is trained or scored against its answers)"
        if missing == ["answers"] else ""))
  for name, kind in _FIELD_TYPES:
    if name in data and not isinstance(data[name], kind):
      return (f"field {name} is a {type(data[name]).__name__}, expected a "
              f"{'string' if kind is str else 'list'}")
  return None


def read_file(path, level, skip_malformed=False, stats=None,
              require_answers=False):
  """Examples of one RACE JSON file.

  Args:
    path: the file.
    level: "middle" or "high".
    skip_malformed: skip (and count) what is malformed instead of raising.
    stats: ReadStats to add to.
    require_answers: a file without answers is malformed (the split is
      trained or scored against them).
  """
  stats = stats if stats is not None else ReadStats()
  stats.files += 1
  try:
    with open(path, encoding="utf-8-sig") as f:  # a byte-order mark too
      data = json.load(f)
  except (json.JSONDecodeError, UnicodeDecodeError) as e:
    _bad(stats, skip_malformed, f"{path}: not valid JSON: {e}")
    return []
  problem = _field_problem(data, require_answers)
  if problem:
    _bad(stats, skip_malformed, f"{path}: {problem}")
    return []
  questions, options = data["questions"], data["options"]
  answers = data.get("answers")
  if len(options) != len(questions) or (
      answers is not None and len(answers) != len(questions)):
    _bad(stats, skip_malformed,
         f"{path}: {len(questions)} questions but {len(options)} option "
         f"lists and {len(answers or [])} answers")
    return []
  file_id = data.get("id", os.path.basename(path))
  out = []
  for q, question in enumerate(questions):
    stats.questions += 1
    opts = options[q]
    if not isinstance(question, str):
      _bad(stats, skip_malformed,
           f"{path}: question {q}: expected a string, got {question!r}")
      continue
    if (not isinstance(opts, list) or len(opts) != NUM_CHOICES or
        not all(isinstance(o, str) for o in opts)):
      _bad(stats, skip_malformed,
           f"{path}: question {q}: expected {NUM_CHOICES} option strings, "
           f"got {opts!r}")
      continue
    label = None
    if answers is not None:
      answer = str(answers[q]).strip()
      if answer not in ANSWER_LETTERS or len(answer) != 1:
        _bad(stats, skip_malformed,
             f"{path}: question {q}: answer {answer!r} is not one of A-D")
        continue
      label = ANSWER_LETTERS.index(answer)
    out.append(RaceExample(f"{level}/{file_id}-{q}", level, data["article"],
                           question, list(opts), label))
  return out


def split_files(data_dir, split, levels=LEVELS):
  """(level, path) of every file `read_examples` reads of `split`, in the
  order it reads them."""
  return [(level, path) for level in levels for path in sorted(
      glob.glob(os.path.join(data_dir, split, level, "*.txt")))]


def read_examples(data_dir, split, levels=LEVELS, skip_malformed=False,
                  stats=None, require_answers=False):
  """All questions of `split` ("train", "dev", "test") under `data_dir`.

  `data_dir` is the RACE directory (holding train/ dev/ test/). Files are read
  in sorted order so feature caches and predictions are stable. Two files
  with one id (the predictions are keyed by it) are malformed.
  `require_answers`: as in `read_file`.
  """
  stats = stats if stats is not None else ReadStats()
  files = split_files(data_dir, split, levels)
  if not files:
    raise FileNotFoundError(
        f"no RACE files under {data_dir}/{split}/{{{','.join(levels)}}}/*.txt")
  examples, owner = [], {}
  for level, path in files:
    read = read_file(path, level, skip_malformed, stats, require_answers)
    taken = next((e.example_id for e in read if e.example_id in owner), None)
    if taken:
      _bad(stats, skip_malformed,
           f"{path}: question id {taken} is also one of "
           f"{owner[taken]}'s (its field id); every file needs its own id")
      continue
    owner.update((e.example_id, path) for e in read)
    examples.extend(read)
  if stats.skipped:
    logging.warning("RACE %s: skipped %d malformed files/questions", split,
                    stats.skipped)
  return examples


def question_with_option(question, option):
  """The original's rule: fill the cloze blank "_" or append the option."""
  if "_" in question:
    return question.replace("_", option)
  return f"{question} {option}"


def convert_examples(examples, tokenizer, max_seq_length, max_qa_length=128):
  """Yields feature dicts: inputs [NUM_CHOICES * max_seq_length] (choice
  major), `label_ids`, `example_index`."""
  cache = {}
  for index, example in enumerate(examples):
    if example.article not in cache:  # articles repeat over questions
      cache = {example.article: tokenizer.encode_ids(example.article)}
    article = cache[example.article]
    packed = {name: [] for name in finetune_features.INPUT_NAMES}
    for option in example.options:
      qa = tokenizer.encode_ids(question_with_option(
          example.question, option))[-max_qa_length:]  # keeps the end
      if len(qa) > max_seq_length - 3:  # [CLS] article [SEP] qa [SEP]
        raise RaceFormatError(
            f"question {example.example_id}: its question and an option are "
            f"{len(qa)} tokens, more than data.max_seq_length - 3 "
            f"({max_seq_length - 3}); lower data.max_qa_length (now "
            f"{max_qa_length}) or raise data.max_seq_length")
      room = max_seq_length - len(qa) - 3
      one = finetune_features.pack(tokenizer, article[:room], qa,
                                   max_seq_length)
      for name in packed:
        packed[name].extend(one[name])
    packed["label_ids"] = [example.label if example.label is not None else 0]
    packed["example_index"] = [index]
    yield packed


def feature_spec(max_seq_length):
  return finetune_features.feature_spec(
      [NUM_CHOICES, max_seq_length], label_ids=([], tf.int64),
      example_index=([], tf.int64))


def write_predictions(path, examples, predictions):
  """RACE answers: JSON {example_id: letter}, plus `<path>.tsv` rows
  `example_id<TAB>letter`."""
  answers = {e.example_id: ANSWER_LETTERS[int(p)]
             for e, p in zip(examples, predictions)}
  output_files.write_json(path, answers, sort_keys=False)
  rows = [f"{key}\t{letter}\n" for key, letter in answers.items()]
  output_files.atomic_write(os.path.splitext(path)[0] + ".tsv",
                            "".join(["id\tanswer\n"] + rows))
  return answers
