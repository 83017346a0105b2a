"""Pretraining TFRecords checked before (and while) training.

What can go wrong: a glob such as `train.tfrecord-*` also matches the summary
JSON, which must be skipped, not read as a corrupt TFRecord; a moved data
directory must still pass the summary check; a truncated or bit-flipped shard
and an id >= vocab_size in a later record must be one-line errors naming the
file and record (TensorFlow's own are a 40-line DataLossError and
`indices[7,5] = 1500 is not in [0, 1000)`)."""

import io
import logging
import shutil

import pytest
import tensorflow as tf

from albert_tf.core import actions
from albert_tf.core import experiment_config as ec
from albert_tf.data import pretraining_dataloader
from albert_tf.tasks import pretraining
from data_prep import pretraining_config
from data_prep import create_pretraining_data as cpd
from data_prep import inspect_tfrecord
from albert_toolkit import tfrecord_io
from data_prep import pretraining_instances as pi
from tests.testing import pretrain_testutil as tu

# Ten seconds or more in all: handed out first (tests/conftest.py).
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
  """train.tfrecord-0000{0,1}-of-00002 + summary, absolute paths in it."""
  _, spm = tu.worker_pretraining_data(tmp_path_factory)
  out = tmp_path_factory.mktemp("shards") / "data"
  cpd.run([tu.worker_corpus(tmp_path_factory)],
          [str(out / f"train.tfrecord-0000{i}-of-00002") for i in range(2)],
          pretraining_config.RunConfig(spm_model_file=spm, do_lower_case=True,
                        instance=pi.InstanceConfig(
                            max_seq_length=tu.SEQ,
                            max_predictions_per_seq=tu.PRED)),
          progress_interval=0)
  return out


def validate(pattern, **overrides):
  config = ec.load_experiment_config(
      pretraining.PretrainingExperimentConfig, [tu.TINY_RECIPE],
      tu.tiny_overrides(pattern, **overrides))
  pretraining.PretrainingTask(config).validate_inputs(training=True)


def test_evaluating_on_training_files_is_warned_about(shards, caplog):
  """An eval_input_path naming a training shard was taken as held-out data
  without a word."""
  train = f"{shards}/train.tfrecord-*"
  shard = f"{shards}/train.tfrecord-00001-of-00002"
  config = ec.load_experiment_config(
      pretraining.PretrainingExperimentConfig, [tu.TINY_RECIPE],
      tu.tiny_overrides(train, shard))
  task = pretraining.PretrainingTask(config)
  with caplog.at_level(logging.WARNING, logger="absl"):
    task.validate_inputs(training=True)
    assert "held-out" not in caplog.text  # nothing to compare yet
    task.validate_inputs(training=False)
  assert [r.getMessage() for r in caplog.records
          if "held-out" in r.getMessage()] == [
              f"data.eval_input_path shares 1 of its 1 files with "
              f"data.input_path (e.g. {shard}): the evaluation measures data "
              "the model trains on, not held-out data"]


def test_training_glob_skips_the_summary(shards):
  pattern = f"{shards}/train.tfrecord-*"
  assert any(p.endswith(".summary.json") for p in tf.io.gfile.glob(pattern))
  assert pretraining_dataloader.list_files(pattern) == [
      f"{shards}/train.tfrecord-0000{i}-of-00002" for i in range(2)]
  validate(pattern)


def test_moved_data_directory_is_still_described_by_its_summary(shards,
                                                                 tmp_path):
  moved = tmp_path / "elsewhere"
  shutil.copytree(shards, moved)
  validate(f"{moved}/train.tfrecord-*")
  for i in range(2):  # each shard alone too (the second has no own summary)
    validate(f"{moved}/train.tfrecord-0000{i}-of-00002")


def copy_dir(shards, tmp_path):
  target = tmp_path / "data"
  shutil.copytree(shards, target)
  return target, str(target / "train.tfrecord-00001-of-00002")


def record_offsets(path):
  """Byte offset of each record of an uncompressed TFRecord file."""
  offsets, pos, data = [], 0, open(path, "rb").read()
  while pos < len(data):
    offsets.append(pos)
    pos += 12 + int.from_bytes(data[pos:pos + 8], "little") + 4
  return offsets


