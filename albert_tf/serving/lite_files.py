"""The files of a .tflite export: which `model.tflite` a path means, and
its `model.json` read and checked against it.

  <export_dir>/<version>/model.tflite   the flatbuffer
  <export_dir>/<version>/model.json     what it is (lite_export writes it)

A path is the file, its version directory or the export directory (its
highest version holding a model.tflite; a newer version that holds none,
e.g. a SavedModel, is named in a note rather than passed over in silence).
A model.json is read only as a JSON object in UTF-8, and what it records of
the file beside it (size, signatures, labels) must match that file: a
model.json copied from another export would otherwise give wrong casing,
vocabulary limits and label names without a word. Errors are ValueErrors of
one line naming the file (and the field).

A model.json must hold what the runner's checks need (`REQUIRED`, and a
`text` section when a signature takes text): without them the checks would
be off without a word. Its `sha256` binds it to the file: two exports of
one architecture have the same size and signatures (a model.json written
before it recorded one is read with a warning, bound by size alone).
"""

import os
from typing import Optional, Tuple

from absl import logging
import numpy as np

from albert_tf.checkpoints import paths
from albert_toolkit import output_files
from albert_toolkit import text_files

TFLITE_NAME = "model.tflite"
METADATA_NAME = "model.json"  # what the .tflite is, beside it
# (section, field) -> what the runner checks with it (for the refusal).
REQUIRED = {
    ("", "size_bytes"): "the file's size",
    ("", "signatures"): "the file's signatures",
    ("model_config", "vocab_size"): "input_word_ids' range",
    ("model_config", "type_vocab_size"): "input_type_ids' range",
    ("model_config", "max_position_embeddings"): "the sequence length",
}
# Required when a signature takes text.
REQUIRED_TEXT = {
    ("text", "do_lower_case"): "the casing of text",
    ("text", "tokenizer"): "the text's pre-rules",
}
# Required when a signature takes choices ([batch, choices, seq] ids).
REQUIRED_CHOICES = {
    ("serving_params", "num_choices"): "the number of choices",
}


def _what_is(directory):
  """What a version directory holds, for messages."""
  if paths.is_saved_model_dir(directory):
    return f"a SavedModel ({paths.SAVED_MODEL_FILE}), not a .tflite"
  return f"no {TFLITE_NAME}"


def resolve(path) -> Tuple[str, Optional[str]]:
  """(the .tflite file `path` means, a note or None).

  `path`: the file, a version directory, or an export directory (its
  highest integer version holding a model.tflite). The note names the
  newer versions passed over and what they are. A version directory named
  explicitly that holds a SavedModel is refused, saying so.
  """
  if os.path.isfile(path):
    return path, None
  candidate = os.path.join(path, TFLITE_NAME)
  if os.path.isfile(candidate):
    return candidate, None
  if paths.is_saved_model_dir(path):
    raise ValueError(f"{path}: {_what_is(path)}; run it with TF Serving, or "
                     "export with --format=tflite")
  versions = paths.existing_versions(path)
  newer = []
  for version in reversed(versions):
    directory = os.path.join(path, str(version))
    candidate = os.path.join(directory, TFLITE_NAME)
    if os.path.isfile(candidate):
      note = None
      if newer:
        note = (f"version {version} of {path} runs; newer "
                + "; ".join(f"version {v}: {_what_is(d)}" for v, d in newer))
      return candidate, note
    newer.append((version, directory))
  where = ("; ".join(f"version {v}: {_what_is(d)}" for v, d in newer)
           if newer else "no integer version directory either")
  raise ValueError(f"{path}: no {TFLITE_NAME} there ({where}); pass the "
                   "file, its version directory or the export directory")


def read_metadata(info_path):
  """The JSON object of a model.json; one-line errors naming the file."""
  return text_files.read_json_object(info_path, " (what the export is)")


def section(info, name, info_path):
  """`info[name]`: a JSON object, or {} when absent; anything else is
  refused naming the field."""
  value = info.get(name)
  if value is None:
    return {}
  if not isinstance(value, dict):
    raise ValueError(f"{info_path}: {name} must be a JSON object, got a "
                     f"{type(value).__name__}")
  return value


