"""SQuAD 2.0 scoring as the official v2 evaluation script defines it, and
which threshold search the XLNet head's eval reports.

The reference below is a transcription of the official script's
make_qid_to_has_ans / get_raw_scores / apply_no_ans_threshold /
make_eval_dict / find_best_thresh (evaluate-v2.0.py). Today's code counted a
question whose gold answers all normalise to "" (the answer "The") as NoAns.
"""

import collections
import re
import string

import numpy as np
import pytest

from albert_tf.data import squad_answers
from albert_tf.data import squad_data
from albert_tf.tasks import metrics as finetune_metrics
from albert_tf.tasks import squad_v2_postprocess as pp


# --- the official evaluate-v2.0.py, transcribed -------------------------------
def _normalize(s):
  s = s.lower()
  s = "".join(ch for ch in s if ch not in set(string.punctuation))
  s = re.sub(r"\b(a|an|the)\b", " ", s)
  return " ".join(s.split())


def _f1(gold, pred):
  gold_toks = _normalize(gold).split() if gold else []
  pred_toks = _normalize(pred).split() if pred else []
  common = collections.Counter(gold_toks) & collections.Counter(pred_toks)
  num_same = sum(common.values())
  if not gold_toks or not pred_toks:
    return int(gold_toks == pred_toks)
  if num_same == 0:
    return 0
  p, r = num_same / len(pred_toks), num_same / len(gold_toks)
  return 2 * p * r / (p + r)


def official(dataset, preds, na_probs, na_prob_thresh=1.0):
  has_ans = {qa["id"]: bool(qa["answers"]) for a in dataset
             for p in a["paragraphs"] for qa in p["qas"]}
  exact, f1 = {}, {}
  for a in dataset:
    for p in a["paragraphs"]:
      for qa in p["qas"]:
        golds = [x["text"] for x in qa["answers"] if _normalize(x["text"])]
        golds = golds or [""]
        pred = preds[qa["id"]]
        exact[qa["id"]] = max(int(_normalize(g) == _normalize(pred))
                              for g in golds)
        f1[qa["id"]] = max(_f1(g, pred) for g in golds)

  def thresh(scores):
    return {q: float(not has_ans[q]) if na_probs[q] > na_prob_thresh else s
            for q, s in scores.items()}

  def mean(scores, qids):
    return 100.0 * sum(scores[q] for q in qids) / len(qids)

  def best(scores):
    cur = best_score = sum(1 for q in has_ans if not has_ans[q])
    best_t = 0.0
    for q in sorted(na_probs, key=lambda k: na_probs[k]):
      diff = scores[q] if has_ans[q] else (-1 if preds[q] else 0)
      cur += diff
      if cur > best_score:
        best_score, best_t = cur, na_probs[q]
    return 100.0 * best_score / len(scores), best_t

  e, f = thresh(exact), thresh(f1)
  has = [q for q in has_ans if has_ans[q]]
  no = [q for q in has_ans if not has_ans[q]]
  out = {"exact": mean(e, has_ans), "f1": mean(f, has_ans),
         "total": len(has_ans), "HasAns_exact": mean(e, has),
         "HasAns_f1": mean(f, has), "HasAns_total": len(has),
         "NoAns_exact": mean(e, no), "NoAns_f1": mean(f, no),
         "NoAns_total": len(no)}
  out["best_exact"], out["best_exact_thresh"] = best(exact)
  out["best_f1"], out["best_f1_thresh"] = best(f1)
  return out


def _dataset(qas):
  return [{"paragraphs": [{"context": "c", "qas": qas}]}]


