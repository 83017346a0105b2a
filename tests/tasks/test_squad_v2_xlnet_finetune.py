"""End to end: run_squad with `task.squad_head: xlnet` (the original SQuAD
2.0 head) fine-tunes a tiny ALBERT on the synthetic colour task, and its
eval is the original's evaluate_v2 (dev-tuned null threshold, v2 metrics)."""

import json
import os

import pytest
import tensorflow as tf

from albert_tf.core import experiment_config
from albert_tf.core import train_lib
from albert_tf.tasks import question_answering
from albert_tf.tasks import export as tasks_export
from tests.testing import finetune_testlib


@pytest.mark.slow
def test_squad_v2_xlnet_head_finetune(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("squad_xlnet")
  files = finetune_testlib.write_synthetic_squad(tmp, {"train": 800,
                                                       "dev": 60})
  config = finetune_testlib.tiny_finetune_config(
      question_answering.SquadExperimentConfig,
      {"train_file": files["train"], "predict_file": files["dev"],
       "spm_model_file": finetune_testlib.spm_model(tmp_path_factory),
       "max_seq_length": 48, "doc_stride": 16, "max_query_length": 12,
       "version_2_with_negative": True},
      steps=300, lr=3e-3, squad_head="xlnet", start_n_top=3, end_n_top=3)
  model_dir = str(tmp / "model")
  task = question_answering.SquadTask(config, model_dir)
  result = train_lib.run_experiment(task, config, model_dir, "train_and_eval")
  metrics = result["eval"]
  assert metrics["total"] == 60
  assert metrics["HasAns_exact"] >= 80.0, metrics
  assert metrics["NoAns_exact"] >= 80.0, metrics
  assert "null_score_diff_threshold" in metrics
  with open(os.path.join(model_dir, "predictions.json")) as f:
    predictions = json.load(f)
  with open(os.path.join(model_dir, "null_odds.json")) as f:
    null_scores = json.load(f)
  thresh = metrics["null_score_diff_threshold"]
  # The original's rule: "" exactly when the null score reaches the tuned
  # threshold.
  assert all((predictions[q] == "") == (null_scores[q] >= thresh)
             for q in predictions)
  with open(os.path.join(model_dir, "nbest_predictions.json")) as f:
    nbest = json.load(f)
  assert all(len(nbest[q]) <= 20 and "start_log_prob" in nbest[q][0]
             for q in nbest)
  with open(os.path.join(model_dir, "eval_results.json")) as f:
    assert json.load(f)["f1"] == pytest.approx(metrics["f1"])

  # The export serves the same beam: null scores and best spans.
  export = train_lib.run_experiment(task, config, model_dir, "export",
                                    export_dir=str(tmp / "export"),
                                    export_fn=tasks_export.run_exporter())["export"]
  with open(files["dev"], encoding="utf-8") as f:
    qas = [(p["qas"][0]["id"], p["qas"][0]["question"], p["context"])
           for p in json.load(f)["data"][0]["paragraphs"][:8]]
  got = tf.saved_model.load(export).signatures["serving_default"](
      question=tf.constant([q for _, q, _ in qas]),
      context=tf.constant([c for _, _, c in qas]))
  for i, (qid, _, _) in enumerate(qas):
    assert float(got["null_score"][i]) == pytest.approx(null_scores[qid],
                                                        abs=1e-4)
    served = got["answer_text"][i].numpy().decode()
    assert served in ("", nbest[qid][0]["text"].lower())
    assert (served == "") == (null_scores[qid] >= 0.0)  # data's threshold


def test_xlnet_head_needs_v2_and_no_simple_answerability(tmp_path):
  config = experiment_config.load_experiment_config(
      question_answering.SquadExperimentConfig)
  config.override({"task": {"squad_head": "xlnet"}})
  with pytest.raises(ValueError, match="version_2_with_negative"):
    question_answering.SquadTask(config, str(tmp_path))
  config.override({"data": {"version_2_with_negative": True},
                   "task": {"with_answerability": True}})
  with pytest.raises(ValueError, match="with_answerability"):
    question_answering.SquadTask(config, str(tmp_path))
  config.override({"task": {"squad_head": "xlnett",
                            "with_answerability": False}})
  with pytest.raises(ValueError, match="squad_head"):
    question_answering.SquadTask(config, str(tmp_path))
