"""The two tasks benchmarks/lite_accuracy.py fine-tunes, made from botchan.

- classification: the demo's `split_sentence` order task (two parts of one
  sentence, shown in order or swapped; MRPC layout), which a small ALBERT
  learns well from random weights in minutes: the sentence's own
  punctuation shows where it ends.
- squad: word look-up in SQuAD v1.1 JSON. The context is a few
  consecutive sentences; the question is one of its words (found once in
  it); the answer is that word where it stands. The model has to match the
  question's pieces to the context's and mark the span they cover. (A cloze
  -- a phrase of the context with one word blanked, answered by that word
  -- needs two steps, finding the phrase and then the word beside it; the
  demo's model did not learn it from random weights in 1,700 steps: dev
  start accuracy 0.08.)

Within each chapter the first sentences make training examples and the
rest dev, so no sentence is in both.
"""

import collections
import json
import os
import random
import re

from albert_toolkit import output_files
from examples.demo import order_tasks

# Questions: words of 4+ letters (shorter ones are often parts of others).
MIN_QUESTION_LETTERS = 4
# Answers: words of 3+ letters that the SQuAD normalisation keeps whole.
_WORD = re.compile(r"\b[A-Za-z]{3,}\b")
_ARTICLES = frozenset(("the",))


def classification_task(docs, data_dir, dev_fraction, seed=0):
  """split_sentence in the MRPC layout; returns {split: counts}."""
  return order_tasks.write_split_sentence_task(
      docs, data_dir, dev_fraction=dev_fraction, seed=seed)


def _answer_words(sentence):
  """(start, word) of each word of `sentence` that may be an answer."""
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


def lookup_questions(paragraph, per_paragraph, rng, pid):
  """SQuAD `qas` of one paragraph: up to `per_paragraph` questions, each a
  word found once in the context (as a word, any case), answered by that
  word where it stands."""
  context = " ".join(paragraph)
  words = collections.Counter(w.lower() for _, w in _answer_words(context))
  choices = [(start, word) for start, word in _answer_words(context)
             if len(word) >= MIN_QUESTION_LETTERS and
             words[word.lower()] == 1]
  qas = []
  for start, word in rng.sample(choices, min(per_paragraph, len(choices))):
    qas.append({"id": f"{pid}-{len(qas)}", "question": word,
                "answers": [{"text": word, "answer_start": start}]})
  return context, qas


def squad_task(docs, data_dir, dev_fraction, count_pieces, max_context,
               seed=0, train_questions=8, dev_questions=3):
  """train.json and dev.json (SQuAD v1.1) of word look-up questions on
  paragraphs of at most `max_context` pieces, one starting at every
  sentence.
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
        context, qas = lookup_questions(paragraph, per, rng,
                                        f"{split}{d}-{p}")
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
