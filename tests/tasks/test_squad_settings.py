"""SQuAD run and export settings that would loop, or do nothing, are
refused in one line: a negative doc_stride never finished windowing, and
SQuAD 2.0's settings in a v1.1 run (or a threshold for the simple head's
export) were accepted and ignored."""

import pytest

from albert_tf.serving import serving_params
from albert_tf.tasks import question_answering
from tests.testing import finetune_testlib


def _config(**data):
  return finetune_testlib.tiny_finetune_config(
      question_answering.SquadExperimentConfig,
      dict(dict(max_seq_length=32), **data))


def test_negative_doc_stride_is_refused():
  with pytest.raises(ValueError) as e:
    _config(doc_stride=-1)
  assert str(e.value) == ("data.doc_stride must be >= 0 (0: one window per "
                          "question), got -1")
  assert _config(doc_stride=0).data.doc_stride == 0


@pytest.mark.parametrize("data,task,message", [
    ({"null_score_diff_threshold": -1.5}, {},
     "data.null_score_diff_threshold (--null_score_diff_threshold) is -1.5 "
     "but applies only to SQuAD 2.0 (--version_2_with_negative); omit it"),
    ({}, {"with_answerability": True},
     "task.with_answerability (--with_answerability) is True but applies "
     "only to SQuAD 2.0 (--version_2_with_negative); omit it"),
    ({"version_2_with_negative": True}, {"start_n_top": 3},
     "task.start_n_top is 3 but applies only with task.squad_head=xlnet "
     "(its beam); omit it"),
])
def test_a_setting_the_run_would_ignore_is_refused(data, task, message):
  """--null_score_diff_threshold in a v1.1 run was accepted and ignored."""
  with pytest.raises(ValueError) as e:
    finetune_testlib.tiny_finetune_config(
        question_answering.SquadExperimentConfig,
        dict(dict(max_seq_length=32), **data), **task)
  assert str(e.value) == message


def test_the_settings_are_taken_where_they_apply():
  v2 = finetune_testlib.tiny_finetune_config(
      question_answering.SquadExperimentConfig,
      {"max_seq_length": 32, "version_2_with_negative": True,
       "null_score_diff_threshold": -1.5}, with_answerability=True)
  assert (v2.data.null_score_diff_threshold, v2.task.with_answerability) == (
      -1.5, True)
  xlnet = finetune_testlib.tiny_finetune_config(
      question_answering.SquadExperimentConfig,
      {"max_seq_length": 32, "version_2_with_negative": True},
      squad_head="xlnet", start_n_top=3)
  assert xlnet.task.start_n_top == 3


def test_export_threshold_is_refused_for_the_simple_head():
  """The simple head's export has no threshold: the flag did nothing."""
  params = question_answering.SquadServingParams(max_seq_length=32,
                                                 max_query_length=8)
  with pytest.raises(ValueError) as e:
    serving_params.with_settings(params, {"null_score_diff_threshold": 1.0},
                                 "a squad export")
  assert str(e.value) == (
      "--null_score_diff_threshold applies to the export of the SQuAD 2.0 "
      "head (task.squad_head=xlnet) only, not to the simple head's (its "
      "answers carry answerable_probability with the answerability head)")
  xlnet = question_answering.SquadServingParams(
      max_seq_length=32, max_query_length=8, squad_head="xlnet")
  assert serving_params.with_settings(
      xlnet, {"null_score_diff_threshold": 1.0},
      "a squad export").null_score_diff_threshold == 1.0
