"""A checkpoint of the original's `run_squad_v2.py` (written here by
tf.compat.v1 under the original's variable names) loads into AlbertSquadV2,
computes the original's equations (NumPy), and `run_squad --mode=eval`
on it predicts the spans the NumPy forward predicts."""

import json
import os

import numpy as np
import pytest

from albert_tf.data import squad_answers
from albert_tf.checkpoints import canonical_weights as cw
from albert_tf.checkpoints import restore as restore_lib
from albert_tf.checkpoints import squad_v2_checkpoint
from albert_tf.checkpoints import tf1_checkpoint
from albert_tf.data import squad_data
from albert_tf.modeling.albert_config import AlbertConfig
from albert_tf.modeling.models.albert_squad_v2 import AlbertSquadV2
from albert_tf.core import train_lib
from albert_tf.tasks import question_answering
from albert_tf.tasks import squad_v2_postprocess
from tests.modeling import test_squad_v2_head as th
from tests.testing import finetune_testlib
from tests.testing import tf1_reference

NAMES = ("input_word_ids", "input_mask", "input_type_ids")


def _original_run(directory, cfg, seed=0, **kwargs):
  """(prefix, weights) of a run_squad_v2.py checkpoint: encoder + v2 head
  (+ Adam slots and global_step)."""
  weights = tf1_reference.original_weights(cfg, seed, heads=False)
  weights.update(th.random_head_weights(np.random.RandomState(seed + 1),
                                        cfg["hidden_size"]))
  prefix = tf1_reference.save_original(directory, weights, cfg, adam=True,
                                       **kwargs)
  return prefix, weights


def _reference(weights, cfg, inputs, start_n_top, end_n_top):
  enc = tf1_reference.reference_forward(
      weights, cfg, inputs["input_word_ids"], inputs["input_mask"],
      inputs["input_type_ids"])
  mask, types = inputs["input_mask"], inputs["input_type_ids"]
  positions = np.arange(mask.shape[1])[None]
  last = mask.sum(1, keepdims=True) - 1
  allowed = ((mask > 0) & (types > 0) & (positions < last)) | (positions == 0)
  w = {k: v.astype(np.float64) for k, v in weights.items()}
  return th.reference_v2_head(w, enc["sequence_output"],
                              1.0 - allowed.astype(np.float64), None,
                              start_n_top, end_n_top)


def test_original_v2_checkpoint_loads_and_matches_numpy(tmp_path):
  cfg = dict(tf1_reference.SINGLE, max_position_embeddings=12)
  prefix, weights = _original_run(str(tmp_path / "tf1"), cfg)
  model = AlbertSquadV2(AlbertConfig(**cfg), start_n_top=3, end_n_top=2)
  report = squad_v2_checkpoint.load_tf1_squad_v2(model, prefix)
  assert sorted(report.mapped.values()) == sorted(weights)
  assert not report.extras
  inputs = {k: v for k, v in tf1_reference.inputs_for(cfg).items()
            if k in NAMES}
  inputs["input_type_ids"][:, 0] = 0
  ours = {k: np.asarray(v) for k, v in model(inputs).items()}
  ref = _reference(weights, cfg, inputs, 3, 2)
  for key in ref:
    np.testing.assert_allclose(ours[key], ref[key], rtol=1e-4, atol=2e-4,
                               err_msg=key)
  # The plain converter keeps the head aside as a fine-tuned head.
  _, plain = restore_lib.read_weights(prefix, AlbertConfig(**cfg),
                                      with_heads=False)
  assert "SQuAD 2.0" in plain.skipped["end_logits/LayerNorm/gamma"]
  assert plain.extras["answer_class/dense_1/kernel"].shape == (16, 1)


