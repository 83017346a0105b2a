"""Tests for data_prep.create_pretraining_data on a real text (botchan)."""

import json
import sys

import numpy as np
import pytest
import tensorflow as tf

from data_prep import create_pretraining_data as cpd
from data_prep import pretraining_config
from data_prep import pretraining_instances as pi
from data_prep import tokenization
from data_prep.inspect_tfrecord import format_example, iter_examples
from tests.testing import tool_server
from tests.testing.botchan_testlib import botchan_spm
from tests.testing.repo_paths import ROOT

SEQ, PRED = 128, 20


def make_cfg(model, seq=SEQ, task="sop", dupe=2, seed=12345, v2=False):
  return pretraining_config.RunConfig(
      spm_model_file=model, do_lower_case=True,
      instance=pi.InstanceConfig(max_seq_length=seq, sentence_pair_task=task,
                                 max_predictions_per_seq=PRED),
      random_seed=seed, dupe_factor=dupe, v2_feature_names=v2)


@pytest.fixture(scope="module")
def spm_corpus(tmp_path_factory):
  return botchan_spm(tmp_path_factory)


@pytest.fixture(scope="module")
def botchan_run(spm_corpus, tmp_path_factory):
  model, corpus = spm_corpus
  out = str(tmp_path_factory.mktemp("cpd") / "botchan.tfrecord")
  summary = cpd.run([corpus], [out], make_cfg(model, dupe=6),
                    progress_interval=0)
  examples = list(iter_examples(out))
  return model, corpus, out, summary, examples


def test_counts_and_summary(botchan_run):
  _, _, out, summary, examples = botchan_run
  assert len(examples) == summary["instances"] > 3000
  with open(out + ".summary.json") as f:
    on_disk = json.load(f)
  assert on_disk["instances"] == summary["instances"]
  assert on_disk["output_files"] == {out: len(examples)}
  assert summary["documents_read"] == 12  # preface + 11 chapters
  assert summary["masked_tokens"] == sum(
      int(sum(e["masked_lm_weights"])) for e in examples)


def test_mask_budget_and_positions(botchan_run):
  model, _, _, _, examples = botchan_run
  tok = tokenization.FullTokenizer(model)
  control = set(tok.control_ids)
  kinds = np.zeros(3)
  for e in examples:
    ids, mask = e["input_ids"], e["input_mask"]
    n = sum(mask)
    w = e["masked_lm_weights"]
    m = int(sum(w))
    assert m == min(PRED, max(1, int(round(n * 0.15))))
    pos = e["masked_lm_positions"][:m]
    assert pos == sorted(pos) and len(set(pos)) == m
    assert all(x == 0 for x in e["masked_lm_positions"][m:])
    labels = e["masked_lm_ids"][:m]
    assert 0 < min(pos) and max(pos) < n
    # Never a special/pad position (<unk> from the text is a normal token).
    assert not {tok.pad_id, tok.cls_id, tok.sep_id, tok.mask_id} & set(labels)
    # [MASK] only at masked positions; CLS/SEP intact.
    mask_at = {i for i in range(len(ids)) if ids[i] == tok.mask_id}
    assert mask_at <= set(pos)
    assert ids[0] == tok.cls_id and ids[n - 1] == tok.sep_id
    assert all(x == 0 for x in ids[n:]) and e["token_boundary"][0] == 1
    for p, lab in zip(pos, labels):
      if ids[p] == tok.mask_id:
        kinds[0] += 1
      elif ids[p] == lab:
        kinds[1] += 1
      else:
        kinds[2] += 1
        assert ids[p] not in control  # random replacement never special
  frac = kinds / kinds.sum()
  np.testing.assert_allclose(frac, [0.8, 0.1, 0.1], atol=0.015)


def test_ngram_and_sop_balance(botchan_run):
  summary = botchan_run[3]
  drawn = np.array([summary["ngram_drawn_full_choice"][k] for k in "123"])
  assert drawn.sum() > 5000
  np.testing.assert_allclose(drawn / drawn.sum(), [6 / 11, 3 / 11, 2 / 11],
                             atol=0.02)
  spans = summary["masked_by_ngram"]
  assert spans["spans_1gram"] > spans["spans_2gram"] > spans["spans_3gram"] > 0
  frac = summary["pair_labels"]["fraction_1"]
  assert 0.45 <= frac <= 0.55


def _find_all(hay_index, hay, seg):
  key = tuple(seg[:3])
  return [p for p in hay_index.get(key, ()) if hay[p:p + len(seg)] == seg]


