"""The run record: what a run directory was started with, checked on resume.

A run directory holds, written once by the chief at the first start (each
file to a temporary name, then renamed):

  experiment_config.yaml   the resolved experiment config (every field).
  run_record.json          what rebuilds the model and its serving signature
                           without retyping: the task kind (pretraining,
                           sentence_prediction, question_answering,
                           multiple_choice), its facts (GLUE task name, label
                           names, number of text fields, ...), seq_length,
                           spm_model_file (+ its sha256) and do_lower_case.

Every later start (resume, eval, predict, export) compares its config with
the record. Only SAFE_FIELDS may change; DATA_POSITION_FIELDS may change
when the saved input position is not restored (see `ResumeCheck`); any other
difference is refused with a one-line error naming the field and both
values. Accepted changes are appended to run_record_changes.jsonl; the
record itself is never rewritten.
"""

import dataclasses
import hashlib
import json
import os
import time
from typing import Any, Dict, Mapping, Optional

import yaml

from albert_tf.checkpoints import conversion
from albert_tf.checkpoints import paths
from albert_tf.core import experiment_config
from albert_tf.data import label_names
from albert_tf.modeling import albert_config

RECORD_NAME = "run_record.json"
CHANGES_NAME = "run_record_changes.jsonl"
CONFIG_NAME = experiment_config.RESOLVED_CONFIG_NAME
TASK_KINDS = ("pretraining", "sentence_prediction", "question_answering",
              "multiple_choice")

# Fields a resumed run may change: how long and how often, where evaluation
# reads, devices. (train_steps also moves the end of the LR decay.)
SAFE_FIELDS = frozenset({
    "trainer.train_steps", "trainer.steps_per_loop",
    "trainer.checkpoint_interval", "trainer.eval_interval",
    "trainer.eval_steps", "trainer.max_to_keep", "trainer.best_metric",
    "trainer.best_metric_mode", "trainer.continuous_eval_timeout",
    # Warm start applies only to a fresh run: ignored on resume.
    "trainer.init_checkpoint", "trainer.init_from_group0",
    "task.init_saved_model",
    "data.eval_input_path", "data.eval_batch_size", "data.predict_file",
    "data.n_best_size", "data.max_answer_length",
    "data.null_score_diff_threshold", "data.cache_dir",
    "data.skip_malformed_rows", "data.allow_unverified_input",
    "runtime.distribution_strategy", "runtime.tpu", "runtime.num_cpu_devices",
    "runtime.jit_compile", "runtime.deterministic", "runtime.seed",
})
# Fields the saved input position (trainer.save_data_position) depends on:
# a change is allowed only when that position is not restored.
DATA_POSITION_FIELDS = frozenset({
    "data.input_path", "data.data_dir", "data.train_file",
    "data.global_batch_size", "data.shuffle_buffer_size", "data.cycle_length",
    "data.seed", "trainer.save_data_position",
})
# Model fields that do not change the inference graph or the weights' meaning.
TRAINING_ONLY_MODEL_FIELDS = frozenset({
    "hidden_dropout_prob", "attention_probs_dropout_prob",
    "initializer_range", "gradient_checkpointing"})


def file_sha256(path: str) -> Optional[str]:
  if not path or not os.path.isfile(path):
    return None
  digest = hashlib.sha256()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      digest.update(block)
  return digest.hexdigest()


def atomic_write(path: str, text: str) -> str:
  """Writes `text` to `path` via a temporary name and a rename."""
  tmp = f"{path}.tmp-{os.getpid()}"
  with open(tmp, "w", encoding="utf-8") as f:
    f.write(text)
    f.flush()
    os.fsync(f.fileno())
  os.replace(tmp, path)
  return path


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
  facts: Dict[str, Any]  # task facts, seq_length, spm_model_file, ...
  config: Dict[str, Any]  # experiment_config.yaml as a dict

  @property
  def model(self) -> Dict[str, Any]:
    return self.config.get("model", {})


