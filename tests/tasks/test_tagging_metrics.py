"""Entity-level scores as conlleval / seqeval's default mode count them,
against hand-counted cases (the quirks included)."""

import pytest

from albert_tf.tasks import tagging_metrics as tm


def test_entities_follow_conllevals_reading():
  assert tm.entities(["B-PER", "I-PER", "O", "B-LOC"]) == [
      ("PER", 0, 1), ("LOC", 3, 3)]
  # I- after O starts an entity (IOB1 style), it is not dropped.
  assert tm.entities(["O", "I-PER", "I-PER"]) == [("PER", 1, 2)]
  assert tm.entities(["I-ORG"]) == [("ORG", 0, 0)]
  # A change of type ends an entity whatever the tags say.
  assert tm.entities(["B-PER", "I-LOC", "I-LOC"]) == [
      ("PER", 0, 0), ("LOC", 1, 2)]
  # B- after I- of the same type starts a second entity.
  assert tm.entities(["B-PER", "I-PER", "B-PER"]) == [
      ("PER", 0, 1), ("PER", 2, 2)]
  assert tm.entities(["O", "O"]) == []


def test_scores_count_exact_spans_and_types():
  true = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
  pred = [["B-PER", "I-PER", "O", "B-ORG"], ["B-ORG", "B-LOC"]]
  s = tm.entity_scores(true, pred)
  # true: PER 0-1, LOC 3, ORG (s2) 0; predicted: PER 0-1, ORG 3, ORG 0,
  # LOC 1: 2 correct of 4 predicted, of 3 true.
  assert (s["num_true_entities"], s["num_predicted_entities"]) == (3, 4)
  assert s["precision"] == pytest.approx(2 / 4)
  assert s["recall"] == pytest.approx(2 / 3)
  assert s["f1"] == pytest.approx(2 * 0.5 * (2 / 3) / (0.5 + 2 / 3))
  assert (s["PER_f1"], s["LOC_recall"], s["LOC_precision"]) == (1.0, 0.0, 0.0)
  assert s["ORG_precision"] == pytest.approx(1 / 2)
  assert s["ORG_recall"] == 1.0
  assert s["word_accuracy"] == pytest.approx(4 / 6)


def test_a_partial_span_is_wrong_and_sentences_are_separate():
  s = tm.entity_scores([["B-PER", "I-PER"]], [["B-PER", "O"]])
  assert (s["precision"], s["recall"], s["f1"]) == (0.0, 0.0, 0.0)
  # I-PER opening the second sentence does not continue the first's PER.
  s = tm.entity_scores([["B-PER"], ["I-PER"]], [["B-PER"], ["I-PER"]])
  assert s["num_true_entities"] == 2 and s["f1"] == 1.0
  # A prediction in IOB1 style (I- after O) matches the IOB2 truth.
  s = tm.entity_scores([["O", "B-LOC", "I-LOC"]], [["O", "I-LOC", "I-LOC"]])
  assert s["f1"] == 1.0


def test_nothing_predicted_scores_zero_and_lengths_must_agree():
  s = tm.entity_scores([["B-PER"]], [["O"]])
  assert (s["precision"], s["recall"], s["f1"]) == (0.0, 0.0, 0.0)
  with pytest.raises(ValueError, match="differ in length"):
    tm.entity_scores([["O", "O"]], [["O"]])
