"""Data checks before training: pretraining TFRecords against their
data_prep summary (<file>.summary.json) and the model config; a fine-tuning
SentencePiece model against model.vocab_size."""

import json
import shutil

import pytest
import tensorflow as tf

from albert_tf.core import experiment_config as ec
from albert_tf.core import train_lib
from albert_tf.tasks import multiple_choice
from albert_tf.tasks import pretraining
from albert_tf.tasks import question_answering
from albert_tf.tasks import sentence_prediction
from albert_tf.tasks import tagging
from data_prep import create_pretraining_data as cpd
from albert_toolkit import output_files
from data_prep import pretraining_config
from data_prep import pretraining_instances as pi
from tests.testing import finetune_testlib
from tests.testing import pretrain_testutil as tu


@pytest.fixture(scope="module")
def train_file(tmp_path_factory):
  return tu.worker_pretraining_data(tmp_path_factory)[0]


def validate(train, **overrides):
  config = ec.load_experiment_config(
      pretraining.PretrainingExperimentConfig, [tu.TINY_RECIPE],
      tu.tiny_overrides(train, **overrides))
  pretraining.PretrainingTask(config).validate_inputs(training=True)


def copy_with_summary(train, directory, summary_edit=None, records=None):
  """The file (or its first `records` records) and an edited summary."""
  path = str(directory / "copy.tfrecord")
  if records is None:
    shutil.copy(train, path)
  else:
    with tf.io.TFRecordWriter(path) as w:
      for r in tf.data.TFRecordDataset(train).take(records):
        w.write(r.numpy())
  with open(train + output_files.SUMMARY_SUFFIX) as f:
    summary = json.load(f)
  count = summary["output_files"][train]
  summary["output_files"] = summary["records_per_file"] = {path: count}
  (summary_edit or (lambda s: None))(summary)
  with open(path + output_files.SUMMARY_SUFFIX, "w") as f:
    json.dump(summary, f)
  return path


def test_generated_data_passes(train_file):
  validate(train_file)


def test_missing_summary_is_refused_unless_allowed(train_file, tmp_path):
  path = str(tmp_path / "bare.tfrecord")
  shutil.copy(train_file, path)
  with pytest.raises(ValueError, match=r"bare.tfrecord: no bare.tfrecord"
                     r".summary.json.*data.allow_unverified_input=true"):
    validate(path)
  validate(path, **{"data.allow_unverified_input": "true"})


def test_summary_vocab_size_must_match_model(train_file, tmp_path):
  """model.vocab_size 1200 > the 1000 pieces: ids fit, embeddings do not."""
  with pytest.raises(ValueError, match=r"vocab_size is 1000 but "
                     r"model.vocab_size is 1200"):
    validate(train_file, **{"model.vocab_size": 1200})


def test_token_ids_beyond_vocab_fail_before_training(train_file, tmp_path):
  """Today: `indices[..] = 909 is not in [0, 500)` mid-step on CPU, silent
  zeros on GPU. The first record's ids are checked even without summary."""
  with pytest.raises(ValueError, match=r"token id \d+ in the first record "
                     r"but model.vocab_size is 500"):
    validate(train_file, **{"model.vocab_size": 500,
                            "data.allow_unverified_input": "true"})


def test_truncated_file_is_refused(train_file, tmp_path):
  path = copy_with_summary(train_file, tmp_path, records=5)
  with pytest.raises(ValueError, match=r"copy.tfrecord: 5 records but .* "
                     r"says \d+ \(truncated"):
    validate(path)


def test_summary_lengths_must_match_config(train_file, tmp_path):
  def edit(summary):  # top-level key (newer data_prep) and under config
    summary["max_predictions_per_seq"] = 12
    summary["config"]["max_predictions_per_seq"] = 12
  path = copy_with_summary(train_file, tmp_path, edit)
  with pytest.raises(ValueError, match=r"max_predictions_per_seq is 12 but "
                     r"data.max_predictions_per_seq is 10"):
    validate(path)


def test_finetuning_spm_must_match_model_vocab(tmp_path_factory, tmp_path):
  config = finetune_testlib.tiny_finetune_config(
      sentence_prediction.GlueExperimentConfig,
      {"task_name": "rte", "data_dir": str(tmp_path), "max_seq_length": 16,
       "spm_model_file": finetune_testlib.spm_model(tmp_path_factory)})
  config.model.vocab_size = 1200
  (tmp_path / "train.tsv").write_text("index\tsentence1\tsentence2\tlabel\n")
  task = sentence_prediction.ClassifierTask(config, str(tmp_path / "m"))
  with pytest.raises(ValueError, match=r"spm.model: 1000 pieces but "
                     r"model.vocab_size is 1200"):
    task.validate_inputs(training=True)


