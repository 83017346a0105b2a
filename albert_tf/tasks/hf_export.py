"""Our runs and checkpoints written as Hugging Face ALBERT directories
(`convert_checkpoint --from=albert_tf --to=hf`): a run's task names the
class (hf_models.TASK_ARCHITECTURES), its params the labels of config.json;
a checkpoint without a run goes out by the heads it holds. The weights'
names: checkpoints/hf_checkpoint.py.
"""

import os
from typing import Any, Dict, Optional, Tuple

import numpy as np

from albert_tf.checkpoints import canonical_weights as cw
from albert_tf.checkpoints import conversion
from albert_tf.checkpoints import hf_checkpoint as hf
from albert_tf.checkpoints import hf_files
from albert_tf.checkpoints import identity
from albert_tf.checkpoints import paths
from albert_tf.checkpoints import restore
from albert_tf.checkpoints.canonical_weights import CheckpointConversionError
from albert_tf.core import checkpoint_config
from albert_tf.core import run_record
from albert_tf.core import run_restore
from albert_tf.modeling.models.albert_pretrainer import AlbertPretrainer
from albert_tf.tasks import hf_models
from albert_tf.tasks import hf_vocab
from albert_tf.tasks import registry
from albert_toolkit import output_files


def _head_config(task, params) -> Tuple[str, Dict[str, Any]]:
  """(architecture, config.json fields of its head) of a run's task."""
  arch = hf_models.TASK_ARCHITECTURES.get(task.name)
  if arch is None:
    raise CheckpointConversionError(
        f"task {task.name!r} has no Hugging Face ALBERT class (convertible: "
        f"{', '.join(sorted(hf_models.TASK_ARCHITECTURES))})")
  if task.name == "question_answering" and (
      params.squad_head != "simple" or params.with_answerability):
    raise CheckpointConversionError(
        f"this SQuAD run's head (task.squad_head={params.squad_head}, "
        f"with_answerability={params.with_answerability}) has no Hugging "
        "Face class: AlbertForQuestionAnswering is start/end logits only")
  names = None
  extra: Dict[str, Any] = {}
  if task.name == "sentence_prediction":
    if params.regression:
      extra["problem_type"] = "regression"
      names = ["LABEL_0"]
    else:
      names = params.label_names or [str(i) for i in range(params.num_labels)]
  elif task.name == "tagging":
    names = list(params.label_names)
  # question answering: qa_outputs has transformers' default num_labels (2)
  # rows, which its config.json leaves out.
  dropout = getattr(getattr(task.config, "task", None), "classifier_dropout",
                    None)
  if dropout is not None:
    extra["classifier_dropout_prob"] = dropout
  if names:
    extra["id2label"] = {str(i): n for i, n in enumerate(names)}
    extra["label2id"] = {n: i for i, n in enumerate(names)}
  return arch, extra


def _restored_run(record, checkpoint: Optional[str]):
  """(task, its model restored, its params) of a run."""
  task = registry.task_of_record(record)
  model = task.build_model()
  run_restore.restore_run(
      task, model, lambda p: identity.check(
          p, model=record.model, facts=record.facts,
          what=f"the run record of {record.model_dir}"),
      record.model_dir, checkpoint)
  return task, model, task.serving_params(record.facts)


def _pretrained_architecture(values) -> str:
  """The class of a checkpoint of ours without a run: by the heads it has."""
  heads = {n.split("/")[0] for n in values if cw.is_head(n)}
  if heads == {"mlm_head", "sop_head"}:
    return "AlbertForPreTraining"
  return "AlbertForMaskedLM" if heads == {"mlm_head"} else "AlbertModel"


def _values(model) -> Dict[str, np.ndarray]:
  values = {n: v.numpy() for n, v in cw.model_variables(model).items()}
  head = getattr(model, "head", None)
  if head is not None:
    values[f"{hf.HEAD}/output_weights"] = head.output_weights.numpy()
    values[f"{hf.HEAD}/output_bias"] = head.output_bias.numpy()
  return values


