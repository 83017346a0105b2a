"""Serving modules as TFLite (LiteRT) flatbuffers: text in, on device.

`export_tflite(module, ...)` writes `<export_dir>/<version>/model.tflite`
and `model.json` beside it (what the file is: kind, task, labels, lengths,
vocabulary sha256, precision, the checkpoint it came from, its signatures,
the file's own size and sha256, which bind the two).

The module is the same serving module the SavedModel export saves, with two
changes: its text preprocessor is `lite_preprocessing.LitePreprocessor`
(ALBERT's normalisation folded into the SentencePiece model, tokenized by
TF Text's `FastSentencepieceTokenizer`, which has a TFLite kernel; with a
WordPiece vocabulary `LiteWordPiecePreprocessor`, TF Text's
`FastBertTokenizer` as in the SavedModel), and its
inputs are checked by the runner
(`serving/lite.py`) instead of in the graph. The signatures keep their
SavedModel names, inputs and outputs (`serving_default` text in,
`serve_ids` ids in); `serve_examples` is left out (tf.Example parsing has
no TFLite kernel). The converter may use only TFLite builtins and TF Text's
TFLite kernels: a graph that would need a Flex (Select TF) op fails to
convert, and before anything is written the converted model is loaded in
LiteRT and each signature run once (`check_ops`), so a custom op without a
kernel fails the export in one line.

Precisions (`PRECISIONS["tflite"]`):
  float32       as trained.
  float16       weights stored in float16 (half the size), computed in
                float32.
  dynamic_int8  weights in int8, activations quantized on the fly per
                batch (`Optimize.DEFAULT`).
  int8          the fully connected layers' weights and activations in
                int8 (`INT8_FLOAT_OPS` stay float32), activation ranges
                calibrated on examples of the run's own data
                (`calibration_samples`: ids, and their text).
"""

import collections
import hashlib
import json
import os
import re
import tempfile

import flatbuffers
import numpy as np
import tensorflow as tf
from tensorflow.lite.python import convert as tflite_convert
from tensorflow.lite.python import schema_py_generated as schema
import tensorflow_text as tf_text

from albert_tf.modeling.networks.albert_encoder import INPUT_NAMES
from albert_tf.serving import export_lib
from albert_tf.serving import lite
from albert_tf.serving import lite_preprocessing
from albert_tf.serving.lite import METADATA_NAME, TFLITE_NAME

FORMATS = ("savedmodel", "tflite")
PRECISIONS = {"savedmodel": ("float32", "bfloat16"),
              "tflite": ("float32", "float16", "dynamic_int8", "int8")}
# Ops int8 leaves in float32: in int8, ALBERT's attention mask (-10000
# added to the scores), softmax and LayerNorm (mean, variance, rsqrt) lose
# the model (a fine-tuned classifier's outputs became constant), and one
# int8 scale for the whole word-embedding table (GATHER) erases the
# differences between words (docs/lite.md).
INT8_FLOAT_OPS = ("GATHER", "BATCH_MATMUL", "ADD", "SUB", "MUL", "SOFTMAX",
                  "MEAN", "SQUARED_DIFFERENCE", "RSQRT", "GELU", "TANH")
# int8's calibration examples when --representative_examples is not given.
DEFAULT_REPRESENTATIVE_EXAMPLES = 100
# What the caller of a text-in .tflite applies to text first, per tokenizer
# (serving/lite.py does).
PRE_RULES = {
    "sentencepiece": "lite_tokenizer.pre_rules: drop NUL; final capital "
                     "sigma -> U+03C2 when lower-casing",
    "wordpiece": "wordpiece.pre_rules: drop NUL, U+FFFD and control/format "
                 "characters but tab, LF, CR; then final capital sigma -> "
                 "U+03C2 when lower-casing"}
# Signatures left out of a .tflite, and why.
LEFT_OUT = {"serve_examples": "tf.Example parsing has no TFLite kernel"}


