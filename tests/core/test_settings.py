"""Each setting is declared once, on its config field (core/settings.py):
the resume rules, flags and export rules are read from the fields."""

import dataclasses

from official.modeling.hyperparams import base_config
import pytest

from albert_tf.core import experiment_config
from albert_tf.core import run_record
from albert_tf.core import settings
from albert_tf.core.settings import DATA_POSITION, SAFE, setting
from albert_tf.tasks import pretraining
from albert_tf.tasks import sentence_prediction


@dataclasses.dataclass
class ToyData(base_config.Config):
  window: int = setting(4, resume=SAFE, flag="A toy's window.")
  shards: int = setting(2, resume=DATA_POSITION)
  width: int = 8
  names: list = setting(["a"])


@dataclasses.dataclass
class ToyConfig(experiment_config.ExperimentConfig):
  data: ToyData = dataclasses.field(default_factory=ToyData)


def test_a_new_config_declares_its_own_resume_rules():
  rules = settings.resume_rules(ToyConfig)
  assert (rules["data.window"], rules["data.shards"], rules["data.width"]) == (
      SAFE, DATA_POSITION, settings.FIXED)
  assert rules["trainer.train_steps"] == SAFE
  assert settings.flagged(ToyConfig)["window"].path == "data.window"
  assert ToyConfig().data.names == ["a"] and ToyConfig().data.names is not (
      ToyConfig().data.names)
  recorded = run_record.RunRecord("/run", "toy", {}, ToyConfig().as_dict())
  changed = ToyConfig()
  changed.data.window, changed.data.shards = 6, 3
  check = run_record.check_resume(recorded, changed)
  assert check.changes == {"data.window": [4, 6], "data.shards": [2, 3]}
  assert check.data_position_reset
  assert check.data_position_fields == ["data.shards"]
  changed.data.width = 9
  with pytest.raises(ValueError, match=r"^data\.width is 9 but "):
    run_record.check_resume(recorded, changed)


def test_each_task_config_has_its_own_best_metric_default():
  assert pretraining.PretrainingExperimentConfig().trainer.best_metric == (
      "masked_lm_accuracy")
  glue = sentence_prediction.GlueExperimentConfig
  assert glue().trainer.best_metric == "accuracy"
  # A value the user gives is kept (it was replaced by "accuracy").
  config = experiment_config.load_experiment_config(
      glue, flag_values={"trainer": {"best_metric": "masked_lm_accuracy"}})
  assert config.trainer.best_metric == "masked_lm_accuracy"


def test_setting_refuses_an_unknown_resume_rule():
  with pytest.raises(ValueError, match="resume must be one of"):
    setting(1, resume="sometimes")
