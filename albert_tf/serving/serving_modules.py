"""tf.Modules that wrap our Keras models for SavedModel export.

The Keras model is held out of the object graph (only its variables are
tracked), so the SavedModel holds plain TF functions: loading it needs
`tensorflow` (and `tensorflow_text` for text-in signatures), not tf_keras or
albert_tf. Every signature pins dtype and rank in its input spec and checks
sequence length, shapes and id ranges with `tf.debugging` asserts whose
messages name the offending input.

Modules:
  EncoderModule      TF-Hub reusable encoder (`__call__(inputs, training)`,
                     `variables`, `trainable_variables`,
                     `regularization_losses`) + `serving_default` ids-in.
  PretrainingModule  EncoderModule + `mlm` and `sop` functions/signatures.
  TaskServingModule  one model for TF Serving: text-in `serving_default`,
                     `serve_ids` and `serve_examples` (serialized tf.Example).
"""

import tensorflow as tf

from albert_tf.modeling.networks.albert_encoder import INPUT_NAMES
TASKS = ("encoder", "classification", "regression", "squad",
         "multiple_choice")
# A finite "minus infinity" (JSON has no -inf) for impossible spans.
_NEG = -1e30


class _Untracked:
  """Holds an object without exposing it to SavedModel tracking."""

  def __init__(self, value):
    self.value = value


def ids_spec(rank=2):
  return tf.TensorSpec([None] * rank, tf.int32)


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
  with tf.control_dependencies([check]):
    return tf.identity(tensor)


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
  ]
  for name in ("input_mask", "input_type_ids"):
    checks.append(tf.debugging.assert_equal(
        tf.shape(features[name]), tf.shape(ids),
        message=f"{name} must have the same shape as input_word_ids"))
  checks += [
      tf.debugging.assert_non_negative(
          ids, message="input_word_ids must be >= 0"),
      tf.debugging.assert_less(
          ids, vocab_size,
          message=f"input_word_ids must be < vocab_size = {vocab_size}"),
      tf.debugging.assert_non_negative(
          features["input_type_ids"], message="input_type_ids must be >= 0"),
      tf.debugging.assert_less(
          features["input_type_ids"], type_vocab_size,
          message=f"input_type_ids must be < type_vocab_size = "
          f"{type_vocab_size}"),
      tf.debugging.assert_less_equal(
          tf.abs(features["input_mask"] - 1) * features["input_mask"], 0,
          message="input_mask must hold only 0 and 1"),
  ]
  with tf.control_dependencies(checks):
    return {k: tf.identity(features[k]) for k in INPUT_NAMES}


def stack_layers(encoder_outputs):
  """List of L x [batch, seq, H] -> [batch, L, seq, H] (batch first, as TF
  Serving's row format needs)."""
  return tf.stack(encoder_outputs, axis=1)


class _ModelModule(tf.Module):
  """Base: the Keras model (untracked), its variables (tracked), assets."""

  # Real attributes instead of tf.Module's computed properties: the TF-Hub
  # reusable SavedModel API reads them from the loaded object.
  variables = None
  trainable_variables = None

  def __init__(self, model, config, config_file=None, spm_model_file=None,
               do_lower_case=None, name=None):
    super().__init__(name=name)
    self._model_ref = _Untracked(model)
    self._config = config
    encoder = getattr(model, "encoder", model)
    self._encoder_ref = _Untracked(encoder)
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
    if do_lower_case is not None:
      # The TF-Hub convention for text models.
      self.do_lower_case = tf.Variable(do_lower_case, trainable=False,
                                       name="do_lower_case")

  @property
  def model(self):
    return self._model_ref.value

  @property
  def encoder(self):
    return self._encoder_ref.value

  def _check(self, features):
    c = self._config
    return check_model_inputs(features, c.max_position_embeddings,
                              c.vocab_size, c.type_vocab_size)


