"""Display names of a classifier's classes: what a user may change.

A classifier's output i is the class the training data called
`recorded[i]`. Export (and fine-tuning continued from a run) may rename the
classes for serving (`--label_names=negative,positive` for "0","1"), but a
name that was a class in training must keep its index: `1,0` would swap the
labels and invert every served answer. Names must be non-empty and distinct,
or two outputs would be served as the same answer.
"""

from typing import List, Optional, Sequence


def check_names(names: Sequence[str], flag: str = "label_names") -> List[str]:
  """Refuses empty or repeated names (ValueError naming them)."""
  names = [str(n) for n in names]
  for i, name in enumerate(names):
    if not name.strip():
      raise ValueError(f"{flag}: name {i} is empty ({','.join(names)!r}); "
                       "every class needs a name")
  for i, name in enumerate(names):
    if name in names[:i]:
      raise ValueError(f"{flag}: {name!r} is given twice "
                       f"({','.join(names)!r}); class names must differ")
  return names


def check_renaming(given: Sequence[str], recorded: Optional[Sequence[str]],
                   flag: str = "label_names") -> List[str]:
  """`given` names for the classes recorded as `recorded` (in output order).

  Renaming in the same order is accepted; a recorded name given at another
  index (a permutation, or a partial one) is refused: it would serve class
  j's outputs under class i's name.
  """
  given = check_names(given, flag)
  if recorded is None:
    return given
  recorded = [str(n) for n in recorded]
  if len(given) != len(recorded):
    raise ValueError(f"{flag} has {len(given)} names but the model has "
                     f"{len(recorded)} classes ({','.join(recorded)})")
  for i, name in enumerate(given):
    if name in recorded and recorded.index(name) != i:
      raise ValueError(
          f"{flag}: {name!r} is output {i} but training called output "
          f"{recorded.index(name)} {name!r} (recorded "
          f"{','.join(recorded)}); give the names in the recorded order")
  return given
