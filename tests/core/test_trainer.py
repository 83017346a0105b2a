"""In-process tests of the generic trainer on the pretraining task: learning,
XLA compilation, NaN stop, input validation and experiment configs."""

import json
import math
import os

import numpy as np
import pytest
import tensorflow as tf
import yaml

from albert_tf.core import actions
from albert_tf.core import experiment_config
from albert_tf.core import run_record
from albert_tf.core import train_lib
from albert_tf.core import trainer as trainer_lib
from albert_tf.modeling import albert_config
from albert_tf.tasks import pretraining
from tests.testing import pretrain_testutil as tu


@pytest.fixture(scope="module")
def data(tmp_path_factory):
  train, spm = tu.worker_pretraining_data(tmp_path_factory)
  return train, train, spm


def build_config(config_files, params_override="", **flag_values):
  return experiment_config.load_experiment_config(
      pretraining.PretrainingExperimentConfig, config_files,
      params_override, flag_values)


def tiny_config(train, held_out="", **overrides):
  return build_config([tu.TINY_RECIPE],
                      tu.tiny_overrides(train, held_out, **overrides))


def read_metrics(model_dir, mode="train"):
  with open(os.path.join(model_dir, actions.METRICS_FILE)) as f:
    return [r for r in map(json.loads, f) if r["mode"] == mode]


@pytest.mark.slow
def test_tiny_pretraining_learns_mlm_and_sop(data, tmp_path):
  """400 CPU steps of the tiny recipe (AdamW 1e-3, batch 64) on
  create_pretraining_data.py output: MLM and SOP accuracy rise well above
  their starting values.

  Data: botchan's question -> reply turns (see
  pretrain_testutil.make_question_reply_data); metrics are over the whole
  training file (evaluate()), before and after training. Thresholds: MLM
  accuracy from < 0.02 (untrained; 1000-piece vocab) to >= 0.08 (a run:
  0.115); SOP accuracy from 0.4-0.6 (chance) to >= 0.80 (a run: 0.945).
  """
  train = tu.make_question_reply_data(os.path.dirname(data[0]))
  model_dir = str(tmp_path / "run")
  # The recipe's own model (2 layers): its learning is what is tested.
  config = tiny_config(train, **{"data.global_batch_size": 64,
                                 "model.num_hidden_layers": 2})
  task = pretraining.PretrainingTask(config)
  trainer = trainer_lib.Trainer(task, config, model_dir)
  start = trainer.evaluate()
  trainer.train()
  final = trainer.evaluate()
  print("start", start, "final", final)
  assert start["masked_lm_accuracy"] < 0.02
  assert 0.4 < start["sentence_order_accuracy"] < 0.6
  assert final["masked_lm_accuracy"] >= 0.08
  assert final["sentence_order_accuracy"] >= 0.80
  assert final["loss"] < start["loss"] - 1.0
  # Logged curves and files.
  rows = read_metrics(model_dir)
  assert [r["step"] for r in rows] == list(
      range(config.trainer.steps_per_loop, config.trainer.train_steps + 1,
            config.trainer.steps_per_loop))
  for key in ("learning_rate", "grad_norm", "steps_per_sec",
              "examples_per_sec", "masked_lm_accuracy",
              "sentence_order_loss"):
    assert all(math.isfinite(r[key]) for r in rows), key
  assert rows[-1]["sentence_order_accuracy"] > rows[0][
      "sentence_order_accuracy"] + 0.2
  assert os.listdir(os.path.join(model_dir, "train"))  # TensorBoard events
  assert tf.train.latest_checkpoint(trainer.checkpoint_dir).endswith(
      f"ckpt-{config.trainer.train_steps}")
  with open(os.path.join(model_dir, "best", "best.json")) as f:
    best = json.load(f)
  assert best["step"] == config.trainer.train_steps
  assert best["masked_lm_accuracy"] == final["masked_lm_accuracy"]


