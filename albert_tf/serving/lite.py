"""Runs a .tflite export: load it with TF Text's TFLite kernels, call a
signature by name with a batch of strings (or ids), get numpy arrays back.

  model = LiteModel("export/1")            # or .../model.tflite
  model.signatures                         # {"serving_default": {...}, ...}
  model("serving_default", text_a=["a man is eating"], text_b=["a man eats"])
  # {"label": array([b"entailment"]), "logits": array([[...]]), ...}

The interpreter is LiteRT's (`ai_edge_litert`, the successor of
`tf.lite.Interpreter`, which TF 2.20 deprecates): it loads TF Text's kernels
through the same registrar functions and runs the same flatbuffer; without
the package, TensorFlow's own `InterpreterWithCustomOps` is used.

A .tflite has no input checks of its own (TFLite drops asserts), so the
runner checks every call first and fails in one line (ValueError) naming
the input: an unknown or missing input, a wrong dtype or rank, batch sizes
that differ, ids outside the vocabulary, a sequence longer than the
position table, a mask that is not 0/1, a number of choices other than the
model's, masked_lm_positions outside the sequence. Text gets
`lite_tokenizer.pre_rules` (the two normalisation rules the folded
tokenizer cannot hold; `wordpiece.pre_rules` for a WordPiece vocabulary,
model.json's text.tokenizer), so the ids are data_prep's.

One LiteModel may be called from several threads at once. A TFLite
interpreter is not thread-safe (two threads in one interpreter swap each
other's outputs or fail inside it), so the runner keeps a pool of
interpreters of the same file: a call takes an idle one, or loads another
while fewer than `max_interpreters` (default: the cores this process may
use) exist, or waits for one. Each interpreter holds its own tensors and
XNNPACK's packed weights; `max_interpreters=1` serialises the calls on one.
"""

import contextlib
import os
import queue
import re
import threading

import numpy as np
import tensorflow_text as tf_text

from albert_tf.serving import lite_files
from albert_tf.serving import lite_tokenizer
from albert_tf.serving import wordpiece
from albert_tf.serving.lite_files import METADATA_NAME, TFLITE_NAME  # pylint: disable=unused-import

try:  # pylint: disable=g-import-not-at-top
  from ai_edge_litert import interpreter as _litert
  INTERPRETER = "ai_edge_litert"
except ImportError:  # LiteRT not installed: TensorFlow's interpreter.
  from tensorflow.lite.python import interpreter as _litert
  INTERPRETER = "tf.lite"

_IDS = ("input_word_ids", "input_mask", "input_type_ids")


class RaggedInputError(ValueError):
  """An input whose rows differ in length: a call holds one shape per
  input."""


def interpreter(tflite_path=None, model_content=None, num_threads=None):
  """An interpreter of the .tflite with TF Text's kernels registered."""
  return _litert.InterpreterWithCustomOps(
      custom_op_registerers=tf_text.tflite_registrar.SELECT_TFTEXT_OPS,
      model_path=tflite_path, model_content=model_content,
      num_threads=num_threads)


def signature_details(lite_interpreter):
  """{signature: {"inputs" / "outputs": {name: (numpy dtype, shape)}}}."""
  table = {}
  for name in lite_interpreter.get_signature_list():
    runner = lite_interpreter.get_signature_runner(name)
    table[name] = {
        side: {key: (np.dtype(d["dtype"]),
                     tuple(int(x) for x in d["shape_signature"]))
               for key, d in details.items()}
        for side, details in (("inputs", runner.get_input_details()),
                              ("outputs", runner.get_output_details()))}
  return table


def interpreter_error(error):
  """The first line of an interpreter's error, its run-together messages
  ("...boundsNode number 84 (GATHER) failed to invoke.") separated."""
  text = str(error).strip().splitlines()[0] if str(error).strip() else (
      type(error).__name__)
  return re.sub(r"(?<=\S)(Node number \d+)", r"; \1", text)


def model_path(path):
  """The .tflite file of `path`: the file, a version directory, or an
  export directory (its highest version holding a model.tflite)."""
  return lite_files.resolve(path)[0]


def check_num_threads(num_threads, name="num_threads"):
  """Raises ValueError (one line naming `name`) unless None or >= 1."""
  if num_threads is not None and (isinstance(num_threads, bool) or
                                  not isinstance(num_threads, int) or
                                  num_threads < 1):
    raise ValueError(f"{name} must be an integer >= 1 (or unset: the "
                     f"interpreter's default), got {num_threads}")


