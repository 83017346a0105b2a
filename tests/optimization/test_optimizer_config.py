"""albert_tf.optimization.optimizer_config: the optimizer defaults are
spelled once and every consumer takes them from there."""

import dataclasses
import inspect

import pytest

from albert_tf.core import experiment_config
from albert_tf.optimization import lamb
from albert_tf.optimization import optimizer_config
from albert_tf.optimization import optimizer_factory

# The original ALBERT recipe (google-research/albert run_pretraining.py and
# lamb_optimizer.py / optimization.py): the reference the defaults follow.
ORIGINAL = {"name": "lamb", "learning_rate": 0.00176,
            "num_warmup_steps": 3125, "start_warmup_step": 0,
            "poly_power": 1.0, "weight_decay_rate": 0.01,
            "bias_correction": False, "beta_1": 0.9, "beta_2": 0.999,
            "epsilon": 1e-6, "clip_norm": 1.0}

# Argument names of the consumers -> OptimizerConfig field; `name` of the
# Keras objects is their name scope, not the optimizer's choice.
RENAMED = {"init_lr": "learning_rate", "name": None}


def test_defaults_are_the_original_recipe():
  assert optimizer_config.OptimizerConfig().as_dict() == ORIGINAL
  assert optimizer_config.DEFAULTS.as_dict() == ORIGINAL


@pytest.mark.parametrize("consumer", [
    lamb.LAMB.__init__, lamb.AdamWeightDecay.__init__,
    optimizer_factory.create_optimizer,
    optimizer_factory.WarmupPolynomialDecay.__init__,
    optimizer_factory.clip_by_global_norm,
], ids=lambda f: f.__qualname__)
def test_every_default_argument_is_the_config_default(consumer):
  fields = {f.name for f in dataclasses.fields(
      optimizer_config.OptimizerConfig)}
  checked = 0
  for name, param in inspect.signature(consumer).parameters.items():
    field = RENAMED.get(name, name)
    if field in fields and param.default is not inspect.Parameter.empty:
      assert param.default == getattr(optimizer_config.DEFAULTS, field), (
          f"{consumer.__qualname__}({name}=...) drifted from OptimizerConfig")
      checked += 1
  assert checked, f"{consumer.__qualname__} takes no optimizer setting"


def test_the_experiment_section_is_the_optimizer_config():
  section = experiment_config.ExperimentConfig().optimizer
  assert type(section) is optimizer_config.OptimizerConfig
  assert section.as_dict() == optimizer_config.DEFAULTS.as_dict()


@pytest.mark.parametrize("name", ["lamb", "adamw"])
def test_create_optimizer_from_config_uses_every_field(name):
  config = optimizer_config.OptimizerConfig(
      name=name.upper(), learning_rate=0.5, num_warmup_steps=7,
      start_warmup_step=3, poly_power=2.0, weight_decay_rate=0.25,
      bias_correction=True, beta_1=0.5, beta_2=0.75, epsilon=0.125,
      clip_norm=9.0)
  optimizer, schedule = optimizer_factory.create_optimizer_from_config(
      config, num_train_steps=100)
  assert isinstance(optimizer, lamb.LAMB)
  assert optimizer.layer_adaptation == (name == "lamb")
  assert (optimizer.beta_1, optimizer.beta_2, optimizer.epsilon) == (
      0.5, 0.75, 0.125)
  assert optimizer.bias_correction
  assert float(optimizer._get_hyper("weight_decay_rate")) == 0.25  # pylint: disable=protected-access
  assert schedule.get_config() == {
      "init_lr": 0.5, "num_train_steps": 100, "num_warmup_steps": 7,
      "start_warmup_step": 3, "poly_power": 2.0, "end_learning_rate": 0.0,
      "name": None}


@pytest.mark.parametrize("warmup,start,steps", [(3125, 0, 300), (50, 10, 40),
                                                (7, 0, 1)])
def test_a_warmup_longer_than_the_run_is_named_with_its_peak(warmup, start,
                                                             steps):
  """The warning states both settings and the highest rate the schedule
  reaches within the run (read from the schedule itself)."""
  config = optimizer_config.OptimizerConfig(
      learning_rate=1e-4, num_warmup_steps=warmup, start_warmup_step=start)
  schedule = optimizer_factory.WarmupPolynomialDecay(
      1e-4, steps, warmup, start_warmup_step=start)
  peak = max(float(schedule(s)) for s in range(steps)) / 1e-4
  start_words = (f" from optimizer.start_warmup_step={start}" if start
                 else "")
  assert optimizer_config.warmup_longer_than_run(config, steps) == (
      f"optimizer.num_warmup_steps={warmup}{start_words} outlasts "
      f"trainer.train_steps={steps}: the learning rate peaks at "
      f"{peak:.1%} of optimizer.learning_rate=0.0001 (its last step); set "
      "optimizer.num_warmup_steps below trainer.train_steps (e.g. a tenth "
      "of it)")


@pytest.mark.parametrize("warmup,start,steps", [(300, 0, 300), (30, 0, 300),
                                                (0, 0, 5), (20, 80, 100)])
def test_a_warmup_within_the_run_says_nothing(warmup, start, steps):
  config = optimizer_config.OptimizerConfig(num_warmup_steps=warmup,
                                            start_warmup_step=start)
  assert optimizer_config.warmup_longer_than_run(config, steps) is None
