"""Writes the forms bench_inference compares (inference_forms.py loads
them): one random-initialised ALBERT classifier through the classification
serving export (`export_savedmodel --task=classification`) as SavedModels
in float32 and bfloat16 (the float32 weights) and as .tflite files in
float32, float16, dynamic_int8 and int8 (calibrated on examples made from
the benchmark's own texts), and Model Garden's `AlbertEncoder` with the
same encoder weights behind our ids-in signature, as a float32 SavedModel.
"""

import os
import time

import tensorflow as tf

from albert_tf.checkpoints import canonical_weights
from albert_tf.checkpoints import model_garden_checkpoint
from albert_tf.serving import preprocessing
from albert_tf.tasks import all_tasks  # pylint: disable=unused-import  (registers the tasks)
from albert_tf.tasks import export
from inference_forms import FORMS
from inference_forms import MODEL_GARDEN

NAMES = ("input_word_ids", "input_mask", "input_type_ids")


class ModelGardenEncoderModule(tf.Module):
  """MG's AlbertEncoder behind the same ids-in signature as our export."""

  def __init__(self, encoder):
    super().__init__()
    self.encoder = encoder

  @tf.function(input_signature=[
      tf.TensorSpec([None, None], tf.int32, name=n) for n in NAMES])
  def serve(self, input_word_ids, input_mask, input_type_ids):
    out = self.encoder(dict(input_word_ids=input_word_ids,
                            input_mask=input_mask,
                            input_type_ids=input_type_ids))
    return {"pooled_output": out["pooled_output"],
            "sequence_output": out["sequence_output"]}


def model_garden_encoder(ours, config):
  """MG AlbertEncoder with our weights copied in (the converter's mapping)."""
  mg = model_garden_checkpoint.build_encoder(config)
  values = {name: var.numpy() for name, var in
            canonical_weights.encoder_variables(ours).items()}
  for name, (var, _, to_mg) in model_garden_checkpoint.variable_map(mg).items():
    var.assign(to_mg(values[name]))
  return mg


def save_model_garden(ours, config, path):
  """Model Garden's encoder with `ours`'s weights as an ids-in SavedModel
  at `path`; returns `path`."""
  module = ModelGardenEncoderModule(model_garden_encoder(ours, config))
  tf.saved_model.save(module, path, signatures={"serving_default":
                                                module.serve})
  return path


def classifier(config, spm, seq, precision="float32"):
  """(task class, serving params, model) of a classification export."""
  task_cls, params = export.task_for_flags(
      "classification", "serving", {"spm_model_file": spm,
                                    "max_seq_length": seq})
  with export.precision_scope(precision):
    model = export.model_for_flags(task_cls, "serving", config, params)
  return task_cls, params, model


def packed_ids(spm, seq, texts):
  """The ids the exports' own preprocessor makes of `texts` (numpy)."""
  packed = preprocessing.TextPreprocessor(spm, seq_length=seq).preprocess(
      [tf.constant(texts)])
  return {k: packed[k].numpy() for k in NAMES}


def export_forms(config, spm, seq, calibration_texts, workdir, names):
  """Exports the forms `names` of one random-initialised classifier (the
  bfloat16 one gets the float32 one's weights); returns {name: path}."""
  task_cls, params, model = classifier(config, spm, seq)
  paths = {}
  for name, fmt, precision in FORMS:
    if name not in names:
      continue
    start = time.perf_counter()
    target = os.path.join(workdir, name)
    if name == MODEL_GARDEN:
      paths[name] = save_model_garden(model.encoder, config, target)
    else:
      form = export.ExportForm(fmt, precision)
      exported = model
      if precision == "bfloat16":
        exported = classifier(config, spm, seq, precision)[2]
        exported.set_weights(model.get_weights())
      if precision == "int8":
        ids = packed_ids(spm, seq, calibration_texts)
        form.calibration_examples = [{k: v[i] for k, v in ids.items()}
                                     for i in range(len(calibration_texts))]
      paths[name] = export.export_model(task_cls, "serving", exported,
                                        params, target, form=form)
    print(f"[forms] exported {name} in {time.perf_counter() - start:.0f} s",
          flush=True)
  return paths
