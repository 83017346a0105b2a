"""Tests for albert_tf.data.squad_data: reading, answer alignment through the
tokenizer's normalisation, doc-stride windows, answers from logits."""

import json
import logging

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data import squad_answers
from albert_tf.tasks import metrics as finetune_metrics
from albert_tf.data import squad_alignment
from albert_tf.data import squad_data
from albert_tf.serving import preprocessing
from tests.testing import finetune_testlib

TRICKY = [
    # (context, answer) -- accents, glued punctuation, quotes, digits+comma,
    # ligatures / full-width forms (NFKD), collapsed whitespace, unknowns.
    ("Le café de Müller est à Zürich, près du lac.", "Müller"),
    ("Le café de Müller est à Zürich, près du lac.", "Zürich"),
    ("He said,\"hello\"to everyone.Then left!", "hello"),
    ("He said,\"hello\"to everyone.Then left!", "everyone.Then"),
    ("Founded in 1990, it grew (fast) in 2001,then slowed.", "1990"),
    ("Founded in 1990, it grew (fast) in 2001,then slowed.", "2001"),
    ("Founded in 1990, it grew (fast) in 2001,then slowed.", "(fast)"),
    ("The ``quoted'' word and the \ufb01ne \uff26ull text.", "``quoted''"),
    ("The ``quoted'' word and the \ufb01ne \uff26ull text.", "\ufb01ne"),
    ("Spaces   and\ttabs\n\nnewlines here.", "tabs\n\nnewlines"),
    ("Price: \u00a3100 \u2014 or \u20ac120 \u2014 naïve Straße.", "naïve"),
    ("Price: \u00a3100 \u2014 or \u20ac120 \u2014 naïve Straße.", "Straße"),
    ("Greek \u03a3\u0391\u03a3 then ASCII.", "ASCII"),
]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
  return finetune_testlib.tokenizer(tmp_path_factory)


@pytest.mark.parametrize("context,answer", TRICKY)
def test_alignment_round_trip(tokenizer, context, answer):
  tokens = squad_alignment.tokenize_with_offsets(tokenizer, context)
  assert tokens.ids == tokenizer.encode_ids(context)  # same tokenizer output
  start = context.index(answer)
  span = squad_alignment.char_span_to_tokens(tokens, start, start + len(answer))
  assert span is not None
  text = squad_alignment.tokens_to_text(context, tokens, *span)
  # The predicted text is the original substring, accents and case intact.
  assert text == answer


def test_offsets_are_monotonic_and_cover_text(tokenizer):
  for context, _ in TRICKY:
    t = squad_alignment.tokenize_with_offsets(tokenizer, context)
    assert all(s <= e for s, e in zip(t.starts, t.ends))
    assert t.starts == sorted(t.starts)
    covered = set()
    for s, e in zip(t.starts, t.ends):
      covered.update(range(s, e))
    assert {i for i, c in enumerate(context) if not c.isspace()} <= covered


def _squad_json(path, paragraphs):
  with open(path, "w", encoding="utf-8") as f:
    json.dump({"version": "v2.0", "data": [{"title": "t",
                                            "paragraphs": paragraphs}]}, f)


def test_read_and_realign(tmp_path):
  context = "Denver Broncos defeated the Carolina Panthers."
  path = str(tmp_path / "train.json")
  _squad_json(path, [{"context": context, "qas": [
      {"id": "ok", "question": "Who won?",
       "answers": [{"text": "Denver Broncos", "answer_start": 0}]},
      {"id": "shifted", "question": "Who lost?",
       "answers": [{"text": "Carolina Panthers", "answer_start": 30}]},
      {"id": "absent", "question": "Who?",
       "answers": [{"text": "Seattle", "answer_start": 3}]},
      {"id": "none", "question": "Why?", "answers": [],
       "is_impossible": True},
  ]}])
  stats = squad_data.ReadStats()
  examples = squad_data.read_squad_examples(path, True, True, stats)
  assert [e.qas_id for e in examples] == ["ok", "shifted", "none"]
  assert examples[1].answer_start == context.index("Carolina")
  assert stats.skipped == 1 and stats.realigned == 1 and stats.questions == 4
  with pytest.raises(squad_data.SquadFormatError, match="is_impossible"):
    squad_data.read_squad_examples(path, True, False)


def test_malformed_json_names_file_and_path(tmp_path):
  path = str(tmp_path / "bad.json")
  _squad_json(path, [{"context": "x", "qas": [{"id": "1", "answers": []}]}])
  with pytest.raises(squad_data.SquadFormatError,
                     match=r"bad.json: data\[0\].paragraphs\[0\].qas\[0\]: "
                           r"missing field 'question'"):
    squad_data.read_squad_examples(path, False)
  with open(path, "w") as f:
    f.write("{not json")
  with pytest.raises(squad_data.SquadFormatError, match="not valid JSON"):
    squad_data.read_squad_examples(path, False)


