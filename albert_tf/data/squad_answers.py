"""SQuAD answers from window outputs: the one decoder of both heads.

Both heads' predictions go the same way: the windows of a question are
grouped (`convert_examples` metadata), each window gives candidate spans of
the passage, candidates rank by score, the first `n_best_size` distinct
texts are the n-best (softmax probabilities over their scores), and a null
score decides "no answer". What differs is where candidates come from and
what the null score is:

  postprocess_logits  the simple head (`AlbertSpanLabeler`): the n best
      starts x ends of each window's context by logit; the null score is
      the [CLS] span's (or, with an answerability head, its logit).
  postprocess_beam    the original's SQuAD 2.0 head (`AlbertSquadV2`,
      `squad_utils.accumulate_predictions_v2` / `write_predictions_v2`):
      each window's start_n_top x end_n_top beam; the null score is the
      smallest `cls_logits` over the question's windows.
"""

import collections
import dataclasses
from typing import Dict, List, Optional

import numpy as np

# The beam's n-best when no candidate is left (the original's placeholder).
_NO_CANDIDATE_LOG_PROB = -1e6


@dataclasses.dataclass
class WindowResult:
  """One window's simple-head outputs."""
  start_logits: np.ndarray  # [seq]
  end_logits: np.ndarray    # [seq]
  answerable_logit: Optional[float] = None


@dataclasses.dataclass
class BeamResult:
  """One window's SQuAD 2.0 head outputs (`AlbertSquadV2` inference)."""
  start_top_log_probs: np.ndarray  # [start_n_top]
  start_top_index: np.ndarray      # [start_n_top]
  end_top_log_probs: np.ndarray    # [start_n_top * end_n_top]
  end_top_index: np.ndarray        # [start_n_top * end_n_top]
  cls_logits: float


# --- Shared ---------------------------------------------------------------


def windows_by_example(windows_meta, results) -> Dict[int, List[int]]:
  """Example index -> the unique ids of its windows that have results."""
  grouped = collections.defaultdict(list)
  for uid, meta in enumerate(windows_meta):
    if uid in results:
      grouped[meta["example_index"]].append(uid)
  return grouped


def distinct_best(candidates, n_best_size: int):
  """The first `n_best_size` candidates (text, ...) with distinct texts, in
  the given (ranked) order."""
  best = {}  # text -> its first candidate, in order
  for candidate in candidates:
    if len(best) >= n_best_size:
      break
    best.setdefault(candidate[0], candidate)
  return list(best.values())


def softmax(scores) -> np.ndarray:
  scores = np.asarray(scores, np.float64)
  probs = np.exp(scores - scores.max())
  return probs / probs.sum()


def _span_text(example, spans, first, last):
  """The passage text of context tokens first..last."""
  return example.context_text[spans["starts"][first]:spans["ends"][last]]


def _top(logits, n):
  return np.argsort(-np.asarray(logits), kind="stable")[:n]


# --- The simple head ----------------------------------------------------------


def logit_candidates(meta, result, n_best_size, max_answer_length):
  """[(score, start_logit, end_logit, first, last)] of one window: the n
  best starts x ends among its context tokens; first/last are context token
  indices of the whole passage."""
  start_l, end_l = result.start_logits, result.end_logits
  off, length = meta["doc_offset"], meta["window_length"]
  out = []
  for s in off + _top(start_l[off:off + length], n_best_size):
    for e in off + _top(end_l[off:off + length], n_best_size):
      if e < s or e - s + 1 > max_answer_length:
        continue
      if not meta["max_context"][s - off]:
        continue
      out.append((float(start_l[s] + end_l[e]), float(start_l[s]),
                  float(end_l[e]), meta["window_start"] + s - off,
                  meta["window_start"] + e - off))
  return out


