"""Answers from the original SQuAD 2.0 head's beam (`squad_utils`'
`accumulate_predictions_v2` / `write_predictions_v2` / `evaluate_v2`).

Per question: every window's start_n_top x end_n_top (start, end) pairs are
candidates unless the start is outside the window's context or not in its
max-context window, the end is outside the context or before the start, or
the span is longer than `max_answer_length`. Candidates rank by
start_log_prob + end_log_prob; the first `n_best_size` distinct texts are the
n-best. The null score is the smallest `cls_logits` over the question's
windows; the answer is "" when it is >= the threshold (None: never).

Evaluation, as `evaluate_v2`: predict with no threshold, take the v2 script's
best-F1 threshold on the null scores, predict again with it and score that
(with the script's default na_prob_thresh 1.0 applied to the null scores, as
the original's printed numbers do). `exact`, `f1` and the HasAns/NoAns
breakdown are the second pass's; `best_*` and their thresholds are the first
pass's search, so `best_f1_thresh` is the `null_score_diff_threshold` used
(the original printed the second pass's search, on already-thresholded
answers).
"""

import collections
import dataclasses

import numpy as np

from albert_tf.tasks import metrics as finetune_metrics

# The original's `evaluate_v2` scores with the eval script's default.
EVAL_NA_PROB_THRESH = 1.0
_NO_CANDIDATE_LOG_PROB = -1e6
_THRESHOLD_SEARCH_KEYS = ("best_exact", "best_exact_thresh", "best_f1",
                          "best_f1_thresh")


@dataclasses.dataclass
class BeamResult:
  """One window's head outputs (`AlbertSquadV2` inference outputs)."""
  start_top_log_probs: np.ndarray  # [start_n_top]
  start_top_index: np.ndarray      # [start_n_top]
  end_top_log_probs: np.ndarray    # [start_n_top * end_n_top]
  end_top_index: np.ndarray        # [start_n_top * end_n_top]
  cls_logits: float


def window_candidates(meta, result, max_answer_length):
  """[(start_log_prob, end_log_prob, first, last)] of one window; first/last
  are context token indices of the whole passage."""
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


def _softmax(scores):
  scores = np.asarray(scores, np.float64)
  probs = np.exp(scores - scores.max())
  return probs / probs.sum()


def postprocess(examples, windows_meta, tokens_meta, results, n_best_size=20,
                max_answer_length=30, null_score_diff_threshold=None):
  """Beam outputs -> (predictions, null_scores, nbest), keyed by qas_id.

  windows_meta / tokens_meta: as `squad_data.convert_examples` and
  `squad_data.example_metadata` produce. results: unique id -> BeamResult.
  null_scores: qas_id -> the smallest window `cls_logits` (the original's
  score_diff; written to null_odds.json).
  nbest: qas_id -> [{"text", "probability", "start_log_prob",
  "end_log_prob"}].
  """
  by_example = collections.defaultdict(list)
  for uid, meta in enumerate(windows_meta):
    if uid in results:
      by_example[meta["example_index"]].append(uid)
  predictions, null_scores, nbest = {}, {}, {}
  for ex_index, example in enumerate(examples):
    spans = tokens_meta[ex_index]
    candidates, score_null = [], None
    for uid in by_example.get(ex_index, []):
      result = results[uid]
      cls = float(result.cls_logits)
      score_null = cls if score_null is None else min(score_null, cls)
      candidates.extend(window_candidates(windows_meta[uid], result,
                                          max_answer_length))
    # Stable sort: ties keep window, start-beam, end-beam order.
    candidates.sort(key=lambda c: -(c[0] + c[1]))
    seen, best = set(), []
    for start_lp, end_lp, first, last in candidates:
      if len(best) >= n_best_size:
        break
      text = example.context_text[spans["starts"][first]:
                                  spans["ends"][last]].strip()
      if text in seen:
        continue
      seen.add(text)
      best.append((text, start_lp, end_lp))
    if not best:
      best = [("", _NO_CANDIDATE_LOG_PROB, _NO_CANDIDATE_LOG_PROB)]
    probs = _softmax([s + e for _, s, e in best])
    nbest[example.qas_id] = [
        {"text": t, "probability": float(p), "start_log_prob": s,
         "end_log_prob": e} for (t, s, e), p in zip(best, probs)]
    score = 0.0 if score_null is None else score_null
    null_scores[example.qas_id] = score
    answer = best[0][0]
    if (null_score_diff_threshold is not None and
        score >= null_score_diff_threshold):
      answer = ""
    predictions[example.qas_id] = answer
  return predictions, null_scores, nbest


def evaluate(dataset, examples, windows_meta, tokens_meta, results,
             n_best_size=20, max_answer_length=30):
  """The original's `evaluate_v2`: (metrics, predictions, null_scores,
  nbest) at the dev-tuned threshold (`metrics["null_score_diff_threshold"]`).
  """
  args = (examples, windows_meta, tokens_meta, results, n_best_size,
          max_answer_length)
  predictions, null_scores, _ = postprocess(*args)
  untuned = finetune_metrics.squad_metrics(dataset, predictions, null_scores)
  threshold = untuned["best_f1_thresh"]
  predictions, null_scores, nbest = postprocess(
      *args, null_score_diff_threshold=threshold)
  metrics = finetune_metrics.squad_metrics(
      dataset, predictions, null_scores, null_threshold=EVAL_NA_PROB_THRESH)
  metrics["null_score_diff_threshold"] = threshold
  # The second pass's best_* were searched on already-thresholded answers;
  # report the first pass's search, the one that chose the threshold.
  metrics.update({k: untuned[k] for k in _THRESHOLD_SEARCH_KEYS})
  return metrics, predictions, null_scores, nbest
