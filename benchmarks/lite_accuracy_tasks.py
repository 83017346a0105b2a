"""The two tasks benchmarks/lite_accuracy.py fine-tunes, made from botchan.

- classification: the demo's `split_sentence` order task (two parts of one
  sentence, shown in order or swapped; MRPC layout), which a small ALBERT
  learns well from random weights in minutes: the sentence's own
  punctuation shows where it ends.
- squad: cloze questions in SQuAD v1.1 JSON. The context is a few
  consecutive sentences; the question is a phrase of one of them (3 words
  either side of the answer, found once in the context) with the answer
  word replaced by `_`; the answer is that word where it stands in the
  context. The model has to find the phrase in the context and point at
  the word in the blank's place.

Within each chapter the first sentences make training examples and the
rest dev, so no sentence is in both.
"""

import json
import os
import random
import re

from data_prep import output_files
from examples.demo import order_tasks

BLANK = "_"
# Answers: words of 3+ letters that the SQuAD normalisation keeps whole.
_WORD = re.compile(r"\b[A-Za-z]{3,}\b")
_ARTICLES = frozenset(("the",))


def classification_task(docs, data_dir, dev_fraction, seed=0):
  """split_sentence in the MRPC layout; returns {split: counts}."""
  return order_tasks.write_split_sentence_task(
      docs, data_dir, dev_fraction=dev_fraction, seed=seed)


def _answer_words(sentence):
  """(start, word) of each word of `sentence` that may be a cloze answer."""
  return [(m.start(), m.group()) for m in _WORD.finditer(sentence)
          if m.group().lower() not in _ARTICLES]


def paragraphs(sentences, count_pieces, max_pieces, stride):
  """Runs of consecutive `sentences` (>= 2 each) of at most `max_pieces`
  pieces in all, starting every `stride` sentences."""
  out = []
  for first in range(0, len(sentences), stride):
    run, pieces = [], 0
    for s in sentences[first:]:
      n = count_pieces(s)
      if pieces + n > max_pieces:
        break
      run.append(s)
      pieces += n
    if len(run) >= 2:
      out.append(run)
  return out


def cloze_question(sentence, start, word, window):
  """(question, phrase) for the answer `word` at `start` of `sentence`: the
  text from `window` words before it to `window` words after it, with the
  word itself replaced by BLANK (question) or kept (phrase)."""
  spans = [m.span() for m in re.finditer(r"\S+", sentence)]
  at = next(n for n, (i, j) in enumerate(spans) if i <= start < j)
  first = spans[max(0, at - window)][0]
  last = spans[min(len(spans) - 1, at + window)][1]
  end = start + len(word)
  return (sentence[first:start] + BLANK + sentence[end:last],
          sentence[first:last])


def cloze_questions(paragraph, per_paragraph, rng, pid, window):
  """SQuAD `qas` of one paragraph: up to `per_paragraph` cloze questions,
  each on a different word, each question's words found once in the
  context (so the answer's place is unambiguous)."""
  context = " ".join(paragraph)
  offsets, at = [], 0
  for s in paragraph:
    offsets.append(at)
    at += len(s) + 1
  choices = [(i, start, word) for i, s in enumerate(paragraph)
             for start, word in _answer_words(s)]
  rng.shuffle(choices)
  qas = []
  for i, start, word in choices:
    question, phrase = cloze_question(paragraph[i], start, word, window)
    answer_start = offsets[i] + start
    assert context[answer_start:answer_start + len(word)] == word
    if context.count(phrase) == 1:
      qas.append({"id": f"{pid}-{len(qas)}", "question": question,
                  "answers": [{"text": word, "answer_start": answer_start}]})
    if len(qas) == per_paragraph:
      break
  return context, qas


def squad_task(docs, data_dir, dev_fraction, count_pieces, max_context,
               seed=0, window=3, train_questions=8, dev_questions=3):
  """train.json and dev.json (SQuAD v1.1) of cloze questions on paragraphs
  of at most `max_context` pieces, one starting at every sentence.
  Returns {split: {"paragraphs", "questions"}}."""
  rng = random.Random(seed)
  splits = {"train": [], "dev": []}
  for d, doc in enumerate(docs):
    sentences = [s for s in doc if len(s.split()) >= 4]
    cut = len(sentences) - int(round(len(sentences) * dev_fraction))
    for split, part, per in (("train", sentences[:cut], train_questions),
                             ("dev", sentences[cut:], dev_questions)):
      for p, paragraph in enumerate(paragraphs(part, count_pieces,
                                               max_context, 1)):
        context, qas = cloze_questions(paragraph, per, rng, f"{split}{d}-{p}",
                                       window)
        if qas:
          splits[split].append({"context": context, "qas": qas})
  os.makedirs(data_dir, exist_ok=True)
  counts = {}
  for split, paras in splits.items():
    rng.shuffle(paras)
    output_files.write_json(
        os.path.join(data_dir, f"{split}.json"),
        {"version": "1.1", "data": [{"title": f"botchan {split}",
                                     "paragraphs": paras}]})
    counts[split] = {"paragraphs": len(paras),
                     "questions": sum(len(p["qas"]) for p in paras)}
  return counts


def read_classification_dev(data_dir):
  """dev.tsv -> (text_a, text_b, labels) lists."""
  with open(os.path.join(data_dir, "dev.tsv"), encoding="utf-8") as f:
    rows = [line.rstrip("\n").split("\t") for line in f][1:]
  return ([r[3] for r in rows], [r[4] for r in rows],
          [int(r[0]) for r in rows])


def read_squad_dev(data_dir):
  """dev.json -> (questions, contexts, gold answer texts) lists."""
  with open(os.path.join(data_dir, "dev.json"), encoding="utf-8") as f:
    data = json.load(f)["data"]
  questions, contexts, answers = [], [], []
  for article in data:
    for para in article["paragraphs"]:
      for qa in para["qas"]:
        questions.append(qa["question"])
        contexts.append(para["context"])
        answers.append(qa["answers"][0]["text"])
  return questions, contexts, answers
