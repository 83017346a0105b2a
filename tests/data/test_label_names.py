"""Class names given at export: renaming in the recorded order only.

`--label_names=1,0` for a run trained on "0","1" used to be accepted and
served every answer inverted; `same,same` and `,x` were accepted too."""

import pytest

from albert_tf.core import run_record
from albert_tf.data import label_names


def record(names):
  return run_record.RunRecord(model_dir="/runs/glue", task="classification",
                              facts={"label_names": names}, config={})


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
    run_record.check_fact(record(["0", "1"]), "label_names", given)


def test_renaming_in_the_same_order_is_kept():
  rec = record(["entailment", "not_entailment"])
  assert run_record.check_fact(rec, "label_names", ["yes", "no"]) == [
      "yes", "no"]
  # The recorded names themselves, and one kept in place, are renamings too.
  assert run_record.check_fact(rec, "label_names",
                               ["entailment", "other"]) == [
                                   "entailment", "other"]
  assert run_record.check_fact(rec, "label_names", None) == [
      "entailment", "not_entailment"]


def test_names_without_a_record_must_still_be_distinct_and_non_empty():
  assert label_names.check_renaming(["b", "a"], None) == ["b", "a"]
  with pytest.raises(ValueError, match=r"'a' is given twice"):
    label_names.check_renaming(["a", "a"], None)
  with pytest.raises(ValueError, match=r"name 1 is empty"):
    label_names.check_names(["a", ""])
