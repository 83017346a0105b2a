"""The trainer trusts a data summary only when it describes the files.

What used to go wrong: the trainer recorded and exported whatever
vocabulary file was at the summary's (relative) path now, resolved against
its own working directory; a stale summary of a rewritten file was read as
the file's; files of different sentence-pair tasks, masking, compression or
feature names were trained on together."""

import json
import os
import shutil

import pytest

from albert_tf.core import experiment_config as ec
from albert_tf.core import run_record
from albert_tf.data import dynamic_masking
from albert_tf.tasks import pretraining
from albert_toolkit import output_files
from data_prep import create_pretraining_data as cpd
from data_prep import pretraining_config
from data_prep import inspect_tfrecord
from data_prep import pretraining_instances as pi
from data_prep import pretraining_summary
from tests.testing import pretrain_testutil as tu
from tests.testing.botchan_testlib import other_model_same_size

# Ten seconds or more in all: handed out first (tests/conftest.py).
pytestmark = pytest.mark.slow


def make_data(tmp_path_factory, outputs, spm, **kw):
  """create_pretraining_data (one dupe pass) on the test corpus."""
  instance = {"max_seq_length": tu.SEQ, "max_predictions_per_seq": tu.PRED}
  instance.update(kw.pop("instance", {}))
  run_cfg = pretraining_config.RunConfig(
      spm_model_file=spm, do_lower_case=True, dupe_factor=1,
      instance=pi.InstanceConfig(**instance),
      v2_feature_names=kw.pop("v2_feature_names", False))
  return cpd.run([tu.worker_corpus(tmp_path_factory)], outputs, run_cfg,
                 progress_interval=0, **kw)


def task_for(train, eval_file="", **overrides):
  """The tiny recipe's task on `train` (files may be comma-separated)."""
  config = ec.load_experiment_config(
      pretraining.PretrainingExperimentConfig, [tu.TINY_RECIPE],
      tu.tiny_overrides("unused", "unused", **overrides))
  config.data.input_path = overrides.get("data.input_path", train)
  config.data.eval_input_path = overrides.get("data.eval_input_path",
                                              eval_file or train)
  return pretraining.PretrainingTask(config)


def read_summary(path):
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def write_summary(path, summary):
  with open(path, "w", encoding="utf-8") as f:
    json.dump(summary, f)


def one_line_error(call):
  with pytest.raises(ValueError) as info:
    call()
  message = str(info.value)
  assert "\n" not in message
  return message


@pytest.fixture()
def relative_data(tmp_path_factory, tmp_path, monkeypatch):
  """data/train.tfrecord made with --spm_model_file=spm.model, relative
  to data/ (the working directory then); the tests run in another one."""
  _, spm = tu.worker_pretraining_data(tmp_path_factory)
  data = tmp_path / "data"
  data.mkdir()
  shutil.copy(spm, data / "spm.model")
  monkeypatch.chdir(data)
  make_data(tmp_path_factory, ["train.tfrecord"], "spm.model")
  (tmp_path / "elsewhere").mkdir()
  monkeypatch.chdir(tmp_path / "elsewhere")
  return data


def test_the_vocabulary_is_recorded_and_found_from_any_directory(
    relative_data):
  """The summary held `spm.model` as given; a trainer started elsewhere
  recorded another file or none (vocab_sha256 null)."""
  train = str(relative_data / "train.tfrecord")
  summary = read_summary(train + output_files.SUMMARY_SUFFIX)
  model = str(relative_data / "spm.model")
  assert summary["config"]["spm_model_file"] == model
  task = task_for(train)
  task.validate_inputs(training=True)
  facts = run_record.with_fingerprints(task.record_facts())
  assert facts["spm_model_file"] == model
  assert facts["vocab_sha256"] == summary["config"]["vocab_sha256"]


def test_a_replaced_vocabulary_file_is_refused(relative_data,
                                               tmp_path_factory):
  """Another model of the same size written over spm.model after data
  prep: the run recorded its sha256, not the data's, without a warning."""
  train = str(relative_data / "train.tfrecord")
  summary_path = train + output_files.SUMMARY_SUFFIX
  want = read_summary(summary_path)["config"]["vocab_sha256"]
  model = relative_data / "spm.model"
  _, spm = tu.worker_pretraining_data(tmp_path_factory)
  other_model_same_size(spm, model)
  got = output_files.file_sha256(str(model))
  message = one_line_error(lambda: task_for(train).validate_inputs())
  assert message == (
      f"{model} is not the SentencePiece model the data was made with: its "
      f"sha256 is {got[:12]}... but {summary_path} records {want[:12]}... "
      "(the file was replaced; the same token id means another piece); "
      "restore it or regenerate the data (or set "
      "data.allow_unverified_input=true)")


