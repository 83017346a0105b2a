"""The runnable examples in the public API's docstrings run and print what
they say (doctest), so the documentation cannot drift from the code."""

import doctest

import pytest

from albert_tf.modeling import albert_config
from albert_tf.modeling.models import albert_pretrainer
from albert_tf.modeling.networks import albert_encoder

MODULES = (albert_config, albert_encoder, albert_pretrainer)


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_docstring_examples_run(module):
  result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
  assert result.attempted > 0, f"{module.__name__} has no example"
  assert result.failed == 0
