"""The run record: what a run directory was started with, checked on resume.

A run directory holds, written once by the chief at the first start (each
file to a temporary name, then renamed):

  experiment_config.yaml   the resolved experiment config (every field).
  run_record.json          the task's name and the module that registers it
                           (tasks/registry.py rebuilds the task from these
                           and the config; labels, heads and lengths follow
                           from the config), the tokenizer the weights
                           belong to: spm_model_file or vocab_file (+ its
                           sha256) and do_lower_case; the training data's
                           facts the objective depends on (`DATA_FACTS`).

Every later start (resume, eval, predict, export) compares its config with
the record by the resume rule each config field declares (core/settings.py):
SAFE fields may change, DATA_POSITION fields when the saved input position
is not restored (see `ResumeCheck`); any other difference is refused with a one-line error naming the field and both
values. Accepted changes are appended to run_record_changes.jsonl; the
record of a run with checkpoints is never rewritten (one whose first start
ended before any checkpoint is replaced by the next start: `binding`).
"""

import dataclasses
import hashlib
import json
import os
import time
from typing import Any, Dict, List, Mapping, Optional, Tuple

from absl import logging
import yaml

from albert_tf.checkpoints import identity
from albert_tf.checkpoints import paths
from albert_tf.modeling import albert_config
from albert_tf.core import settings
from albert_toolkit import output_files
from albert_toolkit import owner_lock
from albert_toolkit.output_files import atomic_write

RECORD_NAME = "run_record.json"
# The facts of the training data the weights' objective depends on (e.g.
# pretraining's sentence-pair task and masking settings), a dict under
# this key: a later start on data made otherwise is refused (a fact the
# record or the start lacks is not compared). DATA_SOURCE names where
# they were read (a data summary), for the error.
DATA_FACTS = "data_facts"
DATA_SOURCE = "data_facts_source"
# A caller that has not read the record yet (`prepare(record=UNREAD)`).
UNREAD = object()
# Where a run keeps its best checkpoint (core.trainer writes it).
BEST_SUBDIR = "best"
CHANGES_NAME = "run_record_changes.jsonl"
# The resolved experiment config beside the record.
CONFIG_NAME = albert_config.RUN_CONFIG_NAME


def flatten(values: Mapping[str, Any], prefix: str = "") -> Dict[str, Any]:
  """{"a": {"b": 1}} -> {"a.b": 1}."""
  out = {}
  for key, value in values.items():
    if isinstance(value, Mapping):
      out.update(flatten(value, f"{prefix}{key}."))
    else:
      out[prefix + key] = value
  return out


@dataclasses.dataclass
class RunRecord:
  """A run directory's record (see the module docstring)."""
  model_dir: str
  task: str
  facts: Dict[str, Any]  # task, its module, the tokenizer, fingerprints
  config: Dict[str, Any]  # experiment_config.yaml as a dict

  @property
  def model(self) -> Dict[str, Any]:
    return self.config.get("model", {})


