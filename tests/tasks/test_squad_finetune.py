"""End to end: run_squad fine-tunes a tiny ALBERT on a synthetic but
learnable SQuAD 2.0 task (find the colour word; half the questions have
none), writes predictions.json / null_odds.json and scores them with the
official v2 metrics."""

import json
import os

import pytest

from albert_tf.core import train_lib
from albert_tf.tasks import question_answering
from tests.testing import finetune_testlib


def test_squad_v2_finetune(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("squad_e2e")
  files = finetune_testlib.write_synthetic_squad(tmp, {"train": 800,
                                                       "dev": 100})
  config = finetune_testlib.tiny_finetune_config(
      question_answering.SquadExperimentConfig,
      {"train_file": files["train"], "predict_file": files["dev"],
       "spm_model_file": finetune_testlib.spm_model(tmp_path_factory),
       "max_seq_length": 48, "doc_stride": 16, "max_query_length": 12,
       "version_2_with_negative": True},
      steps=400, lr=3e-3, with_answerability=True)
  model_dir = str(tmp / "model")
  result = train_lib.run_experiment(
      question_answering.SquadTask(config, model_dir), config, model_dir,
      "train_and_eval")
  metrics = result["eval"]
  assert metrics["total"] == 100
  assert metrics["HasAns_exact"] >= 85.0, metrics
  assert metrics["NoAns_exact"] >= 85.0, metrics
  assert metrics["exact"] >= 85.0 and metrics["best_f1"] >= metrics["f1"]
  with open(os.path.join(model_dir, "predictions.json")) as f:
    predictions = json.load(f)
  with open(os.path.join(model_dir, "null_odds.json")) as f:
    null_odds = json.load(f)
  assert set(predictions) == set(null_odds) == {f"dev{i}" for i in range(100)}
  answered = [q for q, a in predictions.items() if a]
  colours = [q for q in answered if predictions[q] in finetune_testlib.COLOURS]
  assert len(colours) >= 0.9 * len(answered) > 0
  # Answered exactly when the null odds are below the threshold (0.0).
  assert all(null_odds[q] <= 0.0 for q in answered)
  assert all(null_odds[q] > 0.0 for q in predictions if not predictions[q])
  with open(os.path.join(model_dir, "nbest_predictions.json")) as f:
    nbest = json.load(f)
  assert all(nbest[q][0]["text"] for q in nbest)  # a span for every question
  with open(os.path.join(model_dir, "eval_results.json")) as f:
    assert json.load(f)["exact"] == pytest.approx(metrics["exact"])
