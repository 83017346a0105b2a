"""Adding a task is adding files plus one registration: a token tagging task
defined entirely here (config, model, inputs, loss, metrics, serving params
and module) trains through the shared loop, exports with
`export_savedmodel --model_dir` (a fresh process that finds the task through
the module its run record names) and serves in a TensorFlow-only process."""

import dataclasses
import os
import sys

import numpy as np
from official.modeling.hyperparams import base_config
import pytest
import tensorflow as tf
import tf_keras

from albert_tf.core import base_task
from albert_tf.core import experiment_config
from albert_tf.core import run_record
from albert_tf.core import train_lib
from albert_tf.modeling.networks.albert_encoder import AlbertEncoder
from albert_tf.modeling.networks.albert_encoder import INPUT_NAMES
from albert_tf.serving import serving_params
from albert_tf.serving import task_modules
from albert_tf.tasks import registry
from tests.testing import export_testlib
from tests.testing import tool_server
from tests.testing.repo_paths import ROOT

SEQ, TAGS, BATCH = 16, 2, 8


@dataclasses.dataclass
class TaggingDataConfig(base_config.Config):
  spm_model_file: str = ""
  seq_length: int = SEQ
  global_batch_size: int = BATCH
  eval_batch_size: int = BATCH


@dataclasses.dataclass
class TaggingExperimentConfig(experiment_config.ExperimentConfig):
  data: TaggingDataConfig = dataclasses.field(
      default_factory=TaggingDataConfig)


@dataclasses.dataclass
class TaggingParams(serving_params.ServingParams):
  num_tags: int = TAGS


class Tagger(tf_keras.Model):
  """A tag per token: a dense layer on the sequence output."""

  def __init__(self, encoder, num_tags, **kwargs):
    super().__init__(**kwargs)
    self.encoder = encoder
    self.head = tf_keras.layers.Dense(num_tags, name="tags")
    # Variables exist before a checkpoint is read or a module saves them.
    self.head.build([None, None, encoder.config.hidden_size])

  def call(self, inputs, training=False):
    sequence = self.encoder(inputs, training=training)["sequence_output"]
    return {"tag_logits": self.head(sequence)}  # [batch, seq, tags]

  @property
  def checkpoint_items(self):
    return {"encoder": self.encoder, "head": self.head}


class TaggingModule(task_modules.TaskServingModule):
  text_fields = ("text",)

  def outputs(self, features, model_outputs):
    logits = model_outputs["tag_logits"]
    return {"tag_logits": logits,
            "tags": tf.argmax(logits, -1, output_type=tf.int32)}


def _tagging_data(vocab_size, n, seed):
  """Random piece ids; the tag of a token is its id's parity."""
  rng = np.random.default_rng(seed)
  ids = rng.integers(5, vocab_size, (n, SEQ)).astype(np.int32)
  ids[:, 0], ids[:, -1] = 2, 3
  return {"input_word_ids": ids, "input_mask": np.ones_like(ids),
          "input_type_ids": np.zeros_like(ids), "tags": ids % 2}


