"""Settings: each config field declared once, with what the tools need of it.

A field of a config dataclass made with `setting(...)` carries, in its
`dataclasses.field` metadata:

  resume   how a resumed run treats a change: SAFE (may change: run length,
           intervals, evaluation, devices), DATA_POSITION (may change when
           the saved input position is not restored), SAME_VOCAB (may move
           to a file of the recorded SentencePiece model's content), FIXED
           (refused; the default, also of a plain field).
  flag     the help of its command-line flag (None: no flag); `flag_name`
           when the flag's name is not the field's, `choices` for an enum.
  serving  whether it is also a setting of the task's exports: the task's
           serving params are a view of its config's serving fields
           (serving/serving_params.py `view_of`), by their leaf name.
  export   whether an export of a run may change it (serving params).

The run record's resume rules (core/run_record.py), the run tools' and the
exporter's flags (cli_flags.py) are derived by walking the config classes
(`walk`): a new task declares its settings in its config and nowhere else.
"""

import dataclasses
import typing
from typing import Any, Dict, Iterator, Optional, Sequence

SAFE = "safe"
DATA_POSITION = "data_position"
SAME_VOCAB = "same_vocab"
FIXED = "fixed"
RESUME_RULES = (SAFE, DATA_POSITION, SAME_VOCAB, FIXED)


def setting(default: Any = dataclasses.MISSING, *, resume: str = FIXED,
            flag: Optional[str] = None, flag_name: Optional[str] = None,
            choices: Optional[Sequence[str]] = None, serving: bool = False,
            export: bool = False):
  """A dataclass field with its resume rule, flag, serving and export rules
  (see the module docstring). A list default is copied per instance."""
  if resume not in RESUME_RULES:
    raise ValueError(f"resume must be one of {RESUME_RULES}, got {resume!r}")
  metadata = {"resume": resume, "flag": flag, "flag_name": flag_name,
              "choices": tuple(choices) if choices else None,
              "serving": serving, "export": export}
  if isinstance(default, list):
    return dataclasses.field(default_factory=lambda: list(default),
                             metadata=metadata)
  return dataclasses.field(default=default, metadata=metadata)


@dataclasses.dataclass(frozen=True)
class Setting:
  """One leaf field of a config class, with its metadata."""
  path: str  # "data.max_seq_length"
  type: Any  # the field's type, Optional[...] unwrapped
  default: Any
  resume: str = FIXED
  flag: Optional[str] = None  # the flag's help
  flag_name: str = ""
  choices: Optional[Sequence[str]] = None
  serving: bool = False
  export: bool = False


def _unwrap(annotation):
  """Optional[X] -> X."""
  args = [a for a in typing.get_args(annotation) if a is not type(None)]
  if typing.get_origin(annotation) is typing.Union and len(args) == 1:
    return args[0]
  return annotation


def walk(config_cls, prefix: str = "") -> Iterator[Setting]:
  """Every leaf field of dataclass `config_cls` (nested sections walked),
  as a Setting named by its dotted path."""
  for field in dataclasses.fields(config_cls):
    kind = _unwrap(field.type)
    if dataclasses.is_dataclass(kind):
      yield from walk(kind, f"{prefix}{field.name}.")
      continue
    # A plain field has no metadata: the Setting's defaults.
    yield Setting(f"{prefix}{field.name}", kind, default_of(field), **dict(
        field.metadata,
        flag_name=field.metadata.get("flag_name") or field.name))


def default_of(field: dataclasses.Field) -> Any:
  """A dataclass field's default value (a fresh one of a factory)."""
  return (field.default_factory() if field.default_factory
          is not dataclasses.MISSING else field.default)


def resume_rules(config_cls) -> Dict[str, str]:
  """Dotted path -> resume rule of every field of `config_cls`."""
  return {s.path: s.resume for s in walk(config_cls)}


def flagged(config_cls) -> Dict[str, Setting]:
  """Flag name -> Setting of the fields of `config_cls` that have a flag."""
  return {s.flag_name: s for s in walk(config_cls) if s.flag is not None}


def exportable(config_cls):
  """Names of the fields an export of a run may change."""
  return frozenset(s.path for s in walk(config_cls) if s.export)