def test_an_older_summarys_relative_vocabulary_is_looked_for_beside_it(
    relative_data):
  """Older summaries recorded the path as given: it is found beside the
  summary (checked by its sha256), and a missing file is an error, not a
  run record with vocab_sha256 null."""
  train = str(relative_data / "train.tfrecord")
  summary_path = train + output_files.SUMMARY_SUFFIX
  summary = read_summary(summary_path)
  summary["config"]["spm_model_file"] = "spm.model"
  write_summary(summary_path, summary)
  task = task_for(train)
  task.validate_inputs(training=True)
  assert task.data_tokenizer()["spm_model_file"] == str(
      relative_data / "spm.model")
  os.remove(relative_data / "spm.model")
  message = one_line_error(lambda: task_for(train).validate_inputs())
  assert message == (
      f"{summary_path}: the data was made with the SentencePiece model "
      f"spm.model, but there is no file {relative_data}/spm.model or "
      f"{os.getcwd()}/spm.model; restore it or regenerate the data (or set "
      "data.allow_unverified_input=true)")


def test_a_summary_of_a_rewritten_file_is_not_trusted(tmp_path_factory,
                                                      tmp_path):
  """A summary left by a data prep that did not remove it, beside a file
  rewritten since: readers took it for the new file's."""
  _, spm = tu.worker_pretraining_data(tmp_path_factory)
  b = tmp_path / "b.tfrecord"
  make_data(tmp_path_factory, [str(b)], spm)
  stale = f"{b}{output_files.SUMMARY_SUFFIX}"
  kept = (open(stale, encoding="utf-8").read(), b.stat().st_size)
  make_data(tmp_path_factory, [str(b)], spm,
            instance={"masked_lm_prob": 0.2})
  with open(stale, "w", encoding="utf-8") as f:
    f.write(kept[0])
  want = (f"{b} is {b.stat().st_size} bytes but {stale} describes a file "
          f"of {kept[1]} bytes: the file changed after that summary was "
          "written (rewritten or cut); regenerate the data (or remove the "
          "stale summary)")
  assert one_line_error(lambda: task_for(str(b)).validate_inputs()) == want
  for reader in (lambda: inspect_tfrecord.check_model(str(b), spm, tu.VOCAB),
                 lambda: dynamic_masking.settings_for_files([str(b)])):
    with pytest.raises(ValueError) as info:
      reader()
    assert str(info.value) == want
  # A summary beside it that describes the file as it is now is the one.
  summary = read_summary(stale)
  summary["bytes_per_file"] = {str(b): b.stat().st_size}
  write_summary(tmp_path / f"new{output_files.SUMMARY_SUFFIX}", summary)
  os.rename(stale, tmp_path / f"a.tfrecord{output_files.SUMMARY_SUFFIX}")
  assert pretraining_summary.find(str(b))[0] == str(
      tmp_path / f"new{output_files.SUMMARY_SUFFIX}")


@pytest.mark.parametrize("second, differ", [
    ({"compression": "GZIP"}, "{a} has compression NONE but {b} GZIP"),
    ({"v2_feature_names": True},
     "{a} has features ['input_ids', 'segment_ids'] that {b} lacks (it has "
     "['input_type_ids', 'input_word_ids'])")])
def test_files_of_other_compression_or_feature_names_are_refused(
    tmp_path_factory, tmp_path, second, differ):
  """Read as the first file is: a GZIP file beside a plain one was
  'corrupt input (no bad file found ...)' after ckpt-0 was saved, and v1
  beside v2 names a 46-line traceback."""
  _, spm = tu.worker_pretraining_data(tmp_path_factory)
  a, b = str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord")
  make_data(tmp_path_factory, [a], spm)
  make_data(tmp_path_factory, [b], spm, **second)
  for key in ("input_path", "eval_input_path"):
    task = task_for(a, **{f"data.{key}": f"{tmp_path}/*.tfrecord",
                          "data.allow_unverified_input": "true"})
    message = one_line_error(
        lambda: task.validate_inputs(training=key == "input_path"))
    assert message == (
        f"data.{key} mixes files the input pipeline cannot read together: "
        f"{differ.format(a=a, b=b)}; make them with the same "
        "create_pretraining_data flags (--compression, --v2_feature_names) "
        "or use one kind")


