"""Export settings: the `Params` dataclass a task's serving module is built
from (Model Garden's `serving_modules.*.Params`), and how a tool's flags
change them.

A task's serving params are a view of its experiment config: the config
fields marked `setting(serving=True)` (the text-in settings of
`TextInputConfig`, SQuAD's head and windows, a classifier's labels, ...)
become fields of the same name, default and flag (`view_of`), and
`from_config` reads them from a run's config. A params class declares only
what its config does not: facts the task derives from its data (the number
of labels) and settings only an export has (SQuAD's `max_windows`).

Flags may then change only the fields declared `export=True` (decoding and
display settings: they do not change what the weights mean). Any other flag
that disagrees with the run is refused naming the field, and a flag the
task's params do not have is refused: every word on the command line is
used or refused.
"""

import dataclasses
import functools
import math
from typing import Any, ClassVar, Dict, Mapping, Optional

from official.modeling.hyperparams import base_config

from albert_tf.core import settings
from albert_tf.core.settings import SAME_VOCAB, setting
from albert_toolkit import output_files
from data_prep import tokenization

# Settings naming a tokenizer file: the same content is the same setting.
TOKENIZER_FILES = ("spm_model_file", "vocab_file")


@dataclasses.dataclass
class TextInputConfig(base_config.Config):
  """How text becomes the model's inputs: the settings every fine-tuning
  data config and every text-in export share."""
  spm_model_file: str = setting(
      "", resume=SAME_VOCAB, serving=True,
      flag="SentencePiece model (data.spm_model_file; or --vocab_file; "
      "shipped in exports as an asset).")
  vocab_file: str = setting(
      "", resume=SAME_VOCAB, serving=True,
      flag="BERT WordPiece vocabulary, one token a line (data.vocab_file; "
      "or --spm_model_file; shipped in exports as an asset).")
  do_lower_case: bool = setting(True, serving=True, flag="Lowercase text "
                                "(data.do_lower_case; the released models: "
                                "true).")
  max_seq_length: int = setting(
      512, serving=True, flag="Packed length, [CLS] and [SEP] included, of "
      "the model's inputs and of text-in exports (data.max_seq_length).")


def view_of(config_cls):
  """Class decorator: `cls` as a dataclass with its own fields and the
  serving fields of `config_cls` (`setting(serving=True)`), each named by
  its leaf name with its one declaration's default, flag and export rule.
  `cls.config_paths` maps those to their dotted paths in `config_cls`
  (`from_config`). A field declared by both is refused.

  Args:
    config_cls: the experiment (or section) config dataclass viewed.
  """
  def wrap(cls):
    own = dict(cls.__dict__.get("__annotations__", {}))
    inherited = {f.name for f in dataclasses.fields(cls)} if (
        dataclasses.is_dataclass(cls)) else set()
    added, paths = {}, {}
    for s in settings.walk(config_cls):
      if not s.serving:
        continue
      name = s.path.rsplit(".", 1)[-1]
      if name in own or name in paths:
        raise TypeError(f"{cls.__name__}.{name} is declared by "
                        f"{config_cls.__name__} ({s.path}): declare it once")
      paths[name] = s.path
      if name not in inherited:
        added[name] = s.type
        setattr(cls, name, setting(
            s.default, resume=s.resume, flag=s.flag, flag_name=s.flag_name,
            choices=s.choices, serving=True, export=s.export))
    cls.__annotations__ = {**added, **own}
    cls = dataclasses.dataclass(cls)
    cls.config_paths = paths
    return cls
  return wrap


@view_of(TextInputConfig)
class ServingParams:
  """Settings of every text-in export."""

  config_paths: ClassVar[Dict[str, str]] = {}  # set by `view_of`

  @classmethod
  def from_config(cls, config, **resolved):
    """The params of a run's `config`: its serving fields, then `resolved`
    (what the task derives from the config and its data, e.g. the labels
    of the data when the config names none).

    Args:
      config: the run's experiment config (of the class `cls` views).
      **resolved: field values that replace or complete the config's.
    """
    values = {name: functools.reduce(getattr, path.split("."), config)
              for name, path in cls.config_paths.items()}
    return cls(**dict(values, **resolved))

  def validate(self) -> None:
    """Raises ValueError naming the first bad field (subclasses extend)."""
    if self.max_seq_length <= 0:
      raise ValueError(f"max_seq_length must be > 0, got "
                       f"{self.max_seq_length}")

  def check_text_in(self, what: str, model_config) -> None:
    """Text-in signatures need one tokenizer (the SentencePiece model or
    the WordPiece vocabulary) and a packed length the model's position
    table holds."""
    del what  # the error names the two flags
    tokenization.check_one_vocabulary(self.spm_model_file, self.vocab_file)
    if self.max_seq_length > model_config.max_position_embeddings:
      raise ValueError(f"max_seq_length {self.max_seq_length} exceeds the "
                       "model's max_position_embeddings "
                       f"{model_config.max_position_embeddings}")

  def same_value(self, field: str, current: Any, value: Any) -> bool:
    """Whether `value` means what `current` means (a tokenizer file moved
    elsewhere with the same content is the same tokenizer)."""
    if field in TOKENIZER_FILES and current and value:
      return current == value or (
          output_files.file_sha256(value) is not None and
          output_files.file_sha256(current) == output_files.file_sha256(value))
    return _same(current, value)

  def check_given(self, given: Mapping[str, Any]) -> None:
    """Raises naming a flag in `given` (the flags set) that has no effect
    with these settings (subclasses: e.g. SQuAD's windows when truncating)."""
    del given

  def check_change(self, field: str, value: Any) -> None:
    """Raises when changing settable `field` to `value` would change what
    the model's outputs mean (subclasses: e.g. reordered labels)."""
    del field, value


def _same(a, b) -> bool:
  if isinstance(a, float) and isinstance(b, float):
    return a == b or (math.isnan(a) and math.isnan(b))
  if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
    return list(a) == list(b)
  return a == b


def with_settings(params: ServingParams, given: Mapping[str, Any],
                  what: str, recorded_in: Optional[str] = None
                  ) -> ServingParams:
  """`params` with the `given` fields (flags that were set) applied.

  what: the export, for errors ("a classification export").
  recorded_in: the run directory `params` were derived from; then only
    `setting(export=True)` fields may differ from them.
  """
  fields = {f.name for f in dataclasses.fields(params)}
  # What a flag may change on a run's export (`setting(export=True)`).
  settable = settings.exportable(type(params))
  changes = {}
  for name, value in given.items():
    if name not in fields:
      raise ValueError(f"--{name} does not apply to {what} (its settings: "
                       f"{', '.join(sorted(fields))})")
    current = getattr(params, name)
    if params.same_value(name, current, value):
      if name in TOKENIZER_FILES:
        changes[name] = value  # the file that exists now
      continue
    if recorded_in is not None:
      if name not in settable:
        raise ValueError(
            f"{name} is {value!r} but the run record of {recorded_in} has "
            f"{current!r}; omit --{name} to use the run's value (settable "
            f"at export: {', '.join(sorted(settable)) or 'none'}"
            ")")
      params.check_change(name, value)
    changes[name] = value
  out = dataclasses.replace(params, **changes)
  out.validate()
  out.check_given(given)
  return out
