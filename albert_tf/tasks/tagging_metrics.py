"""Entity-level precision, recall and F1 of tag sequences, as conlleval and
seqeval's default mode count them.

An entity is a maximal run of tags read as conlleval reads them: a tag is
"B-TYPE", "I-TYPE", "E-TYPE", "S-TYPE" or "O" (its first letter is the tag,
what follows the first "-" the type). Conlleval's rules, which differ from a
strict IOB2 reading:
  - an I- tag after O (or after an entity of another type) starts an entity;
  - a change of type ends the entity, whatever the tags;
  - sentences are separate: no entity crosses a sentence boundary.
A predicted entity is correct when its type, first and last word equal a
true entity's. Precision = correct / predicted, recall = correct / true,
F1 their harmonic mean; 0 where a denominator is 0.
"""

from typing import Dict, List, Sequence, Set, Tuple

Entity = Tuple[str, int, int]  # (type, first word, last word)


def _split(tag: str) -> Tuple[str, str]:
  """"B-PER" -> ("B", "PER"); "O" -> ("O", "_") (conlleval's reading)."""
  return tag[:1], tag[1:].split("-", 1)[-1] or "_"


def _ends(prev_tag, tag, prev_type, type_) -> bool:
  """Whether the entity before this word ends here."""
  if prev_tag in ("E", "S"):
    return True
  if prev_tag in ("B", "I") and tag in ("B", "S", "O"):
    return True
  return prev_tag not in ("O", ".") and prev_type != type_


def _starts(prev_tag, tag, prev_type, type_) -> bool:
  """Whether an entity starts at this word."""
  if tag in ("B", "S") or (prev_tag in ("E", "S", "O") and
                           tag in ("E", "I")):
    return True
  return tag not in ("O", ".") and prev_type != type_


def entities(tags: Sequence[str], offset: int = 0) -> List[Entity]:
  """The entities of one sentence's tags (word indices + `offset`)."""
  out = []
  prev_tag, prev_type, begin = "O", "", 0
  for i, tag_text in enumerate(list(tags) + ["O"]):
    tag, type_ = _split(tag_text)
    if _ends(prev_tag, tag, prev_type, type_):
      out.append((prev_type, begin + offset, i - 1 + offset))
    if _starts(prev_tag, tag, prev_type, type_):
      begin = i
    prev_tag, prev_type = tag, type_
  return out


def _all_entities(sentences: Sequence[Sequence[str]]) -> Set[Entity]:
  found, offset = set(), 0
  for tags in sentences:
    found.update(entities(tags, offset))
    offset += len(tags) + 1  # one "O" between sentences, as seqeval joins
  return found


def _prf(correct: int, predicted: int, true: int) -> Dict[str, float]:
  p = correct / predicted if predicted else 0.0
  r = correct / true if true else 0.0
  return {"precision": p, "recall": r,
          "f1": 2 * p * r / (p + r) if p + r else 0.0}


def entity_scores(true: Sequence[Sequence[str]],
                  predicted: Sequence[Sequence[str]]) -> Dict[str, float]:
  """Micro-averaged precision / recall / f1 over all entities, the same per
  type ("<TYPE>_f1", ...), entity counts, and word accuracy."""
  if [len(t) for t in true] != [len(p) for p in predicted]:
    raise ValueError("true and predicted tags differ in length")
  gold, guess = _all_entities(true), _all_entities(predicted)
  correct = gold & guess
  scores = _prf(len(correct), len(guess), len(gold))
  for type_ in sorted({e[0] for e in gold | guess}):
    of = lambda found, t=type_: sum(e[0] == t for e in found)  # noqa: E731
    for name, value in _prf(of(correct), of(guess), of(gold)).items():
      scores[f"{type_}_{name}"] = value
  words = sum(len(t) for t in true)
  hits = sum(a == b for t, p in zip(true, predicted) for a, b in zip(t, p))
  scores.update(num_true_entities=len(gold), num_predicted_entities=len(guess),
                word_accuracy=hits / words if words else 0.0)
  return scores