def test_bit_flip_is_named_with_file_and_record(shards, tmp_path):
  target, path = copy_dir(shards, tmp_path)
  offsets = record_offsets(path)
  data = bytearray(open(path, "rb").read())
  data[offsets[9] + 40] ^= 0x10  # inside record 9's payload
  open(path, "wb").write(bytes(data))
  with pytest.raises(ValueError) as info:
    validate(f"{target}/train.tfrecord-*")
  message = str(info.value)
  assert "\n" not in message
  assert f"Corrupt or truncated TFRecord file {path} at record 9:" in message


def test_one_reader_names_the_bad_record_everywhere(shards, tmp_path):
  """The trainer's checks, the training loop's scan and inspect_tfrecord
  read through one checked reader: the same file and record, one line."""
  _, path = copy_dir(shards, tmp_path)
  offsets = record_offsets(path)
  data = bytearray(open(path, "rb").read())
  data[offsets[3] + 40] ^= 0x10
  open(path, "wb").write(bytes(data))
  want = f"Corrupt or truncated TFRecord file {path} at record 3: "
  with pytest.raises(IOError) as info:
    list(tfrecord_io.read_records(path))
  assert str(info.value).startswith(want) and "\n" not in str(info.value)
  assert actions.find_corrupt_file([path]).startswith(want)
  with pytest.raises(ValueError) as info:
    inspect_tfrecord.show(path, None, skip=10**9, stream=io.StringIO())
  assert str(info.value) == ("not a readable TFRecord of tf.train.Example: " +
                             actions.find_corrupt_file([path]))


def test_truncated_record_is_named_with_file_and_record(shards, tmp_path):
  target, path = copy_dir(shards, tmp_path)
  offsets = record_offsets(path)
  with open(path, "r+b") as f:
    f.truncate(offsets[-1] + 30)  # the last record cut inside
  with pytest.raises(ValueError, match=(
      f"Corrupt or truncated TFRecord file {path} at record "
      f"{len(offsets) - 1}:")):
    validate(f"{target}/train.tfrecord-*")


def with_bad_id(path, record_index, token_id):
  """Rewrites record `record_index` of `path` with one input id replaced."""
  records = [r.numpy() for r in tf.data.TFRecordDataset(path)]
  ex = tf.train.Example.FromString(records[record_index])
  ids = ex.features.feature["input_ids"].int64_list.value
  ids[5] = token_id
  records[record_index] = ex.SerializeToString()
  with tf.io.TFRecordWriter(path) as w:
    for r in records:
      w.write(r)


def test_token_id_beyond_vocab_in_a_later_record_is_named(shards, tmp_path):
  target, path = copy_dir(shards, tmp_path)
  with_bad_id(path, 7, 1500)
  with pytest.raises(ValueError, match=(
      f"{path}: record 7: input_ids holds token id 1500 but "
      "model.vocab_size is 1000")):
    validate(f"{target}/train.tfrecord-*")


@pytest.mark.parametrize("checked_reader", [True, False])
def test_token_id_beyond_vocab_is_named_by_the_input_pipeline(
    shards, tmp_path, checked_reader):
  """Files not read at start-up (over 1 GB, or allow_unverified_input)."""
  _, path = copy_dir(shards, tmp_path)
  with_bad_id(path, 7, 1500)
  ds = pretraining_dataloader.pretraining_dataset(
      path, tu.SEQ, tu.PRED, 4, is_training=False, vocab_size=1000,
      checked_reader=checked_reader)
  with pytest.raises(tf.errors.InvalidArgumentError) as info:
    for _ in ds:
      pass
  # What the trainer reports (after saving): one line naming both.
  error = actions.input_data_error(info.value, lambda: [path], 3, "saved x",
                                   pretraining_dataloader.bad_input(info.value))
  assert isinstance(error, actions.InputDataError)
  assert str(error).startswith(
      f"Token id out of range: {path}: record 7 holds token id 1500 but "
      "model.vocab_size is 1000. At step 3: saved x.")
  assert "\n" not in str(error)
  # Within the vocabulary the same data reads through.
  ds = pretraining_dataloader.pretraining_dataset(
      path, tu.SEQ, tu.PRED, 4, is_training=False, vocab_size=1501)
  assert sum(int(b["input_word_ids"].shape[0]) for b in ds) == len(
      record_offsets(path))