def check_required(info, info_path, signatures):
  """Raises ValueError (one line naming the file and field) when the
  model.json `info` lacks a field the runner's checks need, or holds one
  of the wrong type. `signatures`: the file's (`signature_json`)."""
  for name in ("model_config", "text", "serving_params"):
    section(info, name, info_path)  # a present section must be an object
  inputs = [spec for sides in signatures.values()
            for spec in sides["inputs"].values()]
  required = dict(REQUIRED)
  text = ("bytes", "str", "object")  # dtype names of string inputs
  if any(dtype in text for dtype, _ in inputs):
    required.update(REQUIRED_TEXT)
  if any(dtype not in text and len(shape) == 3 for dtype, shape in inputs):
    required.update(REQUIRED_CHOICES)
  for (name, field), use in required.items():
    where = section(info, name, info_path) if name else info
    key = f"{name}.{field}" if name else field
    if field not in where:
      raise ValueError(f"{info_path}: no {key} (the runner checks {use} "
                       "with it); re-export, or keep the export's version "
                       "directory whole")
    value = where[field]
    want = _FIELD_TYPES.get(field, int)
    if not isinstance(value, want) or (want is int and
                                       (isinstance(value, bool) or
                                        value < 1)):
      raise ValueError(f"{info_path}: {key} must be "
                       + ("an integer >= 1" if want is int else
                          f"a JSON {_JSON_TYPES[want]}")
                       + f", got {value!r}")


_FIELD_TYPES = {"signatures": dict, "do_lower_case": bool,
                "tokenizer": str}  # the others: integers >= 1
_JSON_TYPES = {dict: "object", str: "string", bool: "boolean"}


def signature_json(details):
  """`lite.signature_details` as model.json records it:
  {signature: {"inputs" / "outputs": {name: [dtype name, shape]}}}."""
  return {name: {side: {key: [np.dtype(dtype).name, [int(x) for x in shape]]
                        for key, (dtype, shape) in sorted(specs.items())}
                 for side, specs in sides.items()}
          for name, sides in details.items()}


def check_metadata(info, info_path, tflite_path, details):
  """Raises ValueError (one line naming the field) when the model.json
  `info` does not describe the .tflite beside it: a field the checks need
  missing, another size or sha256, other signatures, or label names /
  num_labels / num_choices that are not the width of its logits.
  `details`: the interpreter's `lite.signature_details`."""
  def refuse(field, recorded, actual):
    raise ValueError(f"{info_path} is not the model.json of {tflite_path}: "
                     f"{field} is {recorded} there but {actual} in the "
                     "file; keep each export's version directory whole")

  actual = signature_json(details)
  check_required(info, info_path, actual)
  size = os.path.getsize(tflite_path)
  if info["size_bytes"] != size:
    refuse("size_bytes", info["size_bytes"], size)
  recorded = info["signatures"]
  if sorted(recorded) != sorted(actual):
    refuse("signatures", ", ".join(sorted(recorded)),
           ", ".join(sorted(actual)))
  for name in sorted(actual):
    if recorded[name] != actual[name]:
      refuse(f"signatures.{name}", "other inputs or outputs",
             _describe(actual[name]))
  # Last: the only check that reads the whole file.
  recorded_sha = info.get("sha256")
  if recorded_sha is None:
    logging.warning("%s records no sha256 of %s (an export made before "
                    "model.json held one): bound to the file by its size "
                    "and signatures only; re-export to bind it by content",
                    info_path, tflite_path)
  elif not isinstance(recorded_sha, str):
    raise ValueError(f"{info_path}: sha256 must be a JSON string, got "
                     f"{recorded_sha!r}")
  else:
    digest = output_files.file_sha256(tflite_path)
    if recorded_sha != digest:
      refuse("sha256", recorded_sha[:12] + "...", digest[:12] + "...")
  params = section(info, "serving_params", info_path)
  widths = {spec[1][-1] for sides in actual.values()
            for key, spec in sides["outputs"].items()
            if key == "logits" and len(spec[1]) == 2}
  for field in ("num_labels", "label_names", "num_choices"):
    value = params.get(field)
    if value in (None, []) or not widths:  # [] names: "0", "1", ...
      continue
    count = len(value) if isinstance(value, list) else value
    if count not in widths:
      refuse(f"serving_params.{field}",
             f"{count} names" if field == "label_names" else value,
             f"{min(widths)} logits")


def _describe(sides):
  return "; ".join(f"{side}: " + ", ".join(sorted(specs))
                   for side, specs in sorted(sides.items()))
