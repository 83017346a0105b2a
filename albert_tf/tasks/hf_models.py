"""Hugging Face ALBERT models <-> albert_tf checkpoints and run directories,
every head (`convert_checkpoint --from=hf`; `--to=hf`: hf_export.py).

  AlbertModel, AlbertForPreTraining, AlbertForMaskedLM  <-> our encoder /
      pretrainer checkpoint (+ albert_config.json), as the other layouts
  AlbertForSequenceClassification  <-> a `sentence_prediction` run
  AlbertForQuestionAnswering       <-> a `question_answering` run (the
                                       simple SQuAD v1 head)
  AlbertForMultipleChoice          <-> a `multiple_choice` run
  AlbertForTokenClassification     <-> a `tagging` run

A fine-tuning head converts to a run directory as training writes it
(experiment_config.yaml, run_record.json, checkpoints/ckpt-0 stamped with
its identity) so that export_savedmodel --model_dir and --init_checkpoint
take it; the labels are config.json's id2label. The weights' names:
checkpoints/hf_checkpoint.py; the tokenizer: hf_vocab.py.
"""

import os
from typing import Any, Dict, Tuple

import numpy as np
import tensorflow as tf

from albert_tf.checkpoints import canonical_weights as cw
from albert_tf.checkpoints import conversion
from albert_tf.checkpoints import hf_checkpoint as hf
from albert_tf.checkpoints import hf_files
from albert_tf.checkpoints import identity
from albert_tf.checkpoints import paths
from albert_tf.checkpoints import restore
from albert_tf.checkpoints import tf1_checkpoint
from albert_tf.checkpoints.canonical_weights import CheckpointConversionError
from albert_tf.core import experiment_config
from albert_tf.core import run_record
from albert_tf.modeling import albert_config
from albert_tf.modeling.models.albert_pretrainer import AlbertPretrainer
from albert_tf.modeling.networks.albert_encoder import AlbertEncoder
from albert_tf.tasks import hf_vocab
from albert_tf.tasks import registry

# Architecture -> our task of a fine-tuning head.
FINETUNED = {
    "AlbertForSequenceClassification": "sentence_prediction",
    "AlbertForQuestionAnswering": "question_answering",
    "AlbertForMultipleChoice": "multiple_choice",
    "AlbertForTokenClassification": "tagging",
}
TASK_ARCHITECTURES = {"pretraining": "AlbertForPreTraining",
                      **{t: a for a, t in FINETUNED.items()}}
# The GLUE layout a converted classifier's run records (one text for
# classification; STS-B's pair for regression, GLUE's only regression).
CLASSIFICATION_LAYOUT, REGRESSION_LAYOUT = "sst-2", "sts-b"
# The fine-tuning heads the original's TF1 layout holds: our head layer's
# name (tf1_checkpoint.FINETUNED_HEAD_NAMES: the original scripts' names).
TF1_HEADS = {"AlbertForSequenceClassification": "classification_head",
             "AlbertForQuestionAnswering": "span_labeling_head",
             "AlbertForMultipleChoice": "multiple_choice_head"}
CHECKPOINT_NAME = "ckpt-0"
# What a converted run directory records of its source.
CONVERTED_FROM = "converted_from"
# The identity fact of a converted checkpoint holding config.json's
# classifier_dropout_prob.
HF_CLASSIFIER_DROPOUT = "hf_classifier_dropout_prob"


# --- Hugging Face -> ours -----------------------------------------------------


def _labels(hf_config, path: str):
  """id2label as a list in id order (None: not given)."""
  id2label = hf_config.get("id2label")
  if not id2label:
    return None
  try:
    labels = [str(id2label[str(i)]) for i in range(len(id2label))]
  except KeyError:
    raise CheckpointConversionError(
        f"{path}: id2label keys are not 0..{len(id2label) - 1}") from None
  repeated = sorted({n for n in labels if labels.count(n) > 1})
  if repeated:
    raise CheckpointConversionError(
        f"{path}: id2label names {repeated[0]!r} twice; each class needs its "
        "own label")
  return labels


def _task_settings(model: hf_files.HfModel, config, vocab: Dict[str, Any]
                   ) -> Dict[str, Any]:
  """The experiment config values of a converted fine-tuning run (`vocab`:
  the vocabulary's data settings)."""
  path = os.path.join(model.directory, hf_files.CONFIG_NAME)
  data = {**vocab, "max_seq_length": min(512, config.max_position_embeddings)}
  arch = model.architecture
  labels = _labels(model.config, path)
  if arch == "AlbertForSequenceClassification":
    problem = model.config.get("problem_type")
    num = model.tensors.get("classifier.weight", np.zeros((0,))).shape[0]
    if problem == "multi_label_classification":
      raise CheckpointConversionError(
          f"{path}: problem_type={problem!r}: albert_tf's classifier is a "
          "softmax over exclusive labels")
    if num == 1 or problem == "regression":
      data["task_name"] = REGRESSION_LAYOUT
    else:
      data.update(task_name=CLASSIFICATION_LAYOUT,
                  label_names=labels or [str(i) for i in range(num)])
  elif arch == "AlbertForTokenClassification":
    num = model.tensors.get("classifier.weight", np.zeros((0,))).shape[0]
    data["label_names"] = labels or [str(i) for i in range(num)]
  if "label_names" in data and len(data["label_names"]) != num:
    raise CheckpointConversionError(
        f"{path}: id2label has {len(data['label_names'])} labels, "
        f"classifier.weight {num} rows")
  if arch != "AlbertForQuestionAnswering":
    # Only training reads the data; the source is recorded as such.
    data["data_dir"] = os.path.abspath(model.directory)
  # transformers' default; a training setting only.
  task = {"classifier_dropout": model.config.get("classifier_dropout_prob",
                                                 0.1)}
  return {"data": data, "task": task, "model": config.as_dict()}


