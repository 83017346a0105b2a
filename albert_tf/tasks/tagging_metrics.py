"""Entity-level precision, recall and F1 of tag sequences: seqeval's default
(conlleval) mode, as Model Garden's tagging task reports them.

Conlleval reads an entity differently from strict IOB2: an I- tag after O
(or after another type) starts an entity, a change of type ends one, and no
entity crosses a sentence boundary. A predicted entity is correct when its
type, first and last word equal a true entity's.
"""

from typing import Dict, List, Sequence, Tuple

from seqeval.metrics import sequence_labeling

Entity = Tuple[str, int, int]  # (type, first word, last word)


def entities(tags: Sequence[str], offset: int = 0) -> List[Entity]:
  """The entities of one sentence's tags (word indices + `offset`)."""
  return [(type_, first + offset, last + offset) for type_, first, last in
          sequence_labeling.get_entities(list(tags))]


def entity_scores(true: Sequence[Sequence[str]],
                  predicted: Sequence[Sequence[str]]) -> Dict[str, float]:
  """Micro-averaged precision / recall / f1 over all entities, the same per
  type ("<TYPE>_f1", ...), entity counts, and word accuracy.

  Args:
    true: each sentence's gold tags.
    predicted: each sentence's predicted tags, sentence for sentence and
      word for word as long as `true`.
  """
  if [len(t) for t in true] != [len(p) for p in predicted]:
    raise ValueError("true and predicted tags differ in length")
  true, predicted = [list(t) for t in true], [list(p) for p in predicted]
  gold = sequence_labeling.get_entities(true)
  guess = sequence_labeling.get_entities(predicted)
  prfs = sequence_labeling.precision_recall_fscore_support
  p, r, f, _ = prfs(true, predicted, average="micro", zero_division=0)
  scores = {"precision": float(p), "recall": float(r), "f1": float(f)}
  # average=None: one value per type, the types sorted by name.
  per_type = prfs(true, predicted, average=None, zero_division=0)[:3]
  for i, type_ in enumerate(sorted({e[0] for e in gold + guess})):
    for name, values in zip(("precision", "recall", "f1"), per_type):
      scores[f"{type_}_{name}"] = float(values[i])
  words = sum(len(t) for t in true)
  hits = sum(a == b for t, p in zip(true, predicted) for a, b in zip(t, p))
  scores.update(num_true_entities=len(gold), num_predicted_entities=len(guess),
                word_accuracy=hits / words if words else 0.0)
  return scores