@pytest.mark.slow
def test_jit_compile_static_shapes_and_same_loss(data, tmp_path):
  """The forward/backward step compiles with XLA, every shape static, and
  gives the same losses as the non-XLA step."""
  train, _, _ = data
  losses = {}
  for jit in (False, True):
    config = tiny_config(train, **{"runtime.jit_compile": jit,
                                   "trainer.train_steps": 4,
                                   "trainer.steps_per_loop": 2,
                                   "runtime.deterministic": False})
    task = pretraining.PretrainingTask(config)
    trainer = trainer_lib.Trainer(task, config, str(tmp_path / f"jit{jit}"))
    if jit:
      features = next(iter(task.build_inputs(None, training=True)))
      for t in features.values():
        assert t.shape.is_fully_defined(), t.shape
      normalizers = task.loss_normalizers(features)
      fn = tf.function(trainer._compute_gradients, jit_compile=True)  # pylint: disable=protected-access
      hlo = fn.experimental_get_compiler_ir(features, normalizers)(
          stage="hlo")
      assert "ENTRY" in hlo
      assert "<=" not in hlo and "?" not in hlo  # no dynamic dimensions
    trainer.train()
    losses[jit] = [r["loss"] for r in read_metrics(trainer.model_dir)]
  np.testing.assert_allclose(losses[True], losses[False], rtol=2e-3)


class _PoisonedTask(pretraining.PretrainingTask):
  """Feeds NaN mask weights from global batch `poison_from` on."""
  poison_from = 12

  def build_inputs(self, input_context, training):
    ds = super().build_inputs(input_context, training)
    def poison(i, f):
      f = dict(f)
      f["masked_lm_weights"] = tf.where(
          i >= self.poison_from, float("nan"), f["masked_lm_weights"])
      return f
    return ds.enumerate().map(poison)


def test_nan_loss_stops_and_keeps_last_good_checkpoint(data, tmp_path):
  train, _, _ = data
  config = tiny_config(train, **{"trainer.train_steps": 30,
                                 "trainer.steps_per_loop": 5,
                                 "trainer.checkpoint_interval": 5})
  trainer = trainer_lib.Trainer(_PoisonedTask(config), config, str(tmp_path))
  with pytest.raises(actions.NonFiniteLossError,
                     match=r"NaN or infinite between steps 10 and 15.*ckpt-10"):
    trainer.train()
  latest = tf.train.latest_checkpoint(trainer.checkpoint_dir)
  assert latest.endswith("ckpt-10")
  reader = tf.train.load_checkpoint(latest)
  names = [n for n in reader.get_variable_to_shape_map()
           if n.startswith(("model/", "encoder/", "optimizer/"))]
  assert len(names) > 20
  for name in names:
    value = reader.get_tensor(name)
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
      assert np.all(np.isfinite(value)), name


def test_bad_inputs_fail_before_training(data, tmp_path):
  train, _, _ = data
  empty = tmp_path / "empty.tfrecord"
  empty.write_bytes(b"")

  def run(**kw):
    config = tiny_config(train, **kw)
    return train_lib.run_experiment(pretraining.PretrainingTask(config),
                                    config, str(tmp_path / "m"))

  with pytest.raises(FileNotFoundError, match="nothing-here"):
    run(**{"data.input_path": str(tmp_path / "nothing-here*.tfrecord")})
  with pytest.raises(ValueError, match="empty.tfrecord: empty input file"):
    run(**{"data.input_path": str(empty)})
  with pytest.raises(ValueError, match=r"length 64 but data.seq_length is 32"):
    run(**{"data.seq_length": 32})
  with pytest.raises(ValueError, match=r"length 10 but "
                     r"data.max_predictions_per_seq is 20"):
    run(**{"data.max_predictions_per_seq": 20})
  assert not (tmp_path / "m" / "checkpoints").exists()


@pytest.mark.parametrize("size,hidden", [("base", 768), ("large", 1024),
                                         ("xlarge", 2048), ("xxlarge", 4096)])
