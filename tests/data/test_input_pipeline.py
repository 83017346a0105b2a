"""Tests for albert_tf.data.pretraining_dataloader on files written by data_prep."""


import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data import dynamic_masking
from albert_tf.data import pretraining_dataloader as ip
from data_prep import create_pretraining_data as cpd
from data_prep import pretraining_config
from data_prep import pretraining_instances as pi
from data_prep import tokenization
from data_prep.inspect_tfrecord import iter_examples
from tests.testing.botchan_testlib import botchan_spm

SEQ, PRED = 64, 10


@pytest.fixture(scope="module")
def data(tmp_path_factory):
  model, corpus = botchan_spm(tmp_path_factory)
  d = tmp_path_factory.mktemp("pipe")
  small = d / "small.txt"
  with open(corpus, encoding="utf-8") as f:
    small.write_text("".join(f.readlines()[:600]), encoding="utf-8")
  out = {}
  for name, v2, comp in (("v1", False, "NONE"), ("v2", True, "NONE"),
                         ("gz", False, "GZIP")):
    cfg = pretraining_config.RunConfig(model, True, pi.InstanceConfig(
        max_seq_length=SEQ, max_predictions_per_seq=PRED), dupe_factor=1,
                        v2_feature_names=v2)
    files = [str(d / f"{name}-{i}.tfrecord") for i in range(2)]
    cpd.run([str(small)], files, cfg, compression=comp, progress_interval=0)
    out[name] = files
  return tokenization.FullTokenizer(model), out


def _all(ds):
  """One pass over `ds` (dynamic masking differs per pass), concatenated."""
  batches = [{k: v.numpy() for k, v in b.items()} for b in ds]
  return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


def test_shapes_dtypes_and_values(data):
  tok, files = data
  ds = ip.pretraining_dataset(files["v1"][0], SEQ, PRED, 8, is_training=True)
  b = next(iter(ds))
  assert b["input_word_ids"].shape == (8, SEQ)
  assert b["masked_lm_positions"].shape == (8, PRED)
  assert b["next_sentence_labels"].shape == (8,)
  assert b["token_boundary"].shape == (8, SEQ)
  for k, v in b.items():
    assert v.dtype == (tf.float32 if k == "masked_lm_weights" else tf.int32), k
  # Eval order: equals the file read back independently.
  got = _all(ip.pretraining_dataset(files["v1"][0], SEQ, PRED, 4, False))
  ref = list(iter_examples(files["v1"][0]))
  assert len(got["input_word_ids"]) == len(ref)  # no drop_remainder in eval
  np.testing.assert_array_equal(got["input_word_ids"],
                                [e["input_ids"] for e in ref])
  np.testing.assert_array_equal(got["input_type_ids"],
                                [e["segment_ids"] for e in ref])
  np.testing.assert_array_equal(got["next_sentence_labels"],
                                [e["next_sentence_labels"][0] for e in ref])


def test_v2_names_and_gzip_read_the_same(data):
  _, files = data
  a = _all(ip.pretraining_dataset(files["v1"], SEQ, PRED, 4, False))
  for other in ("v2", "gz"):
    b = _all(ip.pretraining_dataset(",".join(files[other]), SEQ, PRED, 4,
                                    False))
    for k in a:
      np.testing.assert_array_equal(a[k], b[k], err_msg=f"{other} {k}")


def test_drop_remainder_and_sharding(data):
  _, files = data
  n = sum(1 for _ in iter_examples(files["v1"][0]))
  ds = ip.pretraining_dataset(files["v1"][0], SEQ, PRED, 7, True, repeat=False)
  sizes = [b["input_word_ids"].shape[0] for b in ds]
  assert set(sizes) == {7} and len(sizes) == n // 7
  seen = []
  for pid in range(2):   # one file per pipeline, then records with one file
    for pattern in (files["v1"], files["v1"][0]):
      ctx = tf.distribute.InputContext(num_input_pipelines=2,
                                       input_pipeline_id=pid,
                                       num_replicas_in_sync=2)
      ds = ip.pretraining_dataset(pattern, SEQ, PRED, 4, False,
                                  input_context=ctx)
      assert next(iter(ds))["input_word_ids"].shape[0] == 2  # per replica
      if pattern == files["v1"][0]:
        seen.append({tuple(r) for r in _all(ds)["input_word_ids"]})
  assert not seen[0] & seen[1] and len(seen[0] | seen[1]) == n


