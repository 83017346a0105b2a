"""SQuAD v1.1 / v2.0: reading, doc-stride windows, answer alignment, answers.

Alignment of answers to tokens: `squad_alignment`.

Windows. A context longer than `max_seq_length - len(question) - 3` tokens is
split into overlapping windows `[CLS] question [SEP] window [SEP]`, each
starting `doc_stride` tokens after the previous one; `doc_stride` 0 keeps
the first window only (the context cut). A training window that
does not hold the whole answer is labelled (0, 0), the [CLS] position, like
an unanswerable question. At prediction time a token only starts an answer
in the window where it has the most context (min of left and right context,
as the original).

No answer (v2.0). `null_odds` per question (written to null_odds.json) is
the log-odds that the question has no answer: with an answerability head,
minus the best window's answerable logit; without one, the [CLS] span score
minus the best span score (the original BERT rule). The answer is "" when
null_odds > `null_score_diff_threshold`.

Bad input: a question missing a field, or with a field of the wrong type
(`squad_checks`), raises `SquadFormatError` naming the file, JSON path and
question id; a training answer whose text is not at its
`answer_start` is moved to the nearest occurrence of the text in the
context, and skipped when absent or when `answer_start` is negative; each
kind is counted (`ReadStats`) and logged.
"""

import dataclasses
from typing import List

from absl import logging
import tensorflow as tf

from albert_tf.data import finetune_features
from albert_tf.data import squad_alignment
from albert_tf.data import squad_checks

SquadFormatError = squad_checks.SquadFormatError


