"""Dynamic masking uses the data's masking settings and SentencePiece ids.

The special ids, n-gram length and masked_lm_prob must come from the data,
not from defaults of the release's vocabulary or the experiment config. Here
the data is made with a SentencePiece model whose [MASK]/[CLS]/[SEP] are
2/3/4 (not the release's 4/2/3), masked_lm_prob 0.2 and 4-grams, and the
statistics of the static masks (data_prep) and the dynamic masks (input
pipeline) are compared on the same records.
"""

import collections
import json
import random

import numpy as np
import pytest
import sentencepiece as spm

from albert_tf.core import experiment_config as ec
from albert_tf.data import dynamic_masking
from albert_tf.data import pretraining_dataloader
from albert_tf.tasks import pretraining
from data_prep import pretraining_config
from data_prep import create_pretraining_data as cpd
from data_prep import pretraining_instances as pi
from data_prep import tokenization
from tests.testing import pretrain_testutil as tu

SEQ, PRED = 64, 14


@pytest.fixture(scope="module")
def data(tmp_path_factory):
  """(tokenizer, TFRecord path) with non-default ids and settings."""
  corpus = tu.worker_corpus(tmp_path_factory)
  out = tmp_path_factory.mktemp("dynamic")
  prefix = str(out / "layout")
  spm.SentencePieceTrainer.train(
      input=corpus, model_prefix=prefix, vocab_size=1000, pad_id=0, unk_id=1,
      bos_id=-1, eos_id=-1, control_symbols=["[MASK]", "[CLS]", "[SEP]"],
      user_defined_symbols=["(", ")", "\"", "-", ".", "\u2013", "\u00a3"],
      num_threads=1, minloglevel=2)
  tok = tokenization.FullTokenizer(prefix + ".model")
  assert (tok.mask_id, tok.cls_id, tok.sep_id) == (2, 3, 4)
  path = str(out / "train.tfrecord")
  cpd.run([corpus], [path], pretraining_config.RunConfig(
      spm_model_file=prefix + ".model", do_lower_case=True, dupe_factor=2,
      instance=pi.InstanceConfig(max_seq_length=SEQ,
                                 max_predictions_per_seq=PRED,
                                 masked_lm_prob=0.2, ngram=4)),
          progress_interval=0)
  return tok, path


def read_all(ds):
  out = collections.defaultdict(list)
  for batch in ds:
    for k, v in batch.items():
      out[k].append(v.numpy())
  return {k: np.concatenate(v) for k, v in out.items()}


def mask_stats(ex, tok):
  """Share of masked tokens, 80/10/10 shares, masked runs in word units."""
  kinds = np.zeros(3)
  runs = collections.Counter()
  masked = 0
  excluded = set(range(tok.vocab_size)) - set(tok.replacement_ids.tolist())
  for i in range(len(ex["input_mask"])):
    keep = ex["masked_lm_weights"][i] > 0
    pos = ex["masked_lm_positions"][i][keep]
    labels = ex["masked_lm_ids"][i][keep]
    got = ex["input_word_ids"][i][pos]
    masked += len(pos)
    is_mask = got == tok.mask_id
    kept = ~is_mask & (got == labels)
    kinds += [is_mask.sum(), kept.sum(), (~is_mask & ~kept).sum()]
    assert not set(got[~is_mask & ~kept].tolist()) & excluded
    boundary = ex["token_boundary"][i]
    run = 0
    for p in range(SEQ + 1):
      if p < SEQ and p in set(pos.tolist()):
        run += int(boundary[p] > 0)
      elif run:
        runs[run] += 1
        run = 0
  total_runs = sum(runs.values())
  return {"masked_share": masked / ex["input_mask"].sum(),
          "kinds": kinds / kinds.sum(),
          "runs": {n: c / total_runs for n, c in runs.items()}}


def test_settings_come_from_the_summary(data):
  tok, path = data
  settings = dynamic_masking.settings_for_files([path])
  assert settings == {
      "masked_lm_prob": 0.2, "ngram": 4, "favor_shorter_ngram": True,
      "whole_word": True, "cls_id": 3, "sep_id": 4, "mask_id": 2,
      "control_ids": tuple(i for i in range(tok.vocab_size)
                           if i not in set(tok.replacement_ids.tolist()))}
  # An older summary without "masking": the ids of the model it names.
  with open(path + ".summary.json") as f:
    summary = json.load(f)
  del summary["masking"]
  assert dynamic_masking.settings_from_summary(summary, "s.json") == settings
  summary["config"]["spm_model_file"] = "/nowhere/spm.model"
  with pytest.raises(ValueError, match=r"s.json: records no masking ids and "
                     r"its SentencePiece model '/nowhere/spm.model'"):
    dynamic_masking.settings_from_summary(summary, "s.json")
  summary["config"]["do_permutation"] = True
  with pytest.raises(ValueError, match="do_permutation"):
    dynamic_masking.settings_from_summary(summary, "s.json")