def _assign(variables, values, report, source):
  cw.check_and_assign(variables, values, report.mapped, source)


def _fill_pooler(values, report, config, architecture):
  """Architectures without a pooler (transformers' add_pooling_layer=
  False): ours has one; zeros make its pooled output 0, never random."""
  if "pooler/kernel" in values:
    return
  values["pooler/kernel"] = np.zeros([config.hidden_size] * 2, np.float32)
  values["pooler/bias"] = np.zeros([config.hidden_size], np.float32)
  for name in ("pooler/kernel", "pooler/bias"):
    report.mapped[name] = f"(zeros: {architecture} has no pooler)"


def _write_run(model: hf_files.HfModel, config, out: hf_vocab.Output, values,
               report) -> str:
  """A run directory of the head's task holding the converted weights."""
  task_cls = registry.get_task_cls(FINETUNED[model.architecture])
  exp = experiment_config.load_experiment_config(
      task_cls.config_cls, base=_task_settings(
          model, config, out.vocab_settings()),
      base_source=os.path.join(model.directory, hf_files.CONFIG_NAME))
  output_dir = os.path.abspath(out.directory)
  task = task_cls(exp, output_dir)
  target = task.build_model()
  variables = {**cw.model_variables(target),
               f"{hf.HEAD}/output_weights": target.head.output_weights,
               f"{hf.HEAD}/output_bias": target.head.output_bias}
  _assign(variables, values, report, model.directory)
  out.replace()
  facts = run_record.with_fingerprints(task.record_facts())
  facts[CONVERTED_FROM] = os.path.abspath(model.directory)
  stamp = identity.RunIdentity(exp.model.as_dict(), facts,
                               f"the run record of {output_dir}")
  stamp.stamp(0)
  directory = os.path.join(output_dir, paths.RUN_CHECKPOINT_SUBDIR)
  path = tf.train.Checkpoint(**cw.model_parts(target),
                             identity=stamp.variable).write(
                                 os.path.join(directory, CHECKPOINT_NAME))
  paths.write_checkpoint_state(directory, os.path.basename(path))
  run_record.write(output_dir, exp, facts)
  return path


def _identity(model, config, out: hf_vocab.Output):
  """The identity variable of a converted checkpoint, as a run stamps its
  own: the model, the vocabulary written beside it (its sha256) and its
  casing, which export, warm start and --to=hf check and keep."""
  facts = run_record.with_fingerprints(
      {**out.vocab_settings(), CONVERTED_FROM: os.path.abspath(
          model.directory),
       # Unused without a classifier; kept for the way back.
       HF_CLASSIFIER_DROPOUT: model.config.get("classifier_dropout_prob",
                                               0.1)})
  stamp = identity.RunIdentity(config.as_dict(), facts,
                               f"checkpoint converted from {model.directory}")
  stamp.stamp(0)
  return stamp.variable


def _write_pretrained(model, config, out: hf_vocab.Output, to_layout, values,
                      report):
  """AlbertModel / ForPreTraining / ForMaskedLM as the other layouts'
  checkpoints: ckpt (+ albert_config.json)."""
  heads = hf_files.ARCHITECTURES[model.architecture][0]
  target = AlbertPretrainer(config) if heads else AlbertEncoder(config)
  mlm_only = heads == ("mlm",)  # AlbertForMaskedLM: no SOP head
  variables = cw.model_variables(target, mlm_only=mlm_only)
  _assign(variables, values, report, model.directory)
  if mlm_only:
    conversion.check_mlm_only_layout(to_layout)
  conversion.check_config_for(config, to_layout)
  out.replace()
  output_dir = out.directory
  prefix = os.path.join(output_dir, conversion.DEFAULT_OUTPUT_NAMES[to_layout])
  # Ours carries its identity (the other layouts have no place for it).
  extra = ({identity.IDENTITY_NAME: _identity(model, config, out)}
           if to_layout == "albert_tf" else {})
  path = conversion.write_weights(target, prefix, to_layout, extra=extra,
                                  mlm_only=mlm_only)
  conversion.write_config(config, output_dir, to_layout)
  return path


