"""What an export is asked for (`ExportRequest`: export_savedmodel's flags)
and in which form (`ExportForm`), and the checks of a request that run
before any model is built: settings that apply to another kind, format or
precision, and weights that would not be the ones asked for.
"""

import dataclasses
import os
from typing import Any, Dict, List, Optional

from albert_tf.checkpoints import paths
from albert_tf.core import base_task
from albert_tf.serving import export_lib
from albert_tf.serving import lite_export
from albert_tf.tasks import pretraining


@dataclasses.dataclass
class ExportForm:
  """What an export writes besides its kind: the format (`savedmodel`,
  `tflite`), the precision, and for a .tflite what it says it came from
  (`source`) and int8's calibration examples."""
  export_format: str = "savedmodel"
  precision: str = "float32"
  source: Dict[str, Any] = dataclasses.field(default_factory=dict)
  # int8: examples of the run's own data (dicts of numpy ids, one example).
  calibration_examples: Optional[List[Dict[str, Any]]] = None



@dataclasses.dataclass
class ExportRequest:
  """An export as export_savedmodel's flags give it (None: not given)."""
  export_dir: str
  model_dir: str = ""
  checkpoint: str = ""
  export_kind: Optional[str] = None
  # A serving task name (`serving_task_names()`), without a run directory.
  task: Optional[str] = None
  version: Optional[int] = None
  random_init: bool = False
  allow_random_head: bool = False
  # Model config files and overrides (may not change a run's model).
  config_files: List[str] = dataclasses.field(default_factory=list)
  params_override: str = ""
  # Serving params fields that were given (`ServingParams` and subclasses).
  settings: Dict[str, Any] = dataclasses.field(default_factory=dict)
  # The preprocessing export only.
  truncation: Optional[str] = None
  max_first_segment_length: Optional[int] = None
  # What is written (a SavedModel or a .tflite, in which precision:
  # serving/lite_export.py); the export adds the weights' source to a copy.
  form: ExportForm = dataclasses.field(default_factory=ExportForm)
  # How many examples of the run's data calibrate an int8 .tflite.
  representative_examples: Optional[int] = None


def check_preprocessing_only(request: ExportRequest, kind: str) -> None:
  if kind == export_lib.PREPROCESSING_EXPORT:
    # first_fixed without a cap would give the first segment everything.
    if ((request.truncation == "first_fixed") !=
        (request.max_first_segment_length is not None)):
      raise ValueError("--max_first_segment_length and --truncation="
                       "first_fixed go together (the cap on the first "
                       "segment); give both or neither")
    return
  for name in ("truncation", "max_first_segment_length"):
    if getattr(request, name) is not None:
      raise ValueError(f"--{name} applies to --export_kind=preprocessing "
                       f"only, not {kind}")


# The kinds whose signatures take ids of any length, not text.
IDS_IN_KINDS = (base_task.ENCODER_EXPORT, pretraining.PRETRAINING_EXPORT)


def check_encoder_settings(request: ExportRequest, kind: str,
                            has_tokenizer: bool) -> None:
  """The encoder and pretraining exports take ids of any length: text
  settings they would accept and ignore are refused (do_lower_case is
  recorded beside a tokenizer file, the TF-Hub convention)."""
  if kind not in IDS_IN_KINDS:
    return
  if "max_seq_length" in request.settings:
    raise ValueError(f"--max_seq_length does not apply to the {kind} export "
                     "(its signatures take ids of any length up to "
                     "max_position_embeddings)")
  if "do_lower_case" in request.settings and not has_tokenizer:
    raise ValueError(f"--do_lower_case does not apply to the {kind} export "
                     "without --spm_model_file or --vocab_file (it is "
                     "recorded beside the tokenizer file)")


def check_weights(request: ExportRequest) -> None:
  """--random_init only where no checkpoint would be restored: with one,
  which weights are exported would depend on the path taken."""
  if not request.random_init:
    return
  if request.checkpoint:
    raise ValueError("--random_init and --checkpoint: random weights or the "
                     "checkpoint's, not both; drop one")
  if request.model_dir:
    found = paths.checkpoint_candidates(os.path.join(
        request.model_dir, paths.RUN_CHECKPOINT_SUBDIR)) or [
            p for p in [paths.latest_checkpoint(request.model_dir)] if p]
    if found:
      raise ValueError(f"--random_init with --model_dir {request.model_dir}, "
                       f"which has checkpoints ({found[0]}); drop "
                       "--random_init to export them")


def check_form(request: ExportRequest) -> None:
  """A format, precision and kind that make sense together."""
  form = request.form
  lite_export.check_precision(form.export_format, form.precision)
  if (request.representative_examples is not None and
      form.precision != "int8"):
    raise ValueError("--representative_examples calibrates --precision=int8 "
                     f"only, not {form.precision}")
  if (request.representative_examples is not None and
      request.representative_examples < 1):
    raise ValueError("--representative_examples must be >= 1, got "
                     f"{request.representative_examples}")
  if (request.export_kind == export_lib.PREPROCESSING_EXPORT and
      (form.export_format, form.precision) != ("savedmodel", "float32")):
    raise ValueError("--export_kind=preprocessing is a float32 SavedModel "
                     "only (it has no weights; a .tflite of a task's serving "
                     "kind takes text itself)")
