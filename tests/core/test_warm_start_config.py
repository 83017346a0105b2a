"""A warm start (core/base_task.warm_start: fine-tuning and pretraining)
compares the run's model config with the checkpoint's: its identity, else
the run record or the albert_config.json beside a checkpoint without one.
A checkpoint without an identity was never compared (relu weights
warm-started a gelu run; a 2 groups x 2 blocks checkpoint a 1 x 4 config,
the same variables computing another function), and init_from_group0 turned
off the whole comparison, not just the number of groups."""

import logging
import os

import numpy as np
import pytest

from albert_tf.checkpoints import conversion
from albert_tf.checkpoints import identity
from albert_tf.checkpoints import object_layout
from albert_tf.core import run_record
from albert_tf.modeling.albert_config import AlbertConfig
from albert_tf.modeling.models.albert_pretrainer import AlbertPretrainer
from albert_tf.tasks import pretraining
from albert_tf.tasks import sentence_prediction
from tests.testing import finetune_testlib

RELU = {"hidden_act": "relu", "num_hidden_layers": 4,
        "num_attention_heads": 4}


@pytest.fixture(scope="module")
def spm(tmp_path_factory):
  return finetune_testlib.spm_model(tmp_path_factory)


def _glue(tmp_path, spm, model=None, **trainer):
  config = finetune_testlib.tiny_finetune_config(
      sentence_prediction.GlueExperimentConfig,
      {"task_name": "rte", "data_dir": str(tmp_path), "max_seq_length": 16,
       "spm_model_file": spm})
  config.override({"model": model or {}, "trainer": trainer})
  return config


def _saved(directory, config, layout="tf1", beside=True):
  """A checkpoint of a pretrainer of `config` in `layout`, with (`beside`)
  its albert_config.json as a release or a conversion writes it; returns
  (prefix, pretrainer)."""
  pretrainer = AlbertPretrainer(config)
  prefix = conversion.write_weights(
      pretrainer, os.path.join(directory, "model.ckpt"), layout)
  if beside:
    conversion.write_config(config, directory, layout)
  return prefix, pretrainer


def _model(config, **values):
  return AlbertConfig(**dict(config.model.as_dict(), **values))


def test_a_release_of_another_model_is_refused(tmp_path, spm):
  config = _glue(tmp_path, spm)
  prefix, _ = _saved(str(tmp_path / "relu"), _model(config, **RELU))
  assert finetune_testlib.warm_start_error(_glue(tmp_path, spm, init_checkpoint=prefix)) == (
      "model.hidden_act is 'gelu' in this run's config "
      f"(trainer.init_checkpoint) but checkpoint {prefix} was trained with "
      f"'relu' ({tmp_path}/relu/albert_config.json beside it); use that "
      "config")


def test_groups_and_blocks_swapped_are_refused(tmp_path, spm):
  """2 groups x 2 blocks into 1 x 4: the same variables (4 blocks) in our
  layout, another computation."""
  layers = {"num_hidden_layers": 4}
  config = _glue(tmp_path, spm)
  prefix, _ = _saved(str(tmp_path / "g2"), _model(
      config, num_hidden_groups=2, inner_group_num=2, **layers), "albert_tf")
  run = _glue(tmp_path, spm, dict(layers, inner_group_num=4),
              init_checkpoint=os.path.dirname(prefix))
  assert finetune_testlib.warm_start_error(run) == (
      "model.inner_group_num is 4 in this run's config "
      f"(trainer.init_checkpoint) but checkpoint {tmp_path}/g2 was trained "
      f"with 2 ({tmp_path}/g2/albert_config.json beside it); use that config")


