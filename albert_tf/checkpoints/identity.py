"""What a checkpoint is, saved inside the checkpoint itself.

Every checkpoint a run writes holds, besides the weights, one string
variable `identity`: JSON of the model config, the task (its name and
module), the tokenizer (its file, do_lower_case and the sha256 of the
SentencePiece model or WordPiece file) and the number of updates. It
travels with the `.index`/`.data` files, so a checkpoint copied out of its
run, or paired with another run's record, still says what it is; resume,
export, conversion and warm start check it first (`check`), and a
disagreement is refused naming the field.

Checkpoints without one (older runs, releases, other layouts) read as None:
the callers then fall back to the run record or the albert_config.json
beside the checkpoint. An encoder SavedModel (export_savedmodel) reads as
the model config, vocabulary and casing its assets carry, checked the same
way: warm start from an export of another model or vocabulary is refused as
from a checkpoint.
"""

import json
import os
from typing import Any, Dict, Mapping, Optional

from google.protobuf import message
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from albert_tf.checkpoints import paths
from albert_tf.modeling import albert_config
from albert_toolkit import output_files

# The object name in the checkpoint and the tensor key it is saved under.
IDENTITY_NAME = "identity"
_TENSOR_KEY = f"{IDENTITY_NAME}/.ATTRIBUTES/VARIABLE_VALUE"
# What an encoder export names its config and vocabulary assets (a
# SentencePiece model or a WordPiece vocab.txt) and its casing variable
# (albert_tf/serving/serving_modules.py: ModelModule, the TF-Hub names).
CONFIG_ASSET = "albert_config_file"
_VOCAB_ASSETS = ("sp_model_file", "vocab_file")
_LOWER_CASE = "do_lower_case"
# Model fields that do not change the inference graph or the weights'
# meaning (a run may change them).
TRAINING_ONLY_MODEL_FIELDS = frozenset({
    "hidden_dropout_prob", "attention_probs_dropout_prob",
    "initializer_range", "gradient_checkpointing"})
# Model fields a warm start with init_from_group0 may change: it fills the
# config's groups from the checkpoint's group 0 (blocks by their index in
# the group, so inner_group_num must match).
GROUP0_FIELDS = frozenset({"num_hidden_groups"})


def _saved_model_facts(directory: str) -> Dict[str, Any]:
  """The model config, vocabulary and casing an encoder export carries
  (serving's ModelModule: the `albert_config_file` and `sp_model_file` or
  `vocab_file` assets, the `do_lower_case` variable); read from
  saved_model.pb and its variables, without loading the graph."""
  proto = saved_model_pb2.SavedModel()
  with tf.io.gfile.GFile(os.path.join(directory, "saved_model.pb"),
                         "rb") as f:
    proto.ParseFromString(f.read())
  meta = proto.meta_graphs[0]
  nodes = meta.object_graph_def.nodes
  children = {c.local_name: nodes[c.node_id] for c in nodes[0].children}

  def asset_path(name):
    node = children.get(name)
    if node is None or node.WhichOneof("kind") != "asset":
      return None
    index = node.asset.asset_file_def_index
    return os.path.join(directory, "assets",
                        meta.asset_file_def[index].filename)

  facts, found = {}, {"source": "SavedModel"}
  for vocab in filter(None, map(asset_path, _VOCAB_ASSETS)):
    facts[VOCAB_SHA256] = output_files.file_sha256(vocab)
  if children.get(_LOWER_CASE) is not None:
    reader = tf.train.load_checkpoint(
        os.path.join(directory, "variables", "variables"))
    key = f"{_LOWER_CASE}/.ATTRIBUTES/VARIABLE_VALUE"
    if reader.has_tensor(key):
      facts["do_lower_case"] = bool(reader.get_tensor(key))
  found["facts"] = facts
  config_file = asset_path(CONFIG_ASSET)
  if config_file:
    found["config_file"] = config_file
  return found


# The fact naming the vocabulary the weights belong to: the sha256 of its
# SentencePiece model or WordPiece vocab.txt.
VOCAB_SHA256 = "vocab_sha256"
# Facts older records and checkpoints name otherwise (`current_facts` reads
# them under today's names).
_OLD_FACT_NAMES = {"spm_sha256": VOCAB_SHA256}


def current_facts(facts: Mapping[str, Any]) -> Dict[str, Any]:
  """`facts` with the names older versions wrote replaced by today's."""
  facts = dict(facts)
  for old, new in _OLD_FACT_NAMES.items():
    if old in facts:
      value = facts.pop(old)
      facts.setdefault(new, value)
  return facts


def read(path: str) -> Optional[Dict[str, Any]]:
  """The identity of checkpoint `path` (any form resolve_checkpoint takes)
  or of the encoder SavedModel there (its model config, vocabulary and
  casing, "source": "SavedModel", "config_file": its config asset), or None
  when it carries none."""
  try:
    kind, source = paths.resolve_source(path)
    if kind == "saved_model":
      exported = _saved_model_facts(source)
    else:
      prefix = source
      reader = tf.train.load_checkpoint(prefix)
      value = (reader.get_tensor(_TENSOR_KEY)
               if reader.has_tensor(_TENSOR_KEY) else b"")
  # No checkpoint (CheckpointConversionError is a ValueError), or an
  # unreadable file: the restore reports it.
  except (tf.errors.OpError, ValueError, IndexError, message.DecodeError):
    return None
  if kind == "saved_model":
    if "config_file" in exported:  # a bad one is an error naming the file
      exported["model"] = albert_config.load_model_config(
          [exported["config_file"]]).as_dict()
    return exported
  text = value.decode("utf-8") if isinstance(value, bytes) else str(value)
  if not text:
    return None
  try:
    stamped = json.loads(text)
  except json.JSONDecodeError as e:
    raise ValueError(f"{prefix}: unreadable checkpoint identity ({e})"
                     ) from None
  if isinstance(stamped, dict) and isinstance(stamped.get("facts"), dict):
    stamped["facts"] = current_facts(stamped["facts"])
  return stamped