def test_decoded_segments_are_adjacent_in_source(botchan_run):
  model, corpus, _, _, examples = botchan_run
  tok = tokenization.FullTokenizer(model)
  with open(corpus, encoding="utf-8") as f:
    lines = [l for l in f.read().splitlines() if l.strip()]
  hay = [i for ids in tok.encode_ids_batch(lines) for i in ids]
  index = {}
  for p in range(len(hay) - 2):
    index.setdefault(tuple(hay[p:p + 3]), []).append(p)
  max_num = SEQ - 3
  checked_exact = 0
  for e in examples[:600]:
    ids = list(e["input_ids"])
    m = int(sum(e["masked_lm_weights"]))
    for p, lab in zip(e["masked_lm_positions"][:m], e["masked_lm_ids"][:m]):
      ids[p] = lab
    n = sum(e["input_mask"])
    sep = ids.index(tok.sep_id)
    a, b = ids[1:sep], ids[sep + 1:n - 1]
    if e["next_sentence_labels"][0] == 1:
      a, b = b, a  # swapped: the source order is B then A
    if len(a) < 3 or len(b) < 3:
      continue
    starts_a, starts_b = _find_all(index, hay, a), _find_all(index, hay, b)
    assert starts_a and starts_b, format_example(e, tok)
    gaps = [sb - (sa + len(a)) for sa in starts_a for sb in starts_b]
    if len(a) + len(b) < max_num:  # not truncated: exactly adjacent
      assert 0 in gaps, format_example(e, tok)
      checked_exact += 1
    else:                          # truncation may open a gap, never reorder
      assert any(0 <= g <= SEQ * 4 for g in gaps), format_example(e, tok)
  assert checked_exact > 20


def test_workers_byte_identical_and_seed_matters(spm_corpus, tmp_path):
  model, corpus = spm_corpus
  small = tmp_path / "small.txt"
  with open(corpus, encoding="utf-8") as f:
    small.write_text("".join(f.readlines()[:900]), encoding="utf-8")
  outs = {}
  for name, workers, seed in (("w1", 1, 7), ("w2", 2, 7), ("s8", 2, 8)):
    out = str(tmp_path / f"{name}.tfrecord")
    cpd.run([str(small)], [out], make_cfg(model, seq=64, dupe=2, seed=seed),
            num_workers=workers, docs_per_block=1, progress_interval=0)
    with open(out, "rb") as f:
      outs[name] = f.read()
  assert len(outs["w1"]) > 10000
  assert outs["w1"] == outs["w2"]
  assert outs["w1"] != outs["s8"]


def test_model_garden_loader_reads_our_files(botchan_run, spm_corpus, tmp_path):
  from official.nlp.data import pretrain_dataloader  # pylint: disable=g-import-not-at-top
  model, corpus = spm_corpus
  out = botchan_run[2]
  out_v2 = str(tmp_path / "v2.tfrecord")
  cpd.run([corpus], [out_v2], make_cfg(model, dupe=1, v2=True),
          shuffle_buffer_size=0, progress_interval=0)
  for path, v2 in ((out, False), (out_v2, True)):
    cfg = pretrain_dataloader.BertPretrainDataConfig(
        input_path=path, global_batch_size=4, is_training=False,
        seq_length=SEQ, max_predictions_per_seq=PRED,
        use_v2_feature_names=v2)
    batch = next(iter(pretrain_dataloader.BertPretrainDataLoader(cfg).load()))
    first = next(iter_examples(path))
    ids_key = "input_word_ids" if v2 else "input_ids"
    np.testing.assert_array_equal(batch["input_word_ids"][0], first[ids_key])
    np.testing.assert_array_equal(batch["masked_lm_ids"][0],
                                  first["masked_lm_ids"])
    assert batch["next_sentence_labels"].shape == (4, 1)
    assert batch["input_word_ids"].dtype == tf.int32


def test_nsp_and_none_tasks(spm_corpus, tmp_path):
  model, corpus = spm_corpus
  tok = tokenization.FullTokenizer(model)
  out = str(tmp_path / "none.tfrecord")
  s = cpd.run([corpus], [out], make_cfg(model, task="none", dupe=1),
              progress_interval=0)
  ex = list(iter_examples(out))
  assert s["pair_labels"]["1"] == 0
  for e in ex:
    n = sum(e["input_mask"])
    assert set(e["segment_ids"]) == {0}
    assert e["input_ids"][1:n - 1].count(tok.sep_id) == 0
  out = str(tmp_path / "nsp.tfrecord")
  s = cpd.run([corpus], [out], make_cfg(model, task="nsp", dupe=2),
              docs_per_block=4, progress_interval=0)
  assert 0.4 <= s["pair_labels"]["fraction_1"] <= 0.6
  assert s["skipped_or_repaired"]["nsp_no_other_document"] == 0


