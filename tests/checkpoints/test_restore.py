"""checkpoints.restore.restore: every source layout, heads, errors; paths."""

import os

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from tests.testing import export_testlib as lib
from albert_tf.checkpoints import conversion
from albert_tf.checkpoints import object_layout
from albert_tf.checkpoints import paths
from albert_tf.checkpoints.restore import restore
from albert_tf.modeling.models import downstream_models as dm
from albert_tf.modeling.models.albert_pretrainer import AlbertPretrainer
from albert_tf.modeling.networks.albert_encoder import AlbertEncoder
from albert_tf.serving import export_lib
from albert_tf.tasks import pretraining

CONFIG = lib.tiny_config(vocab_size=50)


def _weights(model):
  return [v.numpy() for v in model.variables]


def _assert_same(a, b):
  for x, y in zip(_weights(a), _weights(b)):
    np.testing.assert_array_equal(x, y)


def _tf1_finetuned(tmp_path, model, head_names):
  """The original fine-tuning script's checkpoint of `model`: TF1 encoder
  names plus its head at `head_names` (weights, bias); returns the prefix."""
  encoder_prefix = conversion.write_weights(
      model.encoder, str(tmp_path / "enc" / "model.ckpt"), "tf1")
  reader = tf.train.load_checkpoint(encoder_prefix)
  names = list(reader.get_variable_to_shape_map())
  tensors = [tf.constant(reader.get_tensor(n)) for n in names]
  names += list(head_names)
  tensors += [tf.constant(model.head.output_weights.numpy()),
              tf.constant(model.head.output_bias.numpy())]
  prefix = str(tmp_path / "ft" / "model.ckpt-100")
  os.makedirs(os.path.dirname(prefix))
  tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names,
                    shape_and_slices=[""] * len(names), tensors=tensors)
  return prefix


def test_tf1_finetuned_classifier_head_is_restored(tmp_path):
  tf_keras.utils.set_random_seed(1)
  source = dm.AlbertClassifier(AlbertEncoder(CONFIG), num_labels=3)
  prefix = _tf1_finetuned(tmp_path, source, ("output_weights", "output_bias"))
  target = dm.AlbertClassifier(AlbertEncoder(CONFIG), num_labels=3)
  report = restore(target, str(tmp_path / "ft"))  # a directory: its only one
  assert report.path == prefix and report.layout == "tf1"
  assert report.restored == ["encoder", "head"] and not report.fresh
  _assert_same(target, source)
  # num_labels 2 for a 3-label head: one line naming the file and shapes.
  wrong = dm.AlbertClassifier(AlbertEncoder(CONFIG), num_labels=2)
  with pytest.raises(ValueError, match=r"model.ckpt-100: output_weights has "
                     r"shape \(3, 16\), the model's head expects \(2, 16\)"):
    restore(wrong, prefix)


def test_tf1_squad_checkpoint_without_answerability_head_fails(tmp_path):
  """main's export loaded cls/squad/* and silently left a SQuAD 2.0 model's
  answerability head random."""
  source = dm.AlbertSpanLabeler(AlbertEncoder(CONFIG))
  prefix = _tf1_finetuned(tmp_path, source, ("cls/squad/output_weights",
                                             "cls/squad/output_bias"))
  with_answerability = dm.AlbertSpanLabeler(AlbertEncoder(CONFIG),
                                            with_answerability=True)
  with pytest.raises(ValueError) as e:
    restore(with_answerability, prefix)
  message = str(e.value)
  assert "\n" not in message and prefix in message
  assert "answer_head" in message
  report = restore(with_answerability, prefix, allow_missing_heads=True)
  assert report.restored == ["encoder", "head"]
  assert report.fresh == ["answer_head"]
  np.testing.assert_array_equal(with_answerability.head.output_weights,
                                source.head.output_weights)


def test_pretraining_checkpoint_parts_and_run_directory(tmp_path):
  tf_keras.utils.set_random_seed(2)
  pretrainer = AlbertPretrainer(CONFIG)
  step = tf.Variable(7, dtype=tf.int64)
  # A run's model_dir keeps its checkpoints in checkpoints/.
  run_dir = tmp_path / "run"
  manager = tf.train.CheckpointManager(
      object_layout.checkpoint_for(pretrainer, step=step),
      str(run_dir / paths.RUN_CHECKPOINT_SUBDIR), max_to_keep=2)
  prefix = manager.save()
  assert paths.resolve_checkpoint(str(run_dir)) == prefix

  classifier = dm.AlbertClassifier(AlbertEncoder(CONFIG), num_labels=2)
  with pytest.raises(ValueError, match="not the AlbertClassifier head"):
    restore(classifier, str(run_dir))
  report = restore(classifier, str(run_dir), parts="encoder")
  assert report.restored == ["encoder"] and report.fresh == ["head"]
  _assert_same(classifier.encoder, pretrainer.encoder)

  other = AlbertPretrainer(CONFIG)
  restored_step = tf.Variable(0, dtype=tf.int64)
  report = restore(other, str(run_dir), step=restored_step)
  assert report.restored == ["encoder", "mlm_head", "sop_head", "step"]
  assert int(restored_step.numpy()) == 7
  _assert_same(other, pretrainer)