def check_precision(export_format, precision):
  """Raises ValueError in one line for a format/precision pair that makes no
  sense (e.g. a bfloat16 .tflite, an int8 SavedModel)."""
  if export_format not in FORMATS:
    raise ValueError(f"--format must be one of {', '.join(FORMATS)}, got "
                     f"{export_format!r}")
  allowed = PRECISIONS[export_format]
  if precision not in allowed:
    raise ValueError(f"--precision={precision} is not a {export_format} "
                     f"precision (one of {', '.join(allowed)})")


def for_tflite(module):
  """`module` made ready for conversion (in place): the lite preprocessor,
  no in-graph checks. Returns its TFLite signatures. A module that cannot
  run in TFLite says why (`tflite_refusal`): refused here, before any
  file is written."""
  refusal = getattr(module, "tflite_refusal", None)
  if refusal:
    raise ValueError(f"no TFLite form: {refusal}")
  module.in_graph_checks = False
  preprocessor = getattr(module, "preprocessor", None)
  if preprocessor is not None:
    module.preprocessor = lite_preprocessing.lite_form(preprocessor)
  return {name: fn for name, fn in module.signatures().items()
          if name not in LEFT_OUT}


# --- int8 calibration samples -------------------------------------------------


def _segment_text(row, segment, preprocessor):
  """Text of segment `segment` (0 or 1) of one packed row of ids."""
  ids = row["input_word_ids"]
  keep = ((row["input_type_ids"] == segment) & (row["input_mask"] == 1) &
          ~np.isin(ids, [preprocessor.cls_id, preprocessor.sep_id,
                         preprocessor.pad_id]))
  return preprocessor.decode_ids(ids[keep].tolist())


def calibration_samples(signatures, examples, preprocessor):
  """(signature key, inputs) samples calibrating every signature: ids-in
  inputs take each example's ids (a batch of one), text-in inputs the
  decoded text of its segments (the first text input segment 0, the second
  segment 1; a [batch, choices] input one text per choice, a [batch] one
  the first choice's).

  examples: dicts of numpy arrays of one example ([seq], or [choices, seq]
    for multiple choice). preprocessor: the module's text preprocessor (None
    for ids-only modules).
  """
  samples = []
  for key, fn in sorted(signatures.items()):
    for example in examples:
      rows = ([{k: example[k][c] for k in INPUT_NAMES}
               for c in range(len(example["input_word_ids"]))]
              if example["input_word_ids"].ndim == 2 else [example])
      inputs, segment = {}, 0
      for spec in fn.input_signature:
        if spec.dtype != tf.string:
          inputs[spec.name] = example[spec.name][None]
          continue
        texts = [_segment_text(row, segment, preprocessor) for row in rows]
        inputs[spec.name] = np.array(
            [texts if spec.shape.rank == 2 else texts[0]], dtype=object)
        segment += 1
      samples.append((key, inputs))
  return samples


# --- Conversion ---------------------------------------------------------------


def _converter(saved_model_dir, signature_keys, precision, representative):
  converter = tf.lite.TFLiteConverter.from_saved_model(
      saved_model_dir, signature_keys=signature_keys)
  # Builtins and TF Text's kernels only: a Flex op fails the conversion.
  converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
  converter.allow_custom_ops = True
  if precision != "float32":
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
  if precision == "float16":
    converter.target_spec.supported_types = [tf.float16]
  elif precision == "int8":
    converter.representative_dataset = lambda: iter(representative)
    # The calibrator runs the model, text ops included (TFLite 2.20 reads
    # this private field for it; there is no public one).
    converter.target_spec._experimental_custom_op_registerers = list(  # pylint: disable=protected-access
        tf_text.tflite_registrar.SELECT_TFTEXT_OPS)
  return converter


def _int8_matmuls(converter):
  """The int8 model with `INT8_FLOAT_OPS` left in float32: calibrate, then
  quantize with a denylist (the two steps TFLite's public quantization
  debugger takes, without building its debug model)."""
  converter.experimental_mlir_quantizer = True
  converter._experimental_calibrate_only = True  # pylint: disable=protected-access
  calibrated = _shared_ranges(converter.convert())
  return tflite_convert.mlir_quantize(
      calibrated, denylisted_ops=list(INT8_FLOAT_OPS), fully_quantize=False)