class EncoderModule(_ModelModule):
  """TF-Hub style reusable encoder.

  `module(inputs, training=False)` takes a dict of int32 [batch, seq]
  `input_word_ids`, `input_mask`, `input_type_ids` and returns
  `sequence_output` [batch, seq, H], `pooled_output` [batch, H], `default`
  (= pooled_output) and `encoder_outputs` (list of L x [batch, seq, H]).
  """

  @tf.function(autograph=False)
  def __call__(self, inputs, training=False):
    return self._encode(inputs, training)

  def _encode(self, inputs, training=False):
    features = self._check(inputs)
    outputs = self.encoder(features, training=training)
    return {
        "sequence_output": outputs["sequence_output"],
        "pooled_output": outputs["pooled_output"],
        "default": outputs["pooled_output"],
        "encoder_outputs": list(outputs["encoder_outputs"]),
    }

  def trace(self):
    """Traces `__call__` for both training values (before saving)."""
    spec = {name: ids_spec() for name in INPUT_NAMES}
    for training in (False, True):
      self.__call__.get_concrete_function(spec, training=training)

  def encoder_signature(self):
    @tf.function(autograph=False, input_signature=[ids_spec()] * 3)
    def serve(input_word_ids, input_mask, input_type_ids):
      outputs = self._encode(dict(input_word_ids=input_word_ids,
                                  input_mask=input_mask,
                                  input_type_ids=input_type_ids))
      return {
          "sequence_output": outputs["sequence_output"],
          "pooled_output": outputs["pooled_output"],
          "default": outputs["default"],
          # [batch, L, seq, H]
          "encoder_outputs": stack_layers(outputs["encoder_outputs"]),
      }
    return serve

  def signatures(self):
    return {"serving_default": self.encoder_signature()}


