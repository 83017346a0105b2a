"""The environment of a user's shell, for tests that run an installed tool or
a served model the way a user would (not a test file).

os.environ without the repository on PYTHONPATH and without the suite's
TF_USE_LEGACY_KERAS=1 (set in tests/conftest.py to spare every test process
the import of Keras 3; a user's process has TensorFlow's default).
"""

import os

SUITE_ONLY = ("PYTHONPATH", "TF_USE_LEGACY_KERAS")


def environ(**extra):
  env = {k: v for k, v in os.environ.items() if k not in SUITE_ONLY}
  env.update(extra)
  return env