def _shared_ranges(calibrated):
  """The calibrated model with each later signature's copy of a tensor
  taking the first signature's recorded range (signatures are converted in
  sorted order, so the first is an ids-in one: `serve_ids`, or `mlm` of a
  pretraining export).

  TFLite's calibration of a text-in graph is not reproducible (different
  ranges from process to process for the encoder's tensors there, enough to
  collapse a model), while an ids-in graph's is; both run the same encoder
  on the same examples. A later signature's copy of a tensor has the same
  name up to the numbers the converter appends to keep names unique, and
  comes in the same order: copies are matched as the k-th tensor of the
  same name stem in each graph, where both graphs have as many of them.
  """
  model = schema.ModelT.InitFromPackedBuf(bytearray(calibrated), 0)

  def by_stem(graph):
    stems = collections.defaultdict(list)
    for tensor in graph.tensors:
      q = tensor.quantization
      if q is not None and q.min is not None and len(q.min):
        stems[_name_stem(tensor.name)].append(tensor)
    return stems

  first = by_stem(model.subgraphs[0])
  for graph in model.subgraphs[1:]:
    for stem, tensors in by_stem(graph).items():
      sources = first.get(stem, [])
      if len(sources) != len(tensors):
        continue  # not the same tensors: keep their own ranges
      for tensor, source in zip(tensors, sources):
        tensor.quantization.min = list(source.quantization.min)
        tensor.quantization.max = list(source.quantization.max)
  builder = flatbuffers.Builder(len(calibrated))
  builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
  return bytes(builder.Output())


def _name_stem(name):
  """A tensor name without the numbers the converter adds for uniqueness
  ("split4" -> "split", "StatefulPartitionedCall_1:5" ->
  "StatefulPartitionedCall:")."""
  name = re.sub(rb"StatefulPartitionedCall_\d+", b"StatefulPartitionedCall",
                name)
  return re.sub(rb"[\d_]+$", b"", name)


def custom_ops(tflite_bytes):
  """Names of the custom (non-builtin) ops a .tflite uses (read in place:
  unpacking the whole model would copy every weight buffer)."""
  model = schema.Model.GetRootAs(tflite_bytes, 0)
  codes = map(model.OperatorCodes, range(model.OperatorCodesLength()))
  return sorted({code.CustomCode().decode() for code in codes
                 if code.CustomCode()})


def _probe_inputs(runner, num_choices=None):
  """A batch of one for every input of a signature runner: the text "a"
  for strings, ones for integers (a valid id, type id, mask and position;
  an all-zero mask is not a real input). An unknown dimension is 1 for the
  batch, `num_choices` for the choices (dimension 1 of `choices` and of
  [batch, choices, seq] ids: the graph reshapes by the model's number),
  else 2."""
  inputs = {}
  for name, d in runner.get_input_details().items():
    rank = len(d["shape_signature"])
    dtype = np.dtype(d["dtype"])
    text = dtype == np.object_ or dtype.kind in "SU"
    choices_axis = num_choices and (name == "choices" or
                                    (not text and rank == 3))

    def size(i, x):
      if x >= 0:
        return int(x)
      if i == 0:
        return 1
      return num_choices if (i == 1 and choices_axis) else 2

    shape = [size(i, x) for i, x in enumerate(d["shape_signature"])]
    inputs[name] = (np.full(shape, b"a", dtype=object) if text
                    else np.ones(shape, dtype))
  return inputs


def check_ops(tflite_bytes, num_choices=None):
  """Raises ValueError (one line) unless a LiteRT interpreter with TF Text's
  kernels and nothing else (no Flex delegate) loads the model and runs each
  of its signatures once: a kernel missing for an op (a custom op such as a
  string SelectV2) shows only when its signature runs. num_choices: a
  multiple-choice model's (the probe's number of choices)."""
  flex = [op for op in custom_ops(tflite_bytes) if op.startswith("Flex")]
  if flex:
    raise ValueError(f"the converted model needs Flex (Select TF) ops: "
                     f"{', '.join(flex)}")
  name = None
  try:
    runner = lite.interpreter(model_content=tflite_bytes)
    runner.allocate_tensors()
    for name in sorted(runner.get_signature_list()):
      signature = runner.get_signature_runner(name)
      signature(**_probe_inputs(signature, num_choices))
  except (RuntimeError, ValueError) as e:
    where = f"signature {name!r}" if name else "loading"
    raise ValueError(f"the converted model does not run in {lite.INTERPRETER} "
                     f"with TF Text's TFLite kernels ({where}): "
                     f"{lite.interpreter_error(e)}") from e