def test_gzip_and_sharded_output(spm_corpus, tmp_path):
  model, corpus = spm_corpus
  spec = str(tmp_path / "shard.tfrecord@3")
  files = cpd.tfrecord_io.expand_output_files(spec)
  s = cpd.run([corpus], files, make_cfg(model, dupe=1), compression="GZIP",
              progress_interval=0)
  counts = [sum(1 for _ in tf.data.TFRecordDataset(f, "GZIP")) for f in files]
  assert sum(counts) == s["instances"] and max(counts) - min(counts) <= 1
  assert files[0].endswith("shard.tfrecord-00000-of-00003")


# ------------------------------------------------------------ bad input ----
def _bad_run(model, tmp_path, content, **kw):
  src = tmp_path / "bad.txt"
  src.write_bytes(content)
  out = str(tmp_path / "bad.tfrecord")
  s = cpd.run([str(src)], [out], make_cfg(model, seq=64, dupe=1),
              progress_interval=0, **kw)
  return s, list(iter_examples(out))


GOOD = ("The boy ran home quickly.\nHe was very tired after school.\n"
        "His mother made dinner for him.\n").encode()


def test_invalid_utf8_is_repaired_and_counted(spm_corpus, tmp_path):
  s, ex = _bad_run(spm_corpus[0], tmp_path,
                   GOOD + b"Bad \xff\xfe bytes here in line.\n\n" + GOOD)
  assert s["skipped_or_repaired"]["invalid_utf8_lines"] == 1
  assert len(ex) >= 2


def test_control_chars_removed_and_counted(spm_corpus, tmp_path):
  s, ex = _bad_run(spm_corpus[0], tmp_path,
                   GOOD + "Bell\x07 and\x00 zero\u200b width.\n".encode())
  assert s["skipped_or_repaired"]["control_char_lines"] == 1
  assert ex


def test_empty_documents_skipped_and_counted(spm_corpus, tmp_path):
  s, _ = _bad_run(spm_corpus[0], tmp_path, b"\n\n\n" + GOOD + b"\n   \n\n" + GOOD)
  assert s["skipped_or_repaired"]["empty_documents"] >= 3
  assert s["documents_read"] == 2


def test_huge_line_split_and_counted(spm_corpus, tmp_path):
  huge = ("word " * 5000).encode() + b"\n"
  s, ex = _bad_run(spm_corpus[0], tmp_path, GOOD + huge + GOOD,
                   max_line_chars=1000)
  assert s["skipped_or_repaired"]["huge_lines_split"] == 1
  assert s["document_tokens"] > 5000  # nothing lost
  assert ex


def test_too_short_documents_skipped_or_split(spm_corpus, tmp_path):
  content = b"Hi\n\nOne single sentence with several words in it.\n\n" + GOOD
  s, ex = _bad_run(spm_corpus[0], tmp_path, content)
  sk = s["skipped_or_repaired"]
  assert sk["skipped_chunk_single_unit"] + sk["documents_too_short_for_pair"] >= 1
  assert sk["one_sentence_chunk_split"] >= 1
  assert all(sum(e["input_mask"]) >= 5 for e in ex)  # CLS A SEP B SEP


def test_unreadable_file_and_missing_model_errors(spm_corpus, tmp_path):
  model = spm_corpus[0]
  out = str(tmp_path / "o.tfrecord")
  with pytest.raises(OSError, match="nothere.txt"):
    cpd.run([str(tmp_path / "nothere.txt")], [out], make_cfg(model))
  corrupt = tmp_path / "corrupt.txt.gz"
  corrupt.write_bytes(b"\x1f\x8b\x08\x00garbage-not-gzip" * 10)
  with pytest.raises(OSError, match="corrupt.txt.gz"):
    cpd.run([str(corrupt)], [out], make_cfg(model), progress_interval=0)
  with pytest.raises(FileNotFoundError, match="missing.model"):
    cpd.run([str(corrupt)], [out], make_cfg(str(tmp_path / "missing.model")))


def test_cli_reports_clear_error_and_help(tmp_path):
  env = tool_server.tool_env()
  src = tmp_path / "in.txt"
  src.write_bytes(GOOD)
  r = tool_server.run(
      [sys.executable, "-m", "data_prep.create_pretraining_data",
       f"--input_file={src}", f"--output_file={tmp_path / 'o.tfrecord'}",
       f"--spm_model_file={tmp_path / 'gone.model'}"],
      env=env, capture_output=True, text=True, cwd=ROOT, timeout=60)
  assert r.returncode == 1 and "gone.model" in r.stderr
  r = tool_server.run([sys.executable, "-m",
                       "data_prep.create_pretraining_data", "--helpfull"],
                      env=env, capture_output=True, text=True, cwd=ROOT,
                      timeout=60)
  for flag in ("dupe_factor", "sentence_pair_task", "num_workers",
               "compression", "v2_feature_names", "favor_shorter_ngram"):
    assert f"--{flag}" in r.stdout or f"--[no]{flag}" in r.stdout
