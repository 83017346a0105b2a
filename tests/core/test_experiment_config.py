"""The one config loader: typed values, one-line errors naming the field and
the file/override, packaged configs, the model config of export/convert."""

import json
import logging
import re
import types

import pytest

from albert_tf.core import best_checkpoint
from albert_tf.core import experiment_config as ec
from albert_tf.core import train_lib
from albert_tf.modeling import albert_config
from albert_tf.tasks import finetuning
from albert_tf.tasks import question_answering
from albert_tf.tasks import pretraining

TINY = "pretraining/albert_tiny_cpu.yaml"  # packaged: no repo path needed


def load(override="", files=(TINY,), cls=pretraining.PretrainingExperimentConfig):
  return ec.load_experiment_config(cls, list(files), override)


def test_packaged_config_and_integral_float():
  c = load("trainer.train_steps=20.0,optimizer.learning_rate=1e-6")
  assert c.model.hidden_size == 64  # albert_tiny_cpu.yaml was found
  assert c.trainer.train_steps == 20 and isinstance(c.trainer.train_steps,
                                                    int)
  assert c.optimizer.learning_rate == 1e-6
  assert load("trainer.init_checkpoint=").trainer.init_checkpoint == ""


@pytest.mark.parametrize("override,message", [
    ("trainer.train_steps=abc",
     "trainer.train_steps must be an integer, got 'abc'"),
    ("trainer.train_steps=20.7",
     "trainer.train_steps must be an integer, got 20.7"),
    ("optimizer.learning_rate=fast",
     "optimizer.learning_rate must be a number, got 'fast'"),
    ("data.seed=x", "data.seed must be an integer"),
    ("trainer.no_such=1", "unknown field trainer.no_such"),
])
def test_wrong_type_overrides_name_field_and_override(override, message):
  with pytest.raises(ValueError) as e:
    load(override)
  assert message in str(e.value)
  assert str(e.value).startswith(f"--params_override {override!r}")
  assert "\n" not in str(e.value)


@pytest.mark.parametrize("override,message", [
    ("data.cycle_length=0", "data.cycle_length must be > 0, got 0"),
    ("data.shuffle_buffer_size=-1",
     "data.shuffle_buffer_size must be >= 0, got -1"),
    ("data.eval_batch_size=-3", "data.eval_batch_size must be >= 0, got -3"),
])
def test_input_pipeline_sizes_out_of_range_are_refused(override, message):
  """They passed the loader and ended in TensorFlow tracebacks, the eval
  batch size only at the first evaluation, after the training."""
  with pytest.raises(ValueError) as e:
    load(override)
  assert str(e.value) == message
  # Zero is a setting of its own for these two: the global batch size, and
  # no shuffling.
  config = load("data.eval_batch_size=0,data.shuffle_buffer_size=0")
  assert (config.data.eval_batch_size, config.data.shuffle_buffer_size) == (
      0, 0)


def test_yaml_bool_must_be_true_or_false(tmp_path):
  path = tmp_path / "bad.yaml"
  path.write_text('trainer:\n  save_data_position: "no"\n')
  with pytest.raises(ValueError, match=r"bad.yaml: trainer.save_data_position"
                     r" must be true or false, got 'no'"):
    load(files=[TINY, str(path)])
  path.write_text("trainer:\n  save_data_position: false\n")
  assert not load(files=[TINY, str(path)]).trainer.save_data_position


def test_yaml_syntax_error_names_file_and_line(tmp_path):
  path = tmp_path / "broken.yaml"
  path.write_text("trainer:\n  train_steps: 3\n  steps_per_loop: [1\n"
                  "runtime:\n  seed: 1\n")
  with pytest.raises(ValueError) as e:
    load(files=[str(path)])
  assert str(e.value).startswith(f"{path}:4: YAML syntax error")
  assert "\n" not in str(e.value)


