"""Downstream metrics, computed the way each benchmark defines them.

GLUE: accuracy; F1 of the positive class (MRPC, QQP); Matthews correlation
(CoLA); Pearson and Spearman correlation (STS-B).
SQuAD: the official evaluation scripts' answer normalisation (lowercase, drop
punctuation and the articles a/an/the, collapse whitespace), exact match and
token F1 as the maximum over the gold answers; v2.0 adds the HasAns/NoAns
breakdown and the best no-answer threshold over `null_odds`.
RACE: accuracy on middle, high and all.

Everything is NumPy / SciPy / Python, so the numbers do not depend on TF.
"""

import collections
import re
import string

from absl import logging
import numpy as np
from scipy import stats

from albert_tf.data import squad_checks

# --- Classification / regression --------------------------------------------


def accuracy(labels, predictions):
  labels = np.asarray(labels)
  return float(np.mean(labels == predictions)) if labels.size else 0.0


# Each formula once, over sums: the NumPy metrics below and the in-graph
# eval (`sentence_prediction.metrics_from_sums`, xp=tf.math) both call these.


def f1_from_counts(tp, fp, fn, xp=np):
  """F1 of the positive class, 2tp / (2tp + fp + fn); 0 when tp == 0."""
  return 2 * tp / xp.maximum(2 * tp + fp + fn, 1.0)


def mcc_from_counts(tp, fp, fn, tn, xp=np):
  """Binary Matthews correlation; 0 when a marginal is empty (then the
  numerator is 0 too)."""
  denom = xp.sqrt(xp.maximum((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn),
                             0.0))
  return (tp * tn - fp * fn) / xp.maximum(denom, 1e-12)


def pearson_from_moments(n, sx, sy, sxx, syy, sxy, xp=np):
  """Pearson correlation from n and the sums of x, y, x², y², xy; 0 when
  a variance is 0."""
  cov = sxy - sx * sy / n
  vx = sxx - sx * sx / n
  vy = syy - sy * sy / n
  return cov / xp.sqrt(xp.maximum(vx * vy, 1e-12))


def binary_counts(labels, predictions, positive=1):
  """(tp, fp, fn, tn) as floats."""
  y = np.asarray(labels) == positive
  p = np.asarray(predictions) == positive
  return tuple(float(np.sum(a & b)) for a, b in
               ((y, p), (~y, p), (y, ~p), (~y, ~p)))


def f1_score(labels, predictions, positive=1):
  """F1 of class `positive` (0.0 when there are no true positives)."""
  return float(f1_from_counts(*binary_counts(labels, predictions, positive)[:3]))


def matthews_corrcoef(labels, predictions):
  """Binary Matthews correlation (labels as bools)."""
  return float(mcc_from_counts(*binary_counts(
      np.asarray(labels, bool), np.asarray(predictions, bool), True)))


def pearson(x, y):
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  # Centred first (exact for data far from 0), then the shared formula.
  x, y = x - x.mean(), y - y.mean()
  return float(pearson_from_moments(len(x), x.sum(), y.sum(), np.sum(x * x),
                                    np.sum(y * y), np.sum(x * y)))


def spearman(x, y):
  return pearson(stats.rankdata(x), stats.rankdata(y))


def classification_metrics(task_metric, labels, predictions):
  """Dict of the metrics a GLUE task reports.

  task_metric: "accuracy", "f1" (accuracy + F1 + their mean), "mcc"
  (Matthews corr.) or "corr" (Pearson, Spearman and their mean; predictions
  are the regression outputs).
  """
  if task_metric == "corr":
    p, s = pearson(predictions, labels), spearman(predictions, labels)
    return {"pearson": p, "spearman": s, "corr": (p + s) / 2}
  out = {"accuracy": accuracy(labels, predictions)}
  if task_metric == "f1":
    out["f1"] = f1_score(labels, predictions)
    out["acc_and_f1"] = (out["accuracy"] + out["f1"]) / 2
  elif task_metric == "mcc":
    out["mcc"] = matthews_corrcoef(labels, predictions)
  elif task_metric != "accuracy":
    raise ValueError(f"unknown task metric {task_metric!r}")
  return out


# --- SQuAD (official evaluation) ---------------------------------------------

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = frozenset(string.punctuation)


def normalize_answer(s):
  """Official SQuAD normalisation: lower, no punctuation/articles, spaces."""
  s = "".join(ch for ch in s.lower() if ch not in _PUNCT)
  s = _ARTICLES.sub(" ", s)
  return " ".join(s.split())


def _answer_tokens(s):
  return normalize_answer(s).split() if s else []


def exact_match(prediction, gold):
  return float(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction, gold):
  """Token F1 of two answers; both empty scores 1, one empty scores 0."""
  pred, ref = _answer_tokens(prediction), _answer_tokens(gold)
  if not pred or not ref:
    return float(pred == ref)
  common = collections.Counter(pred) & collections.Counter(ref)
  same = sum(common.values())
  if same == 0:
    return 0.0
  precision, recall = same / len(pred), same / len(ref)
  return 2 * precision * recall / (precision + recall)


