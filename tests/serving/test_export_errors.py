"""Export refuses bad inputs in one line naming the path, writing nothing."""

import os
import threading

import pytest

from tests.testing import export_testlib as lib
from albert_tf.modeling.models import downstream_models as dm
from albert_tf.modeling.networks.albert_encoder import AlbertEncoder
from albert_tf.serving import export_lib
from albert_tf.tasks import sentence_prediction

VOCAB = 300


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("export_errors")
  right = lib.train_spm(str(tmp), vocab_size=VOCAB)
  os.makedirs(tmp / "big")
  wrong = lib.train_spm(str(tmp / "big"), vocab_size=VOCAB + 100)
  config = lib.tiny_config(vocab_size=VOCAB)
  config_file = str(tmp / "albert_config.json")
  config.to_json_file(config_file)
  return dict(tmp=tmp, right=right, wrong=wrong, config=config,
              config_file=config_file)


def _exports(setup, spm_file, export_dir):
  """Every export that embeds a tokenizer, as (name, thunk)."""
  config = setup["config"]
  return [
      ("encoder", lambda: export_lib.export_encoder(
          AlbertEncoder(config), export_dir, spm_model_file=spm_file)),
      ("pretraining", lambda: lib.export(
          export_dir, export_kind="pretraining", random_init=True,
          config_files=[setup["config_file"]],
          settings={"spm_model_file": spm_file})),
      ("preprocessing", lambda: export_lib.export_preprocessing(
          spm_file, export_dir, seq_length=16, config=config)),
      ("serving", lambda: lib.export_serving(
          sentence_prediction.ClassifierTask,
          dm.AlbertClassifier(AlbertEncoder(config), num_labels=2),
          export_dir, spm_file, max_seq_length=16)),
  ]


def test_spm_model_of_another_size_is_refused(setup, tmp_path):
  """main exported a 400-piece tokenizer for a 300-id model: every served
  id was another piece's."""
  export_dir = str(tmp_path / "out")
  for name, export in _exports(setup, setup["wrong"], export_dir):
    message = lib.one_line_error(export)
    assert setup["wrong"] in message, name
    assert f"{VOCAB + 100} pieces" in message, name
    assert f"vocab_size is {VOCAB}" in message, name
  assert not os.path.exists(export_dir)


def test_missing_spm_file_is_refused(setup, tmp_path):
  missing = str(tmp_path / "nowhere.model")
  export_dir = str(tmp_path / "out")
  for name, export in _exports(setup, missing, export_dir):
    message = lib.one_line_error(export)
    assert message.startswith(missing + ":"), name
  message = lib.one_line_error(
      lib.export, export_dir, config_files=[setup["config_file"]],
      random_init=True, settings={"spm_model_file": missing})
  assert message.startswith(missing + ":")
  assert not os.path.exists(export_dir)


def test_existing_version_and_bad_checkpoint(setup, tmp_path):
  export_dir = str(tmp_path / "out")
  first = lib.export(export_dir, config_files=[setup["config_file"]],
                     random_init=True,
                     settings={"spm_model_file": setup["right"]})
  before = sorted(os.listdir(first))
  # An existing version fails before any model is built or loaded: even
  # with a checkpoint that does not exist, the version is what is reported.
  message = lib.one_line_error(
      lib.export, export_dir, config_files=[setup["config_file"]],
      checkpoint="/no/such/ckpt", version=1,
      settings={"spm_model_file": setup["right"]})
  assert message.startswith(first + " already exists")
  assert sorted(os.listdir(first)) == before
  bad = str(tmp_path / "no_ckpt")
  message = lib.one_line_error(
      lib.export, export_dir, config_files=[setup["config_file"]],
      checkpoint=bad)
  assert message.startswith(bad + ": no such checkpoint")
  missing_config = str(tmp_path / "albert_config.json")
  message = lib.one_line_error(
      lib.export, export_dir, config_files=[missing_config],
      random_init=True, errors=(ValueError, FileNotFoundError))
  assert missing_config in message
  assert os.listdir(export_dir) == ["1"]


def _racing_saves(export_dir, versions):
  """Two `write_versioned` calls at once, each past its version check
  before either renames (a barrier inside `write`); returns
  {writer: path or one-line error}."""
  both_staged = threading.Barrier(len(versions))
  results = {}

  def save(name, version):
    def write(directory):
      os.makedirs(directory, exist_ok=True)
      with open(os.path.join(directory, "writer"), "w") as f:
        f.write(name)
      both_staged.wait()
    try:
      results[name] = export_lib.write_versioned(export_dir, write, version)
    except ValueError as e:
      results[name] = e

  threads = [threading.Thread(target=save, args=(f"w{i}", v))
             for i, v in enumerate(versions)]
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  return results


def test_concurrent_exports_take_distinct_versions(tmp_path):
  """Two exports into one --export_dir at once both chose version 1: the
  later failed in a raw AlreadyExistsError (and in one process both wrote
  into one staging directory)."""
  export_dir = str(tmp_path / "out")
  os.makedirs(os.path.join(export_dir, "1"))
  open(os.path.join(export_dir, "1", "saved_model.pb"), "w").close()
  results = _racing_saves(export_dir, [None, None])
  assert sorted(results.values()) == [os.path.join(export_dir, "2"),
                                      os.path.join(export_dir, "3")]
  for name, path in results.items():
    assert open(os.path.join(path, "writer")).read() == name
  assert sorted(os.listdir(export_dir)) == ["1", "2", "3"]  # no staging left


def test_concurrent_exports_of_one_explicit_version(tmp_path):
  """Both asked for --version=5: one lands, the other fails in one line;
  the winner's files are whole."""
  export_dir = str(tmp_path / "out")
  results = _racing_saves(export_dir, [5, 5])
  final = os.path.join(export_dir, "5")
  winner = [n for n, r in results.items() if r == final]
  loser = [r for r in results.values() if isinstance(r, ValueError)]
  assert len(winner) == 1 and len(loser) == 1, results
  assert str(loser[0]) == (f"{final} was written by another export "
                           "meanwhile; pass another --version or leave it "
                           "unset to use the next free one")
  assert open(os.path.join(final, "writer")).read() == winner[0]
  assert os.listdir(export_dir) == ["5"]