@dataclasses.dataclass
class SquadExample:
  qas_id: str
  question_text: str
  context_text: str
  answer_text: str = ""
  answer_start: int = -1        # character offset in context_text
  is_impossible: bool = False
  gold_answers: List[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class ReadStats:
  questions: int = 0
  answerable: int = 0  # training questions with an answer to align
  skipped: int = 0  # answer not in the context, or a negative answer_start
  negative_starts: int = 0  # of `skipped`
  realigned: int = 0  # answer_start moved to the nearest occurrence


def read_squad_examples(path, is_training, version_2_with_negative=False,
                        stats=None):
  """Reads a SQuAD JSON file into SquadExamples.

  Training uses the first answer; evaluation keeps all gold answers.
  """
  stats = stats if stats is not None else ReadStats()
  data = squad_checks.load_json(path)
  articles = squad_checks.field(data, "data", path, "top level")
  examples, seen_ids, realigned_ids = [], {}, []
  for a, article in enumerate(articles):
    for p, paragraph in enumerate(
        squad_checks.field(article, "paragraphs", path, f"data[{a}]")):
      where_p = f"data[{a}].paragraphs[{p}]"
      qas = squad_checks.field(paragraph, "qas", path, where_p)
      for q, qa in enumerate(qas):
        where = f"{where_p}.qas[{q}]"
        qas_id = squad_checks.question_id(qa, path, where)
        squad_checks.check_new_id(seen_ids, qas_id, path, where)
        context = squad_checks.text_field(paragraph, "context", path,
                                          where_p, qas_id)
        question = squad_checks.text_field(qa, "question", path, where,
                                           qas_id)
        stats.questions += 1
        is_impossible = squad_checks.is_impossible(qa, path, where)
        if is_impossible and not version_2_with_negative:
          raise SquadFormatError(
              f"{path}: {where}: is_impossible question in a v1.1 run; pass "
              "--version_2_with_negative")
        gold = squad_checks.answer_texts(qa, path, where, qas_id)
        example = SquadExample(qas_id, question, context,
                               is_impossible=is_impossible,
                               gold_answers=gold)
        if is_training and not is_impossible:
          if not gold:
            raise SquadFormatError(
                f"{path}: {where}: answerable question without answers")
          stats.answerable += 1
          text = gold[0]
          given = squad_checks.answer_start(qa, path, where, qas_id)
          if given < 0:  # not an offset (Python would count from the end)
            stats.skipped += 1
            stats.negative_starts += 1
            logging.warning("%s: %s: answer_start %d is negative; skipped",
                            path, where, given)
            continue
          start = _locate_answer(context, text, given)
          if start is None:
            stats.skipped += 1
            logging.warning("%s: %s: answer %r not found in the context; "
                            "skipped", path, where, text)
            continue
          if start != given:
            stats.realigned += 1
            realigned_ids.append(qas_id)
          example.answer_text, example.answer_start = text, start
        examples.append(example)
  squad_checks.check_answers_found(path, stats.answerable, stats.skipped)
  _log_stats(path, stats, realigned_ids[:1])
  return examples


def _log_stats(path, stats, realigned_ids):
  """Warns of the training answers skipped and moved."""
  if stats.skipped:
    logging.warning("%s: skipped %d of %d questions: %d whose answer is "
                    "not in the context, %d with a negative answer_start",
                    path, stats.skipped, stats.questions,
                    stats.skipped - stats.negative_starts,
                    stats.negative_starts)
  if stats.realigned:
    logging.warning("%s: moved %d of %d answers to the occurrence of their "
                    "text nearest their answer_start, which did not point "
                    "at it (e.g. question %r)", path, stats.realigned,
                    stats.answerable, realigned_ids[0])


def _locate_answer(context, text, start):
  """`start` if the answer is there, else the nearest occurrence, or None."""
  if not text.strip():
    return None
  if context[start:start + len(text)] == text:
    return start
  hits = [i for i in range(len(context)) if context.startswith(text, i)]
  return min(hits, key=lambda h: abs(h - start)) if hits else None


# --- Windows and features -----------------------------------------------------


def doc_windows(num_tokens, max_tokens, doc_stride):
  """[(start, length)] windows covering num_tokens (original doc-stride);
  doc_stride 0: the one window of the first max_tokens (the context cut, as
  the export without windows)."""
  if max_tokens <= 0:
    raise ValueError("max_seq_length leaves no room for the context; reduce "
                     "max_query_length or raise max_seq_length")
  if doc_stride < 0:
    raise ValueError(f"doc_stride must be >= 0, got {doc_stride}")
  if not doc_stride:
    return [(0, min(max_tokens, num_tokens))]
  windows, start = [], 0
  while True:
    length = min(max_tokens, num_tokens - start)
    windows.append((start, length))
    if start + length >= num_tokens:
      return windows
    start += min(length, doc_stride)


def max_context_flags(windows, window_index):
  """Per token of window `window_index`: is this its max-context window?"""
  w_start, w_len = windows[window_index]
  flags = []
  for pos in range(w_start, w_start + w_len):
    # Context: min(left, right) + 0.01 * length; the first best one wins.
    scores = [min(pos - s, s + length - 1 - pos) + 0.01 * length
              if s <= pos < s + length else -1 for s, length in windows]
    flags.append(scores.index(max(scores)) == window_index)
  return flags


def convert_examples(examples, tokenizer, max_seq_length, doc_stride,
                     max_query_length, is_training):
  """Yields (features dict, window metadata dict) per window.

  features: the three inputs, `unique_ids`, `start_positions`,
  `end_positions`, `is_impossible` (all windows, labels 0 at prediction).
  metadata: example_index, doc_offset (position of the first context token),
  window_start, window_length, max_context (list of bools).

  With `doc_stride` 0 a training answer past the one window trains towards
  [CLS] as unanswerable; how many did is logged once the examples are done.
  """
  unique_id = cut = answered = 0
  for ex_index, example in enumerate(examples):
    q_ids = tokenizer.encode_ids(example.question_text)[:max_query_length]
    doc = squad_alignment.tokenize_with_offsets(tokenizer, example.context_text)
    answer = None
    if is_training and not example.is_impossible:
      answer = squad_alignment.char_span_to_tokens(
          doc, example.answer_start,
          example.answer_start + len(example.answer_text))
    windows = doc_windows(len(doc.ids), max_seq_length - len(q_ids) - 3,
                          doc_stride)
    if answer is not None:
      answered += 1
      cut += answer[1] >= windows[-1][0] + windows[-1][1]
    doc_offset = len(q_ids) + 2
    for w, (w_start, w_len) in enumerate(windows):
      features = finetune_features.pack(
          tokenizer, q_ids, doc.ids[w_start:w_start + w_len], max_seq_length)
      start = end = 0
      impossible = int(example.is_impossible)
      if answer is not None:
        if w_start <= answer[0] and answer[1] < w_start + w_len:
          start = answer[0] - w_start + doc_offset
          end = answer[1] - w_start + doc_offset
        else:
          impossible = 1  # the answer is not (wholly) in this window
      features.update(unique_ids=[unique_id], start_positions=[start],
                      end_positions=[end], is_impossible=[impossible])
      meta = {"example_index": ex_index, "doc_offset": doc_offset,
              "window_start": w_start, "window_length": w_len,
              "max_context": max_context_flags(windows, w)}
      unique_id += 1
      yield features, meta
  if cut:
    logging.warning("SQuAD training: %d of %d answers end past the one window "
                    "of --doc_stride=0 (the question and the first context "
                    "tokens that fit --max_seq_length) and train towards "
                    "[CLS] as unanswerable; give --doc_stride for windows "
                    "over the whole context", cut, answered)


def example_metadata(examples, tokenizer):
  """Per example, the tokens' original character spans (for answers)."""
  docs = (squad_alignment.tokenize_with_offsets(tokenizer, e.context_text)
          for e in examples)
  return [{"starts": doc.starts, "ends": doc.ends} for doc in docs]


def feature_spec(max_seq_length):
  scalar = ([], tf.int64)
  return finetune_features.feature_spec(
      [max_seq_length], unique_ids=scalar, start_positions=scalar,
      end_positions=scalar, is_impossible=scalar)