def postprocess_logits(examples, windows_meta, tokens_meta, results,
                       n_best_size=20, max_answer_length=30,
                       version_2_with_negative=False,
                       null_score_diff_threshold=0.0):
  """Window logits -> (predictions, null_odds, nbest), all keyed by qas_id.

  windows_meta: per unique id, the metadata `convert_examples` yielded.
  tokens_meta: per example, `{"starts", "ends"}` (`example_metadata`).
  results: unique id -> WindowResult.
  predictions: qas_id -> answer text ("" = no answer, v2.0 only).
  null_odds: qas_id -> log-odds of no answer (v2.0; empty dict for v1.1).
  nbest: qas_id -> list of {"text", "probability", "start_logit",
    "end_logit"}.
  """
  grouped = windows_by_example(windows_meta, results)
  predictions, null_odds, nbest = {}, {}, {}
  for ex_index, example in enumerate(examples):
    spans, uids = tokens_meta[ex_index], grouped.get(ex_index, [])
    window_results = [results[uid] for uid in uids]
    candidates = []
    for uid in uids:
      for score, start, end, first, last in logit_candidates(
          windows_meta[uid], results[uid], n_best_size, max_answer_length):
        text = _span_text(example, spans, first, last)
        if text.strip():  # only word-start markers: no visible text
          candidates.append((text, score, start, end))
    candidates.sort(key=lambda c: -c[1])
    best = distinct_best(candidates, n_best_size) or [("", 0.0, 0.0, 0.0)]
    probs = softmax([c[1] for c in best])
    nbest[example.qas_id] = [
        {"text": c[0], "probability": float(p), "start_logit": c[2],
         "end_logit": c[3]} for c, p in zip(best, probs)]
    answer = best[0][0]
    if version_2_with_negative:
      answerable = [r.answerable_logit for r in window_results
                    if r.answerable_logit is not None]
      null_span_score = min((float(r.start_logits[0] + r.end_logits[0])
                             for r in window_results), default=0.0)
      odds = (-float(max(answerable)) if answerable
              else null_span_score - best[0][1])
      null_odds[example.qas_id] = odds
      if odds > null_score_diff_threshold or not candidates:
        answer = ""
    predictions[example.qas_id] = answer
  return predictions, null_odds, nbest


# --- The SQuAD 2.0 head (the original's beam) ---------------------------------


def beam_candidates(meta, result, max_answer_length):
  """[(start_log_prob, end_log_prob, first, last)] of one window's beam,
  in beam order; first/last are context token indices of the passage.
  Dropped: a start outside the window's context or not in its max-context
  window, an end outside the context or before the start, a span longer
  than `max_answer_length`."""
  off, length = meta["doc_offset"], meta["window_length"]
  start_n_top = len(result.start_top_index)
  end_n_top = len(result.end_top_index) // start_n_top
  out = []
  for i in range(start_n_top):
    start = int(result.start_top_index[i])
    for j in range(end_n_top):
      end = int(result.end_top_index[i * end_n_top + j])
      if not (0 <= start - off < length and end - off < length):
        continue
      if not meta["max_context"][start - off]:
        continue
      if end < start or end - start + 1 > max_answer_length:
        continue
      out.append((float(result.start_top_log_probs[i]),
                  float(result.end_top_log_probs[i * end_n_top + j]),
                  meta["window_start"] + start - off,
                  meta["window_start"] + end - off))
  return out


def postprocess_beam(examples, windows_meta, tokens_meta, results,
                     n_best_size=20, max_answer_length=30,
                     null_score_diff_threshold=None):
  """Beam outputs -> (predictions, null_scores, nbest), keyed by qas_id.

  Candidates rank by start_log_prob + end_log_prob (a stable sort: ties
  keep window, start-beam, end-beam order). null_scores: qas_id -> the
  smallest window `cls_logits` (the original's score_diff; written to
  null_odds.json); the answer is "" when it is >= the threshold (None:
  never). nbest: qas_id -> [{"text", "probability", "start_log_prob",
  "end_log_prob"}].
  """
  grouped = windows_by_example(windows_meta, results)
  predictions, null_scores, nbest = {}, {}, {}
  for ex_index, example in enumerate(examples):
    spans, uids = tokens_meta[ex_index], grouped.get(ex_index, [])
    candidates = [c for uid in uids for c in beam_candidates(
        windows_meta[uid], results[uid], max_answer_length)]
    candidates.sort(key=lambda c: -(c[0] + c[1]))
    best = distinct_best(
        ((_span_text(example, spans, first, last).strip(), start, end)
         for start, end, first, last in candidates), n_best_size) or [
             ("", _NO_CANDIDATE_LOG_PROB, _NO_CANDIDATE_LOG_PROB)]
    probs = softmax([s + e for _, s, e in best])
    nbest[example.qas_id] = [
        {"text": t, "probability": float(p), "start_log_prob": s,
         "end_log_prob": e} for (t, s, e), p in zip(best, probs)]
    score = min((float(results[uid].cls_logits) for uid in uids), default=0.0)
    null_scores[example.qas_id] = score
    no_answer = (null_score_diff_threshold is not None and
                 score >= null_score_diff_threshold)
    predictions[example.qas_id] = "" if no_answer else best[0][0]
  return predictions, null_scores, nbest
