"""Tests for albert_tf.tasks.metrics against hand computation and SciPy /
scikit-learn (independent implementations)."""

import numpy as np
import pytest
from scipy import stats
from sklearn import metrics as skm
import tensorflow as tf

from albert_tf.tasks import metrics as fm


def test_classification_against_sklearn_and_scipy():
  rng = np.random.RandomState(0)
  y = rng.randint(0, 2, 200)
  p = np.where(rng.rand(200) < 0.8, y, 1 - y)
  assert fm.accuracy(y, p) == pytest.approx(skm.accuracy_score(y, p))
  assert fm.f1_score(y, p) == pytest.approx(skm.f1_score(y, p))
  assert fm.matthews_corrcoef(y, p) == pytest.approx(
      skm.matthews_corrcoef(y, p))
  x = rng.rand(50)
  z = np.round(x * 5 + rng.rand(50), 1)  # ties on purpose
  assert fm.pearson(x, z) == pytest.approx(stats.pearsonr(x, z)[0])
  assert fm.spearman(x, z) == pytest.approx(stats.spearmanr(x, z)[0])


def test_classification_hand_computed():
  # tp=2 fp=1 fn=1 tn=1: F1 = 2*2/(4+1+1) = 2/3; MCC = (2-1)/sqrt(3*3*2*2)=1/6
  y = [1, 1, 1, 0, 0]
  p = [1, 1, 0, 1, 0]
  out = fm.classification_metrics("mcc", y, p)
  assert out == {"accuracy": pytest.approx(0.6), "mcc": pytest.approx(1 / 6)}
  out = fm.classification_metrics("f1", y, p)
  assert out["f1"] == pytest.approx(2 / 3)
  assert out["acc_and_f1"] == pytest.approx((0.6 + 2 / 3) / 2)
  assert fm.matthews_corrcoef([1, 1], [1, 1]) == 0.0  # empty marginal
  corr = fm.classification_metrics("corr", [1.0, 2.0, 3.0], [1.0, 3.0, 2.0])
  assert corr["spearman"] == pytest.approx(0.5)
  assert corr["pearson"] == pytest.approx(0.5)
  with pytest.raises(ValueError, match="unknown task metric"):
    fm.classification_metrics("bleu", y, p)


def test_squad_normalization_and_pairs():
  assert fm.normalize_answer("The  Cat, sat!") == "cat sat"
  assert fm.normalize_answer("an apple a day") == "apple day"
  # (prediction, gold, EM, F1) computed by hand.
  cases = [
      ("the Eiffel Tower", "Eiffel Tower", 1.0, 1.0),
      ("Eiffel", "Eiffel Tower", 0.0, 2 * 1.0 * 0.5 / 1.5),
      ("in Paris, France", "Paris", 0.0, 2 * (1 / 3) * 1.0 / (1 / 3 + 1)),
      ("1990", "1991", 0.0, 0.0),
      ("", "", 1.0, 1.0),
      ("something", "", 0.0, 0.0),
      ("", "Paris", 0.0, 0.0),
      ("x b b", "b b c", 0.0, 2 / 3),  # 2 common, P = R = 2/3
      ("a b b", "b b c", 0.0, 0.8),  # article dropped: P 1, R 2/3
  ]
  for pred, gold, em, f1 in cases:
    assert fm.exact_match(pred, gold) == em, (pred, gold)
    assert fm.token_f1(pred, gold) == pytest.approx(f1), (pred, gold)


def _dataset(qas):
  return [{"paragraphs": [{"context": "unused", "qas": qas}]}]


def test_squad_v1_max_over_gold_answers():
  data = _dataset([
      {"id": "q1", "answers": [{"text": "Denver Broncos"},
                               {"text": "the Broncos"}]},
      {"id": "q2", "answers": [{"text": "Santa Clara, California"}]},
      {"id": "q3", "answers": [{"text": "gold"}]},
  ])
  preds = {"q1": "Broncos", "q2": "Santa Clara", "q3": "gold"}
  out = fm.squad_metrics(data, preds)
  # q1: EM 1 vs "the Broncos"; q2: EM 0, F1 2*1*(2/3)/(5/3) = 0.8; q3: 1.
  assert out["exact_match"] == pytest.approx(100 * 2 / 3)
  assert out["f1"] == pytest.approx(100 * (1 + 0.8 + 1) / 3)
  # A missing prediction scores 0 (the v1.1 script's behaviour).
  out = fm.squad_metrics(data, {"q1": "Broncos"})
  assert out["exact_match"] == pytest.approx(100 / 3)