def test_incomplete_or_misfit_head_is_a_named_error(tmp_path):
  cfg = dict(tf1_reference.SINGLE)
  weights = tf1_reference.original_weights(cfg, 0, heads=False)
  head = th.random_head_weights(np.random.RandomState(1), cfg["hidden_size"])
  partial = dict(weights, **{k: v for k, v in head.items()
                             if not k.startswith("answer_class/")})
  prefix = tf1_reference.save_original(str(tmp_path / "partial"), partial,
                                       cfg)
  model = AlbertSquadV2(AlbertConfig(**cfg))
  before = [v.numpy().copy() for v in model.encoder.variables]
  with pytest.raises(cw.CheckpointConversionError,
                     match="answer_class/dense_0/kernel"):
    squad_v2_checkpoint.load_tf1_squad_v2(model, prefix)
  for old, new in zip(before, model.encoder.variables):  # nothing assigned
    np.testing.assert_array_equal(old, new.numpy())
  wide = dict(weights, **head)
  wide["end_logits/dense_0/kernel"] = np.zeros([5, 16], np.float32)
  prefix = tf1_reference.save_original(str(tmp_path / "wide"), wide, cfg)
  with pytest.raises(cw.CheckpointConversionError,
                     match=r"end_logits/dense_0/kernel has shape \(5, 16\)"):
    squad_v2_checkpoint.load_tf1_squad_v2(model, prefix)


def test_run_squad_evaluates_an_original_v2_checkpoint(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("squad_v2_tf1")
  cfg = dict(finetune_testlib.TINY_CONFIG, num_hidden_groups=1,
             inner_group_num=1, type_vocab_size=2, hidden_act="gelu",
             initializer_range=0.02, hidden_dropout_prob=0.0,
             attention_probs_dropout_prob=0.0)
  prefix, weights = _original_run(str(tmp / "tf1"), cfg, seed=3)
  dev = finetune_testlib.write_synthetic_squad(tmp, {"dev": 12}, seed=1,
                                               words=(3, 30))["dev"]
  spm = finetune_testlib.spm_model(tmp_path_factory)
  config = finetune_testlib.tiny_finetune_config(
      question_answering.SquadExperimentConfig,
      {"predict_file": dev, "spm_model_file": spm, "max_seq_length": 32,
       "doc_stride": 8, "max_query_length": 8,
       "version_2_with_negative": True},
      squad_head="xlnet", start_n_top=5, end_n_top=5)
  config.override({"model": {k: cfg[k] for k in ("num_hidden_groups",
                                                  "inner_group_num")}})
  out = str(tmp / "eval")
  model_dir = str(tmp / "model")
  result = train_lib.run_experiment(
      question_answering.SquadTask(config, model_dir), config, model_dir,
      "eval", output_dir=out, checkpoint=prefix)
  assert result["eval"]["step"] == 0  # the original's global_step

  # The same through NumPy: windows -> original equations -> evaluate_v2.
  tokenizer = finetune_testlib.tokenizer(tmp_path_factory)
  examples = squad_data.read_squad_examples(dev, False, True)
  windows, results = [], {}
  for uid, (feats, meta) in enumerate(squad_data.convert_examples(
      examples, tokenizer, 32, 8, 8, False)):
    windows.append(meta)
    inputs = {k: np.array([feats[k]]) for k in NAMES}
    ref = _reference(weights, cfg, inputs, 5, 5)
    results[uid] = squad_answers.BeamResult(
        *(ref[k][0] for k in ("start_top_log_probs", "start_top_index",
                              "end_top_log_probs", "end_top_index")),
        float(ref["cls_logits"][0]))
  assert len(windows) > len(examples)  # several windows per question
  with open(dev, encoding="utf-8") as f:
    dataset = json.load(f)["data"]
  metrics, predictions, null_scores, _ = squad_v2_postprocess.evaluate(
      dataset, examples, windows,
      squad_data.example_metadata(examples, tokenizer), results)
  with open(os.path.join(out, "predictions.json")) as f:
    assert json.load(f) == predictions
  assert any(predictions.values())  # spans, not only null answers
  with open(os.path.join(out, "null_odds.json")) as f:
    assert json.load(f) == pytest.approx(null_scores, abs=1e-4)
  assert result["eval"]["f1"] == pytest.approx(metrics["f1"])

  # Warm start from it (trainer.init_checkpoint) brings the head along.
  config.override({"trainer": {"init_checkpoint": prefix}})
  task = question_answering.SquadTask(config, str(tmp / "warm"))
  model = task.build_model()
  task.initialize(model)
  for name, variable in tf1_checkpoint.finetuned_head_variables(
      model.head).items():
    np.testing.assert_array_equal(variable.numpy(), weights[name])