@registry.register_task
class TaggingTask(base_task.Task):
  name = "test_token_tagging"
  config_cls = TaggingExperimentConfig
  serving_params_cls = TaggingParams
  serving_tasks = {"test_tagging": {}}

  def __init__(self, config, model_dir=None):
    super().__init__(config, model_dir)
    self.global_batch_size = config.data.global_batch_size
    self.eval_batch_size = config.data.eval_batch_size

  def build_inputs(self, input_context, training):
    data = _tagging_data(self.config.model.vocab_size, 64,
                         seed=0 if training else 1)
    batch = (input_context.get_per_replica_batch_size(self.global_batch_size)
             if input_context else self.global_batch_size)
    ds = tf.data.Dataset.from_tensor_slices(data)
    return (ds.repeat() if training else ds).batch(batch,
                                                   drop_remainder=True)

  def loss_normalizers(self, features):
    return {"count": tf.reduce_sum(tf.cast(features["input_mask"],
                                           tf.float32))}

  def compute_sums(self, model, features, training):
    logits = model({k: features[k] for k in INPUT_NAMES},
                   training=training)["tag_logits"]
    mask = tf.cast(features["input_mask"], tf.float32)  # [batch, seq]
    ce = tf.nn.sparse_softmax_cross_entropy_with_logits(
        features["tags"], logits)  # [batch, seq]
    hits = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32),
                            features["tags"]), tf.float32)
    return {"loss_sum": tf.reduce_sum(mask * ce),
            "correct": tf.reduce_sum(mask * hits),
            "count": tf.reduce_sum(mask)}

  def loss_from_sums(self, sums, normalizers):
    return sums["loss_sum"] / tf.maximum(normalizers["count"], 1.0)

  def metrics_from_sums(self, sums):
    count = tf.maximum(sums["count"], 1.0)
    return {"loss": sums["loss_sum"] / count,
            "accuracy": sums["correct"] / count}

  def validate_inputs(self, training=True):
    del training

  def initialize(self, model):
    del model

  def serving_params(self, recorded_facts):
    del recorded_facts
    d = self.config.data
    return TaggingParams(max_seq_length=d.seq_length,
                         spm_model_file=d.spm_model_file)

  @classmethod
  def model_for(cls, kind, model_config, params, dropout_rate=0.0):
    del kind, dropout_rate
    return Tagger(AlbertEncoder(model_config), params.num_tags)

  @classmethod
  def serving_module(cls, kind, model, params, assets):
    del kind
    config = model.encoder.config
    params.check_text_in("a tagging export", config)
    return TaggingModule(model, params, config, **assets)


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("custom_task")
  spm_file = export_testlib.train_spm(str(tmp))
  config = experiment_config.load_experiment_config(
      TaggingExperimentConfig, [], ",".join([
          "model.vocab_size=500", "model.embedding_size=8",
          "model.hidden_size=16", "model.num_hidden_layers=2",
          "model.num_attention_heads=2", "model.intermediate_size=32",
          f"model.max_position_embeddings={SEQ}",
          "trainer.train_steps=2", "trainer.steps_per_loop=1",
          "trainer.checkpoint_interval=2", "trainer.eval_interval=2",
          "trainer.best_metric=accuracy", "optimizer.name=adamw",
          "optimizer.learning_rate=0.001", "optimizer.num_warmup_steps=0",
          f"data.spm_model_file={spm_file}"]))
  model_dir = str(tmp / "run")
  result = train_lib.run_experiment(TaggingTask(config, model_dir), config,
                                    model_dir, "train_and_eval")
  return tmp, model_dir, result


def test_a_task_defined_here_trains_through_the_shared_loop(trained_run):
  _, model_dir, result = trained_run
  assert result["train"]["step"] == 2
  assert set(result["train"]["eval"][2]) >= {"loss", "accuracy"}
  record = run_record.read(model_dir)
  assert record.task == "test_token_tagging"
  assert record.facts["task_module"] == __name__
  assert os.path.isfile(os.path.join(model_dir, "checkpoints",
                                     "ckpt-2.index"))


@pytest.mark.slow
def test_export_in_a_fresh_process_and_serve_without_albert_tf(trained_run):
  tmp, model_dir, _ = trained_run
  # A fresh process knows nothing of this module: the run record names it.
  proc = tool_server.run(
      [sys.executable, "-m", "albert_tf.export_savedmodel",
       f"--model_dir={model_dir}", f"--export_dir={tmp / 'export'}"],
      cwd=ROOT, env=tool_server.tool_env(),
      capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  path = str(tmp / "export" / "1")
  assert "serving_default" in proc.stdout and "tags" in proc.stdout

  # The same ids through the run's model in this process.
  task = registry.task_of_record(run_record.read(model_dir))
  model = task.build_model()
  task.restore_for_inference(model, model_dir)
  data = _tagging_data(500, 3, seed=7)
  inputs = {k: data[k] for k in INPUT_NAMES}
  expected = model(inputs)["tag_logits"].numpy()
  np.savez(tmp / "ids.npz", **inputs)
  served = export_testlib.run_isolated(f"""
      import numpy as np
      import tensorflow as tf
      import tensorflow_text  # noqa: registers the SentencePiece op
      loaded = tf.saved_model.load({path!r})
      ids = dict(np.load({str(tmp / 'ids.npz')!r}))
      out = loaded.signatures["serve_ids"](
          **{{k: tf.constant(v) for k, v in ids.items()}})
      text = loaded.signatures["serving_default"](
          text=tf.constant(["the cat sat on the mat"]))
      emit({{"logits": out["tag_logits"].numpy().tolist(),
             "text_tags": text["tags"].numpy().shape}})
  """, str(tmp))
  np.testing.assert_allclose(np.array(served["logits"]), expected,
                             rtol=1e-5, atol=1e-5)
  assert served["text_tags"] == [1, SEQ]
