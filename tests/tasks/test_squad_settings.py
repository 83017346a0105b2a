"""SQuAD run settings that would loop, or do nothing, are refused in one
line when the config is loaded: a negative doc_stride never finished
windowing."""

import pytest

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
