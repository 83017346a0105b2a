"""The published lexicon baseline of the demo's real task: VADER (Hutto &
Gilbert, ICWSM 2014), its own `SentimentIntensityAnalyzer`, run from the
files of the vaderSentiment 3.3.2 sdist (not installed: the module needs only
the standard library; its `requests` dependency serves an optional
translation demo in its `__main__`)."""

import importlib.util
import math
import os

MODULE_FILE = "vaderSentiment.py"


def load_analyzer(vader_dir):
  """VADER's SentimentIntensityAnalyzer from `vader_dir` (vaderSentiment.py
  beside its vader_lexicon.txt and emoji_utf8_lexicon.txt, which it reads
  from its own directory).

  Args:
    vader_dir: the directory sentiment_data.extract_from_sdist filled.
  """
  path = os.path.join(vader_dir, MODULE_FILE)
  if not os.path.isfile(path):
    raise FileNotFoundError(f"{path}: not found (VADER's module from the "
                            "vaderSentiment 3.3.2 sdist)")
  spec = importlib.util.spec_from_file_location("demo_vader_sentiment", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.SentimentIntensityAnalyzer()


def vader_labels(analyzer, sentences):
  """1 (positive) where VADER's compound score is > 0, else 0 (VADER's
  sign rule, as in the ICWSM paper's classification figures)."""
  return [int(analyzer.polarity_scores(s)["compound"] > 0) for s in sentences]


def accuracy(predicted, truth):
  if len(predicted) != len(truth) or not truth:
    raise ValueError(f"{len(predicted)} predictions for {len(truth)} labels")
  return sum(int(p == t) for p, t in zip(predicted, truth)) / len(truth)


def paired_gain(correct_a, correct_b):
  """(gain, standard error) of accuracy a - b on the same examples: the
  mean and standard error of the per-example differences (0/1 correct)."""
  n = len(correct_a)
  if n != len(correct_b) or n < 2:
    raise ValueError(f"paired_gain: {n} and {len(correct_b)} examples")
  diffs = [int(a) - int(b) for a, b in zip(correct_a, correct_b)]
  mean = sum(diffs) / n
  var = sum((d - mean) ** 2 for d in diffs) / (n - 1)
  return mean, math.sqrt(var / n)


def binomial_se(acc, n):
  """Standard error of an accuracy measured on n examples."""
  return math.sqrt(acc * (1 - acc) / n)
