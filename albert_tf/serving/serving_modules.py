"""tf.Modules that wrap our Keras models for SavedModel export.

The Keras model is held out of the object graph (only its variables are
tracked), so the SavedModel holds plain TF functions: loading it needs
`tensorflow` (and `tensorflow_text` for text-in signatures), not tf_keras or
albert_tf. Every signature pins dtype and rank in its input spec and checks
sequence length, shapes and id ranges with `tf.debugging` asserts whose
messages name the offending input.

Here: EncoderModule (TF-Hub reusable encoder) and PretrainingModule (+ `mlm`
and `sop`); the TF Serving modules of each task (text, ids and tf.Example
signatures) are in `task_modules.py` and `squad_module.py`.
"""

import tensorflow as tf

from albert_tf.modeling.networks.albert_encoder import INPUT_NAMES


class _Untracked:
  """Holds an object without exposing it to SavedModel tracking."""

  def __init__(self, value):
    self.value = value


def ids_specs(rank=2, names=INPUT_NAMES):
  """name -> int32 TensorSpec of rank `rank`, one per id input."""
  return {name: tf.TensorSpec([None] * rank, tf.int32) for name in names}


def named_signature(fn, specs):
  """A signature calling `fn(dict of inputs)`, whose inputs are `specs`
  (name -> TensorSpec) named by their keys (signatures take flat, named
  tensors; `fn` takes them as one dict)."""
  names = list(specs)

  @tf.function(autograph=False, input_signature=[
      tf.TensorSpec(s.shape, s.dtype, name=n) for n, s in specs.items()])
  def signature(*inputs):
    return fn(dict(zip(names, inputs)))
  return signature


def after(checks, tensors):
  """`tensors` (a nest) once the asserts `checks` have run."""
  with tf.control_dependencies(checks):
    return tf.nest.map_structure(tf.identity, tensors)


def same_batch(a, b, name_a, name_b):
  """`a`, `b` after asserting they have the same batch size."""
  return after([tf.debugging.assert_equal(
      tf.shape(a)[0], tf.shape(b)[0],
      message=f"{name_a} and {name_b} must have the same batch size")], (a, b))


def check_rank(tensor, rank, name, shape_doc):
  """`tensor` after asserting it has `rank` dimensions (message names it).

  Needed because calling a signature (eager or TF Serving) checks dtypes but
  not shapes, and grappler folds `tf.rank(x)` to the declared rank; the rank
  is therefore measured on a copy whose static shape is unknown (a
  serialize/parse round trip, cheap for ids and text).
  """
  opaque = tf.io.parse_tensor(tf.io.serialize_tensor(tensor), tensor.dtype)
  check = tf.debugging.assert_equal(
      tf.rank(opaque), rank,
      message=f"{name} must have rank {rank}: {tensor.dtype.name} {shape_doc}")
  return after([check], tensor)


def same_shape_checks(features):
  """Asserts that `input_mask` and `input_type_ids` have the shape of
  `input_word_ids` (any rank: a reshape of mismatched inputs would mix rows).

  Args:
    features: dict holding the three id inputs.
  """
  ids = features["input_word_ids"]
  return [tf.debugging.assert_equal(
      tf.shape(features[name]), tf.shape(ids),
      message=f"{name} must have the same shape as input_word_ids")
          for name in ("input_mask", "input_type_ids")]


def check_model_inputs(features, max_seq_length, vocab_size, type_vocab_size):
  """Asserts on int32 encoder inputs; returns them after the checks ran.

  Checks: each is [batch, seq], the three share one shape, 1 <= seq <=
  max_seq_length, 0 <= ids < vocab_size, 0 <= type ids < type_vocab_size,
  mask in {0, 1}.
  """
  features = {k: check_rank(features[k], 2, k, "[batch, seq]")
              for k in INPUT_NAMES}
  ids = features["input_word_ids"]
  seq_length = tf.shape(ids)[-1]
  checks = [
      tf.debugging.assert_less_equal(
          seq_length, max_seq_length,
          message=f"input_word_ids: sequence length (last dimension) must be "
          f"<= max_position_embeddings = {max_seq_length}"),
      tf.debugging.assert_positive(
          seq_length, message="input_word_ids: sequence length must be >= 1 "
          "(the first position is [CLS])"),
  ] + same_shape_checks(features)
  for name, limit, size in (("input_word_ids", "vocab_size", vocab_size),
                            ("input_type_ids", "type_vocab_size",
                             type_vocab_size)):
    checks += [
        tf.debugging.assert_non_negative(
            features[name], message=f"{name} must be >= 0"),
        tf.debugging.assert_less(
            features[name], size,
            message=f"{name} must be < {limit} = {size}")]
  # Two bounds: a product test such as |m - 1| * m <= 0 passes any m <= 0.
  mask = features["input_mask"]
  checks += [
      tf.debugging.assert_non_negative(
          mask, message="input_mask must hold only 0 and 1"),
      tf.debugging.assert_less_equal(
          mask, 1, message="input_mask must hold only 0 and 1")]
  return after(checks, {k: features[k] for k in INPUT_NAMES})


def as_float32(outputs):
  """`outputs` (a nest) with floating tensors in float32: a model built in
  bfloat16 (export --precision=bfloat16) serves the same dtypes."""
  return tf.nest.map_structure(
      lambda t: tf.cast(t, tf.float32) if t.dtype.is_floating else t,
      outputs)