def _write_tf1_head(model, config, out: hf_vocab.Output, values, report) -> str:
  """The encoder and the head under the original fine-tuning scripts'
  names (no labels: that layout keeps none) + albert_config.json."""
  target = AlbertEncoder(config)
  variables = cw.model_variables(target)
  _assign(variables, values, report, model.directory)
  names = tf1_checkpoint.FINETUNED_HEAD_NAMES[TF1_HEADS[model.architecture]]
  head = dict(zip(names, (values[f"{hf.HEAD}/output_weights"],
                          values[f"{hf.HEAD}/output_bias"])))
  conversion.check_config_for(config, "tf1")
  out.replace()
  output_dir = out.directory
  prefix = os.path.join(output_dir, conversion.DEFAULT_OUTPUT_NAMES["tf1"])
  path = tf1_checkpoint.write_tf1_checkpoint(
      {n: v.numpy() for n, v in variables.items()}, prefix, config,
      finetuned=head)
  conversion.write_config(config, output_dir, "tf1")
  return path


def _check_output(output_dir: str, overwrite: bool, source: str) -> bool:
  """Refuses the source's directory, a training run's directory, and
  (without `overwrite`) a directory that holds another model. Returns
  whether a converted run directory is to be replaced."""
  if os.path.realpath(output_dir) == os.path.realpath(source):
    raise CheckpointConversionError(
        f"--output_dir {output_dir} is the input directory; use another")
  record = run_record.find_for_checkpoint(output_dir)
  if record is not None and (CONVERTED_FROM not in record.facts or
                             os.path.realpath(record.model_dir) !=
                             os.path.realpath(output_dir)):
    raise CheckpointConversionError(
        f"--output_dir {output_dir} is in the run directory "
        f"{record.model_dir}; use another directory")
  # A model there, or files of a user's that the import would write over
  # (its vocabulary, the checkpoint state file).
  held = [n for n in (hf_files.CONFIG_NAME, hf_files.WEIGHTS_NAME,
                      run_record.RECORD_NAME,
                      albert_config.CONFIG_JSON_NAME, hf_vocab.SPM_NAME,
                      hf_vocab.WORDPIECE_NAME, paths.STATE_FILE)
          if os.path.isfile(os.path.join(output_dir, n))]
  held += paths.checkpoint_prefixes(output_dir) if os.path.isdir(
      output_dir) else []
  hf_files.check_not_held(output_dir, held, overwrite)
  return bool(held) and record is not None


def import_hf(hf_dir: str, output_dir: str, to_layout: str = "albert_tf",
              overwrite: bool = False) -> Tuple[str, cw.ConversionReport]:
  """Converts the Hugging Face directory `hf_dir`; returns (checkpoint
  path, report). A fine-tuning head goes to a run directory (albert_tf
  layout), or with `to_layout="tf1"` under the original fine-tuning
  scripts' names (no labels; token classification refused); Model Garden's
  layout holds the pretraining classes only.

  Args:
    hf_dir: a Hugging Face ALBERT directory (config.json, weights,
      spiece.model).
    output_dir: where to write; refused when it holds another model
      unless `overwrite` (nothing is replaced before every check passed).
    to_layout: "albert_tf", "tf1" or "model_garden".
    overwrite: replace the model or converted run already there.
  """
  model = hf_files.read_model(hf_dir)
  config_path = os.path.join(hf_dir, hf_files.CONFIG_NAME)
  config = hf.albert_config_from_hf(model.config, config_path)
  finetuned = model.architecture in FINETUNED
  if finetuned and to_layout == "model_garden" or (
      to_layout == "tf1" and
      model.architecture == "AlbertForTokenClassification"):
    raise CheckpointConversionError(
        f"--to={to_layout}: that layout has no {model.architecture} head "
        "(use --to=albert_tf: a run directory with its task and labels)")
  if to_layout not in restore.LAYOUTS:
    raise CheckpointConversionError(f"--to={to_layout}: expected one of "
                                    f"{restore.LAYOUTS}")
  replaces_run = _check_output(output_dir, overwrite, hf_dir)
  # A size config.json leaves out took transformers' default: an error that
  # default may have caused says so.
  note = hf.defaults_note(model.config, config_path)
  try:
    return _import(model, config, output_dir, to_layout, replaces_run)
  except ValueError as e:
    if not note:
      raise
    raise CheckpointConversionError(f"{e}{note}") from None


def _import(model, config, output_dir, to_layout, replaces_run):
  """The weights mapped and checked, the tokenizer read, then written."""
  hf_dir = model.directory
  finetuned = model.architecture in FINETUNED
  report, values = hf.map_hf(model, config)
  _fill_pooler(values, report, config, model.architecture)
  out = hf_vocab.Output(output_dir,
                        hf_vocab.checked_tokenizer(hf_dir, config), config,
                        replaces_run)
  if finetuned and to_layout == "tf1":
    return _write_tf1_head(model, config, out, values, report), report
  if finetuned:
    return _write_run(model, config, out, values, report), report
  return _write_pretrained(model, config, out, to_layout, values,
                           report), report