def write(model_dir: str, config, facts: Mapping[str, Any]) -> RunRecord:
  """Writes experiment_config.yaml, then run_record.json (the marker)."""
  task = facts.get("task")
  if not task or not isinstance(task, str):
    raise ValueError(f"run record: the task's name is missing (got {task!r})")
  os.makedirs(model_dir, exist_ok=True)
  values = config.as_dict()
  text = yaml.safe_dump(values, default_flow_style=False, sort_keys=False)
  atomic_write(os.path.join(model_dir, CONFIG_NAME), text)
  facts = with_fingerprints(facts)
  # The config is trusted only as written: a hand edit is refused on read.
  facts["config_sha256"] = hashlib.sha256(text.encode("utf-8")).hexdigest()
  facts["created"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
  facts["created_by"] = owner_lock.process_record()  # see `binding`
  atomic_write(os.path.join(model_dir, RECORD_NAME),
               json.dumps(facts, indent=2, sort_keys=True) + "\n")
  return RunRecord(model_dir, task, facts, values)


def read(model_dir: str) -> Optional[RunRecord]:
  """The record of `model_dir`, or None when it has none."""
  path = os.path.join(model_dir, RECORD_NAME)
  if not os.path.isfile(path):
    return None
  with open(path, encoding="utf-8") as f:
    try:
      facts = identity.current_facts(json.load(f))
    except json.JSONDecodeError as e:
      raise ValueError(f"{path}: corrupt run record ({e})") from None
  config_path = os.path.join(model_dir, CONFIG_NAME)
  if not os.path.isfile(config_path):
    raise ValueError(f"{config_path} is missing beside {RECORD_NAME}: the "
                     "run's config is unknown; restore the file (or start a "
                     "new --model_dir)")
  with open(config_path, encoding="utf-8") as f:
    text = f.read()
  recorded_sha = facts.get("config_sha256")
  if recorded_sha and hashlib.sha256(
      text.encode("utf-8")).hexdigest() != recorded_sha:
    raise ValueError(f"{config_path} was edited after the run started (its "
                     f"sha256 is not the one in {RECORD_NAME}); restore it: "
                     "a resumed run changes settings with flags, which the "
                     "record checks and logs")
  config = yaml.safe_load(text) or {}
  return RunRecord(model_dir, facts["task"], facts, config)


def with_fingerprints(facts: Mapping[str, Any]) -> Dict[str, Any]:
  """`facts` with the sha256 of their vocabulary (the one the weights
  belong to: the SentencePiece model or WordPiece vocabulary) as
  vocab_sha256."""
  facts = dict(facts)
  facts[identity.VOCAB_SHA256] = output_files.file_sha256(
      facts.get("spm_model_file") or facts.get("vocab_file") or "")
  return facts


def run_dir_of_checkpoint(path: str) -> Optional[str]:
  """The directory of the run a checkpoint (prefix or directory) belongs
  to: the checkpoint's directory or up to two levels above it holding a
  run record (RUN/checkpoints/ckpt-N, RUN/best/ckpt); None: no run's."""
  directory = os.path.abspath(path if os.path.isdir(path)
                              else os.path.dirname(path))
  for _ in range(3):
    if os.path.isfile(os.path.join(directory, RECORD_NAME)):
      return directory
    directory = os.path.dirname(directory)
  return None


def find_for_checkpoint(path: str) -> Optional[RunRecord]:
  """The record of the run a checkpoint belongs to (run_dir_of_checkpoint),
  or None."""
  directory = run_dir_of_checkpoint(path)
  return read(directory) if directory else None


def refuse(field: str, recorded, given, source: str, hint: str = ""):
  """The one-line error of every disagreement with a record: `source` is a
  run directory, an albert_config.json or a checkpoint's own record."""
  if os.path.isdir(source):
    source = f"the run record of {source}"
  return ValueError(f"{field} is {given!r} but {source} has {recorded!r}"
                    f"{'; ' + hint if hint else ''}")


def check_model(recorded: Mapping[str, Any], model_config, source: str,
                what: str = "model") -> None:
  """Raises when `model_config` builds a different model than `recorded`
  (same shapes but e.g. another num_hidden_layers or hidden_act)."""
  given = model_config.as_dict() if hasattr(model_config, "as_dict") else (
      dict(model_config))
  for field, before, after in identity.model_differences(recorded, given):
    raise refuse(f"{what}.{field}", before, after, source,
                 "the weights were trained with the recorded value")


@dataclasses.dataclass
class ResumeCheck:
  """Outcome of `check_resume`: accepted changes and whether the saved data
  position must not be restored."""
  changes: Dict[str, Any] = dataclasses.field(default_factory=dict)
  data_position_reset: bool = False
  # The changed fields the saved data position depends on.
  data_position_fields: List[str] = dataclasses.field(default_factory=list)


def _same_spm(record: RunRecord, new_path: str) -> bool:
  recorded = record.facts.get(identity.VOCAB_SHA256)
  return recorded is not None and output_files.file_sha256(new_path) == recorded


def _refusal_hint(config, mode: Optional[str]) -> str:
  """What may change instead: on resume, or in a run's export (whose
  settable fields the run tools pass to the export, not the config)."""
  if mode != "export":
    return ("only run-length, interval, eval and device settings may change "
            "on resume (docs/reliability.md)")
  settable = sorted(s.flag_name for s in settings.walk(type(config))
                    if s.export and s.flag is not None)
  return ("--mode=export keeps the run's settings"
          + (f" but {', '.join('--' + n for n in settable)}"
             if settable else "") + " (docs/serving.md)")


def check_resume(record: RunRecord, config, mode: Optional[str] = None,
                 hint: Optional[str] = None) -> ResumeCheck:
  """Compares a new start's config with the record; raises on unsafe changes
  (the message says what `mode` may change, or gives `hint`)."""
  rules = settings.resume_rules(type(config))
  check = ResumeCheck()
  for field, before, after in identity.differences(
      flatten(record.config), flatten(config.as_dict())):
    rule = rules.get(field, settings.FIXED)
    if rule == settings.SAFE:
      pass
    elif rule == settings.DATA_POSITION:
      check.data_position_reset = True
      check.data_position_fields.append(field)
    elif rule == settings.SAME_VOCAB and _same_spm(record, after):
      pass  # moved, same content
    else:
      raise refuse(field, before, after, record.model_dir,
                   hint or _refusal_hint(config, mode))
    check.changes[field] = [before, after]
  return check


def _append_change(model_dir: str, **line) -> None:
  """One timed JSON line of run_record_changes.jsonl (never rewritten)."""
  line["time"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
  with open(os.path.join(model_dir, CHANGES_NAME), "a",
            encoding="utf-8") as f:
    f.write(json.dumps(line, sort_keys=True, default=str) + "\n")


def append_changes(model_dir: str, mode: str, check: ResumeCheck) -> None:
  """One line per start that changed a setting (`data_position_reset`: by
  a change of these settings; see also append_input_change)."""
  if check.changes:
    _append_change(model_dir, mode=mode, changes=check.changes,
                   data_position_reset=check.data_position_reset)


def append_input_change(model_dir: str, mode: str, changed: str) -> None:
  """The line of a start whose training files changed since the checkpoint
  it resumes from: its saved data position was not restored."""
  _append_change(model_dir, mode=mode, input_files_changed=changed,
                 data_position_reset=True)


# Where a run's checkpoints are.
_CHECKPOINT_DIRS = (paths.RUN_CHECKPOINT_SUBDIR, BEST_SUBDIR)


def has_checkpoints(model_dir: str) -> bool:
  """Anything under checkpoints/ or best/ (a partial save counts too)."""
  return any(os.path.isdir(d) and os.listdir(d) for d in (
      os.path.join(model_dir, sub) for sub in _CHECKPOINT_DIRS))


def binding(record: RunRecord) -> bool:
  """Whether a record binds later starts: once a checkpoint exists (it
  describes the weights), or while the process that wrote it may still be
  starting. A first start that failed, was killed or stopped before its
  first checkpoint leaves a record that describes nothing: the next start
  replaces it. Records of older versions (no `created_by`) always bind."""
  creator = record.facts.get("created_by")
  return (has_checkpoints(record.model_dir) or not isinstance(creator, dict)
          or owner_lock.may_be_running(creator))


def _log_replacement(old: RunRecord, config, facts: Mapping[str, Any]):
  changes = {k: [before, after] for k, before, after in identity.differences(
      flatten(old.config), flatten(config.as_dict()))}
  if old.task != facts.get("task"):
    changes["task"] = [old.task, facts.get("task")]
  _append_change(old.model_dir, replaced_record_of=old.facts.get("created"),
                 reason="its start ended before any checkpoint",
                 changes=changes)
  logging.warning("%s: the run record of a start that ended before any "
                  "checkpoint is replaced (%s)", old.model_dir,
                  ", ".join(changes) or "same config")


def _new_record(model_dir: str, config, facts: Mapping[str, Any],
                is_chief: bool) -> RunRecord:
  """The record of a first start: written by the chief."""
  if is_chief:
    return write(model_dir, config, facts)
  return RunRecord(model_dir, facts.get("task"), with_fingerprints(facts),
                   config.as_dict())


def prepare(model_dir: str, config, facts: Mapping[str, Any],
            is_chief: bool = True, record: Any = UNREAD,
            mode: Optional[str] = None) -> Tuple[RunRecord, ResumeCheck]:
  """First start: write the record (chief). Later: check the config (the
  caller logs the changes with `append_changes` once it accepts them). A
  record that does not bind (see `binding`) is replaced by the chief.
  `record`: the record of `model_dir` the caller read (None: none), else
  it is read here; `mode`: the run tool's, for refusals. Returns (the run's
  record, the check)."""
  if record is UNREAD:
    record = read(model_dir)
  if record is not None and not binding(record):
    if is_chief:
      _log_replacement(record, config, facts)
    return _new_record(model_dir, config, facts, is_chief), ResumeCheck()
  if record is None:
    if has_checkpoints(model_dir):
      raise ValueError(
          f"{model_dir} holds checkpoints but no {RECORD_NAME}: what they "
          "were trained with is unknown; restore the record, or start a new "
          "--model_dir (warm-start from them with trainer.init_checkpoint)")
    return _new_record(model_dir, config, facts, is_chief), ResumeCheck()
  if record.task != facts.get("task"):
    raise refuse("task", record.task, facts.get("task"), model_dir,
                 "use a new --model_dir for another task")
  recorded_spm = record.facts.get(identity.VOCAB_SHA256)
  given_spm = with_fingerprints(facts)[identity.VOCAB_SHA256]
  if recorded_spm and given_spm and recorded_spm != given_spm:
    given = facts.get("spm_model_file") or facts.get("vocab_file")
    what = ("the SentencePiece model" if facts.get("spm_model_file") else
            "the WordPiece vocabulary")
    raise refuse(f"{what} (sha256)", recorded_spm, given_spm,
                 model_dir, f"{given} is another vocabulary than the run's; "
                 "use data made with the run's")
  check_data_facts(record, facts)
  return record, check_resume(record, config, mode)


def check_data_facts(record: RunRecord, facts: Mapping[str, Any]) -> None:
  """Raises (one line naming the fact and both values) when this start's
  data was made otherwise than the run's (`DATA_FACTS`)."""
  recorded = record.facts.get(DATA_FACTS) or {}
  given = facts.get(DATA_FACTS) or {}
  source = facts.get(DATA_SOURCE)
  for key in sorted(set(recorded) & set(given)):
    if recorded[key] != given[key]:
      field = f"the data's {key}" + (f" ({source})" if source else "")
      raise refuse(field, recorded[key], given[key],
                   record.model_dir, "the weights were trained on data made "
                   "with the recorded value; use such data, or start a new "
                   "--model_dir (trainer.init_checkpoint warm-starts from "
                   "this run)")