def test_files_of_two_vocabularies_are_refused(train_file, tmp_path_factory,
                                               tmp_path):
  """Shards of an earlier data prep with another SentencePiece model (of the
  same size) left beside the new ones: one glob matched both and trained."""
  from sentencepiece import sentencepiece_model_pb2  # pylint: disable=g-import-not-at-top
  model = tu.worker_pretraining_data(tmp_path_factory)[1]
  proto = sentencepiece_model_pb2.ModelProto()
  proto.ParseFromString(open(model, "rb").read())
  a, b = proto.pieces[100], proto.pieces[200]  # same size, other ids
  a.piece, b.piece = b.piece, a.piece
  other = tmp_path / "other.model"
  other.write_bytes(proto.SerializeToString())
  new = copy_with_summary(train_file, tmp_path)
  old = str(tmp_path / "old.tfrecord")
  cpd.run([tu.worker_corpus(tmp_path_factory)], [old],
          pretraining_config.RunConfig(
              spm_model_file=str(other), do_lower_case=True,
              instance=pi.InstanceConfig(max_seq_length=tu.SEQ,
                                         max_predictions_per_seq=tu.PRED)),
          progress_interval=0)
  with pytest.raises(ValueError) as info:
    validate(str(tmp_path / "*.tfrecord"))
  message = str(info.value)
  assert "\n" not in message
  assert (f"data.input_path mixes data tokenized differently: {new} was made "
          f"with SentencePiece model {model} (sha256 ") in message
  assert (f"but {old} with SentencePiece model {other} (sha256 "
          f"{output_files.file_sha256(str(other))[:12]}") in message
  # Training and evaluation files must agree too.
  with pytest.raises(ValueError, match="data.eval_input_path and "
                     "data.input_path mixes data tokenized differently"):
    config = ec.load_experiment_config(
        pretraining.PretrainingExperimentConfig, [tu.TINY_RECIPE],
        tu.tiny_overrides(new, eval_file=old))
    task = pretraining.PretrainingTask(config)
    task.validate_inputs(training=True)
    task.validate_inputs(training=False)


def test_data_without_masks_is_refused(train_file, tmp_path):
  """Data made with masked_lm_prob=0 trained and reported 'new best
  masked_lm_accuracy 0.0000'."""
  path = copy_with_summary(train_file, tmp_path,
                           lambda s: s.update(masked_tokens=0))
  with pytest.raises(ValueError, match=rf"{path} holds no masked token "
                     r"\(made with masked_lm_prob=0\?\)"):
    validate(path)


def test_evaluation_inputs_are_checked_before_training(tmp_path_factory,
                                                       tmp_path):
  """An empty dev.tsv was found after the whole training run, as
  'evaluation data produced no batch' naming no file; a bad dev label
  likewise only after training."""
  header = "index\tsentence1\tsentence2\tlabel\n"
  (tmp_path / "train.tsv").write_text(
      header + "".join(f"{i}\ta b\tc d\tentailment\n" for i in range(40)))
  config = finetune_testlib.tiny_finetune_config(
      sentence_prediction.GlueExperimentConfig,
      {"task_name": "rte", "data_dir": str(tmp_path), "max_seq_length": 16,
       "spm_model_file": finetune_testlib.spm_model(tmp_path_factory)},
      steps=2)
  config.model.vocab_size = 1000
  dev = tmp_path / "dev.tsv"
  for text, error in (
      (header, rf"{dev}: no dev example to evaluate on"),
      (header + "0\ta\tb\tentailment\n1\ta\tb\tmaybe\n",
       rf"{dev}:3: .*'maybe'")):
    dev.write_text(text)
    model_dir = tmp_path / "run"
    with pytest.raises(ValueError, match=error):
      train_lib.run_experiment(
          sentence_prediction.ClassifierTask(config, str(model_dir)), config,
          str(model_dir), "train_and_eval")
    assert not (model_dir / "checkpoints").exists()  # nothing trained


@pytest.mark.parametrize("task_cls, data", [
    (sentence_prediction.ClassifierTask, {"task_name": "mrpc"}),
    (multiple_choice.RaceTask, {}), (tagging.TaggingTask, {})])
def test_a_family_that_reads_a_directory_needs_data_dir(task_cls, data):
  config = finetune_testlib.tiny_finetune_config(
      task_cls.config_cls, dict(data, max_seq_length=32))
  with pytest.raises(ValueError, match=r"^data\.data_dir \(--data_dir\) is "
                     r"required$"):
    task_cls(config, "unused")


def test_squad_predictions_never_replace_the_predict_file(tmp_path):
  """--predict_file=out/predictions.json with --output_dir=out was replaced
  by the predictions (and null_odds.json likewise), after the whole
  prediction run."""
  out = tmp_path / "out"
  out.mkdir()
  for name in ("predictions", "null_odds"):
    given = out / f"{name}.json"
    given.write_text('{"data": []}')
    config = finetune_testlib.tiny_finetune_config(
        question_answering.SquadExperimentConfig,
        {"predict_file": str(tmp_path / "out" / ".." / "out" / given.name),
         "max_seq_length": 32, "version_2_with_negative": True},
        with_answerability=True)
    task = question_answering.SquadTask(config, str(tmp_path / "run"))
    for run in (task.predict, task.evaluate):
      with pytest.raises(ValueError) as e:
        run(None, str(out))  # refused before the trainer is used
      assert str(e.value) == (
          f"--output_dir {out / given.name} is also an input "
          f"(--predict_file {config.data.predict_file}); refusing to "
          "overwrite it")
    assert given.read_text() == '{"data": []}'
    given.unlink()


def test_a_finetuning_best_records_its_evaluation_split(tmp_path):
  """The in-loop evaluation's data, recorded with the best checkpoint: a
  best kept on one dev file is not replaced by an evaluation of another."""
  def eval_data(data_dir):
    config = finetune_testlib.tiny_finetune_config(
        sentence_prediction.GlueExperimentConfig,
        {"task_name": "rte", "data_dir": str(data_dir), "max_seq_length": 16})
    return sentence_prediction.ClassifierTask(config, "unused").eval_data()
  assert eval_data(tmp_path / "a") == [str(tmp_path / "a" / "dev.tsv")]
  assert eval_data(tmp_path / "a") != eval_data(tmp_path / "b")