def test_squad_v2_breakdown_and_best_threshold():
  data = _dataset([
      {"id": "a", "answers": [{"text": "red"}]},
      {"id": "b", "answers": [{"text": "blue sky"}]},
      {"id": "c", "answers": [], "is_impossible": True},
      {"id": "d", "answers": [], "is_impossible": True},
  ])
  preds = {"a": "red", "b": "blue", "c": "", "d": "green"}
  odds = {"a": -2.0, "b": 1.0, "c": 3.0, "d": 0.5}
  out = fm.squad_metrics(data, preds, odds)
  # Raw: a EM1/F1 1; b EM0/F1 2/3; c EM1; d EM0.
  assert out["total"] == 4
  assert out["exact"] == pytest.approx(50.0)
  assert out["f1"] == pytest.approx(100 * (1 + 2 / 3 + 1) / 4)
  assert out["HasAns_exact"] == pytest.approx(50.0)
  assert out["HasAns_f1"] == pytest.approx(100 * (1 + 2 / 3) / 2)
  assert out["NoAns_exact"] == pytest.approx(50.0)
  assert out["HasAns_total"] == 2 and out["NoAns_total"] == 2
  # Threshold walk (by odds a, d, b, c) starting at 2 (no-answer count):
  # exact: a +1 -> 3 (thr -2), d -1 -> 2, b +0 -> 2, c +0 -> 2. best 3/4.
  assert out["best_exact"] == pytest.approx(75.0)
  assert out["best_exact_thresh"] == -2.0
  # f1: a -> 3, d -> 2, b -> 2+2/3, c -> 2+2/3: best 3 at -2.
  assert out["best_f1"] == pytest.approx(75.0)
  # Applying threshold 0.7: b (1.0) and c (3.0) become "", d (0.5) kept.
  out = fm.squad_metrics(data, preds, odds, null_threshold=0.7)
  assert out["exact"] == pytest.approx(50.0)  # a 1, b 0, c 1, d 0
  assert out["HasAns_f1"] == pytest.approx(50.0)


def test_race_accuracy_by_level():
  out = fm.race_accuracy(["middle", "middle", "high", "high", "high"],
                         [0, 1, 2, 3, 0], [0, 0, 2, 3, 1])
  assert out["accuracy"] == pytest.approx(0.6)
  assert out["accuracy_middle"] == pytest.approx(0.5)
  assert out["accuracy_high"] == pytest.approx(2 / 3)
  assert out["num_middle"] == 2 and out["num_high"] == 3


def test_in_graph_formulas_are_the_numpy_ones():
  """The eval loop's tensors and the NumPy metrics go through one formula
  each (xp=tf.math in the graph): same numbers as scikit-learn / SciPy."""
  rng = np.random.RandomState(1)
  y = rng.randint(0, 2, 300)
  p = np.where(rng.rand(300) < 0.7, y, 1 - y)
  counts = [tf.constant(c, tf.float32) for c in fm.binary_counts(y, p)]
  assert float(fm.f1_from_counts(*counts[:3], xp=tf.math)) == pytest.approx(
      skm.f1_score(y, p), rel=1e-6)
  assert float(fm.mcc_from_counts(*counts, xp=tf.math)) == pytest.approx(
      skm.matthews_corrcoef(y, p), rel=1e-5)
  x, z = rng.rand(100), rng.rand(100) + np.linspace(0, 1, 100)
  moments = [tf.constant(v, tf.float64) for v in
             (100.0, x.sum(), z.sum(), x @ x, z @ z, x @ z)]
  assert float(fm.pearson_from_moments(*moments, xp=tf.math)) == (
      pytest.approx(stats.pearsonr(x, z)[0], rel=1e-9))