def convert(module, precision, calibration_examples=None):
  """Bytes of the .tflite of `module` (a serving module, changed in place
  by `for_tflite`). calibration_examples: int8's examples of the run's own
  data (see `calibration_samples`)."""
  signatures = for_tflite(module)
  representative = None
  if precision == "int8":
    if not calibration_examples:
      raise ValueError("--precision=int8 calibrates on the run's own data: "
                       "export from a run directory (--model_dir)")
    representative = calibration_samples(signatures, calibration_examples,
                                         getattr(module, "preprocessor", None))
  with tempfile.TemporaryDirectory(prefix="albert_tflite_") as tmp:
    saved = os.path.join(tmp, "saved_model")
    tf.saved_model.save(module, saved, signatures=signatures)
    converter = _converter(saved, sorted(signatures), precision,
                           representative)
    try:
      tflite_bytes = (_int8_matmuls(converter) if precision == "int8"
                      else converter.convert())
    except Exception as e:  # the converter raises ConverterError and others
      first = str(e).strip().splitlines()[0] if str(e).strip() else type(e)
      raise ValueError(f"cannot convert to TFLite with builtins and TF Text "
                       f"kernels only: {first}") from e
  check_ops(tflite_bytes, getattr(module, "num_choices", None))
  return tflite_bytes


def signature_table(tflite_bytes):
  """{signature: {"inputs": {name: [dtype, shape]}, "outputs": ...}}."""
  details = lite.signature_details(lite.interpreter(model_content=tflite_bytes))
  return {name: {side: {key: [dtype.name, [int(x) for x in shape]]
                        for key, (dtype, shape) in sorted(specs.items())}
                 for side, specs in sides.items()}
          for name, sides in details.items()}


def export_tflite(module, export_dir, precision, metadata,
                  calibration_examples=None, version=None):
  """Writes `<export_dir>/<version>/model.tflite` + `model.json`
  (`metadata` plus precision, signatures, size, sha256, tokenizer); returns
  the version directory. Written beside it under a hidden name, then
  renamed."""
  export_lib.version_dir(export_dir, version)  # a taken version fails first
  tflite_bytes = convert(module, precision, calibration_examples)
  preprocessor = getattr(module, "preprocessor", None)
  info = dict(
      metadata, format="tflite", precision=precision, file=TFLITE_NAME,
      size_bytes=len(tflite_bytes),
      sha256=hashlib.sha256(tflite_bytes).hexdigest(),
      signatures=signature_table(tflite_bytes),
      left_out_signatures=dict(LEFT_OUT),
      custom_ops=custom_ops(tflite_bytes), in_graph_checks=False)
  if preprocessor is not None:
    info["text"] = dict(
        preprocessor.settings(),
        do_lower_case=bool(preprocessor.do_lower_case),
        tokenizer=preprocessor.tokenizer_name,
        pre_rules=PRE_RULES[preprocessor.tokenizer_name])

  def write(directory):
    tf.io.gfile.makedirs(directory)
    with tf.io.gfile.GFile(os.path.join(directory, TFLITE_NAME), "wb") as f:
      f.write(tflite_bytes)
    with tf.io.gfile.GFile(os.path.join(directory, METADATA_NAME), "w") as f:
      f.write(json.dumps(info, indent=2, sort_keys=True, default=str) + "\n")

  return export_lib.write_versioned(export_dir, write, version)


def describe(path):
  """Text listing a .tflite export's signatures (from its model.json)."""
  with tf.io.gfile.GFile(os.path.join(path, METADATA_NAME)) as f:
    info = json.load(f)
  return "\n".join(
      [f"TFLite {os.path.join(path, TFLITE_NAME)} ({info['precision']}, "
       f"{info['size_bytes']:,} bytes)"] +
      export_lib.signature_lines(info["signatures"]))
