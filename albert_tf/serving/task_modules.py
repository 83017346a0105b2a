"""TF Serving modules, one class per kind of head (Model Garden's serving
pattern); the tasks (albert_tf/tasks/) choose one and its settings.

Every module offers the same three signatures, built once in the base class:
  serving_default: raw text, string [batch] per field in `text_fields`
    (multiple choice: `context` [batch], `choices` [batch, num_choices]).
  serve_ids: int32 `input_word_ids`, `input_mask`, `input_type_ids`
    [batch, seq] ([batch, num_choices, seq] for multiple choice).
  serve_examples: string [batch] `examples`, serialized tf.Example with
    bytes features named as the text fields.
All three return the task's outputs (`outputs`). A task subclass says what
its text fields are, how text and ids become model inputs when that differs
from one packed sequence, and what it returns; its settings are the task's
params (serving/serving_params.py), the same description the model was
built from.

Modules: EncoderServingModule, ClassificationModule, RegressionModule,
MultipleChoiceModule here; SquadModule in `squad_module.py`.
"""

import tensorflow as tf

from albert_tf.data import label_names as label_names_lib
from albert_tf.serving import preprocessing
from albert_tf.serving import serving_modules
from albert_tf.serving.serving_modules import INPUT_NAMES


def sentence_fields(num_text_fields):
  """Text inputs of a one- or two-segment task."""
  if num_text_fields in (1, 2):
    return (("text",), ("text_a", "text_b"))[num_text_fields - 1]
  raise ValueError(f"num_text_fields must be 1 or 2, got {num_text_fields}")


def label_table(label_names, num_labels):
  """String constant of the checked `label_names`, one per label."""
  names = label_names_lib.check_names(label_names)
  if len(names) != num_labels:
    raise ValueError(f"label_names has {len(names)} names for "
                     f"{num_labels} labels")
  return tf.constant(names)


class TaskServingModule(serving_modules.ModelModule):
  """Base: text / ids / tf.Example signatures over `task_outputs`.

  Subclasses set `text_fields`, implement `outputs`, and may override
  `make_preprocessor`, `preprocess_text`, `text_outputs`, `checked_ids`,
  `text_specs` and `example_spec`. `params` (the task's
  serving_params.ServingParams) give the text packer and the settings,
  `config` (the AlbertConfig) the input checks, `kwargs` the assets.
  """

  text_fields = ()
  ids_rank = 2  # [batch, seq]

  def __init__(self, model, params, config, **kwargs):
    super().__init__(model, config, **kwargs)
    self.params = params
    self.preprocessor = self.make_preprocessor(params)

  @classmethod
  def make_preprocessor(cls, params):
    """The text packer for this task (pairs: longest segment cut first)."""
    return preprocessing.make_preprocessor(
        params.spm_model_file, params.vocab_file,
        do_lower_case=params.do_lower_case,
        seq_length=params.max_seq_length, truncation="longest_first")

  # --- inputs -> checked model inputs ---

  def preprocess_text(self, texts):
    """Dict field -> string [batch]; returns packed int32 model inputs."""
    fields = [texts[name] for name in self.text_fields]
    if len(fields) == 2:
      fields = list(serving_modules.same_batch(*fields, *self.text_fields))
    return self.preprocessor.preprocess(fields)

  # --- model inputs -> task outputs ---

  def outputs(self, features, model_outputs):
    """Checked inputs and the model's outputs -> dict of task outputs."""
    raise NotImplementedError

  def task_outputs(self, features):
    """Model inputs (serve_ids, or packed text) -> task outputs."""
    features = self.checked_ids(features)
    return self.outputs(features, serving_modules.as_float32(
        self.model(features, training=False)))

  def text_outputs(self, texts):
    """Dict field -> string tensor; returns the task outputs (a module that
    runs several windows per text overrides this)."""
    return self.task_outputs(self.preprocess_text(texts))

  # --- signatures ---

  def text_specs(self):
    return {name: tf.TensorSpec([None], tf.string, name=name)
            for name in self.text_fields}

  def example_spec(self):
    return {name: tf.io.FixedLenFeature([], tf.string)
            for name in self.text_fields}

  def signatures(self):
    text_specs = self.text_specs()

    @tf.function(autograph=False, input_signature=[text_specs])
    def serve_text_dict(texts):
      texts = {name: self.check_rank(t, t.shape.rank, name,
                                     "[batch, num_choices]"
                                     if t.shape.rank == 2 else "[batch]")
               for name, t in texts.items()}
      return self.text_outputs(texts)

    def serve_examples(inputs):
      examples = self.check_rank(inputs["examples"], 1, "examples",
                                 "[batch] of serialized tf.Example")
      return serve_text_dict(parse_text_examples(examples,
                                                 self.example_spec()))

    # The text-in function is also callable as `module.serve_text(...)`.
    self.serve_text = serve_text_dict
    named = serving_modules.named_signature
    return {"serving_default": named(serve_text_dict, text_specs),
            "serve_ids": named(self.task_outputs,
                               serving_modules.ids_specs(self.ids_rank)),
            "serve_examples": named(serve_examples,
                                    {"examples": preprocessing.STRINGS})}