@pytest.fixture(scope="module")
def pair_data(tmp_path_factory):
  """d/{sop,nsp,none,sop_p20}.tfrecord: sentence-pair tasks and a masking."""
  _, spm = tu.worker_pretraining_data(tmp_path_factory)
  d = tmp_path_factory.mktemp("pairs")
  for name, instance in (("sop", {}), ("nsp", {"sentence_pair_task": "nsp"}),
                         ("none", {"sentence_pair_task": "none"}),
                         ("sop_p20", {"masked_lm_prob": 0.2})):
    make_data(tmp_path_factory, [str(d / f"{name}.tfrecord")], spm,
              instance=instance)
  return {name: str(d / f"{name}.tfrecord")
          for name in ("sop", "nsp", "none", "sop_p20")}


def validate_both(train, eval_file):
  task = task_for(train, eval_file)
  task.validate_inputs(training=True)
  task.validate_inputs(training=False)
  return task


@pytest.mark.parametrize("training", [True, False])
def test_single_segment_data_is_refused(pair_data, training):
  """--sentence_pair_task=none data trained the sentence-order head on a
  constant label and evaluated to sentence_order_accuracy 1.0."""
  none = pair_data["none"]
  task = task_for(pair_data["sop"], none) if not training else task_for(none)
  message = one_line_error(lambda: task.validate_inputs(training=training))
  assert message == (
      f"{none}{output_files.SUMMARY_SUFFIX}: {none} was made with "
      "--sentence_pair_task=none (single segments, pair label always 0): "
      "the sentence-order head would learn a constant; regenerate it with "
      "--sentence_pair_task=sop (or nsp)")


def test_files_of_two_sentence_pair_tasks_are_refused(pair_data):
  sop, nsp = pair_data["sop"], pair_data["nsp"]
  why = ("the sentence-pair head would learn (or be judged on) other labels "
         "in each: use one kind's files (move the others away)")
  message = one_line_error(
      lambda: task_for(f"{nsp},{sop}").validate_inputs(training=True))
  assert message == (
      f"data.input_path mixes data made with different sentence_pair_task: "
      f"{nsp} has 'nsp' ({nsp}{output_files.SUMMARY_SUFFIX}) but {sop} has "
      f"'sop' ({sop}{output_files.SUMMARY_SUFFIX}); {why}")
  # NSP training data judged on SOP evaluation data.
  message = one_line_error(lambda: validate_both(nsp, sop))
  assert message.startswith("data.eval_input_path and data.input_path mixes "
                            "data made with different sentence_pair_task: ")


def test_files_masked_differently_are_refused_in_one_input(pair_data,
                                                           caplog):
  sop, p20 = pair_data["sop"], pair_data["sop_p20"]
  message = one_line_error(
      lambda: task_for(f"{sop},{p20}").validate_inputs(training=True))
  assert message == (
      f"data.input_path mixes data made with different masked_lm_prob: "
      f"{sop} has 0.15 ({sop}{output_files.SUMMARY_SUFFIX}) but {p20} has "
      f"0.2 ({p20}{output_files.SUMMARY_SUFFIX}); the masked tokens were "
      "chosen differently in each: use files masked alike (move the others "
      "away)")
  # Evaluation masked otherwise than training: said, not refused.
  validate_both(sop, p20)
  assert ("data.input_path and data.eval_input_path mixes data made with "
          "different masked_lm_prob") in caplog.text


@pytest.mark.parametrize("name, key, recorded, given", [
    ("nsp", "sentence_pair_task", "'sop'", "'nsp'"),
    ("sop_p20", "masked_lm_prob", "0.15", "0.2")])
def test_resume_refuses_data_made_for_another_objective(
    pair_data, tmp_path_factory, tmp_path, name, key, recorded, given):
  """Data regenerated with another sentence-pair task or masking: the
  resumed run only logged that the input pipeline starts over."""
  run = str(tmp_path / "run")
  shutil.copytree(tu.worker_tiny_run(tmp_path_factory), run)
  data = pair_data[name]
  config = tu.tiny_experiment(data, **{"trainer.train_steps": 4,
                                       "trainer.save_data_position": False})
  message = one_line_error(lambda: tu.run_tiny(config, run))
  assert message == (
      f"the data's {key} ({data}{output_files.SUMMARY_SUFFIX}) is {given} "
      f"but the run record of {run} has {recorded}; the weights were "
      "trained on data made with the recorded value; use such data, or "
      "start a new --model_dir (trainer.init_checkpoint warm-starts from "
      "this run)")
  assert not os.path.exists(os.path.join(run, "checkpoints", "ckpt-4"))