@pytest.mark.parametrize("name,text,message", [
    # A repeated section dropped the first one (its train_steps) silently.
    ("dup.yaml", "trainer:\n  train_steps: 2\noptimizer:\n"
     "  num_warmup_steps: 1\ntrainer:\n  steps_per_loop: 1\n",
     ":5: duplicate key 'trainer' (first at line 1): YAML would keep only "
     "the last"),
    ("dup.yaml", "trainer:\n  train_steps: 3\n  steps_per_loop: 1\n"
     "  train_steps: 1\n",
     ":4: duplicate key 'train_steps' (first at line 2)"),
    ("albert_config.json", '{"hidden_size": 64,\n "num_attention_heads": 2,'
     '\n "hidden_size": 128}\n', ":3: duplicate key 'hidden_size' (first "
     "at line 1)"),
])
def test_a_key_given_twice_is_refused_naming_file_and_line(tmp_path, name,
                                                           text, message):
  path = tmp_path / name
  path.write_text(text)
  for read in (lambda: load(files=[TINY, str(path)]),
               lambda: albert_config.load_model_config([str(path)])):
    with pytest.raises(ValueError) as e:
      read()
    assert str(e.value).startswith(f"{path}{message}")
    assert "\n" not in str(e.value)


def test_a_yaml_merge_key_is_no_duplicate(tmp_path):
  # `<<: *base` then a key: the key overrides the merged one on purpose.
  path = tmp_path / "merge.yaml"
  path.write_text("base: &b {train_steps: 1, steps_per_loop: 1}\n"
                  "trainer:\n  <<: *b\n  train_steps: 4\n")
  assert albert_config.read_config_file(str(path))["trainer"] == {
      "train_steps": 4, "steps_per_loop": 1}


def test_missing_config_file():
  with pytest.raises(FileNotFoundError, match="nope.yaml does not exist"):
    load(files=["nope.yaml"])


def test_family_data_configs_keep_their_fields_apart():
  c = load(files=["models/albert_base_v2.yaml",
                  "finetuning/squad_v2.0.yaml"], cls=question_answering.SquadExperimentConfig)
  assert c.data.version_2_with_negative and c.data.doc_stride == 128
  with pytest.raises(ValueError, match="unknown field data.task_name"):
    load("data.task_name=mnli", files=["finetuning/squad_v2.0.yaml"],
         cls=question_answering.SquadExperimentConfig)


def test_model_config_sources(tmp_path):
  base = albert_config.load_model_config(["albert_base_v2"])
  assert (base.hidden_size, base.num_hidden_layers) == (768, 12)
  relu = albert_config.load_model_config(["models/albert_base_v2.yaml"],
                              "model.hidden_act=relu")
  assert relu.hidden_act == "relu"
  release = tmp_path / "albert_config.json"
  release.write_text(json.dumps(dict(base.as_dict(), num_hidden_layers=6,
                                     net_structure_type=0)))
  assert albert_config.load_model_config([str(release)]).num_hidden_layers == 6
  # A directory: its albert_config.json (or a run's experiment_config.yaml).
  assert albert_config.load_model_config([str(tmp_path)]).num_hidden_layers == 6
  with pytest.raises(ValueError, match="unknown model preset"):
    albert_config.load_model_config(["albert_huge"])


# YAML 1.1 reads `2e-2` and `1e-12` (no dot) as strings; every reader must
# read them as the floats 0.02 and 1e-12 (initializer_range is checked > 0).
MODEL_YAML = """\
hidden_size: 64
num_attention_heads: 2
intermediate_size: 128
num_hidden_layers: 2
embedding_size: 16
vocab_size: 100
initializer_range: 2e-2
hidden_dropout_prob: 1e-12
"""


@pytest.mark.parametrize("nested", [False, True])
def test_every_model_reader_reads_the_same_yaml_alike(tmp_path, nested):
  path = tmp_path / "model.yaml"
  text = MODEL_YAML
  if nested:  # an experiment config: the fields under `model:`
    text = "model:\n" + "".join(f"  {l}\n" for l in text.splitlines())
  path.write_text(text)
  by_yaml = albert_config.AlbertConfig.from_yaml(str(path))
  by_loader = albert_config.load_model_config([str(path)])
  by_run_loader = ec.load_experiment_config(ec.ExperimentConfig,
                                            [str(path)]).model
  json_path = tmp_path / "albert_config.json"
  json_path.write_text(json.dumps(by_loader.as_dict()))
  by_json = albert_config.AlbertConfig.from_json_file(str(json_path))
  assert by_yaml.initializer_range == 0.02
  assert by_yaml.hidden_dropout_prob == 1e-12
  assert (by_yaml.hidden_size, by_yaml.vocab_size) == (64, 100)
  for other in (by_loader, by_run_loader, by_json):
    assert other.as_dict() == by_yaml.as_dict()