def export_hf(input_checkpoint: str, output_dir: str,
              overwrite: bool = False) -> Tuple[str, str]:
  """Writes a run (or a checkpoint of ours) as a Hugging Face directory;
  returns (weights path, architecture).

  Args:
    input_checkpoint: a run directory, a checkpoint in one (the run's task
      gives the class and labels), or a checkpoint of ours without a run
      (AlbertForPreTraining / ForMaskedLM / AlbertModel by its heads).
    output_dir: where config.json, model.safetensors and the tokenizer
      files (spiece.model, or vocab.txt and tokenizer.json) go.
    overwrite: replace the Hugging Face model already there.
  """
  is_run = os.path.isfile(os.path.join(input_checkpoint,
                                       run_record.RECORD_NAME))
  record = (run_record.read(input_checkpoint) if is_run else
            run_record.find_for_checkpoint(input_checkpoint))
  _check_hf_output(output_dir, overwrite, input_checkpoint)
  if record is not None:
    task, model, params = _restored_run(
        record, None if is_run else input_checkpoint)
    arch, extra = _head_config(task, params)
    config, vocab, lower = (
        task.config.model,
        params.spm_model_file or getattr(params, "vocab_file", ""),
        params.do_lower_case)
  else:
    config, _ = checkpoint_config.model_config_for(
        [], "", checkpoint=input_checkpoint)
    prefix = paths.resolve_checkpoint(input_checkpoint)
    if config is None:
      config = conversion.resolve_config(None, prefix)
    model = AlbertPretrainer(config)
    values, report = restore.read_weights(prefix, config)
    arch, extra = _pretrained_architecture(values), {}
    variables = cw.model_variables(model)
    variables = {n: v for n, v in variables.items() if n in values or
                 not cw.is_head(n)}  # the heads it holds
    cw.check_and_assign(variables, values, report.mapped, prefix)
    facts = identity.recorded_facts(prefix)
    vocab, lower = _vocabulary_beside(prefix, facts)
    dropout = facts.get(hf_models.HF_CLASSIFIER_DROPOUT)
    if dropout is not None:  # a converted checkpoint's config.json value
      extra["classifier_dropout_prob"] = dropout
  tensors = hf.to_hf(_values(model), config, arch)
  path = hf_files.write_model(output_dir, tensors,
                              hf.hf_config_from_albert(config, arch, extra))
  if vocab:
    hf_vocab.write_tokenizer(output_dir, vocab, lower,
                             config.max_position_embeddings)
  return path, arch


def _vocabulary_beside(prefix: str, facts: Dict[str, Any]
                       ) -> Tuple[str, bool]:
  """(the tokenizer file next to checkpoint `prefix`, its lower-casing) of
  a checkpoint without a run: the one its identity's `facts` name by
  sha256 (a converted checkpoint's), else the only one there (lower-cased:
  such a checkpoint records no casing). Two candidates and nothing to
  choose by, or none with the recorded sha256, are refused."""
  found = conversion.tokenizer_files(prefix)
  sha = facts.get(identity.VOCAB_SHA256)
  if sha:
    matching = [p for p in found if output_files.file_sha256(p) == sha]
    if not matching:
      raise CheckpointConversionError(
          f"{prefix}: its identity names the vocabulary with sha256 {sha}, "
          "but no tokenizer file beside it has it "
          f"({', '.join(found) or 'none there'})")
    found = matching[:1]  # copies of one file
  if len(found) > 1:
    raise CheckpointConversionError(
        f"{prefix}: {len(found)} tokenizer files beside the checkpoint "
        f"({', '.join(os.path.basename(p) for p in found)}) and no record "
        "of which is the model's; keep only its own")
  return (found[0] if found else ""), facts.get("do_lower_case", True)


def _check_hf_output(output_dir: str, overwrite: bool, source: str):
  if os.path.realpath(output_dir) == os.path.realpath(
      source if os.path.isdir(source) else os.path.dirname(source)):
    raise CheckpointConversionError(
        f"--output_dir {output_dir} holds the input; use another directory")
  # A model there, or files of a user's that the export would write over.
  held = [n for n in (hf_files.CONFIG_NAME, hf_files.WEIGHTS_NAME,
                      hf_files.INDEX_NAME) + hf_files.TOKENIZER_FILES
          if os.path.isfile(os.path.join(output_dir, n))]
  hf_files.check_not_held(output_dir, held, overwrite)
  if os.path.isfile(os.path.join(output_dir, hf_files.INDEX_NAME)):
    # A stale index beside the new model.safetensors would be read instead.
    os.remove(os.path.join(output_dir, hf_files.INDEX_NAME))