def differences(recorded: Mapping[str, Any], given: Mapping[str, Any],
                ignored=frozenset()):
  """(field, recorded, given) of the fields whose values differ."""
  for field in sorted((set(recorded) | set(given)) - set(ignored)):
    if recorded.get(field) != given.get(field):
      yield field, recorded.get(field), given.get(field)


def model_differences(recorded: Mapping[str, Any],
                      given: Mapping[str, Any], ignored=frozenset()):
  """[(field, recorded, given)] of model fields that change the model (but
  `ignored`)."""
  return list(differences(recorded, given,
                          TRAINING_ONLY_MODEL_FIELDS | frozenset(ignored)))


# Facts that say which model and tokenizer the weights belong to (the rest,
# e.g. paths and lengths of the data, may differ between uses): each with
# its name in an error and why it may not differ.
IDENTITY_FACTS = {
    "task": ("task", "the weights belong to another task"),
    VOCAB_SHA256: ("the vocabulary (sha256)",
                   "the weights belong to another vocabulary"),
    "do_lower_case": ("do_lower_case", "lower-casing is part of the "
                      "tokenisation the weights were trained with; set "
                      "data.do_lower_case (--do_lower_case) to the "
                      "checkpoint's"),
}


def check(path: str, model: Optional[Mapping[str, Any]] = None,
          facts: Optional[Mapping[str, Any]] = None,
          what: str = "", ignored=frozenset()) -> Optional[Dict[str, Any]]:
  """Refuses checkpoint `path` when its identity disagrees with `model` (a
  model config dict; fields in `ignored` aside) or with `facts` (task,
  vocab_sha256; a fact either side lacks is not compared). Returns the
  identity (None: it has none).

  what: whose config / facts these are, for the error ("the run record of
  runs/a").
  """
  identity = read(path)
  if identity is None:
    return None
  source = what or "the given config"
  exported = identity.get("source") == "SavedModel"
  holder, record = ((f"SavedModel {path}", "its assets") if exported else
                    (f"checkpoint {path}", "its own record"))
  # An export without its config asset has no model to compare.
  if model is not None and "model" in identity:
    for field, saved, given in model_differences(identity["model"],
                                                 model, ignored):
      if exported:
        raise ValueError(
            f"model.{field} is {given!r} in {source} but SavedModel {path} "
            f"was exported with {saved!r} ({identity['config_file']}); use "
            "the export's config")
      raise ValueError(
          f"model.{field} is {given!r} in {source} but checkpoint {path} "
          f"was trained with {saved!r} (its own record); use the "
          "checkpoint's run or its config")
  saved_facts = identity.get("facts", {})
  for name, (label, why) in IDENTITY_FACTS.items():
    saved, given = saved_facts.get(name), (facts or {}).get(name)
    if saved is not None and given is not None and saved != given:
      raise ValueError(
          f"{label} is {given!r} in {source} but {holder} has "
          f"{saved!r} ({record}); {why}")
  return identity


def recorded_facts(path: str) -> Dict[str, Any]:
  """The facts the identity of checkpoint `path` records ({} when it
  carries none)."""
  return (read(path) or {}).get("facts") or {}


def with_recorded_casing(path: str, settings: Mapping[str, Any]
                         ) -> Dict[str, Any]:
  """`settings` with do_lower_case, when not given, taken from the casing
  checkpoint `path`'s identity records (an export without a run record)."""
  settings = dict(settings)
  if path and "do_lower_case" not in settings:
    recorded = recorded_facts(path).get("do_lower_case")
    if recorded is not None:
      settings["do_lower_case"] = recorded
  return settings


class RunIdentity:
  """The identity a run stamps on each checkpoint it saves, and checks on
  each checkpoint it restores."""

  def __init__(self, model: Mapping[str, Any], facts: Mapping[str, Any],
               what: str):
    # A string variable: created outside any strategy scope (host only).
    self.variable = tf.Variable("", dtype=tf.string, trainable=False,
                                name=IDENTITY_NAME)
    self.model, self.facts, self.what = dict(model), dict(facts), what

  def stamp(self, updates: int) -> None:
    """Before a save: the identity (the model config, the task's run record
    facts: task, task_module, the tokenizer and its vocab_sha256; the update
    count)."""
    self.variable.assign(json.dumps(
        {"model": self.model, "facts": self.facts, "updates": int(updates)},
        sort_keys=True, default=str))

  def check(self, path: str) -> None:
    """Refuses checkpoint `path` unless it is this run's model, task and
    vocabulary (a checkpoint copied in, or a config changed under it)."""
    check(path, model=self.model, facts=self.facts, what=self.what)