def usable_cores():
  """The cores this process may run on (its CPU affinity, e.g. a
  container's limit), not the host's."""
  if hasattr(os, "sched_getaffinity"):
    return max(1, len(os.sched_getaffinity(0)))
  return os.cpu_count() or 1


class LiteModel:
  """A .tflite export, ready to call, from any number of threads (see
  module doc).

  Attributes: `path` (the .tflite), `note` (None, or which version of an
  export directory runs when newer ones are not .tflite files), `info` (its
  model.json), `signatures` ({name: {"inputs": {name: (dtype, shape)},
  "outputs": ...}}), `interpreter` ("ai_edge_litert" or "tf.lite").

  Args:
    path: the .tflite, its version directory or the export directory.
    num_threads: threads of each interpreter (default: the interpreter's).
    max_interpreters: interpreters run at once by concurrent calls
      (default: the cores this process may use).
  """

  def __init__(self, path, num_threads=None, max_interpreters=None):
    check_num_threads(num_threads)
    check_num_threads(max_interpreters, "max_interpreters")
    self.path, self.note = lite_files.resolve(path)
    self._num_threads = num_threads
    first = self._load()
    info_path = os.path.join(os.path.dirname(self.path), METADATA_NAME)
    # Casing and the vocabulary's limits come from it: without it, text
    # would be normalised on a guess and ids go unchecked.
    if not os.path.isfile(info_path):
      raise ValueError(f"{self.path}: no {METADATA_NAME} beside it (what the "
                       "export is: casing, vocabulary size); keep the "
                       "export's version directory whole")
    self.info = lite_files.read_metadata(info_path)
    self.interpreter = INTERPRETER
    self.signatures = signature_details(first)
    lite_files.check_metadata(self.info, info_path, self.path,
                              self.signatures)
    text = lite_files.section(self.info, "text", info_path)
    self._lower = bool(text.get("do_lower_case", True))
    self._pre_rules = (wordpiece.pre_rules
                       if text.get("tokenizer") == "wordpiece"
                       else lite_tokenizer.pre_rules)
    self._model_config = lite_files.section(self.info, "model_config",
                                            info_path)
    # Multiple choice: a [batch, N] choices input (or [batch, N, seq] ids)
    # must have the model's N; another N runs to a wrong answer or fails
    # inside the interpreter.
    self._num_choices = lite_files.section(
        self.info, "serving_params", info_path).get("num_choices")
    # The pool: idle {signature: runner} tables, one per interpreter.
    self._idle = queue.LifoQueue()
    self._idle.put(self._runners_of(first))
    self._loaded = 1
    self._most = max_interpreters or usable_cores()
    self._pool_lock = threading.Lock()

  def _load(self):
    try:
      return interpreter(self.path, num_threads=self._num_threads)
    except ValueError as e:
      raise ValueError(f"{self.path}: not a loadable .tflite "
                       f"({str(e).splitlines()[0]})") from e

  def _runners_of(self, lite_interpreter):
    # The runners keep their interpreter alive.
    return {name: lite_interpreter.get_signature_runner(name)
            for name in lite_interpreter.get_signature_list()}

  @contextlib.contextmanager
  def _runners(self):
    """An interpreter's runners, this call's alone until it returns."""
    try:
      runners = self._idle.get_nowait()
    except queue.Empty:
      with self._pool_lock:
        grow = self._loaded < self._most
        self._loaded += grow
      if grow:
        try:
          runners = self._runners_of(self._load())
        except BaseException:
          with self._pool_lock:
            self._loaded -= 1
          raise
      else:
        runners = self._idle.get()
    try:
      yield runners
    finally:
      self._idle.put(runners)

  def __call__(self, signature="serving_default", **inputs):
    """Runs `signature` on `inputs` (name -> array-like, batch first);
    returns {output name: numpy array}."""
    if signature not in self.signatures:
      raise ValueError(f"{self.path}: no signature {signature!r} (it has "
                       f"{', '.join(sorted(self.signatures))})")
    arrays = self._checked(signature, inputs)
    try:
      with self._runners() as runners:
        return runners[signature](**arrays)
    except (RuntimeError, ValueError) as e:  # the interpreter's own error
      raise ValueError(f"{self.path} signature {signature!r}: "
                       f"{interpreter_error(e)}") from e

  # --- input checks ---

  def _checked(self, signature, inputs):
    specs = self.signatures[signature]["inputs"]
    unknown = sorted(set(inputs) - set(specs))
    missing = sorted(set(specs) - set(inputs))
    if unknown or missing:
      raise ValueError(
          f"signature {signature!r} takes {', '.join(sorted(specs))}"
          + (f"; unknown: {', '.join(unknown)}" if unknown else "")
          + (f"; missing: {', '.join(missing)}" if missing else ""))
    # input_word_ids first: an error names it before the mask and types.
    arrays = {name: self._array(name, inputs[name], *specs[name])
              for name in sorted(specs, key=lambda n: n != _IDS[0])}
    batch = {name: a.shape[0] for name, a in arrays.items()}
    if len(set(batch.values())) > 1:
      raise ValueError(f"inputs of {signature!r} must have the same batch "
                       f"size, got {batch}")
    if _IDS[0] in arrays:
      self._check_ids(arrays)
    self._check_choices(arrays)
    if "masked_lm_positions" in arrays:
      self._check_positions(arrays)
    return arrays

  def _array(self, name, value, dtype, shape):
    text = dtype == np.object_ or dtype.kind in "SU"  # a string input
    spec = f"{'strings' if text else np.dtype(dtype).name} {list(shape)}"
    ragged = RaggedInputError(f"{name}: the rows of one call must share one "
                              f"length ({spec}); pad them to one length")
    try:
      array = np.asarray(value, dtype=object if text else None)
    except ValueError:  # NumPy: "inhomogeneous shape"
      raise ragged from None
    if text and array.ndim < len(shape) and any(
        isinstance(x, (list, tuple, np.ndarray)) for x in array.reshape(-1)):
      raise ragged  # strings of rows of different lengths: lists in a row
    if not text and (array.dtype.kind not in "iu" or
                     array.dtype.itemsize > 8):
      raise ValueError(f"{name} must hold integers ({spec}), got "
                       f"{array.dtype.name}")
    if array.ndim != len(shape):
      raise ValueError(f"{name} must have rank {len(shape)} ({spec}), got "
                       f"shape {list(array.shape)}")
    if text:
      flat = [self._text(name, x) for x in array.reshape(-1)]
      return np.array(flat, dtype=object).reshape(array.shape)
    info = np.iinfo(dtype)
    if array.size and (array.min() < info.min or array.max() > info.max):
      raise ValueError(f"{name} holds values outside {np.dtype(dtype).name}")
    return array.astype(dtype)

  def _text(self, name, value):
    if isinstance(value, bytes):
      value = value.decode("utf-8", errors="replace")  # as data_prep
    if not isinstance(value, str):
      raise ValueError(f"{name} must hold strings, got "
                       f"{type(value).__name__}")
    return self._pre_rules(value, self._lower).encode("utf-8")

  def _check_ids(self, arrays):
    ids = arrays["input_word_ids"]
    for name in _IDS[1:]:
      if name in arrays and arrays[name].shape != ids.shape:
        raise ValueError(f"{name} must have the shape of input_word_ids "
                         f"{list(ids.shape)}, got {list(arrays[name].shape)}")
    config = self._model_config
    if ids.shape[-1] < 1:
      raise ValueError("input_word_ids: sequence length must be >= 1")
    limits = (("input_word_ids", config.get("vocab_size")),
              ("input_type_ids", config.get("type_vocab_size")))
    for name, limit in limits:
      a = arrays.get(name)
      if a is not None and a.size and (a.min() < 0 or
                                       (limit and a.max() >= limit)):
        raise ValueError(f"{name} must be in [0, {limit}), got values in "
                         f"[{a.min()}, {a.max()}]")
    most = config.get("max_position_embeddings")
    if most and ids.shape[-1] > most:
      raise ValueError(f"input_word_ids: sequence length {ids.shape[-1]} > "
                       f"max_position_embeddings = {most}")
    mask = arrays.get("input_mask")
    if mask is not None and mask.size and not np.isin(mask, (0, 1)).all():
      raise ValueError("input_mask must hold only 0 and 1")

  def _check_choices(self, arrays):
    n = self._num_choices
    choices = arrays.get("choices")
    if choices is not None and choices.shape[1] != n:
      raise ValueError(f"choices must have shape [batch, {n}], got "
                       f"{list(choices.shape)}")
    ids = arrays.get("input_word_ids")
    if ids is not None and ids.ndim == 3 and ids.shape[1] != n:
      raise ValueError(f"input_word_ids must have shape [batch, {n}, seq], "
                       f"got {list(ids.shape)}")

  def _check_positions(self, arrays):
    positions = arrays["masked_lm_positions"]
    seq = arrays["input_word_ids"].shape[-1]
    if positions.size and positions.min() < 0:
      raise ValueError(f"masked_lm_positions must be >= 0, got "
                       f"{positions.min()}")
    if positions.size and positions.max() >= seq:
      raise ValueError(f"masked_lm_positions must be < the sequence length "
                       f"{seq}, got {positions.max()}")