class PretrainingModule(EncoderModule):
  """The encoder plus the pretraining heads.

  `mlm(inputs)` adds int32 [batch, P] `masked_lm_positions` to the encoder
  inputs and returns `mlm_logits` [batch, P, vocab]; `sop(inputs)` returns
  `sop_logits` [batch, 2] (1 = segments swapped).
  """

  def _mlm(self, inputs):
    features = self._check(inputs)
    positions = check_rank(inputs["masked_lm_positions"], 2,
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
    with tf.control_dependencies(checks):
      positions = tf.identity(positions)
    sequence_output = self.encoder(features,
                                   training=False)["sequence_output"]
    return {"mlm_logits": self.model.mlm_head(sequence_output, positions)}

  def _sop(self, inputs):
    features = self._check(inputs)
    pooled = self.encoder(features, training=False)["pooled_output"]
    return {"sop_logits": self.model.sop_head(pooled)}

  @tf.function(autograph=False, input_signature=[dict(
      input_word_ids=ids_spec(), input_mask=ids_spec(),
      input_type_ids=ids_spec(), masked_lm_positions=ids_spec())])
  def mlm(self, inputs):
    return self._mlm(inputs)

  @tf.function(autograph=False, input_signature=[dict(
      input_word_ids=ids_spec(), input_mask=ids_spec(),
      input_type_ids=ids_spec())])
  def sop(self, inputs):
    return self._sop(inputs)

  def signatures(self):
    @tf.function(autograph=False, input_signature=[ids_spec()] * 4)
    def mlm(input_word_ids, input_mask, input_type_ids, masked_lm_positions):
      return self._mlm(dict(input_word_ids=input_word_ids,
                            input_mask=input_mask,
                            input_type_ids=input_type_ids,
                            masked_lm_positions=masked_lm_positions))

    @tf.function(autograph=False, input_signature=[ids_spec()] * 3)
    def sop(input_word_ids, input_mask, input_type_ids):
      return self._sop(dict(input_word_ids=input_word_ids,
                            input_mask=input_mask,
                            input_type_ids=input_type_ids))

    return {"serving_default": self.encoder_signature(), "mlm": mlm,
            "sop": sop}


def text_fields_for(task, num_text_fields=1):
  """Names of the text inputs of `serving_default` (and tf.Example keys)."""
  if task == "squad":
    return ("question", "context")
  if task == "multiple_choice":
    return ("context", "choices")
  if num_text_fields == 1:
    return ("text",)
  if num_text_fields == 2:
    return ("text_a", "text_b")
  raise ValueError(f"num_text_fields must be 1 or 2, got {num_text_fields}")


class TaskServingModule(_ModelModule):
  """A task model (or the bare encoder) for TF Serving.

  Signatures (all return the same task outputs, see `task_outputs`):
    serving_default: raw text, string [batch] per field in `text_fields`
      (multiple choice: `context` [batch], `choices` [batch, num_choices]).
    serve_ids: int32 `input_word_ids`, `input_mask`, `input_type_ids`
      [batch, seq] ([batch, num_choices, seq] for multiple choice).
    serve_examples: string [batch] `examples`, serialized tf.Example with
      bytes features named as the text fields.

  Args:
    model: AlbertEncoder, AlbertClassifier, AlbertSpanLabeler or
      AlbertMultipleChoice.
    task: one of TASKS.
    preprocessor: a `preprocessing.TextPreprocessor` (tracked, saved with it).
    label_names: class names for `label` (classification).
    max_answer_length: longest span in tokens (SQuAD).
    num_text_fields: 1 or 2 (encoder/classification/regression).
  """

  def __init__(self, model, task, preprocessor, config, label_names=None,
               max_answer_length=30, num_text_fields=1, **kwargs):
    super().__init__(model, config, **kwargs)
    if task not in TASKS:
      raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    self.task = task
    self.preprocessor = preprocessor
    self.text_fields = text_fields_for(task, num_text_fields)
    self.max_answer_length = max_answer_length
    self.num_choices = getattr(model, "num_choices", None)
    self.label_names = None
    if task == "classification":
      num_labels = model.num_labels
      names = list(label_names or [str(i) for i in range(num_labels)])
      if len(names) != num_labels:
        raise ValueError(f"label_names has {len(names)} names for "
                         f"{num_labels} labels")
      self.label_names = tf.constant(names)

  # --- inputs -> model inputs ---

  def _preprocess_text(self, texts):
    """Dict field -> string tensor; returns packed int32 model inputs."""
    if self.task == "multiple_choice":
      context, choices = texts["context"], texts["choices"]
      num_choices = self.num_choices
      checks = [tf.debugging.assert_equal(
          tf.shape(choices)[1], num_choices,
          message=f"choices must have shape [batch, {num_choices}]"),
                tf.debugging.assert_equal(
          tf.shape(choices)[0], tf.shape(context)[0],
          message="choices and context must have the same batch size")]
      with tf.control_dependencies(checks):
        flat_choices = tf.reshape(choices, [-1])  # [batch * choices]
      flat_context = tf.repeat(context, num_choices)  # [batch * choices]
      packed = self.preprocessor.preprocess([flat_context, flat_choices])
      seq_length = self.preprocessor.seq_length
      return {k: tf.reshape(v, [-1, num_choices, seq_length])
              for k, v in packed.items()}  # [batch, choices, seq]
    fields = [texts[name] for name in self.text_fields]
    if len(fields) == 2:
      fields = [self._same_batch(fields[0], fields[1])[0], fields[1]]
    return self.preprocessor.preprocess(fields)

  def _same_batch(self, a, b):
    check = tf.debugging.assert_equal(
        tf.shape(a)[0], tf.shape(b)[0],
        message=f"{self.text_fields[0]} and {self.text_fields[1]} must have "
        "the same batch size")
    with tf.control_dependencies([check]):
      return tf.identity(a), tf.identity(b)

  def _checked_ids(self, features):
    if self.task != "multiple_choice":
      return self._check(features)
    num_choices = self.num_choices
    features = {k: check_rank(features[k], 3, k, "[batch, num_choices, seq]")
                for k in INPUT_NAMES}
    check = tf.debugging.assert_equal(
        tf.shape(features["input_word_ids"])[1], num_choices,
        message=f"input_word_ids must have shape [batch, {num_choices}, seq]")
    with tf.control_dependencies([check]):
      seq_length = tf.shape(features["input_word_ids"])[-1]
      flat = self._check({k: tf.reshape(features[k], [-1, seq_length])
                          for k in INPUT_NAMES})
    return {k: tf.reshape(v, [-1, num_choices, seq_length])
            for k, v in flat.items()}

  def text_outputs(self, texts):
    """Dict field -> string tensor; returns the task outputs."""
    return self.task_outputs(self._preprocess_text(texts))

  # --- model inputs -> task outputs ---

  def task_outputs(self, features):
    """Checked int32 model inputs -> dict of task outputs (batch first).

    encoder: pooled_output [b, H], sequence_output [b, seq, H].
    classification: logits, probabilities [b, labels], label_id int32 [b],
      label string [b].
    regression: score [b].
    squad: start_logits, end_logits [b, seq]; answer_start, answer_end int32
      [b] (token positions; 0, 0 = no span found); answer_score [b];
      answer_text [b] (normalised text of the span); answerable_probability
      [b] when the model has an answerability head.
    multiple_choice: logits, probabilities [b, choices], choice int32 [b].
    """
    features = self._checked_ids(features)
    if self.task == "encoder":
      outputs = self.model(features, training=False)
      return {"pooled_output": outputs["pooled_output"],
              "sequence_output": outputs["sequence_output"]}
    outputs = self.model(features, training=False)
    if self.task == "classification":
      logits = outputs["logits"]
      label_id = tf.argmax(logits, axis=-1, output_type=tf.int32)
      return {"logits": logits,
              "probabilities": tf.nn.softmax(logits, axis=-1),
              "label_id": label_id,
              "label": tf.gather(self.label_names, label_id)}
    if self.task == "regression":
      return {"score": outputs["logits"][:, 0]}
    if self.task == "multiple_choice":
      logits = outputs["logits"]
      return {"logits": logits,
              "probabilities": tf.nn.softmax(logits, axis=-1),
              "choice": tf.argmax(logits, axis=-1, output_type=tf.int32)}
    return self._squad_outputs(features, outputs)

  def _squad_outputs(self, features, outputs):
    start_logits = outputs["start_logits"]  # [b, seq]
    end_logits = outputs["end_logits"]
    ids = features["input_word_ids"]
    seq_length = tf.shape(ids)[1]
    # Answers lie in the passage: segment 1, not padding, not the final [SEP].
    in_context = ((features["input_type_ids"] == 1) &
                  (features["input_mask"] == 1) &
                  (ids != self.preprocessor.sep_id))  # [b, seq]
    positions = tf.range(seq_length)
    offset = positions[None, :] - positions[:, None]  # [seq, seq]: end-start
    in_band = (offset >= 0) & (offset < self.max_answer_length)
    allowed = (in_band[None] & in_context[:, :, None] &
               in_context[:, None, :])  # [b, start, end]
    scores = start_logits[:, :, None] + end_logits[:, None, :]  # [b, s, s]
    scores = tf.where(allowed, scores, _NEG)
    best = tf.argmax(tf.reshape(scores, [-1, seq_length * seq_length]),
                     axis=-1, output_type=tf.int32)  # [b]
    found = tf.reduce_any(allowed, axis=[1, 2])  # [b]
    start = tf.where(found, best // seq_length, 0)
    end = tf.where(found, best % seq_length, 0)
    score = tf.where(found, tf.reduce_max(scores, axis=[1, 2]), _NEG)
    keep = ((positions[None, :] >= start[:, None]) &
            (positions[None, :] <= end[:, None]) & found[:, None])
    span_ids = tf.ragged.boolean_mask(ids, keep)  # [b, (span)]
    result = {
        "start_logits": start_logits,
        "end_logits": end_logits,
        "answer_start": start,
        "answer_end": end,
        "answer_score": score,
        "answer_text": self.preprocessor.detokenize(span_ids),
    }
    if "answerable_logits" in outputs:
      result["answerable_probability"] = tf.sigmoid(
          outputs["answerable_logits"])
    return result

  # --- signatures ---

  def _text_specs(self):
    specs = {}
    for name in self.text_fields:
      rank = 2 if name == "choices" else 1
      specs[name] = tf.TensorSpec([None] * rank, tf.string, name=name)
    return specs

  def signatures(self):
    text_specs = self._text_specs()

    @tf.function(autograph=False, input_signature=[text_specs])
    def serve_text_dict(texts):
      texts = {name: check_rank(t, t.shape.rank, name,
                                "[batch, num_choices]" if t.shape.rank == 2
                                else "[batch]")
               for name, t in texts.items()}
      return self.text_outputs(texts)

    # Signature inputs are named after the TensorSpec names (the fields).
    names = list(text_specs)
    if len(names) == 1:
      @tf.function(autograph=False, input_signature=[text_specs[names[0]]])
      def serve_text(a):
        return serve_text_dict({names[0]: a})
    else:
      @tf.function(autograph=False, input_signature=[text_specs[n] for n in names])
      def serve_text(a, b):
        return serve_text_dict({names[0]: a, names[1]: b})

    rank = 3 if self.task == "multiple_choice" else 2
    id_specs = [tf.TensorSpec([None] * rank, tf.int32, name=n)
                for n in INPUT_NAMES]

    @tf.function(autograph=False, input_signature=id_specs)
    def serve_ids(input_word_ids, input_mask, input_type_ids):
      return self.task_outputs(dict(input_word_ids=input_word_ids,
                                    input_mask=input_mask,
                                    input_type_ids=input_type_ids))

    feature_spec = {}
    for name in names:
      shape = [self.num_choices] if name == "choices" else []
      feature_spec[name] = tf.io.FixedLenFeature(shape, tf.string)

    @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string,
                                                name="examples")])
    def serve_examples(examples):
      examples = check_rank(examples, 1, "examples",
                            "[batch] of serialized tf.Example")
      texts = tf.io.parse_example(examples, feature_spec)
      return serve_text_dict(texts)

    # The text-in function is also callable as `module.serve_text(...)`.
    self.serve_text = serve_text_dict
    return {"serving_default": serve_text,
            "serve_ids": serve_ids,
            "serve_examples": serve_examples}