def test_static_and_dynamic_masks_have_the_same_statistics(data):
  tok, path = data
  static = read_all(pretraining_dataloader.pretraining_dataset(
      path, SEQ, PRED, 64, is_training=False))
  dynamic = read_all(pretraining_dataloader.pretraining_dataset(
      path, SEQ, PRED, 64, is_training=False, repeat=False,
      dynamic_masking=True, vocab_size=tok.vocab_size, seed=5,
      masking=dynamic_masking.settings_for_files([path])))
  assert len(static["input_mask"]) == len(dynamic["input_mask"]) > 500
  ours, theirs = mask_stats(dynamic, tok), mask_stats(static, tok)
  assert ours["masked_share"] == pytest.approx(theirs["masked_share"],
                                               abs=0.003)
  assert theirs["masked_share"] == pytest.approx(0.2, abs=0.02)
  np.testing.assert_allclose(ours["kinds"], theirs["kinds"], atol=0.03)
  np.testing.assert_allclose(ours["kinds"], [0.8, 0.1, 0.1], atol=0.03)
  lengths = sorted(set(ours["runs"]) | set(theirs["runs"]))
  tv = 0.5 * sum(abs(ours["runs"].get(n, 0) - theirs["runs"].get(n, 0))
                 for n in lengths)
  assert tv < 0.05, (ours["runs"], theirs["runs"])
  assert max(theirs["runs"]) >= 4  # 4-grams (and merged neighbours) occur


def task_inputs(path, **overrides):
  config = ec.load_experiment_config(
      pretraining.PretrainingExperimentConfig, [tu.TINY_RECIPE],
      tu.tiny_overrides(path, **{"data.seq_length": SEQ,
                                 "data.max_predictions_per_seq": PRED,
                                 "data.dynamic_masking": "true",
                                 "data.shuffle_buffer_size": 0,
                                 **overrides}))
  task = pretraining.PretrainingTask(config)
  task.validate_inputs(training=True)
  return task.build_inputs(None, training=True)


def test_training_masks_with_the_models_mask_id(data):
  tok, path = data
  batch = next(iter(task_inputs(path)))
  pos = batch["masked_lm_positions"].numpy()
  got = np.take_along_axis(batch["input_word_ids"].numpy(), pos, axis=1)
  weights = batch["masked_lm_weights"].numpy() > 0
  assert (got[weights] == tok.mask_id).mean() > 0.6  # 2, not the default 4
  assert not (got[weights] == tok.sep_id).any()  # 4 is [SEP] here


def test_config_values_other_than_the_data_are_refused(data):
  _, path = data
  with pytest.raises(ValueError, match=r"data.mask_id is 4 but the data was "
                     r"made with 2 \(.*train.tfrecord.summary.json\)"):
    task_inputs(path, **{"data.mask_id": 4})
  with pytest.raises(ValueError, match=r"data.masked_lm_prob is 0.15 but the "
                     r"data was made with 0.2"):
    task_inputs(path, **{"data.masked_lm_prob": 0.15})
  task_inputs(path, **{"data.mask_id": 2, "data.masked_lm_prob": 0.2})


@pytest.mark.parametrize("override,value", [
    ("data.masked_lm_prob=0.5", "0.5"), ("data.mask_id=4", "4")])
def test_masking_settings_without_dynamic_masking_are_refused(override,
                                                              value):
  """Static masks are the data's: the settings were ignored without a word."""
  field = override.split("=")[0]
  with pytest.raises(ValueError, match=(
      rf"^{field} is {value} but applies "
      r"only with data.dynamic_masking=true: the static masks are the "
      r"data's \(made by create_pretraining_data\); omit it$")):
    ec.load_experiment_config(pretraining.PretrainingExperimentConfig,
                              [tu.TINY_RECIPE], override)
  config = ec.load_experiment_config(
      pretraining.PretrainingExperimentConfig, [tu.TINY_RECIPE],
      f"{override},data.dynamic_masking=true")
  assert str(getattr(config.data, field.split(".")[1])) == value


def test_dynamic_masks_are_the_static_rule_over_the_same_draws():
  """One rule: given the random draws data_prep used, the input pipeline's
  masker writes data_prep's masks exactly (positions, labels, 80/10/10)."""
  rng = np.random.RandomState(0)
  vocab, excluded = 60, (0, 1, 2, 3, 4)
  info = pi.TokenInfo(cls_id=3, sep_id=4, mask_id=2,
                      is_start=list(rng.rand(vocab) < 0.6),
                      replacement_ids=[i for i in range(vocab)
                                       if i not in excluded])
  cfg = pi.InstanceConfig(max_seq_length=SEQ, max_predictions_per_seq=PRED,
                          masked_lm_prob=0.2, ngram=4)
  masker = dynamic_masking.DynamicMasker(
      vocab, mask_id=2, cls_id=3, sep_id=4, control_ids=excluded,
      max_predictions_per_seq=PRED, masked_lm_prob=0.2, ngram=4)
  for seed in range(40):
    a, b = rng.randint(5, vocab, rng.randint(1, 30)), rng.randint(5, vocab, 20)
    tokens = [3, *a, 4, *b, 4]
    out, positions, labels, boundary = pi.create_masked_lm_predictions(
        tokens, cfg, info, random.Random(seed), collections.Counter())
    pad = [0] * (SEQ - len(tokens))
    ids, got_positions, got_labels, weights = masker.mask(
        np.array(tokens + pad, np.int32),
        np.array([1] * len(tokens) + pad, np.int32),
        np.array(boundary + pad, np.int32), seed)
    m = len(positions)
    assert ids.tolist() == out + pad
    assert got_positions[:m].tolist() == positions and weights.sum() == m
    assert got_labels[:m].tolist() == labels