class ModelModule(tf.Module):
  """Base: the Keras model (untracked), its variables (tracked), assets."""

  # Real attributes instead of tf.Module's computed properties: the TF-Hub
  # reusable SavedModel API reads them from the loaded object.
  variables = None
  trainable_variables = None
  # False when the graph becomes a .tflite: TFLite's converter drops
  # asserts and has no kernel for the rank check's ops, so the .tflite
  # runner checks inputs instead (albert_tf/serving/lite.py).
  in_graph_checks = True

  def __init__(self, model, config, config_file=None, spm_model_file=None,
               do_lower_case=None, vocab_file=None):
    super().__init__()
    self._model_ref = _Untracked(model)
    self._config = config
    encoder = getattr(model, "encoder", model)
    self.variables = list(encoder.variables)
    self.trainable_variables = list(encoder.trainable_variables)
    self.regularization_losses = []
    encoder_ids = {id(v) for v in encoder.variables}
    # Head variables: tracked so they are saved, not offered to hub users.
    self.head_variables = [v for v in model.variables
                           if id(v) not in encoder_ids]
    if config_file:
      self.albert_config_file = tf.saved_model.Asset(config_file)
    if spm_model_file:
      self.sp_model_file = tf.saved_model.Asset(spm_model_file)
    if vocab_file:  # BERT's TF-Hub name for the WordPiece vocabulary
      self.vocab_file = tf.saved_model.Asset(vocab_file)
    if do_lower_case is not None:
      # The TF-Hub convention for text models.
      self.do_lower_case = tf.Variable(do_lower_case, trainable=False,
                                       name="do_lower_case")

  @property
  def model(self):
    return self._model_ref.value

  @property
  def encoder(self):
    return getattr(self.model, "encoder", self.model)

  def check_rank(self, tensor, rank, name, shape_doc):
    """`check_rank` when this module checks in the graph."""
    if not self.in_graph_checks:
      return tensor
    return check_rank(tensor, rank, name, shape_doc)

  def checked_ids(self, features):
    """The encoder inputs of `features`, checked (`in_graph_checks`)."""
    if not self.in_graph_checks:
      return {k: features[k] for k in INPUT_NAMES}
    c = self._config
    return check_model_inputs(features, c.max_position_embeddings,
                              c.vocab_size, c.type_vocab_size)


class EncoderModule(ModelModule):
  """TF-Hub style reusable encoder.

  `module(inputs, training=False)` takes a dict of int32 [batch, seq]
  `input_word_ids`, `input_mask`, `input_type_ids` and returns
  `sequence_output` [batch, seq, H], `pooled_output` [batch, H], `default`
  (= pooled_output) and `encoder_outputs` (list of L x [batch, seq, H]).
  """

  @tf.function(autograph=False)
  def __call__(self, inputs, training=False):
    features = self.checked_ids(inputs)
    outputs = as_float32(self.encoder(features, training=training))
    return dict(outputs, default=outputs["pooled_output"],
                encoder_outputs=list(outputs["encoder_outputs"]))

  def trace(self):
    """Traces `__call__` for both training values (before saving)."""
    for training in (False, True):
      self.__call__.get_concrete_function(ids_specs(), training=training)

  def signatures(self):
    def serve(inputs):
      outputs = self(inputs)
      # L x [batch, seq, H] -> [batch, L, seq, H]: batch first, as TF
      # Serving's row format needs.
      return dict(outputs, encoder_outputs=tf.stack(
          outputs["encoder_outputs"], axis=1))
    return {"serving_default": named_signature(serve, ids_specs())}


# mlm's inputs: the encoder's and int32 [batch, P] masked_lm_positions.
_MLM_SPECS = ids_specs(names=INPUT_NAMES + ("masked_lm_positions",))


class PretrainingModule(EncoderModule):
  """The encoder plus the pretraining heads.

  `mlm(inputs)` adds int32 [batch, P] `masked_lm_positions` to the encoder
  inputs and returns `mlm_logits` [batch, P, vocab]; `sop(inputs)` returns
  `sop_logits` [batch, 2] (1 = segments swapped).
  """

  @tf.function(autograph=False, input_signature=[_MLM_SPECS])
  def mlm(self, inputs):
    features = self.checked_ids(inputs)
    positions = self.check_rank(inputs["masked_lm_positions"], 2,
                           "masked_lm_positions", "[batch, num_positions]")
    seq_length = tf.shape(features["input_word_ids"])[1]
    checks = [
        tf.debugging.assert_equal(
            tf.shape(positions)[0], tf.shape(features["input_word_ids"])[0],
            message="masked_lm_positions must have the batch size of "
            "input_word_ids"),
        tf.debugging.assert_non_negative(
            positions, message="masked_lm_positions must be >= 0"),
        tf.debugging.assert_less(
            positions, seq_length,
            message="masked_lm_positions must be < the sequence length"),
    ]
    positions = after(checks, positions)
    sequence_output = self.encoder(features,
                                   training=False)["sequence_output"]
    return as_float32(
        {"mlm_logits": self.model.mlm_head(sequence_output, positions)})

  @tf.function(autograph=False, input_signature=[ids_specs()])
  def sop(self, inputs):
    features = self.checked_ids(inputs)
    pooled = self.encoder(features, training=False)["pooled_output"]
    return as_float32({"sop_logits": self.model.sop_head(pooled)})

  def signatures(self):
    return dict(super().signatures(),
                mlm=named_signature(self.mlm, _MLM_SPECS),
                sop=named_signature(self.sop, ids_specs()))