def test_windows_and_max_context():
  assert squad_data.doc_windows(10, 4, 2) == [(0, 4), (2, 4), (4, 4), (6, 4)]
  assert squad_data.doc_windows(3, 4, 2) == [(0, 3)]
  windows = squad_data.doc_windows(10, 4, 2)
  # Token 3 is in windows 0 (score min(3,0)), 1 (min(1,2)=1), 2 (min(0,3)).
  flags = [squad_data.max_context_flags(windows, i) for i in range(4)]
  assert flags[1][3 - 2] and not flags[0][3] and not flags[2][0]
  with pytest.raises(ValueError, match="no room"):
    squad_data.doc_windows(5, 0, 2)


def test_doc_stride_zero_is_one_window_of_the_first_tokens():
  """--doc_stride=0 ("0 truncates") never returned: the windows did not
  advance."""
  assert squad_data.doc_windows(30, 20, 0) == [(0, 20)]
  assert squad_data.doc_windows(5, 20, 0) == [(0, 5)]
  assert squad_data.doc_windows(0, 20, 0) == [(0, 0)]
  with pytest.raises(ValueError, match=r"^doc_stride must be >= 0, got -1$"):
    squad_data.doc_windows(30, 20, -1)


def test_doc_stride_zero_cuts_the_context_as_the_export(tokenizer,
                                                        tmp_path_factory,
                                                        caplog):
  """Training, evaluation and prediction get one window per question: the
  question and the first context tokens that fit, packed as the export
  without windows (preprocessing "first_fixed") packs them."""
  context = " ".join(finetune_testlib.botchan_sentences(40, 8, 12))
  words = context.split()
  near, far = words[2], words[-2]
  seq, max_query = 32, 8
  examples = [squad_data.SquadExample(q, "Which word comes here?", context,
                                      w, context.index(w))
              for q, w in (("near", near), ("far", far))]
  room = seq - len(tokenizer.encode_ids(examples[0].question_text)) - 3
  assert len(tokenizer.encode_ids(context)) > 4 * room
  with caplog.at_level(logging.WARNING, logger="absl"):
    train = list(squad_data.convert_examples(examples, tokenizer, seq, 0,
                                             max_query, is_training=True))
  assert len(train) == 2
  assert [r.getMessage() for r in caplog.records] == [
      "SQuAD training: 1 of 2 answers end past the one window of "
      "--doc_stride=0 (the question and the first context tokens that fit "
      "--max_seq_length) and train towards [CLS] as unanswerable; give "
      "--doc_stride for windows over the whole context"]
  (near_feats, _), (far_feats, _) = train
  assert near_feats["is_impossible"] == [0]
  s, e = near_feats["start_positions"][0], near_feats["end_positions"][0]
  ids = near_feats["input_word_ids"]
  assert tokenizer.decode_ids(ids[s:e + 1]).strip() == near.lower()
  # The far answer is cut off: the window is trained towards [CLS].
  assert (far_feats["start_positions"], far_feats["is_impossible"]) == (
      [0], [1])
  evals = list(squad_data.convert_examples(examples, tokenizer, seq, 0,
                                           max_query, is_training=False))
  assert [m["window_start"] for _, m in evals] == [0, 0]
  assert [m["window_length"] for _, m in evals] == [room, room]
  assert all(all(m["max_context"]) for _, m in evals)
  preprocessor = preprocessing.make_preprocessor(
      finetune_testlib.spm_model(tmp_path_factory), seq_length=seq,
      truncation="first_fixed", max_first_segment_length=max_query)
  # With windows, the far answer has one of its own: nothing is cut.
  caplog.clear()
  with caplog.at_level(logging.WARNING, logger="absl"):
    windowed = list(squad_data.convert_examples(
        examples, tokenizer, seq, room // 2, max_query, is_training=True))
  assert not caplog.records
  assert sum(1 - f["is_impossible"][0] for f, m in windowed
             if m["example_index"] == 1) >= 1
  packed = preprocessor.preprocess([tf.constant([examples[0].question_text]),
                                    tf.constant([context])])
  for key, value in packed.items():
    assert value.numpy()[0].tolist() == evals[0][0][key], key


def test_answer_crossing_window_boundary(tokenizer):
  words = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda "
           "mu nu xi omicron pi rho sigma tau upsilon").split()
  context = " ".join(words) + "."
  answer = "kappa lambda mu"
  example = squad_data.SquadExample("q", "which letters?", context, answer,
                                    context.index(answer))
  q_len = len(tokenizer.encode_ids(example.question_text))
  doc = squad_alignment.tokenize_with_offsets(tokenizer, context)
  first, last = squad_alignment.char_span_to_tokens(
      doc, example.answer_start, example.answer_start + len(answer))
  # Windows of 3x the answer, stride 1x: the answer's max-context window
  # holds it whole, and (first % stride != 0) some window edge cuts it.
  length = last - first + 1
  window, stride = 3 * length, length
  assert first % stride
  max_seq = q_len + 3 + window
  out = list(squad_data.convert_examples([example], tokenizer, max_seq,
                                         stride, 64, is_training=True))
  windows = squad_data.doc_windows(len(doc.ids), window, stride)
  assert len(out) == len(windows) > 2
  inside = 0
  for (features, meta), (w_start, w_len) in zip(out, windows):
    assert len(features["input_word_ids"]) == max_seq
    if w_start <= first and last < w_start + w_len:
      inside += 1
      s, e = features["start_positions"][0], features["end_positions"][0]
      ids = features["input_word_ids"]
      assert ids[s:e + 1] == doc.ids[first:last + 1]
      assert features["is_impossible"] == [0]
    else:  # answer cut by the window edge (or absent): [CLS] target
      assert features["start_positions"] == [0]
      assert features["is_impossible"] == [1]
  assert inside >= 1
  # Some window cuts the answer: it crosses a window boundary.
  assert any(w_start < first + 1 <= w_start + w_len <= last
             for w_start, w_len in windows)

  # Postprocessing: logits that point at the answer in the window where it
  # has max context recover the original text.
  eval_out = list(squad_data.convert_examples([example], tokenizer, max_seq,
                                              stride, 64, is_training=False))
  metas = [m for _, m in eval_out]
  results = {}
  for uid, meta in enumerate(metas):
    start_l = np.zeros(max_seq, np.float32)
    end_l = np.zeros(max_seq, np.float32)
    off, w_start = meta["doc_offset"], meta["window_start"]
    if w_start <= first < w_start + meta["window_length"] and meta[
        "max_context"][first - w_start] and last < w_start + meta[
            "window_length"]:
      start_l[first - w_start + off] = 5.0
      end_l[last - w_start + off] = 5.0
    results[uid] = squad_answers.WindowResult(start_l, end_l)
  tokens_meta = squad_data.example_metadata([example], tokenizer)
  preds, odds, nbest = squad_answers.postprocess_logits([example], metas, tokens_meta,
                                              results, max_answer_length=64)
  assert preds == {"q": answer} and odds == {}
  assert nbest["q"][0]["text"] == answer
  assert sum(n["probability"] for n in nbest["q"]) == pytest.approx(1.0)


def _single_window(tokenizer, context, question="what?"):
  example = squad_data.SquadExample("q", question, context)
  (feats, meta), = squad_data.convert_examples([example], tokenizer, 64, 32,
                                               16, is_training=False)
  return example, feats, meta


def test_v2_null_odds_and_threshold(tokenizer):
  example, _, meta = _single_window(tokenizer, "The sky is blue today.")
  tokens_meta = squad_data.example_metadata([example], tokenizer)
  start = np.zeros(64, np.float32)
  end = np.zeros(64, np.float32)
  start[meta["doc_offset"]] = end[meta["doc_offset"]] = 2.0  # "the" span
  start[0] = end[0] = 3.0  # [CLS]: null score 6 vs best span 4
  results = {0: squad_answers.WindowResult(start, end)}
  preds, odds, _ = squad_answers.postprocess_logits([example], [meta], tokens_meta,
                                          results,
                                          version_2_with_negative=True)
  assert odds["q"] == pytest.approx(2.0) and preds["q"] == ""
  preds, _, _ = squad_answers.postprocess_logits(
      [example], [meta], tokens_meta, results, version_2_with_negative=True,
      null_score_diff_threshold=2.5)
  assert finetune_metrics.normalize_answer(preds["q"]) == ""  # "The"
  # With an answerability head: null odds = -answerable logit.
  results = {0: squad_answers.WindowResult(start, end, answerable_logit=1.5)}
  preds, odds, _ = squad_answers.postprocess_logits([example], [meta], tokens_meta,
                                          results,
                                          version_2_with_negative=True)
  assert odds["q"] == pytest.approx(-1.5) and preds["q"] == "The"


def test_max_answer_length_and_order(tokenizer):
  example, _, meta = _single_window(tokenizer, "one two three four five six")
  tokens_meta = squad_data.example_metadata([example], tokenizer)
  off = meta["doc_offset"]
  start = np.full(64, -10.0, np.float32)
  end = np.full(64, -10.0, np.float32)
  start[off] = 5.0        # "one"
  end[off + meta["window_length"] - 1] = 5.0  # "six": too long at max 2
  end[off + 1] = 1.0      # "two"
  end[off - 1] = 9.0      # [SEP] before the context: never an answer end
  results = {0: squad_answers.WindowResult(start, end)}
  preds, _, _ = squad_answers.postprocess_logits([example], [meta], tokens_meta,
                                       results, max_answer_length=3)
  span_tokens = squad_alignment.tokenize_with_offsets(tokenizer, example.context_text)
  assert preds["q"] in ("one two", example.context_text[
      span_tokens.starts[0]:span_tokens.ends[1]])
