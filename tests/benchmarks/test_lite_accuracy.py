"""benchmarks/lite_accuracy.py's parts that need no training: the SQuAD
task it makes from text, and its RESULTS.md section. (The script
itself fine-tunes two models and exports each six times: minutes even with
--smoke, so the suite does not run it.)"""

import json
import os
import re
import sys

from tests.testing.repo_paths import ROOT

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import lite_accuracy_tasks  # pylint: disable=g-import-not-at-top,wrong-import-position
import run_all  # pylint: disable=g-import-not-at-top,wrong-import-position

DOCS = [[
    "The old woman came in with tea for the two of us.",
    "I thanked her, and she went out again without a word.",
    "Red Shirt said the school would give a dinner on Saturday.",
    "Nobody in the town had heard of such a dinner before that year.",
    "The principal looked at his watch and began a long speech.",
], [
    "It rained all night, and the river rose over the stones.",
    "In the morning the boatman said we could not go fishing today.",
    "So we sat on the veranda and watched the water go by.",
    "Porcupine came over at noon with a basket of persimmons.",
    "He laughed at the rain and said the fish would wait for us.",
]]


def _count_words(text):
  return len(text.split())


def _read(path):
  with open(path, encoding="utf-8") as f:
    return json.load(f)["data"][0]["paragraphs"]


def test_lookup_questions_are_words_found_once_in_their_context(tmp_path):
  counts = lite_accuracy_tasks.squad_task(
      DOCS, str(tmp_path), dev_fraction=0.4, count_pieces=_count_words,
      max_context=25, seed=3)
  train, dev = _read(tmp_path / "train.json"), _read(tmp_path / "dev.json")
  assert counts == {
      "train": {"paragraphs": len(train),
                "questions": sum(len(p["qas"]) for p in train)},
      "dev": {"paragraphs": len(dev),
              "questions": sum(len(p["qas"]) for p in dev)}}
  assert counts["train"]["questions"] > 0 and counts["dev"]["questions"] > 0
  for para in train + dev:
    context = para["context"]
    assert _count_words(context) <= 25
    # Whole words of the context, any case (the model lowercases).
    words = re.findall(r"[a-z]+", context.lower())
    for qa in para["qas"]:
      (answer,) = qa["answers"]
      start, text = answer["answer_start"], answer["text"]
      assert qa["question"] == text
      assert context[start:start + len(text)] == text
      assert text.isalpha() and len(text) >= 4
      assert words.count(text.lower()) == 1


def test_squad_train_and_dev_share_no_sentence(tmp_path):
  lite_accuracy_tasks.squad_task(DOCS, str(tmp_path), dev_fraction=0.4,
                                 count_pieces=_count_words, max_context=40)
  def sentences(paragraphs):
    return {s for doc in DOCS for s in doc
            if any(s in p["context"] for p in paragraphs)}
  train = sentences(_read(tmp_path / "train.json"))
  dev = sentences(_read(tmp_path / "dev.json"))
  assert train and dev and not train & dev
  # Each chapter's last 40% (2 of 5 sentences) is dev.
  assert dev <= {s for doc in DOCS for s in doc[3:]}


def test_results_section_lists_every_export_and_a_failed_one():
  row = {"examples": 2152, "agreement": 0.9986, "accuracy": 0.9851,
         "max_abs_logit_diff": 0.0737, "size_bytes": 2_750_000}
  result = {
      "timestamp": "2026-11-26 14:00:00", "smoke": False,
      "cpu": {"model": "AMD EPYC", "flags": ["avx2", "avx512_bf16"]},
      "versions": {"tensorflow": "2.20.0", "ai-edge-litert": "2.0.2"},
      "representative_examples": 100,
      "targets": {"classification": {"agreement": 0.99,
                                     "accuracy_drop": 0.01},
                  "squad": {"agreement": 0.97, "accuracy_drop": 0.01}},
      "tasks": {"classification": {"rows": [
          dict(row, export="savedmodel float32", agreement=1.0),
          dict(row, export="savedmodel bfloat16", meets_targets=True),
          {"export": "tflite int8", "error": "TypeError: int32 vs int64",
           "meets_targets": False}]}}}
  lines = run_all.lite_accuracy_lines(result)
  table = [l for l in lines if l.startswith("| classification")]
  assert table == [
      "| classification | savedmodel float32 | 2.75 | 100.00% | 0.9851 | "
      "0.0737 | reference |",
      "| classification | savedmodel bfloat16 | 2.75 | 99.86% | 0.9851 | "
      "0.0737 | met |",
      "| classification | tflite int8 | - | - | - | - | NOT met: export "
      "failed (TypeError: int32 vs int64) |"]
  assert any("AMD EPYC (flags: avx2 avx512_bf16)" in l for l in lines)
  assert any("Dev examples: classification 2152." in l for l in lines)
  assert run_all.lite_accuracy_lines(None) == []