def exists(model_dir: str) -> bool:
  return os.path.isfile(os.path.join(model_dir, RECORD_NAME))


def write(model_dir: str, config, facts: Mapping[str, Any]) -> RunRecord:
  """Writes experiment_config.yaml, then run_record.json (the marker)."""
  task = facts.get("task")
  if task not in TASK_KINDS:
    raise ValueError(f"run record: task must be one of {TASK_KINDS}, got "
                     f"{task!r}")
  os.makedirs(model_dir, exist_ok=True)
  values = config.as_dict()
  atomic_write(os.path.join(model_dir, CONFIG_NAME),
               yaml.safe_dump(values, default_flow_style=False,
                              sort_keys=False))
  facts = dict(facts)
  facts["spm_sha256"] = file_sha256(facts.get("spm_model_file", ""))
  facts["created"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
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
      facts = json.load(f)
    except json.JSONDecodeError as e:
      raise ValueError(f"{path}: corrupt run record ({e})") from None
  with open(os.path.join(model_dir, CONFIG_NAME), encoding="utf-8") as f:
    config = yaml.safe_load(f) or {}
  return RunRecord(model_dir, facts["task"], facts, config)


def find_for_checkpoint(path: str) -> Optional[RunRecord]:
  """The record of the run a checkpoint (prefix or directory) belongs to:
  the checkpoint's directory or up to two levels above it (RUN/checkpoints/
  ckpt-N, RUN/best/ckpt)."""
  directory = os.path.abspath(path if os.path.isdir(path)
                              else os.path.dirname(path))
  for _ in range(3):
    if exists(directory):
      return read(directory)
    directory = os.path.dirname(directory)
  return None


def refuse(field: str, recorded, given, source: str, hint: str = ""):
  """The one-line error of every disagreement with a record: `source` is a
  run directory or an albert_config.json."""
  if not source.endswith(".json"):
    source = f"the run record of {source}"
  return ValueError(f"{field} is {given!r} but {source} has {recorded!r}"
                    f"{'; ' + hint if hint else ''}")


def check_model(recorded: Mapping[str, Any], model_config, source: str,
                what: str = "model") -> None:
  """Raises when `model_config` builds a different model than `recorded`
  (same shapes but e.g. another num_hidden_layers or hidden_act)."""
  given = model_config.as_dict() if hasattr(model_config, "as_dict") else (
      dict(model_config))
  for field in sorted(set(recorded) | set(given)):
    if field in TRAINING_ONLY_MODEL_FIELDS:
      continue
    if recorded.get(field) != given.get(field):
      raise refuse(f"{what}.{field}", recorded.get(field), given.get(field),
                   source, "the weights were trained with the recorded value")


def check_fact(record: RunRecord, name: str, given) -> Any:
  """A fact the caller may pass (None: take the record's); refuses a
  different value (a SentencePiece model: different content; label names:
  a different number of them)."""
  recorded = record.facts.get(name)
  if given is None:
    return recorded
  if name == "spm_model_file" and given != recorded and _same_spm(record,
                                                                 given):
    return given
  if name == "label_names" and recorded:
    return label_names.check_renaming(given, recorded)  # same order only
  if recorded is not None and given != recorded:
    raise refuse(name, recorded, given, record.model_dir,
                 "omit it to use the run's value")
  return given


def resolve_facts(record: Optional[RunRecord], given: Mapping[str, Any],
                  defaults: Mapping[str, Any]) -> Dict[str, Any]:
  """given (None = not passed) <- the record's facts <- defaults."""
  out = {}
  for name, value in given.items():
    if record is not None:
      value = check_fact(record, name, value)
    out[name] = defaults.get(name) if value is None else value
  return out


# Facts of an export a run record knows, and their values without a record.
SERVING_DEFAULTS = {
    "serving_task": "encoder", "num_labels": 2, "label_names": None,
    "num_text_fields": 1, "with_answerability": False,
    "max_answer_length": 30, "max_query_length": 64, "doc_stride": 128,
    "num_choices": 4,
    "seq_length": 128, "spm_model_file": None, "do_lower_case": True}


def _beside_checkpoint(checkpoint: str) -> Optional[str]:
  """albert_config.json beside a checkpoint (release / conversion output)."""
  try:
    prefix = paths.resolve_checkpoint(checkpoint)
  except conversion.CheckpointConversionError:
    return None
  return conversion.find_config_file(prefix)


def model_config_for(sources, params_override: str = "",
                     model_dir: Optional[str] = None,
                     checkpoint: Optional[str] = None):
  """(AlbertConfig or None, RunRecord or None) of export / convert.

  The model of the run record (of `model_dir`, or of the run `checkpoint`
  belongs to), else of the albert_config.json beside `checkpoint`, is the
  base; `sources` and `params_override` apply on top, and any difference
  that changes the model is refused naming the field. With neither, the
  config is `sources` + `params_override` alone (None if nothing given).
  """
  record = None
  if model_dir:
    record = read(model_dir)
    if record is None:
      raise ValueError(f"--model_dir {model_dir}: no {RECORD_NAME} (not a "
                       "run directory of this version)")
  elif checkpoint:
    record = find_for_checkpoint(checkpoint)
  base = record.model_dir if record else (
      _beside_checkpoint(checkpoint) if checkpoint else None)
  sources = list(sources or ())
  if base is None:
    if not sources and not params_override:
      return None, None
    return albert_config.load_model_config(sources,
                                               params_override), None
  recorded = albert_config.load_model_config([base])
  config = albert_config.load_model_config([base] + sources,
                                               params_override)
  check_model(recorded.as_dict(), config, base)
  return config, record


@dataclasses.dataclass
class ResumeCheck:
  """Outcome of `check_resume`: accepted changes and whether the saved data
  position must not be restored."""
  changes: Dict[str, Any] = dataclasses.field(default_factory=dict)
  data_position_reset: bool = False


def _same_spm(record: RunRecord, new_path: str) -> bool:
  recorded = record.facts.get("spm_sha256")
  return recorded is not None and file_sha256(new_path) == recorded


def check_resume(record: RunRecord, config) -> ResumeCheck:
  """Compares a new start's config with the record; raises on unsafe changes."""
  old, new = flatten(record.config), flatten(config.as_dict())
  check = ResumeCheck()
  for field in sorted(set(old) | set(new)):
    before, after = old.get(field), new.get(field)
    if before == after:
      continue
    if field in SAFE_FIELDS:
      pass
    elif field in DATA_POSITION_FIELDS:
      check.data_position_reset = True
    elif field == "data.spm_model_file" and _same_spm(record, after):
      pass  # moved, same content
    else:
      raise refuse(field, before, after, record.model_dir,
                   "only run-length, interval, eval and device settings may "
                   "change on resume (docs/reliability.md)")
    check.changes[field] = [before, after]
  return check


def append_changes(model_dir: str, mode: str, check: ResumeCheck) -> None:
  """One JSON line per start that changed something (never rewrites)."""
  if not check.changes:
    return
  line = {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
          "mode": mode, "changes": check.changes,
          "data_position_reset": check.data_position_reset}
  with open(os.path.join(model_dir, CHANGES_NAME), "a",
            encoding="utf-8") as f:
    f.write(json.dumps(line, sort_keys=True, default=str) + "\n")


def prepare(model_dir: str, config, facts: Mapping[str, Any],
            is_chief: bool = True) -> ResumeCheck:
  """First start: write the record (chief). Later: check the config (the
  caller logs the changes with `append_changes` once it accepts them)."""
  record = read(model_dir)
  if record is None:
    if is_chief:
      write(model_dir, config, facts)
    return ResumeCheck()
  if record.task != facts.get("task"):
    raise refuse("task", record.task, facts.get("task"), model_dir,
                 "use a new --model_dir for another task")
  return check_resume(record, config)
