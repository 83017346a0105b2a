"""The suite's garbage collector setting, for the pytest workers
(tests/conftest.py) and the tool servers whose forks run the tools
(tests/testing/tool_server.py); not a test file.

Building TensorFlow graphs makes many short-lived objects, and each
collection rescanned every object the imports had made. Freezing those
(once the tests are collected; once a server has preloaded) and a less
frequent youngest generation: exporting 2 small serving models 3 times took
9.2 CPU-s, 8.1 this way. Higher thresholds, (50000, 20, 100), saved more but
let dead graphs pile up until one collection took tens of seconds.
"""

import gc

THRESHOLDS = (10_000, 10, 10)


def settle():
  """Freezes the objects made so far and sets THRESHOLDS."""
  gc.freeze()
  gc.set_threshold(*THRESHOLDS)