def test_paper_recipes(size, hidden):
  for version in ("v1", "v2"):
    path = os.path.join(albert_config.CONFIG_DIR, "pretraining",
                        f"albert_{size}_{version}.yaml")
    c = experiment_config.load_experiment_config(
        pretraining.PretrainingExperimentConfig, [path])
    assert (c.data.global_batch_size, c.data.seq_length) == (4096, 512)
    assert (c.optimizer.name, c.optimizer.learning_rate) == ("lamb", 0.00176)
    assert (c.trainer.train_steps, c.optimizer.num_warmup_steps) == (125000,
                                                                     3125)
    assert c.optimizer.epsilon == 1e-6 and c.optimizer.clip_norm == 1.0
    assert c.model.hidden_size == hidden
    assert c.model.as_dict() == albert_config.AlbertConfig.\
        from_preset(f"albert_{size}_{version}").as_dict()


def test_config_files_overrides_and_errors(tmp_path):
  model_file = os.path.join(albert_config.PRESET_DIR, "albert_tiny.yaml")
  c = build_config(
      [tu.TINY_RECIPE, model_file],
      "trainer.train_steps=7,optimizer.name=adamw,data.seq_length=32",
      runtime={"distribution_strategy": "mirrored"},
      trainer={"init_checkpoint": "/x/ckpt", "init_from_group0": True})
  assert c.model.num_hidden_layers == 4  # flat model file sets `model`
  assert c.trainer.train_steps == 7 and c.optimizer.name == "adamw"
  assert c.runtime.distribution_strategy == "mirrored"
  assert c.trainer.init_checkpoint == "/x/ckpt" and c.trainer.init_from_group0
  run_record.write(str(tmp_path), c, {"task": "pretraining"})
  again = build_config([str(tmp_path / run_record.CONFIG_NAME)])
  assert again.as_dict() == c.as_dict()
  with pytest.raises(ValueError, match="trainer.no_such_field|no_such_field"):
    build_config([tu.TINY_RECIPE], "trainer.no_such_field=1")
  with pytest.raises(ValueError, match="optimizer.name"):
    build_config([tu.TINY_RECIPE], "optimizer.name=sgd")
  with pytest.raises(ValueError, match="gradient_accumulation_steps"):
    build_config([tu.TINY_RECIPE], "trainer.gradient_accumulation_steps=3")
  # A released albert_config.json, extra keys and all, sets `model`.
  release = tmp_path / "albert_config.json"
  release.write_text(json.dumps(dict(
      vocab_size=30000, embedding_size=128, hidden_size=1024,
      num_hidden_layers=24, num_hidden_groups=1, inner_group_num=1,
      num_attention_heads=16, intermediate_size=4096, hidden_act="gelu",
      hidden_dropout_prob=0, attention_probs_dropout_prob=0,
      max_position_embeddings=512, type_vocab_size=2, initializer_range=0.02,
      net_structure_type=0, gap_size=0, num_memory_blocks=0,
      down_scale_factor=1, layers_to_keep=[])))
  c = build_config([tu.TINY_RECIPE, str(release)])
  assert (c.model.hidden_size, c.model.num_hidden_layers) == (1024, 24)
  bad = tmp_path / "bad.yaml"
  bad.write_text(yaml.safe_dump({"trainer": {"train_step": 3}}))
  with pytest.raises(ValueError, match="bad.yaml"):
    build_config([str(bad)])


def test_plot_metrics_writes_png(tmp_path):
  from albert_tf import plot_metrics
  path = tmp_path / "metrics.jsonl"
  rows = [{"mode": "train", "step": s, "loss": 7 - s / 10,
           "masked_lm_accuracy": s / 100, "sentence_order_accuracy": 0.5,
           "learning_rate": 1e-3} for s in range(10, 60, 10)]
  rows.append({"mode": "eval", "step": 50, "loss": 2.5,
               "masked_lm_accuracy": 0.4})
  path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
  out = plot_metrics.plot(str(path), str(tmp_path / "c.png"))
  with open(out, "rb") as f:
    assert f.read(8) == b"\x89PNG\r\n\x1a\n"
  assert plot_metrics.read_metrics(str(path))["eval"][0]["loss"] == 2.5
  path.write_text('{"step": 1}\nnot json\n')
  with pytest.raises(ValueError, match="metrics.jsonl:2"):
    plot_metrics.read_metrics(str(path))
