"""The model `make demo` ships (examples/demo/pretrained_imdb/): its files
match MANIFEST.json's sha256, load into the model its config builds with the
vocabulary its identity names, and it has learned: it predicts masked pieces
of held-out sentences it never trained on."""

import gzip
import os
import shutil

import numpy as np
import pytest
import sentencepiece as spm
import tensorflow as tf
import yaml

from albert_tf import AlbertConfig, AlbertPretrainer
from albert_tf.checkpoints import identity
from albert_tf.checkpoints import restore
from albert_toolkit import output_files
from examples.demo import shipped
from examples.demo import stage_report

BUNDLE = shipped.BUNDLE_DIR


def test_files_match_the_manifest():
  manifest = shipped.verify(BUNDLE)
  assert manifest["command"] == "make demo DEMO_ARGS=--long"
  assert sorted(manifest["sha256"]) == sorted(shipped.FILES)
  # The weights, vocabulary and text are small enough to ship in the repo.
  total = sum(os.path.getsize(os.path.join(BUNDLE, f)) for f in shipped.FILES)
  assert total < 4 * 2**20


def test_recorded_figures_reach_the_demo_targets():
  """The pretraining targets and the real task's gain over VADER are
  reached; the gain over random initialisation is shown as measured."""
  figures = shipped.verify(BUNDLE)["figures"]
  real = figures["real_task"]
  rows = {r["name"].strip(): r for r in stage_report.headline(
      {"shipped": figures, "finetuning": figures["finetuning"]}, real)}
  assert all(rows[name]["reached"] for name in (
      "held-out masked_lm_accuracy", "held-out sentence_order_accuracy",
      "fill-mask top-5 (held-out words)",
      f"gain over VADER ({real['vader_test_accuracy']:.3f})")), rows
  assert rows["gain from pretraining"]["after"] == pytest.approx(
      real["pretrained_test_accuracy"] - real["random_init_test_accuracy"])


@pytest.mark.parametrize("name", ["spm.model", shipped.WEIGHTS + ".index"])
def test_a_changed_or_missing_file_is_refused_by_name(tmp_path, name):
  copy = tmp_path / "bundle"
  shutil.copytree(BUNDLE, copy)
  with open(copy / name, "r+b") as f:
    byte = f.read(1)
    f.seek(0)
    f.write(bytes([byte[0] ^ 1]))
  with pytest.raises(ValueError, match=f"{name}: sha256 differs"):
    shipped.verify(str(copy))
  os.remove(copy / name)
  with pytest.raises(ValueError, match=f"{name}: missing"):
    shipped.verify(str(copy))


def _masked_batch(sp, sentences, seq):
  """One piece masked in the middle of each sentence: (features, truth)."""
  ids, positions, truth = [], [], []
  for text in sentences:
    pieces = sp.encode(text.lower())[:seq - 2]
    if len(pieces) < 5:
      continue
    pos = 1 + len(pieces) // 2
    row = [sp.piece_to_id("[CLS]")] + pieces + [sp.piece_to_id("[SEP]")]
    truth.append(row[pos])
    row[pos] = sp.piece_to_id("[MASK]")
    ids.append(row + [0] * (seq - len(row)))
    positions.append([pos])
  ids = np.array(ids, np.int32)
  return {"input_word_ids": ids, "input_mask": (ids > 0).astype(np.int32),
          "input_type_ids": np.zeros_like(ids),
          "masked_lm_positions": np.array(positions, np.int32)
          }, np.array(truth)


def test_weights_load_and_fill_held_out_masks():
  with open(os.path.join(BUNDLE, "model.yaml"), encoding="utf-8") as f:
    config = AlbertConfig.from_dict(yaml.safe_load(f))
  weights = os.path.join(BUNDLE, shipped.WEIGHTS)
  ident = identity.read(weights)
  # The checkpoint names the model and the vocabulary shipped beside it.
  assert not list(identity.model_differences(ident["model"], config.as_dict()))
  assert ident["facts"]["vocab_sha256"] == output_files.file_sha256(
      os.path.join(BUNDLE, "spm.model"))
  sp = spm.SentencePieceProcessor(
      model_file=os.path.join(BUNDLE, "spm.model"))
  with gzip.open(os.path.join(BUNDLE, "heldout.txt.gz"), "rt",
                 encoding="utf-8") as f:
    sentences = [l.strip() for l in f if len(l.split()) >= 8][:200]
  features, truth = _masked_batch(sp, sentences, 64)
  model = AlbertPretrainer(config)
  model(features)
  report = restore.restore(model, weights)
  assert "encoder" in report.restored and not report.fresh
  logits = model(features, training=False)["mlm_logits"][:, 0]  # [n, vocab]
  top5 = tf.math.top_k(logits, 5).indices.numpy()
  hits = np.mean([t in row for t, row in zip(truth, top5)])
  # A random model scores ~0.0006 (5 of 8000 pieces); the shipped one has
  # learned to read the context.
  assert hits > 0.3, hits