def parse_text_examples(examples, feature_spec):
  """tf.io.parse_example, where a text feature (a FixedLenFeature of shape
  []) must hold exactly one string: two values (or none) are refused naming
  the feature and the count of each example (TensorFlow's own parse said
  only "Can't parse serialized Example")."""
  spec = {name: (tf.io.VarLenFeature(f.dtype) if not f.shape else f)
          for name, f in feature_spec.items()}
  out = tf.io.parse_example(examples, spec)
  batch = tf.shape(examples)[0]
  for name in [name for name, f in feature_spec.items() if not f.shape]:
    value = out[name]
    counts = tf.math.bincount(tf.cast(value.indices[:, 0], tf.int32),
                              minlength=batch, maxlength=batch)  # [batch]
    check = tf.debugging.assert_equal(
        counts, tf.ones_like(counts), message=(
            f"serve_examples: feature {name} must hold exactly one string "
            "in each tf.Example; strings per example:"))
    with tf.control_dependencies([check]):
      dense = tf.sparse.to_dense(value, default_value="")  # [batch, 1]
      out[name] = tf.reshape(dense, [batch])  # [batch]
  return out


class _SentenceModule(TaskServingModule):
  """One or two text segments (`text` or `text_a`, `text_b`:
  params.num_text_fields)."""

  def __init__(self, model, params, config, **kwargs):
    super().__init__(model, params, config, **kwargs)
    self.text_fields = sentence_fields(params.num_text_fields)


class EncoderServingModule(_SentenceModule):
  """The bare encoder: pooled_output [b, H], sequence_output [b, seq, H]."""

  def outputs(self, features, model_outputs):
    return {"pooled_output": model_outputs["pooled_output"],
            "sequence_output": model_outputs["sequence_output"]}


class ClassificationModule(_SentenceModule):
  """logits, probabilities [b, labels], label_id int32 [b], label string
  [b] (from params.label_names, default "0", "1", ...)."""

  def __init__(self, model, params, config, **kwargs):
    super().__init__(model, params, config, **kwargs)
    self.label_names = label_table(
        params.label_names or [str(i) for i in range(model.num_labels)],
        model.num_labels)

  def outputs(self, features, model_outputs):
    logits = model_outputs["logits"]  # [b, labels]
    label_id = tf.argmax(logits, axis=-1, output_type=tf.int32)  # [b]
    return {"logits": logits,
            "probabilities": tf.nn.softmax(logits, axis=-1),
            "label_id": label_id,
            "label": tf.gather(self.label_names, label_id)}


class RegressionModule(_SentenceModule):
  """score [b] (a one-output classifier, e.g. STS-B)."""

  def outputs(self, features, model_outputs):
    return {"score": model_outputs["logits"][:, 0]}


class MultipleChoiceModule(TaskServingModule):
  """`context` [b] + `choices` [b, num_choices]: logits, probabilities
  [b, choices], choice int32 [b]."""

  text_fields = ("context", "choices")
  ids_rank = 3  # [batch, num_choices, seq]

  def __init__(self, model, params, config, **kwargs):
    super().__init__(model, params, config, **kwargs)
    self.num_choices = model.num_choices

  def preprocess_text(self, texts):
    context, choices = texts["context"], texts["choices"]
    num_choices = self.num_choices
    checks = [
        tf.debugging.assert_equal(
            tf.shape(choices)[1], num_choices,
            message=f"choices must have shape [batch, {num_choices}]"),
        tf.debugging.assert_equal(
            tf.shape(choices)[0], tf.shape(context)[0],
            message="choices and context must have the same batch size")]
    flat_choices = tf.reshape(serving_modules.after(checks, choices),
                              [-1])  # [batch * choices]
    flat_context = tf.repeat(context, num_choices)  # [batch * choices]
    packed = self.preprocessor.preprocess([flat_context, flat_choices])
    seq_length = self.preprocessor.seq_length
    return {k: tf.reshape(v, [-1, num_choices, seq_length])
            for k, v in packed.items()}  # [batch, choices, seq]

  def checked_ids(self, features):
    num_choices = self.num_choices
    features = {k: self.check_rank(features[k], 3, k,
                                   "[batch, num_choices, seq]")
                for k in INPUT_NAMES}
    checks = [tf.debugging.assert_equal(
        tf.shape(features["input_word_ids"])[1], num_choices,
        message=f"input_word_ids must have shape [batch, {num_choices}, seq]")]
    if self.in_graph_checks:  # before the reshape below can mix rows
      checks += serving_modules.same_shape_checks(features)
    features = serving_modules.after(checks, features)
    seq_length = tf.shape(features["input_word_ids"])[-1]
    flat = super().checked_ids({k: tf.reshape(v, [-1, seq_length])
                                for k, v in features.items()})  # [b * c, seq]
    return {k: tf.reshape(v, [-1, num_choices, seq_length])
            for k, v in flat.items()}

  def outputs(self, features, model_outputs):
    logits = model_outputs["logits"]  # [b, choices]
    return {"logits": logits,
            "probabilities": tf.nn.softmax(logits, axis=-1),
            "choice": tf.argmax(logits, axis=-1, output_type=tf.int32)}

  def text_specs(self):
    return {"context": tf.TensorSpec([None], tf.string, name="context"),
            "choices": tf.TensorSpec([None, None], tf.string, name="choices")}

  def example_spec(self):
    return {"context": tf.io.FixedLenFeature([], tf.string),
            "choices": tf.io.FixedLenFeature([self.num_choices], tf.string)}