def gold_answers(qa):
  """Gold answer texts of a SQuAD question dict ([""] if unanswerable)."""
  answers = [a["text"] for a in qa.get("answers", [])
             if normalize_answer(a["text"])]
  return answers or [""]


def _raw_scores(dataset, predictions):
  """qid -> (EM, F1) of the raw predictions, qid -> has_answer. Ids are
  keyed as the reader keys them (`squad_checks.question_key`: a numeric id
  is its text); a question without a prediction scores 0, with a warning."""
  exact, f1, has_answer, missing = {}, {}, {}, []
  for article in dataset:
    for paragraph in article["paragraphs"]:
      for qa in paragraph["qas"]:
        qid = squad_checks.question_key(qa["id"])
        golds = gold_answers(qa)
        # As the official v2 script: answerable if it lists answers, even
        # ones that normalise to "" (e.g. "The"), which then only match "".
        has_answer[qid] = bool(qa.get("answers"))
        if qid not in predictions:
          missing.append(qid)
          continue
        pred = predictions[qid]
        exact[qid] = max(exact_match(pred, g) for g in golds)
        f1[qid] = max(token_f1(pred, g) for g in golds)
  if missing:
    logging.warning("SQuAD scoring: %d of %d questions have no prediction "
                    "(e.g. id %r); they score 0", len(missing),
                    len(has_answer), missing[0])
  return exact, f1, has_answer


def _apply_threshold(scores, null_odds, has_answer, threshold):
  """`scores` with "no answer" where the null odds exceed `threshold`."""
  return {qid: float(not has_answer[qid])
          if null_odds.get(qid, -np.inf) > threshold else s
          for qid, s in scores.items()}


def _mean(scores, qids):
  qids = list(qids)
  return 100.0 * sum(scores.get(q, 0.0) for q in qids) / len(qids) if qids else 0.0


def find_best_threshold(predictions, scores, null_odds, has_answer):
  """Official v2 search: the null-odds threshold maximising the mean score.

  Starts from "answer nothing" (score = share of NoAns questions) and walks
  questions by increasing null odds, switching each to its prediction.
  `scores` are the raw (unthresholded) per-question scores. Returns (best
  score in %, threshold).
  """
  num_no_ans = sum(1 for q in has_answer if not has_answer[q])
  best = cur = float(num_no_ans)
  best_thresh = 0.0
  for qid in sorted(null_odds, key=lambda q: null_odds[q]):
    if qid not in scores:
      continue
    if has_answer[qid]:
      diff = scores[qid]
    elif predictions.get(qid):
      diff = -1.0
    else:
      diff = 0.0
    cur += diff
    if cur > best:
      best, best_thresh = cur, null_odds[qid]
  return 100.0 * best / max(len(scores), 1), best_thresh


def squad_metrics(dataset, predictions, null_odds=None, null_threshold=None):
  """SQuAD metrics of `predictions` (qid -> text) against `dataset`.

  `dataset` is the "data" list of a SQuAD JSON file. Without `null_odds` the
  result is v1.1's {"exact_match", "f1"} (in %). With `null_odds` (qid ->
  odds of no answer, as written to null_odds.json) it is the v2.0 script's
  output: exact, f1, total, HasAns_*/NoAns_* breakdown and best_exact,
  best_exact_thresh, best_f1, best_f1_thresh. `null_threshold` (None: the
  predictions are taken as given) re-applies a threshold first.
  """
  exact, f1, has_answer = _raw_scores(dataset, predictions)
  if null_odds is None:
    total = len(has_answer)
    return {"exact_match": _mean(exact, has_answer) if total else 0.0,
            "f1": _mean(f1, has_answer) if total else 0.0}
  raw_exact, raw_f1 = exact, f1
  if null_threshold is not None:
    exact = _apply_threshold(exact, null_odds, has_answer, null_threshold)
    f1 = _apply_threshold(f1, null_odds, has_answer, null_threshold)
  out = {"exact": _mean(exact, has_answer), "f1": _mean(f1, has_answer),
         "total": len(has_answer)}
  for part, answerable in (("HasAns", True), ("NoAns", False)):
    qids = [q for q in has_answer if has_answer[q] == answerable]
    if qids:
      out.update({f"{part}_exact": _mean(exact, qids),
                  f"{part}_f1": _mean(f1, qids), f"{part}_total": len(qids)})
  for name, raw in (("exact", raw_exact), ("f1", raw_f1)):
    out[f"best_{name}"], out[f"best_{name}_thresh"] = find_best_threshold(
        predictions, raw, null_odds, has_answer)
  return out


# --- RACE ---------------------------------------------------------------------


def race_accuracy(levels, labels, predictions):
  """Accuracy on "middle", "high" and "all" (levels: one string per question)."""
  levels, labels, predictions = map(np.asarray, (levels, labels, predictions))
  out = {"accuracy": accuracy(labels, predictions)}
  for level in ("middle", "high"):
    keep = levels == level
    if keep.any():
      out[f"accuracy_{level}"] = accuracy(labels[keep], predictions[keep])
      out[f"num_{level}"] = int(keep.sum())
  out["num_all"] = int(len(labels))
  return out
