"""Imports every built-in task so each registers itself (tasks/registry.py).

Tools that rebuild a task by name (export_savedmodel, the run tools) import
this module; a task defined elsewhere registers when its own module is
imported (a run record names that module, see registry.task_of_record).
"""

# pylint: disable=unused-import
from albert_tf.tasks import multiple_choice
from albert_tf.tasks import pretraining
from albert_tf.tasks import question_answering
from albert_tf.tasks import sentence_prediction
from albert_tf.tasks import tagging
