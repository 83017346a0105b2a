"""A task's serving params are a view of its config: each export setting is
declared once, on a config field marked `serving=True`, or on the params
class when no config field holds it (serving/serving_params.py)."""

import dataclasses

from official.modeling.hyperparams import base_config
import pytest

from albert_tf.core import experiment_config
from albert_tf.core import settings
from albert_tf.core.settings import SAFE, setting
from albert_tf.serving import serving_params
from albert_tf.tasks import all_tasks  # pylint: disable=unused-import
from albert_tf.tasks import question_answering
from albert_tf.tasks import registry
from albert_tf.tasks import sentence_prediction


@dataclasses.dataclass
class ToyData(serving_params.TextInputConfig):
  window: int = setting(4, resume=SAFE, serving=True, export=True,
                        flag="A toy's window.")
  shards: int = 2


@dataclasses.dataclass
class ToyConfig(experiment_config.ExperimentConfig):
  data: ToyData = dataclasses.field(default_factory=ToyData)


@serving_params.view_of(ToyConfig)
class ToyParams(serving_params.ServingParams):
  width: int = setting(3, export=True, flag="Only an export has it.")


def test_a_view_has_the_config_fields_with_their_one_declaration():
  fields = {f.name: f for f in dataclasses.fields(ToyParams)}
  assert set(fields) == {"spm_model_file", "vocab_file", "do_lower_case",
                         "max_seq_length", "window", "width"}
  assert ToyParams.config_paths == {
      "spm_model_file": "data.spm_model_file",
      "vocab_file": "data.vocab_file", "do_lower_case": "data.do_lower_case",
      "max_seq_length": "data.max_seq_length", "window": "data.window"}
  assert ToyParams().window == 4 and ToyParams().max_seq_length == 512
  assert settings.flagged(ToyParams)["window"].flag == "A toy's window."
  assert settings.exportable(ToyParams) == {"window", "width"}
  config = ToyConfig()
  config.data.window, config.data.max_seq_length = 7, 64
  params = ToyParams.from_config(config, width=5)
  assert (params.window, params.max_seq_length, params.width) == (7, 64, 5)


def test_a_setting_declared_by_both_is_refused():
  with pytest.raises(TypeError, match=r"ClashParams\.window is declared by "
                     r"ToyConfig \(data\.window\): declare it once"):
    @serving_params.view_of(ToyConfig)
    class ClashParams(serving_params.ServingParams):  # pylint: disable=unused-variable
      window: int = 4


@dataclasses.dataclass
class TwoWindows(base_config.Config):
  window: int = setting(1, serving=True)
  inner: ToyData = dataclasses.field(default_factory=ToyData)


def test_two_config_fields_of_one_name_are_refused():
  with pytest.raises(TypeError, match=r"\.window is declared by TwoWindows "
                     r"\(inner\.window\)"):
    serving_params.view_of(TwoWindows)(type("P", (), {}))


# The built-in tasks (a task defined elsewhere, e.g. in a test, may declare
# its params by hand).
BUILT_IN = sorted((c for c in registry.tasks()
                   if c.__module__.startswith("albert_tf.")),
                  key=lambda c: c.name)


@pytest.mark.parametrize("task_cls", BUILT_IN, ids=lambda c: c.name)
def test_every_task_declares_each_serving_setting_once(task_cls):
  params_fields = {f.name: f for f in
                   dataclasses.fields(task_cls.serving_params_cls)}
  config_leaves = {}
  for s in settings.walk(task_cls.config_cls):
    config_leaves.setdefault(s.path.rsplit(".", 1)[-1], []).append(s)
  for name, field in params_fields.items():
    # A params field named as a config field is that field's view.
    for s in config_leaves.get(name, ()):
      assert s.serving, (task_cls.name, s.path)
      assert settings.default_of(field) == s.default, (task_cls.name, name)
      assert field.metadata["flag"] == s.flag, (task_cls.name, name)
      assert field.metadata["export"] == s.export, (task_cls.name, name)


def test_the_packed_length_has_one_name_and_one_default(tmp_path):
  config = sentence_prediction.GlueExperimentConfig()
  config.data.task_name, config.data.max_seq_length = "sst-2", 96
  config.data.data_dir = str(tmp_path)
  params = sentence_prediction.ClassifierTask(config, str(tmp_path)).serving_params({})
  assert params.max_seq_length == 96 and params.label_names == ["0", "1"]
  assert serving_params.ServingParams().max_seq_length == (
      config.data.__class__().max_seq_length)
  squad = question_answering.SquadExperimentConfig()
  squad.task.squad_head, squad.data.null_score_diff_threshold = "xlnet", -1.5
  squad.data.doc_stride, squad.data.version_2_with_negative = 64, True
  params = question_answering.SquadTask(squad, str(tmp_path)).serving_params({})
  assert (params.squad_head, params.null_score_diff_threshold,
          params.doc_stride, params.max_windows) == ("xlnet", -1.5, 64, 32)