def test_corrupt_and_truncated_files_name_the_file(data, tmp_path):
  _, files = data
  raw = open(files["v1"][0], "rb").read()
  trunc = tmp_path / "trunc.tfrecord"
  trunc.write_bytes(raw[:len(raw) // 2 + 3])
  bad = bytearray(raw)
  bad[len(raw) // 2] ^= 0xFF
  corrupt = tmp_path / "corrupt.tfrecord"
  corrupt.write_bytes(bytes(bad))
  for path in (trunc, corrupt):
    ds = ip.pretraining_dataset(str(path), SEQ, PRED, 4, False)
    with pytest.raises(tf.errors.OpError, match=path.name):
      for _ in ds:
        pass
  with pytest.raises(FileNotFoundError, match="nomatch"):
    ip.pretraining_dataset(str(tmp_path / "nomatch*"), SEQ, PRED, 4, False)


def test_dynamic_masking(data):
  tok, files = data
  kw = dict(dynamic_masking=True, vocab_size=tok.vocab_size, seed=3,
            masking=dynamic_masking.settings_for_files(files["v1"][:1]))
  ds = ip.pretraining_dataset(files["v1"][0], SEQ, PRED, 16, False, **kw)
  ref = _all(ip.pretraining_dataset(files["v1"][0], SEQ, PRED, 16, False))
  e1, e2 = _all(ds), _all(ds)      # two epochs of the same dataset
  # Original tokens, restored from the stored labels.
  orig = ref["input_word_ids"].copy()
  for i in range(len(orig)):
    m = ref["masked_lm_weights"][i] > 0
    orig[i, ref["masked_lm_positions"][i][m]] = ref["masked_lm_ids"][i][m]
  specials = (orig == tok.cls_id) | (orig == tok.sep_id) | (ref["input_mask"] == 0)
  kinds = np.zeros(3)
  for ep in (e1, e2):
    for i in range(len(orig)):
      n = ref["input_mask"][i].sum()
      m = int(ep["masked_lm_weights"][i].sum())
      assert m == min(PRED, max(1, int(round(n * 0.15))))
      pos = ep["masked_lm_positions"][i][:m]
      assert not specials[i][pos].any()
      np.testing.assert_array_equal(ep["masked_lm_ids"][i][:m], orig[i][pos])
      changed = np.flatnonzero(ep["input_word_ids"][i] != orig[i])
      assert set(changed) <= set(pos)
      got = ep["input_word_ids"][i][pos]
      kinds += [(got == tok.mask_id).sum(), (got == orig[i][pos]).sum(),
                ((got != tok.mask_id) & (got != orig[i][pos])).sum()]
      assert not set(got[got != orig[i][pos]]) & (set(tok.control_ids) - {tok.mask_id})
      # Whole words: a masked continuation piece has its unit start masked.
      tb = ref["token_boundary"][i]
      for p in pos:
        if not tb[p] and not specials[i][p - 1]:
          assert p - 1 in set(pos)
  assert not np.array_equal(e1["masked_lm_positions"], e2["masked_lm_positions"])
  frac = kinds / kinds.sum()
  np.testing.assert_allclose(frac, [0.8, 0.1, 0.1], atol=0.04)


def test_dynamic_masking_position_can_be_saved(data, tmp_path):
  """The trainer saves the input position (trainer.save_data_position, on
  by default); with dynamic masking TF refused it ("RandomShuffle is
  stateful") at the first checkpoint. The position is saved, the random
  stream is not."""
  tok, files = data
  masking = dynamic_masking.settings_for_files(files["v1"][:1])
  def batches():
    return iter(ip.pretraining_dataset(
        files["v1"][0], SEQ, PRED, 4, False, repeat=True, checked_reader=False,
        dynamic_masking=True, vocab_size=tok.vocab_size, seed=3,
        masking=masking))
  it = batches()
  next(it)
  path = tf.train.Checkpoint(iterator=it).save(str(tmp_path / "pos"))
  want = next(it)
  restored = batches()
  tf.train.Checkpoint(iterator=restored).restore(path).assert_consumed()
  got = next(restored)
  for key in ("input_mask", "input_type_ids", "token_boundary"):
    np.testing.assert_array_equal(got[key], want[key])


def test_missing_or_empty_patterns_are_clear_errors(tmp_path):
  with pytest.raises(ValueError, match="No pretraining data file pattern"):
    ip.list_files(" , ")
  missing = str(tmp_path / "nothing-*.tfrecord")
  with pytest.raises(FileNotFoundError, match="nothing-"):
    ip.list_files(missing)


def test_a_file_matched_twice_is_refused(tmp_path):
  """A glob and a path to one of its files trained on that file twice."""
  for name in ("train-0", "train-1"):
    (tmp_path / name).write_bytes(b"")
  files = [str(tmp_path / "train-0"), str(tmp_path / "train-1")]
  assert ip.list_files(f"{tmp_path}/train-*") == files
  pattern = f"{tmp_path}/train-*,{tmp_path}/train-1"
  with pytest.raises(ValueError) as e:
    ip.list_files(pattern)
  assert str(e.value) == (
      f"pretraining data file {files[1]} is matched more than once (also as "
      f"{files[1]}) by {pattern!r}; give each file once")
  os.symlink(files[0], tmp_path / "link")
  with pytest.raises(ValueError) as e:
    ip.list_files(f"{tmp_path}/link,{files[0]}")
  assert str(e.value).startswith(
      f"pretraining data file {files[0]} is matched more than once (also as "
      f"{tmp_path}/link)")
