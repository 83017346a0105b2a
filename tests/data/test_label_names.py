"""Class names given at export: renaming in the recorded order only.

`--label_names=1,0` for a run trained on "0","1" would serve every answer
inverted, so it is refused, as are `same,same` and `,x`."""

import pytest

from albert_tf.data import label_names
from albert_tf.serving import serving_params
from albert_tf.tasks import sentence_prediction


def run_params(names):
  """A classifier run's export params, as the task derives them."""
  return sentence_prediction.SentenceServingParams(
      num_labels=len(names), label_names=list(names))


def export_names(params, given):
  """The label names of a run's export given `--label_names`."""
  settings = {} if given is None else {"label_names": given}
  return serving_params.with_settings(
      params, settings, "a classification export",
      recorded_in="/runs/glue").label_names


@pytest.mark.parametrize("given, match", [
    (["1", "0"], r"label_names: '1' is output 0 but training called output 1"),
    (["x", "0"], r"'0' is output 1 but training called output 0"),
    (["same", "same"], r"'same' is given twice"),
    (["", "x"], r"name 0 is empty"),
    ([" ", "x"], r"name 0 is empty"),
    (["a", "b", "c"], r"3 names but the model has 2 classes"),
])
def test_export_refuses_names_that_change_the_classes(given, match):
  with pytest.raises(ValueError, match=match):
    export_names(run_params(["0", "1"]), given)


def test_renaming_in_the_same_order_is_kept():
  rec = run_params(["entailment", "not_entailment"])
  assert export_names(rec, ["yes", "no"]) == ["yes", "no"]
  # The recorded names themselves, and one kept in place, are renamings too.
  assert export_names(rec, ["entailment", "other"]) == ["entailment", "other"]
  assert export_names(rec, None) == ["entailment", "not_entailment"]


def test_names_without_a_record_must_still_be_distinct_and_non_empty():
  assert label_names.check_renaming(["b", "a"], None) == ["b", "a"]
  with pytest.raises(ValueError, match=r"'a' is given twice"):
    label_names.check_renaming(["a", "a"], None)
  with pytest.raises(ValueError, match=r"name 1 is empty"):
    label_names.check_names(["a", ""])
