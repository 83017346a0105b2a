"""Stage 5's fine-tuning tasks, made from held-out text in the GLUE/MRPC
layout: which part of a sentence (or which of two sentences) comes first."""

import os
import random
import re


# MRPC's TSV layout: the demo tasks reuse run_classifier's `mrpc` reader
# (text pair, labels 0/1, accuracy + F1).
MRPC_HEADER = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"
LABEL_NAMES = ("in_order", "swapped")


def _clean(s):
  return " ".join(s.replace("\t", " ").split())


def _split_by_position(items, dev_fraction):
  """(train, dev): the last `dev_fraction` of `items` is dev."""
  cut = len(items) - int(round(len(items) * dev_fraction))
  return items[:cut], items[cut:]


def _ordered_rows(first, second, row_id, both_orders, rng):
  """MRPC rows for a (first, second) text pair; label 1 = swapped."""
  in_order = ("0", f"{row_id}a", f"{row_id}b", first, second)
  swapped = ("1", f"{row_id}b", f"{row_id}a", second, first)
  if both_orders:
    return [in_order, swapped]
  return [swapped if rng.random() < 0.5 else in_order]


def write_mrpc_task(data_dir, train_rows, dev_rows):
  """Writes train.tsv and dev.tsv (MRPC layout); returns their counts."""
  if len(train_rows) < 8 or len(dev_rows) < 4:
    raise ValueError(f"too few examples for the fine-tuning task "
                     f"({len(train_rows)} train, {len(dev_rows)} dev rows); "
                     "use a larger corpus or --heldout_fraction")
  os.makedirs(data_dir, exist_ok=True)
  counts = {}
  for split, rows in (("train", train_rows), ("dev", dev_rows)):
    with open(os.path.join(data_dir, f"{split}.tsv"), "w",
              encoding="utf-8") as f:
      f.write(MRPC_HEADER + "\n")
      for row in rows:
        f.write("\t".join(row) + "\n")
    counts[split] = {"examples": len(rows),
                     "swapped": sum(r[0] == "1" for r in rows)}
  return counts


def sentence_pairs(docs, min_words=3):
  """Consecutive sentence pairs (a, b) inside documents."""
  pairs = []
  for doc in docs:
    for a, b in zip(doc, doc[1:]):
      a, b = _clean(a), _clean(b)
      if len(a.split()) >= min_words and len(b.split()) >= min_words:
        pairs.append((a, b))
  return pairs


def write_sentence_order_task(docs, data_dir, dev_fraction=0.25, seed=0):
  """Sentence order of two consecutive sentences (MRPC format).

  Each document's pairs are split by position (the first part trains, the
  rest is dev, so no sentence is shared between train and dev pairs other
  than at one boundary). Label 1 = the two sentences are swapped: train gets
  both orders of each pair (balanced labels), dev one order at random.
  """
  rng = random.Random(seed)
  train_rows, dev_rows = [], []
  for d, doc in enumerate(docs):
    train, dev = _split_by_position(
        list(enumerate(sentence_pairs([doc]))), dev_fraction)
    for rows, part, both in ((train_rows, train, True),
                             (dev_rows, dev, False)):
      for i, (a, b) in part:
        rows += _ordered_rows(a, b, f"{d}-{i}", both, rng)
  rng.shuffle(train_rows)
  return write_mrpc_task(data_dir, train_rows, dev_rows)


def sentence_halves(sentence, num_cuts, rng):
  """Up to `num_cuts` (head, tail) splits of `sentence` at word boundaries.

  Cuts fall in the middle half of the words, so both parts have some text.
  """
  words = sentence.split()
  lo, hi = max(1, len(words) // 4), max(1, (3 * len(words)) // 4)
  cuts = sorted(rng.sample(range(lo, hi + 1), min(num_cuts, hi + 1 - lo)))
  return [(" ".join(words[:c]), " ".join(words[c:])) for c in cuts]


def words_only(sentence):
  """`sentence` without punctuation: words (letters, digits, inner
  apostrophes and hyphens) separated by single spaces."""
  words = (w.strip("'-") for w in re.sub(r"[^\w'\-]+", " ", sentence).split())
  return " ".join(w for w in words if w)


def write_split_words_task(docs, data_dir, dev_fraction=0.25, train_cuts=4,
                           min_words=6, seed=0):
  """split_sentence on the words alone (punctuation removed first).

  Without the full stop, the capital-free text (the vocabulary lowercases)
  shows the order only through how the words run: which words start a
  sentence, and what a phrase cut in two leaves dangling. A random
  initialisation learns little of that from a few thousand pairs; a model
  that has read the book learns more (docs/demo.md has the measurements).
  """
  stripped = [[words_only(s) for s in doc] for doc in docs]
  return write_split_sentence_task(stripped, data_dir, dev_fraction,
                                   train_cuts, min_words, seed)


def write_split_sentence_task(docs, data_dir, dev_fraction=0.25,
                              train_cuts=4, min_words=6, seed=0):
  """Order of the two parts of one sentence (MRPC format).

  Every sentence of at least `min_words` words is cut at a word boundary
  into (head, tail); label 1 = shown swapped as (tail, head). Within each
  document the first sentences train and the last `dev_fraction` are dev, so
  no sentence is in both. Train: `train_cuts` different cuts per sentence,
  each in both orders; dev: one cut per sentence in both orders, so the
  majority baseline is exactly 0.5.

  Unlike the order of two whole sentences (which needs an understanding of
  the story no tiny model gets from one novel; docs/demo.md), this is
  learnable in minutes: where a sentence starts and ends and how its
  phrases run are visible in the text itself.
  """
  rng = random.Random(seed)
  train_rows, dev_rows = [], []
  for d, doc in enumerate(docs):
    sentences = [_clean(s) for s in doc]
    sentences = [s for s in sentences if len(s.split()) >= min_words]
    train, dev = _split_by_position(list(enumerate(sentences)), dev_fraction)
    for rows, part, cuts in ((train_rows, train, train_cuts),
                             (dev_rows, dev, 1)):
      for i, sentence in part:
        for head, tail in sentence_halves(sentence, cuts, rng):
          cut = len(head.split())
          rows += _ordered_rows(head, tail, f"{d}-{i}.{cut}", True, rng)
  rng.shuffle(train_rows)
  return write_mrpc_task(data_dir, train_rows, dev_rows)


# --finetune_task name -> (builder, description).
FINETUNE_TASKS = {
    "split_sentence": (
        write_split_sentence_task,
        "the two parts of a sentence, cut at a word boundary; label 1 = "
        "shown tail first"),
    "split_words": (
        write_split_words_task,
        "the two parts of a sentence without its punctuation, cut at a word "
        "boundary; label 1 = shown tail first"),
    "sentence_order": (
        write_sentence_order_task,
        "two consecutive sentences; label 1 = shown in the wrong order"),
}
