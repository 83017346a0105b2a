"""The task registry (Model Garden's `official/core/task_factory.py` shape):
task name -> task class, each class carrying its experiment config class.

A task registers itself where it is defined:

  @registry.register_task
  class MyTask(base_task.Task):
    name = "my_task"
    config_cls = MyExperimentConfig
    ...

The run record keeps the task's name and the module that registered it, so
any tool can rebuild the task of a run directory (`task_of_record`), including
a task defined outside this package (its module is imported by name).
`albert_tf.tasks.all_tasks` imports the built-in tasks.
"""

import importlib
from typing import Dict, List, Optional, Type

from albert_tf.core import base_task
from albert_tf.core import experiment_config
from albert_tf.core import checkpoint_config
from albert_tf.core import run_record

_TASKS: Dict[str, Type[base_task.Task]] = {}


def register_task(task_cls: Type[base_task.Task]) -> Type[base_task.Task]:
  """Class decorator: registers `task_cls` under `task_cls.name`."""
  name = task_cls.name
  if not name:
    raise ValueError(f"{task_cls.__name__}: a registered task needs a name")
  known = _TASKS.get(name)
  if known is not None and known is not task_cls and (
      known.__module__, known.__qualname__) != (task_cls.__module__,
                                                task_cls.__qualname__):
    raise ValueError(f"task {name!r} is registered already by "
                     f"{known.__module__}.{known.__qualname__}")
  for attr in ("config_cls", "serving_params_cls"):
    if not isinstance(getattr(task_cls, attr), type) or getattr(
        task_cls, attr) is type(None):
      raise ValueError(f"task {name!r}: {task_cls.__name__}.{attr} must be "
                       "a class")
  _TASKS[name] = task_cls
  return task_cls


def task_names() -> List[str]:
  return sorted(_TASKS)


def tasks() -> List[Type[base_task.Task]]:
  """The registered task classes, in the order of their names."""
  return [_TASKS[name] for name in task_names()]


def get_task_cls(name: str, module: Optional[str] = None
                 ) -> Type[base_task.Task]:
  """The class registered as `name`; imports `module` first when given and
  the name is not registered yet (a task defined outside albert_tf)."""
  if name not in _TASKS and module:
    try:
      importlib.import_module(module)
    except ImportError as e:
      raise ValueError(f"task {name!r}: cannot import its module {module!r} "
                       f"({e}); put it on PYTHONPATH") from None
  if name not in _TASKS:
    raise ValueError(f"unknown task {name!r}; registered: {task_names()}")
  return _TASKS[name]


def task_for_serving_name(serving_task: str) -> Type[base_task.Task]:
  """The task whose export serves `serving_task` (`--task=classification`:
  the keys of each task's `serving_tasks`)."""
  for task_cls in tasks():
    if serving_task in task_cls.serving_tasks:
      return task_cls
  known = sorted(s for t in _TASKS.values() for s in t.serving_tasks)
  raise ValueError(f"unknown serving task {serving_task!r}; expected one of "
                   f"{known}")


def task_for_export_kind(kind: str) -> Type[base_task.Task]:
  """The one task that writes export `kind` (`--export_kind` without
  `--task`)."""
  owners = [t for t in _TASKS.values() if kind in t.export_kinds]
  if len(owners) != 1:
    raise ValueError(f"--export_kind={kind} needs --task (or --model_dir): "
                     f"{len(owners)} tasks export it")
  return owners[0]


def task_of_record(record: run_record.RunRecord, sources=(),
                   params_override: str = "") -> base_task.Task:
  """The task of a run rebuilt from its record: its registered class and
  its recorded experiment config. `sources` / `params_override` (model
  config files and overrides given to a tool) may not change the model: a
  difference is refused naming the field."""
  task_cls = get_task_cls(record.task, record.facts.get("task_module"))
  model, _ = checkpoint_config.model_config_for(sources, params_override,
                                                record=record)
  config = experiment_config.load_experiment_config(
      task_cls.config_cls, base=record.config,
      base_source=f"{record.model_dir}/{run_record.CONFIG_NAME}")
  config.model = model
  return task_cls(config, record.model_dir)