def test_the_run_record_of_a_checkpoint_without_an_identity(tmp_path, spm):
  """An older run's checkpoint (no identity): its run record's model."""
  relu = _glue(tmp_path, spm, RELU)
  run_dir = str(tmp_path / "old_run")
  run_record.write(run_dir, relu, {"task": "glue"})
  path = object_layout.checkpoint_for(AlbertPretrainer(relu.model)).write(
      os.path.join(run_dir, "checkpoints", "ckpt-2"))
  assert identity.read(path) is None
  assert finetune_testlib.warm_start_error(_glue(tmp_path, spm, init_checkpoint=path)) == (
      "model.hidden_act is 'gelu' in this run's config "
      f"(trainer.init_checkpoint) but checkpoint {path} was trained with "
      f"'relu' (the run record of {run_dir}); use that config")


def test_nothing_beside_warm_starts_and_says_it_was_not_checked(
    tmp_path, spm, caplog):
  config = _glue(tmp_path, spm)
  prefix, pretrainer = _saved(str(tmp_path / "bare"), config.model,
                              beside=False)
  with caplog.at_level(logging.WARNING, logger="absl"):
    model = finetune_testlib.warm_started_classifier(_glue(tmp_path, spm, init_checkpoint=prefix))
  assert (f"trainer.init_checkpoint {prefix} records no model config (no "
          "identity, run record or albert_config.json): the model config "
          "could not be checked, only the shapes of its weights"
          ) in caplog.text
  np.testing.assert_array_equal(
      model.encoder.pooler.kernel.numpy(),
      pretrainer.encoder.pooler.kernel.numpy())


def test_init_from_group0_may_change_the_number_of_groups_only(tmp_path,
                                                               spm):
  """A 1-group checkpoint grows to 2 groups; any other field is still
  compared, whether the checkpoint has an identity or a config beside it."""
  two = {"num_hidden_layers": 2}
  config = _glue(tmp_path, spm, two)
  release, released = _saved(str(tmp_path / "g1"), config.model)
  stamp = identity.RunIdentity(config.model.as_dict(), {}, "a run")
  stamp.stamp(2)
  run = AlbertPretrainer(config.model)
  stamped = object_layout.checkpoint_for(run, identity=stamp.variable).write(
      str(tmp_path / "stamped" / "ckpt-2"))
  for path, source, holder, use in (
      (release, released, f"{tmp_path}/g1/albert_config.json beside it",
       "that config"),
      (stamped, run, "its own record", "the checkpoint's run or its config")):
    grown = finetune_testlib.warm_started_classifier(_glue(tmp_path, spm, dict(two, num_hidden_groups=2),
                              init_checkpoint=path, init_from_group0=True))
    group0 = source.encoder.transformer.attention_layers[0].query.kernel
    for layer in grown.encoder.transformer.attention_layers:
      np.testing.assert_array_equal(layer.query.kernel.numpy(),
                                    group0.numpy())
    for field, value, saved in (("hidden_act", "relu", "'gelu'"),
                                ("inner_group_num", 2, "1")):
      run_config = _glue(tmp_path, spm, dict(two, num_hidden_groups=2,
                                             **{field: value}),
                         init_checkpoint=path, init_from_group0=True)
      assert finetune_testlib.warm_start_error(run_config) == (
          f"model.{field} is {value!r} in this run's config "
          f"(trainer.init_checkpoint) but checkpoint {path} was trained with "
          f"{saved} ({holder}); use {use}")


def test_pretraining_warm_start_is_checked_too(tmp_path, spm):
  config = pretraining.PretrainingExperimentConfig()
  config.override({"model": _glue(tmp_path, spm).model.as_dict()})
  prefix, _ = _saved(str(tmp_path / "relu"), _model(config, **RELU))
  config.trainer.init_checkpoint = prefix
  with pytest.raises(ValueError) as info:
    pretraining.PretrainingTask(config).initialize(
        AlbertPretrainer(config.model))
  assert str(info.value) == (
      "model.hidden_act is 'gelu' in this run's config "
      f"(trainer.init_checkpoint) but checkpoint {prefix} was trained with "
      f"'relu' ({tmp_path}/relu/albert_config.json beside it); use that "
      "config")
