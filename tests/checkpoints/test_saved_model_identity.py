"""Warm start from an encoder SavedModel checks the model config,
vocabulary and casing its assets carry (checkpoints/identity.py), as a
checkpoint's identity is checked: an export of another model (its
assets/albert_config.json), of another SentencePiece model or WordPiece
vocabulary, or of other lower-casing was accepted silently, the same
weights as a checkpoint were refused."""

import os

import numpy as np
import pytest

from albert_tf.modeling.models.albert_pretrainer import AlbertPretrainer
from albert_tf.serving import export_lib
from albert_tf.tasks import sentence_prediction
from albert_toolkit import output_files
from tests.testing import export_testlib
from tests.testing import finetune_testlib


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
  """(config factory, pretrainer, {name: encoder export}, spm A, spm B)."""
  base = tmp_path_factory.mktemp("sm_identity")
  spm_a = finetune_testlib.spm_model(tmp_path_factory)
  spm_b = export_testlib.train_spm(str(base), vocab_size=1000)

  def config(lower=True, **source):
    c = finetune_testlib.tiny_finetune_config(
        sentence_prediction.GlueExperimentConfig,
        {"task_name": "rte", "data_dir": str(base), "max_seq_length": 16,
         "spm_model_file": spm_a, "do_lower_case": lower})
    c.override(source)
    return c

  pretrainer = AlbertPretrainer(config().model)
  exports = {name: export_lib.export_encoder(
      pretrainer.encoder, str(base / name), spm_model_file=spm,
      do_lower_case=lower)
             for name, spm, lower in (("other_vocab", spm_b, True),
                                      ("cased", spm_a, False))}
  return config, pretrainer, exports, spm_a, spm_b


def test_an_export_of_another_vocabulary_is_refused(setup):
  config, _, exports, spm_a, spm_b = setup
  version_dir = exports["other_vocab"]
  base = os.path.dirname(version_dir)
  sha_a, sha_b = (output_files.file_sha256(spm_a),
                  output_files.file_sha256(spm_b))
  assert sha_a != sha_b
  for path, setting, source in (
      (base, "task.init_saved_model", {"task": {"init_saved_model": base}}),
      (version_dir, "trainer.init_checkpoint",
       {"trainer": {"init_checkpoint": version_dir}})):
    assert finetune_testlib.warm_start_error(config(**source)) == (
        f"the vocabulary (sha256) is {sha_a!r} in this run's config "
        f"({setting}) but SavedModel {path} has {sha_b!r} (its assets); the "
        "weights belong to another vocabulary")


def test_an_export_of_other_lower_casing_is_refused(setup):
  config, _, exports, _, _ = setup
  base = os.path.dirname(exports["cased"])
  assert finetune_testlib.warm_start_error(config(task={"init_saved_model": base})) == (
      "do_lower_case is True in this run's config (task.init_saved_model) "
      f"but SavedModel {base} has False (its assets); lower-casing is part "
      "of the tokenisation the weights were trained with; set "
      "data.do_lower_case (--do_lower_case) to the checkpoint's")


def test_an_export_of_the_runs_vocabulary_and_casing_warm_starts(setup):
  config, pretrainer, exports, _, _ = setup
  ids = np.array([[2, 10, 11, 3, 12, 3, 0, 0]], np.int32)
  inputs = {"input_word_ids": ids, "input_mask": (ids > 0).astype(np.int32),
            "input_type_ids": np.zeros_like(ids)}
  model = finetune_testlib.warm_started_classifier(config(lower=False, task={
      "init_saved_model": os.path.dirname(exports["cased"])}))
  np.testing.assert_allclose(
      model.encoder(inputs)["pooled_output"].numpy(),
      pretrainer.encoder(inputs)["pooled_output"].numpy(), rtol=1e-5,
      atol=1e-6)


def test_an_export_of_another_model_is_refused(setup):
  """A relu run from a gelu export: the same shapes, so the variables were
  copied by position and the run went ahead."""
  config, _, exports, _, _ = setup
  base = os.path.dirname(exports["cased"])
  asset = os.path.join(exports["cased"], "assets", "albert_config.json")
  assert config().model.hidden_act == "gelu"
  relu = config(lower=False, model={"hidden_act": "relu"},
                task={"init_saved_model": base})
  assert finetune_testlib.warm_start_error(relu) == (
      "model.hidden_act is 'relu' in this run's config "
      f"(task.init_saved_model) but SavedModel {base} was exported with "
      f"'gelu' ({asset}); use the export's config")
  # Dropout does not change the model.
  finetune_testlib.warm_started_classifier(config(lower=False, model={"hidden_dropout_prob": 0.3},
                     task={"init_saved_model": base}))


def test_an_export_of_a_wordpiece_vocabulary_is_compared(setup, tmp_path):
  config, pretrainer, _, spm_a, _ = setup
  vocab = tmp_path / "vocab.txt"
  special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
  vocab.write_text("".join(f"{t}\n" for t in special + [
      f"w{i}" for i in range(config().model.vocab_size - 5)]),
                   encoding="utf-8")
  export = export_lib.export_encoder(pretrainer.encoder,
                                     str(tmp_path / "wp"),
                                     vocab_file=str(vocab))
  assert finetune_testlib.warm_start_error(config(task={"init_saved_model": export})) == (
      f"the vocabulary (sha256) is {output_files.file_sha256(spm_a)!r} in "
      f"this run's config (task.init_saved_model) but SavedModel {export} "
      f"has {output_files.file_sha256(str(vocab))!r} (its assets); the "
      "weights belong to another vocabulary")