def test_encoder_saved_model_export(tmp_path):
  tf_keras.utils.set_random_seed(3)
  encoder = AlbertEncoder(CONFIG)
  export_lib.export_encoder(encoder, str(tmp_path / "hub"))
  os.makedirs(tmp_path / "hub" / "5")  # An unfinished later version.
  target = dm.AlbertClassifier(AlbertEncoder(CONFIG), num_labels=2)
  report = restore(target, str(tmp_path / "hub"), parts="encoder")
  assert report.layout == "saved_model"
  assert report.path == str(tmp_path / "hub" / "1")
  _assert_same(target.encoder, encoder)
  with pytest.raises(ValueError, match=r"hub/1: model.embedding_size is 8 "
                     r"in the export \(\S+/hub/1/assets/albert_config.json\) "
                     r"but 4 in the model"):
    restore(AlbertEncoder(lib.tiny_config(vocab_size=50, embedding_size=4)),
            str(tmp_path / "hub" / "1"))


@pytest.mark.parametrize("bad", ["missing/ckpt", "empty_dir"])
def test_bad_paths_fail_in_one_line(tmp_path, bad):
  os.makedirs(tmp_path / "empty_dir")
  path = str(tmp_path / bad)
  with pytest.raises(ValueError) as e:
    restore(AlbertEncoder(CONFIG), path)
  assert str(e.value).startswith(path + ":") and "\n" not in str(e.value)


def test_versions(tmp_path):
  base = str(tmp_path / "models")
  assert paths.next_version(base) == 1
  assert paths.latest_version_dir(base) is None
  for version, complete in ((1, True), (3, True), (4, False)):
    os.makedirs(os.path.join(base, str(version)))
    if complete:
      open(os.path.join(base, str(version), "saved_model.pb"), "wb").close()
  os.makedirs(os.path.join(base, ".tmp-9-1"))
  assert paths.existing_versions(base) == [1, 3, 4]
  assert paths.next_version(base) == 5
  assert paths.resolve_saved_model(base) == os.path.join(base, "3")
  assert paths.resolve_saved_model(os.path.join(base, "1")) == os.path.join(
      base, "1")
  with pytest.raises(ValueError, match="4: no SavedModel"):
    paths.resolve_saved_model(os.path.join(base, "4"))


def test_versions_stay_within_int64(tmp_path, caplog):
  """TF Serving reads versions as int64: --version=2**63 was accepted, and
  the automatic versions after it counted on past int64."""
  base = str(tmp_path / "models")
  too_large = str(2**63)
  for name in ("2", too_large):
    os.makedirs(os.path.join(base, name))
  open(os.path.join(base, too_large, "saved_model.pb"), "wb").close()
  assert paths.existing_versions(base) == [2]
  with caplog.at_level("WARNING"):
    assert paths.next_version(base) == 3
  assert f"version directories {too_large} are above" in caplog.text
  assert paths.latest_version_dir(base) is None  # TF Serving's view too
  for bad in (2**63, -1):
    message = lib.one_line_error(export_lib.version_dir, base, bad)
    assert message == ("--version must be an integer from 0 to "
                       f"{2**63 - 1} (TF Serving reads versions as int64), "
                       f"got {bad}")
  assert export_lib.version_dir(base, 2**63 - 1).endswith(str(2**63 - 1))
  os.makedirs(os.path.join(base, str(2**63 - 1)))
  message = lib.one_line_error(paths.next_version, base)
  assert message == (f"{base}: version {2**63 - 1} exists, the largest TF "
                     "Serving reads (int64); pass a free --version")


def test_pretraining_warm_start_from_an_encoder_checkpoint(tmp_path):
  """PretrainingTask.initialize: the encoder from an encoder-only
  checkpoint, MLM/SOP heads the source lacks stay fresh."""
  tf_keras.utils.set_random_seed(4)
  encoder = AlbertEncoder(CONFIG)
  path = object_layout.checkpoint_for(encoder).write(str(tmp_path / "enc"))
  config = pretraining.PretrainingExperimentConfig()
  config.trainer.init_checkpoint = path
  model = AlbertPretrainer(CONFIG)
  sop_before = model.sop_head.output_weights.numpy()
  pretraining.PretrainingTask(config).initialize(model)
  _assert_same(model.encoder, encoder)
  np.testing.assert_array_equal(model.sop_head.output_weights, sop_before)
  report = restore(AlbertPretrainer(CONFIG), path, allow_missing_heads=True)
  assert report.restored == ["encoder"]
  assert report.fresh == ["mlm_head", "sop_head"]


