"""Export settings: the `Params` dataclass a task's serving module is built
from (Model Garden's `serving_modules.*.Params`), and how a tool's flags
change them.

Every export has the fields of `ServingParams`; a task subclasses it with
its own (labels, text fields, SQuAD windows, ...). A run's params come from
its recorded config (the task computes them); flags may then change only the
fields declared `export=True` (decoding and display settings: they do not
change what the weights mean). Any other flag that disagrees with the run is
refused naming the field, and a flag the task's params do not have is
refused: every word on the command line is used or refused.
"""

import dataclasses
import math
from typing import Any, Mapping, Optional

from albert_tf.core import settings
from albert_tf.core.settings import setting
from albert_toolkit import output_files
from data_prep import tokenization

# Settings naming a tokenizer file: the same content is the same setting.
TOKENIZER_FILES = ("spm_model_file", "vocab_file")


@dataclasses.dataclass
class ServingParams:
  """Settings of every text-in export."""
  seq_length: int = setting(128, flag="Packed length of text-in "
                            "signatures.")
  spm_model_file: str = setting("", flag="SentencePiece .model (shipped as "
                                "an asset).")
  vocab_file: str = setting("", flag="BERT WordPiece vocabulary (one token a line; shipped as an asset).")
  do_lower_case: bool = setting(True, flag="Lowercase text (default true).")

  def validate(self) -> None:
    """Raises ValueError naming the first bad field (subclasses extend)."""
    if self.seq_length <= 0:
      raise ValueError(f"seq_length must be > 0, got {self.seq_length}")

  def check_text_in(self, what: str, model_config) -> None:
    """Text-in signatures need one tokenizer (the SentencePiece model or
    the WordPiece vocabulary) and a packed length the model's position
    table holds."""
    del what  # the error names the two flags
    tokenization.check_one_vocabulary(self.spm_model_file, self.vocab_file)
    if self.seq_length > model_config.max_position_embeddings:
      raise ValueError(f"seq_length {self.seq_length} exceeds the model's "
                       "max_position_embeddings "
                       f"{model_config.max_position_embeddings}")

  def same_value(self, field: str, current: Any, value: Any) -> bool:
    """Whether `value` means what `current` means (a tokenizer file moved
    elsewhere with the same content is the same tokenizer)."""
    if field in TOKENIZER_FILES and current and value:
      return current == value or (
          output_files.file_sha256(value) is not None and
          output_files.file_sha256(current) == output_files.file_sha256(value))
    return _same(current, value)

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
  return out