def test_answers_normalising_to_empty_are_hasans_as_in_the_official_script():
  data = _dataset([
      {"id": "the", "answers": [{"text": "The"}, {"text": "the "}]},
      {"id": "red", "answers": [{"text": "red"}]},
      {"id": "none", "answers": []},
      {"id": "none2", "answers": []},
  ])
  preds = {"the": "", "red": "red", "none": "blue", "none2": ""}
  odds = {"the": 0.3, "red": -1.0, "none": 2.0, "none2": -0.5}
  ours = finetune_metrics.squad_metrics(data, preds, odds)
  ref = official(data, preds, odds, na_prob_thresh=np.inf)
  assert ours["HasAns_total"] == ref["HasAns_total"] == 2
  assert ours["NoAns_total"] == ref["NoAns_total"] == 2
  for key, value in ref.items():
    assert ours[key] == pytest.approx(value), key
  # With a threshold applied, "the" (odds 0.3 > 0) counts 0 as HasAns.
  ours = finetune_metrics.squad_metrics(data, preds, odds, null_threshold=0.0)
  ref = official(data, preds, odds, na_prob_thresh=0.0)
  for key, value in ref.items():
    assert ours[key] == pytest.approx(value), key


@pytest.mark.parametrize("seed", range(4))
def test_random_datasets_match_the_official_script(seed):
  rng = np.random.RandomState(seed)
  words = ["the", "a", "red", "blue", "sky", "An"]
  qas, preds, odds = [], {}, {}
  for i in range(30):
    answers = [{"text": " ".join(rng.choice(words, rng.randint(1, 3)))}
               for _ in range(rng.randint(0, 3))]
    qas.append({"id": f"q{i}", "answers": answers})
    preds[f"q{i}"] = " ".join(rng.choice(words, rng.randint(0, 3)))
    odds[f"q{i}"] = float(rng.standard_normal())
  data = _dataset(qas)
  ours = finetune_metrics.squad_metrics(data, preds, odds, null_threshold=0.2)
  ref = official(data, preds, odds, na_prob_thresh=0.2)
  for key, value in ref.items():
    assert ours[key] == pytest.approx(value), key


def _one_word_beam_case():
  """Four questions, one window each; the beam answers the first word.

  Null scores -1, 2, 0.5, 1. The first pass's F1 search picks 0.5 (q0 and
  q2 answered right, q1/q3 unanswerable); the second pass (answer "" when
  the score >= 0.5) drops q2's right answer, and a search on those
  thresholded answers would report another threshold (-1).
  """
  examples, windows, tokens, results = [], [], [], {}
  for i, null in enumerate((-1.0, 2.0, 0.5, 1.0)):
    examples.append(squad_data.SquadExample(f"q{i}", "?", "alpha beta"))
    tokens.append({"starts": [0, 6], "ends": [5, 10]})
    windows.append({"example_index": i, "doc_offset": 3, "window_start": 0,
                    "window_length": 2, "max_context": [True, True]})
    results[i] = squad_answers.BeamResult(np.array([0.0]), np.array([3]),
                               np.array([0.0]), np.array([3]), null)
  gold = [[{"text": "alpha"}], [], [{"text": "alpha"}], []]
  dataset = _dataset([{"id": f"q{i}", "answers": g}
                      for i, g in enumerate(gold)])
  return dataset, examples, windows, tokens, results


def test_xlnet_eval_reports_the_search_that_chose_the_threshold():
  dataset, examples, windows, tokens, results = _one_word_beam_case()
  metrics, predictions, _, _ = pp.evaluate(dataset, examples, windows,
                                           tokens, results)
  first, null_scores, _ = squad_answers.postprocess_beam(
      examples, windows, tokens, results)
  assert first == {"q0": "alpha", "q1": "alpha", "q2": "alpha",
                   "q3": "alpha"}
  ref_first = official(dataset, first, null_scores, na_prob_thresh=np.inf)
  assert ref_first["best_f1_thresh"] == 0.5
  assert metrics["null_score_diff_threshold"] == 0.5
  assert metrics["best_f1_thresh"] == 0.5
  assert metrics["best_f1"] == pytest.approx(ref_first["best_f1"])
  assert metrics["best_exact_thresh"] == ref_first["best_exact_thresh"]
  # exact/f1 are the second pass's, at the chosen threshold.
  assert predictions == {"q0": "alpha", "q1": "", "q2": "", "q3": ""}
  ref_second = official(dataset, predictions, null_scores)
  assert ref_second["best_f1_thresh"] == -1.0  # what was reported before
  assert metrics["f1"] == pytest.approx(ref_second["f1"]) == 75.0