def test_mis_shaped_head_fails_before_anything_is_assigned(tmp_path):
  """A 3-label classifier checkpoint into a 2-label model: one line naming
  the path and the variable; the encoder is left as it was (main's
  object read assigned the encoder, then failed on the head)."""
  tf_keras.utils.set_random_seed(5)
  source = dm.AlbertClassifier(AlbertEncoder(CONFIG), num_labels=3)
  path = object_layout.checkpoint_for(source).write(str(tmp_path / "clf"))
  target = dm.AlbertClassifier(AlbertEncoder(CONFIG), num_labels=2)
  before = _weights(target)
  with pytest.raises(ValueError) as e:
    restore(target, path)
  message = str(e.value)
  assert "\n" not in message and message.startswith(path + ":")
  assert "head/output_weights" in message and "[3, 16]" in message
  for old, new in zip(before, _weights(target)):
    np.testing.assert_array_equal(old, new)


def test_a_checkpoint_of_more_blocks_than_the_config_is_refused(tmp_path):
  """A 2-group x 2-block pretrainer's checkpoint restored into a 1 x 1
  config: the model's own variables were all found, so the restore said
  "encoder" and dropped 3 of the 4 blocks without a word."""
  tf_keras.utils.set_random_seed(6)
  big = lib.tiny_config(vocab_size=50, num_hidden_layers=4,
                        num_hidden_groups=2, inner_group_num=2)
  source = AlbertPretrainer(big)
  step = tf.Variable(3, dtype=tf.int64)
  # A training checkpoint: optimizer slots and counters are not the model's.
  optimizer = tf_keras.optimizers.Adam()
  optimizer.apply_gradients((tf.zeros_like(v), v)
                            for v in source.trainable_variables)
  path = object_layout.checkpoint_for(source, step=step,
                                      optimizer=optimizer).write(
                                          str(tmp_path / "big"))
  block = "encoder/layer_with_weights-1/attention_layers/1"
  for model, args in ((AlbertEncoder(CONFIG), {}),
                      (AlbertPretrainer(CONFIG), {}),
                      (AlbertEncoder(CONFIG), {"init_from_group0": True})):
    before = _weights(model)
    with pytest.raises(ValueError) as e:
      restore(model, path, **args)
    assert str(e.value) == (
        f"{path}: 48 variable(s) of its encoder are not in the model (wrong "
        f"config for this checkpoint?): {block}/key/bias, {block}/key/kernel"
        f", {block}/layer_norm/beta, ... (48 in all)")
    for old, new in zip(before, _weights(model)):
      np.testing.assert_array_equal(old, new)
  # Its own config takes every variable; the slots and counters stay out.
  same = AlbertPretrainer(big)
  restored_step = tf.Variable(0, dtype=tf.int64)
  report = restore(same, path, step=restored_step)
  assert report.restored == ["encoder", "mlm_head", "sop_head", "step"]
  assert int(restored_step.numpy()) == 3
  _assert_same(same, source)
  # A classifier's head in the checkpoint is not asked for by parts=encoder.
  classifier = dm.AlbertClassifier(AlbertEncoder(big), num_labels=2)
  path = object_layout.checkpoint_for(classifier).write(str(tmp_path / "clf"))
  report = restore(AlbertPretrainer(big), path, parts="encoder")
  assert report.restored == ["encoder"]


def test_an_encoder_export_of_another_model_is_refused(tmp_path):
  """Its variables were copied by position with shape checks only: a gelu
  export filled a relu model of the same shapes."""
  tf_keras.utils.set_random_seed(7)
  version_dir = export_lib.export_encoder(AlbertEncoder(CONFIG),
                                          str(tmp_path / "hub"))
  relu = AlbertEncoder(lib.tiny_config(vocab_size=50, hidden_act="relu"))
  before = _weights(relu)
  with pytest.raises(ValueError) as e:
    restore(relu, str(tmp_path / "hub"))
  asset = os.path.join(version_dir, "assets", "albert_config.json")
  assert str(e.value) == (
      f"{version_dir}: model.hidden_act is 'gelu' in the export ({asset}) "
      "but 'relu' in the model; not an encoder export of this config")
  for old, new in zip(before, _weights(relu)):
    np.testing.assert_array_equal(old, new)
  # Dropout is not the model's computation at inference.
  restore(AlbertEncoder(lib.tiny_config(vocab_size=50,
                                        hidden_dropout_prob=0.5)),
          version_dir)
