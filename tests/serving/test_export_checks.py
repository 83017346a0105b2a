"""What an export refuses, checks and records: the mask's values, flags
that do nothing or contradict each other, bad export directories, version
directory modes, the SavedModel's export.json."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.checkpoints import identity
from albert_tf.checkpoints import object_layout
from albert_tf.modeling.networks.albert_encoder import AlbertEncoder
from albert_tf.serving import export_lib
from albert_tf.serving import preprocessing
from albert_tf.serving import serving_params
from albert_tf.tasks import export as tasks_export
from albert_tf.tasks import question_answering
from albert_tf.tasks import registry
from tests.testing import export_testlib as lib

# Ten seconds or more in all: handed out first (tests/conftest.py).
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def encoder_export(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("checks_encoder")
  tf.keras.utils.set_random_seed(1)
  encoder = AlbertEncoder(lib.tiny_config())
  path = export_lib.export_encoder(encoder, str(tmp / "enc"))
  return encoder, path


def test_input_mask_other_than_0_and_1_is_refused(encoder_export):
  encoder, path = encoder_export
  serve = tf.saved_model.load(path).signatures["serving_default"]
  ids = np.array([[2, 50, 60, 70, 3]], np.int32)
  types = np.zeros_like(ids)
  mask = np.array([[1, 1, 1, 0, 0]], np.int32)
  got = serve(input_word_ids=ids, input_mask=mask, input_type_ids=types)
  want = encoder(dict(input_word_ids=ids, input_mask=mask,
                      input_type_ids=types))
  np.testing.assert_allclose(got["pooled_output"], want["pooled_output"],
                             atol=1e-5, rtol=0)
  for bad in (-7, -1, 2, np.iinfo(np.int32).min):
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="input_mask must hold only 0 and 1"):
      serve(input_word_ids=ids, input_mask=np.array([[1, bad, 1, 1, 1]],
                                                    np.int32),
            input_type_ids=types)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("checks_files")
  config_file = str(tmp / "albert_config.json")
  lib.tiny_config().to_json_file(config_file)
  return dict(tmp=tmp, spm=lib.train_spm(str(tmp)), config_file=config_file)


def test_random_init_with_a_checkpoint_is_refused(files, tmp_path):
  export_dir = str(tmp_path / "out")
  message = lib.one_line_error(
      lib.export, export_dir, config_files=[files["config_file"]],
      checkpoint=str(tmp_path / "ckpt-1"), random_init=True,
      settings={"spm_model_file": files["spm"]})
  assert message.startswith("--random_init and --checkpoint")
  # A run directory with checkpoints: its weights, not random ones.
  run = tmp_path / "run"
  saved = tf.train.Checkpoint(v=tf.Variable(1.0)).save(
      str(run / "checkpoints" / "ckpt"))
  message = lib.one_line_error(lib.export, export_dir, model_dir=str(run),
                            random_init=True)
  assert message.startswith(f"--random_init with --model_dir {run}")
  assert saved in message
  assert not os.path.exists(export_dir)



def test_squad_query_must_leave_room_for_the_context(files, tmp_path):
  params = question_answering.SquadServingParams
  params(max_seq_length=16, max_query_length=12).validate()  # one token left
  export_dir = str(tmp_path / "out")
  for doc_stride in (0, 4):
    message = lib.one_line_error(
        lib.export, export_dir, config_files=[files["config_file"]],
        random_init=True, task="squad", settings=dict(
            spm_model_file=files["spm"], max_seq_length=16,
            max_query_length=13, doc_stride=doc_stride))
    assert message == (
        "--max_seq_length 16 leaves no room for the context after "
        "--max_query_length 13 (at most 12); reduce --max_query_length or "
        "raise --max_seq_length")
  assert not os.path.exists(export_dir)


def test_first_segment_cap_must_leave_room_for_the_second(files, tmp_path):
  """A cap below 1 or above max_seq_length - 4 used to export, and packed
  pairs without segment A or without B (one [SEP], [CLS] of type 1)."""
  export_dir = str(tmp_path / "out")
  request = dict(export_kind="preprocessing", truncation="first_fixed",
                 settings=dict(spm_model_file=files["spm"], max_seq_length=16))
  for cap in (-3, 0):
    message = lib.one_line_error(lib.export, export_dir,
                                 max_first_segment_length=cap, **request)
    assert message == f"--max_first_segment_length must be >= 1, got {cap}"
  message = lib.one_line_error(lib.export, export_dir,
                               max_first_segment_length=13, **request)
  assert message == (
      "--max_seq_length 16 leaves no room for the second segment after "
      "--max_first_segment_length 13 (at most 12); reduce "
      "--max_first_segment_length or raise --max_seq_length")
  assert not os.path.exists(export_dir)
  # The largest cap keeps one token of B: [CLS] 12 of A [SEP] 1 of B [SEP].
  packed = preprocessing.make_preprocessor(
      files["spm"], seq_length=16, truncation="first_fixed",
      max_first_segment_length=12).preprocess(
          [tf.constant(["the man went to school " * 4]),
           tf.constant(["and then he came back home"])])
  assert packed["input_mask"].numpy().tolist() == [[1] * 16]
  assert packed["input_type_ids"].numpy().tolist() == [[0] * 14 + [1] * 2]


def test_a_bad_export_dir_fails_before_a_model_is_built(files, tmp_path,
                                                          monkeypatch):
  def no_model(*args, **kwargs):
    raise AssertionError("a model was built")
  monkeypatch.setattr(tasks_export, "model_for_flags", no_model)
  a_file = tmp_path / "a_file"
  a_file.write_text("")
  request = dict(config_files=[files["config_file"]], random_init=True,
                 settings={"spm_model_file": files["spm"]})
  for export_dir in (a_file, a_file / "under"):
    message = lib.one_line_error(lib.export, str(export_dir), **request)
    assert message == (f"--export_dir {export_dir}: {a_file} is not a "
                       "directory")
  if os.path.isdir("/proc"):  # a file system without new directories
    message = lib.one_line_error(lib.export, "/proc/albert_export_x", **request)
    assert message.startswith("--export_dir /proc/albert_export_x: cannot "
                              "create a directory in /proc (")
  assert a_file.read_text() == ""


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_version_directories_take_the_umask(tmp_path, umask):
  """TF Serving may run as another user: a version directory has the mode
  a plain mkdir gives (it was always 0700)."""
  module = tf.Module()
  module.v = tf.Variable(1.0)
  previous = os.umask(umask)
  try:
    saved = export_lib.save_versioned(module, str(tmp_path / "sm"), None)

    def write(directory):  # as the .tflite export writes its files
      with open(os.path.join(directory, "model.tflite"), "wb") as f:
        f.write(b"x")
    written = export_lib.write_versioned(str(tmp_path / "lite"), write)
  finally:
    os.umask(previous)
  for path in (saved, written):
    assert os.stat(path).st_mode & 0o777 == 0o777 & ~umask, path
  assert not [n for n in os.listdir(tmp_path / "sm") if n.startswith(".")]


def test_flags_that_would_do_nothing_are_refused(files, tmp_path):
  export_dir = str(tmp_path / "out")
  base = dict(config_files=[files["config_file"]], random_init=True)
  spm = {"spm_model_file": files["spm"]}
  cases = [
      (dict(settings=dict(spm, max_seq_length=8)),
       "--max_seq_length does not apply to the encoder export (its signatures "
       "take ids of any length up to max_position_embeddings)"),
      (dict(export_kind="pretraining", settings=dict(spm, max_seq_length=8)),
       "--max_seq_length does not apply to the pretraining export (its "
       "signatures take ids of any length up to max_position_embeddings)"),
      (dict(settings={"do_lower_case": False}),
       "--do_lower_case does not apply to the encoder export without "
       "--spm_model_file or --vocab_file (it is recorded beside the "
       "tokenizer file)"),
      (dict(task="squad", settings=dict(
          spm, max_seq_length=16, max_query_length=4, doc_stride=0,
          max_windows=4)),
       "--max_windows applies to doc-stride windows only, not "
       "--doc_stride=0 (one window per question)"),
      (dict(export_kind="preprocessing", truncation="first_fixed",
            settings=spm),
       "--max_first_segment_length and --truncation=first_fixed go together "
       "(the cap on the first segment); give both or neither"),
      (dict(export_kind="preprocessing", max_first_segment_length=4,
            settings=spm),
       "--max_first_segment_length and --truncation=first_fixed go together "
       "(the cap on the first segment); give both or neither"),
  ]
  for request, expected in cases:
    assert lib.one_line_error(lib.export, export_dir,
                           **dict(base, **request)) == expected, request
  message = lib.one_line_error(
      lib.export, export_dir, export_kind="preprocessing",
      **dict(base, settings=dict(spm, num_labels=5)))
  assert message.startswith("--num_labels does not apply to a preprocessing "
                            "export (its settings: ")
  assert not os.path.exists(export_dir)
  # With windows --max_windows is taken; with a tokenizer file the encoder
  # records --do_lower_case (the TF-Hub variable).
  params = question_answering.SquadServingParams
  assert serving_params.with_settings(
      params(max_seq_length=16, max_query_length=4), dict(
          doc_stride=4, max_windows=4), "a squad export").max_windows == 4
  path = lib.export(export_dir, **dict(base, settings=dict(
      spm, do_lower_case=False)))
  assert not tf.saved_model.load(path).do_lower_case.numpy()


def _export_info(path):
  loaded = tf.saved_model.load(path)
  with open(loaded.export_info_file.asset_path.numpy().decode(),
            encoding="utf-8") as f:
    return json.load(f)


def test_saved_model_says_what_it_is_and_where_its_weights_came_from(
    files, tmp_path):
  config_file = files["config_file"]
  path = lib.export(str(tmp_path / "clf"), config_files=[config_file],
                    random_init=True, task="classification", settings=dict(
                        spm_model_file=files["spm"], max_seq_length=16,
                        num_labels=2, label_names=["neg", "pos"]))
  info = _export_info(path)
  assert (info["kind"], info["task"], info["precision"]) == (
      "serving", registry.task_for_serving_name("classification").name,
      "float32")
  assert info["serving_params"]["label_names"] == ["neg", "pos"]
  assert info["serving_params"]["max_seq_length"] == 16
  assert info["source"] == {"random_init": True}
  # A checkpoint stamped by its run (step 7): its path and identity.
  config = lib.tiny_config()
  encoder = AlbertEncoder(config)
  stamp = identity.RunIdentity(config.as_dict(), {}, "a test run")
  stamp.stamp(7)
  ckpt = object_layout.checkpoint_for(encoder, identity=stamp.variable).write(
      str(tmp_path / "ckpt"))
  path = lib.export(str(tmp_path / "enc"), config_files=[config_file],
                    checkpoint=ckpt)
  info = _export_info(path)
  assert (info["kind"], info["task"]) == ("encoder", None)
  assert info["source"]["checkpoint"] == ckpt
  assert info["source"]["identity"]["updates"] == 7