def test_a_flat_model_file_with_an_unknown_key_is_refused_by_every_reader(
    tmp_path):
  """Not read as an experiment config whose model stays at the defaults."""
  path = tmp_path / "model.yaml"
  path.write_text(MODEL_YAML + "hiden_size: 32\n")
  for read in (albert_config.AlbertConfig.from_yaml,
               lambda p: albert_config.load_model_config([p]),
               lambda p: ec.load_experiment_config(ec.ExperimentConfig, [p])):
    with pytest.raises(ValueError,
                       match=r"model\.yaml: unknown AlbertConfig.*hiden_size"):
      read(str(path))


def test_from_dict_checks_types_like_the_file_reader():
  with pytest.raises(ValueError, match=r"hidden_size must be an integer"):
    albert_config.AlbertConfig.from_dict({"hidden_size": "big"})


@pytest.mark.parametrize("override,message", [
    ("runtime.distribution_strategy=default,runtime.tpu=local",
     "runtime.tpu='local' (--tpu) selects the TPU strategy; "
     "runtime.distribution_strategy=default would not use it"),
    ("runtime.distribution_strategy=mirrored,runtime.tpu=my-tpu",
     "runtime.distribution_strategy=mirrored would not use it"),
    ("runtime.distribution_strategy=default,runtime.num_cpu_devices=2",
     "runtime.num_cpu_devices=2 splits the CPU for the mirrored strategy "
     "only; runtime.distribution_strategy=default would run on one device"),
    ("runtime.distribution_strategy=auto,runtime.num_cpu_devices=2",
     "runtime.distribution_strategy=auto would run on one device"),
    ("runtime.distribution_strategy=multi_worker_mirrored,"
     "runtime.num_cpu_devices=4", "multi_worker_mirrored would run on one"),
])
def test_runtime_settings_the_strategy_would_not_use_are_refused(override,
                                                                 message):
  """--num_cpu_devices=2 with the default strategy ran on one device, --tpu
  with another strategy ran without the TPU: both without a word."""
  with pytest.raises(ValueError, match=re.escape(message)):
    train_lib.strategy_from_config(load(override).runtime)


def test_a_best_metric_without_in_loop_evaluation_warns(caplog):
  """SQuAD evaluates after training only: its recipes' best_metric: f1 kept
  no best checkpoint without a word."""
  squad = load(files=["finetuning/squad_v1.1.yaml"],
               cls=question_answering.SquadExperimentConfig)
  assert squad.trainer.best_metric == ""
  no_loop_eval = types.SimpleNamespace(in_loop_eval=False)
  with caplog.at_level(logging.WARNING, logger="absl"):
    best_checkpoint.check_task_best_metric(no_loop_eval, squad)
    assert not caplog.records
    best_checkpoint.check_task_best_metric(no_loop_eval, load(
        "trainer.best_metric=f1", files=["finetuning/squad_v1.1.yaml"],
        cls=question_answering.SquadExperimentConfig))
  assert "trainer.best_metric=f1 is not used" in caplog.text


@pytest.mark.parametrize("metric", ["loss", "sentence_order_loss",
                                    "perplexity"])
def test_a_loss_kept_by_its_maximum_is_refused(metric):
  """trainer.best_metric=loss with the default mode max kept the checkpoint
  of the highest loss without a word."""
  message = (f"trainer.best_metric={metric} with trainer.best_metric_mode=max"
             f" would keep the checkpoint of the highest {metric}; set "
             "trainer.best_metric_mode=min")
  with pytest.raises(ValueError, match=re.escape(message)):
    load(f"trainer.best_metric={metric}")
  assert load(f"trainer.best_metric={metric},"
              "trainer.best_metric_mode=min").trainer.best_metric == metric


def test_no_default_best_metric_is_a_loss_kept_by_its_maximum():
  """No task's default best metric is a loss kept by its maximum."""
  for cls in (pretraining.PretrainingExperimentConfig,
              finetuning.FinetuningExperimentConfig,
              question_answering.SquadExperimentConfig):
    trainer = cls().trainer
    assert not (trainer.best_metric_mode == "max" and trainer.best_metric
                .endswith(ec.LOWER_IS_BETTER_SUFFIXES)), cls
