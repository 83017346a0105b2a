"""One export path for every task and head: `export_savedmodel --model_dir`
(tasks/export.py `export`) and `run_* --mode=export` (train_lib's export
mode with `run_exporter`) give the same signatures and the same outputs; a
run's export refuses a random head and any setting that disagrees with the
run, and takes the settable ones (--max_windows for both SQuAD heads,
--label_names renamed in order)."""

import json
import os
import random
import sys

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # pylint: disable=unused-import

from albert_tf.core import train_lib
from albert_tf.tasks import export as tasks_export
from albert_tf.tasks import multiple_choice
from albert_tf.tasks import question_answering
from albert_tf.tasks import sentence_prediction
from tests.testing import export_testlib
from tests.testing import finetune_testlib
from tests.testing import pretrain_testutil
from tests.testing import tool_server
from tests.testing.repo_paths import ROOT

SEQ = 32


def _write_glue(directory, task, rows):
  """train.tsv and dev.tsv of `task` with the columns glue_data reads."""
  spec = sentence_prediction.glue_data.get_task(task)
  columns = [spec.text_a] + ([spec.text_b] if spec.text_b else []) + [
      spec.label_column]
  os.makedirs(directory, exist_ok=True)
  for name in ("train.tsv", "dev.tsv"):
    with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
      f.write("\t".join(["index"] + columns) + "\n")
      for i, row in enumerate(rows):
        f.write("\t".join([str(i)] + row) + "\n")


def _glue_rows(task, n=16):
  rng = random.Random(0)
  sentences = finetune_testlib.botchan_sentences(100, 3, 8)
  spec = sentence_prediction.glue_data.get_task(task)
  rows = []
  for i in range(n):
    label = (f"{rng.uniform(0, 5):.2f}" if spec.labels is None
             else spec.labels[i % len(spec.labels)])
    texts = [rng.choice(sentences)] + ([rng.choice(sentences)]
                                       if spec.text_b else [])
    rows.append(texts + [label])
  return rows


def _config(case, tmp, spm):
  """(task class, experiment config) of a 2-step tiny run of `case`."""
  data = {"spm_model_file": spm, "max_seq_length": SEQ}
  task = {}
  if case in ("sst-2", "rte", "sts-b"):
    directory = str(tmp / case)
    _write_glue(directory, case, _glue_rows(case))
    task_cls = sentence_prediction.ClassifierTask
    data.update(task_name=case, data_dir=directory)
  elif case.startswith("squad"):
    files = finetune_testlib.write_synthetic_squad(
        tmp, {"train": 16, "dev": 4})
    task_cls = question_answering.SquadTask
    data.update(train_file=files["train"], predict_file=files["dev"],
                version_2_with_negative=True, doc_stride=8,
                max_query_length=8)
    task = ({"squad_head": "xlnet", "start_n_top": 2, "end_n_top": 2}
            if case == "squad_xlnet" else {"with_answerability": True})
  else:
    root = str(tmp / case)
    rng = random.Random(0)
    sentences = finetune_testlib.botchan_sentences(100, 4, 10)
    for split in ("train", "dev"):
      finetune_testlib.write_race_split(root, split, rng, sentences, 4)
    task_cls = multiple_choice.RaceTask
    data.update(data_dir=root, max_qa_length=12)
  config = finetune_testlib.tiny_finetune_config(
      task_cls.config_cls, data, steps=2, batch=4, **task)
  config.override({"trainer": {"steps_per_loop": 1}, "model": {
      "max_position_embeddings": SEQ}})
  return task_cls, config


CASES = ("sst-2", "rte", "sts-b", "squad_simple", "squad_xlnet", "race")


@pytest.fixture(scope="module", params=CASES)
def run(request, tmp_path_factory):
  tmp = tmp_path_factory.mktemp(request.param.replace("-", ""))
  spm = finetune_testlib.spm_model(tmp_path_factory)
  task_cls, config = _config(request.param, tmp, spm)
  model_dir = str(tmp / "run")
  task = task_cls(config, model_dir)
  train_lib.run_experiment(task, config, model_dir, "train")
  return request.param, task, config, model_dir, tmp


def _default_export(model_dir, tmp):
  """export_savedmodel --model_dir of the run with its recorded settings,
  made once per run."""
  path = tmp / "by_tool" / "1"
  if not path.exists():
    export_testlib.export(str(tmp / "by_tool"), model_dir=model_dir)
  return str(path)


def _sample_inputs(signature):
  """Text inputs for a text-in signature, ids for serve_ids."""
  words = ["the cat sat on the mat .", "a long day in the country"]
  out = {}
  for name, spec in signature.structured_input_signature[1].items():
    if spec.dtype == tf.string and spec.shape.rank == 2:  # choices
      out[name] = tf.constant([[w, w[::-1], "yes", "no"] for w in words])
    elif spec.dtype == tf.string:
      out[name] = tf.constant(words)
    else:  # ids: [batch, seq] (or [batch, choices, seq])
      shape = [2] + [4] * (spec.shape.rank - 2) + [SEQ]
      ids = np.full(shape, 7, np.int32)
      ids[..., 0] = 2
      out[name] = tf.constant(ids if name == "input_word_ids" else
                              np.ones_like(ids) if name == "input_mask"
                              else np.zeros_like(ids))
  return out


def _outputs(path):
  loaded = tf.saved_model.load(path)
  out = {}
  for name in ("serving_default", "serve_ids"):
    result = loaded.signatures[name](**_sample_inputs(
        loaded.signatures[name]))
    out[name] = {k: v.numpy() for k, v in result.items()}
  return sorted(loaded.signatures), out


def test_both_paths_export_the_same_model(run):
  case, task, config, model_dir, tmp = run
  by_tool = _default_export(model_dir, tmp)
  by_mode = train_lib.run_experiment(
      task, config, model_dir, "export", export_dir=str(tmp / "by_mode"),
      export_fn=tasks_export.run_exporter())["export"]
  names_a, out_a = _outputs(by_tool)
  names_b, out_b = _outputs(by_mode)
  assert names_a == names_b == ["serve_examples", "serve_ids",
                                "serving_default"], case
  for signature in out_a:
    assert sorted(out_a[signature]) == sorted(out_b[signature]), case
    for key, value in out_a[signature].items():
      if value.dtype.kind in "fc":
        np.testing.assert_allclose(value, out_b[signature][key], rtol=1e-5,
                                   atol=1e-6, err_msg=f"{case} {key}")
      else:
        np.testing.assert_array_equal(value, out_b[signature][key],
                                      err_msg=f"{case} {key}")
  if case == "squad_xlnet":
    assert "null_score" in out_a["serving_default"]
  # Both say which checkpoint they came from, with its identity.
  source_a, source_b = (_export_info(p)["source"] for p in (by_tool, by_mode))
  assert source_a == source_b, case
  assert source_a["checkpoint"].endswith("ckpt-2") and source_a["identity"]


def _export_info(path):
  with open(os.path.join(path, "assets", "export.json"),
            encoding="utf-8") as f:
    return json.load(f)


def test_a_run_refuses_a_random_head_and_disagreeing_settings(run):
  case, _, _, model_dir, tmp = run
  with pytest.raises(ValueError, match="--allow_random_head: the run record"):
    export_testlib.export(str(tmp / "x"), model_dir=model_dir,
                          allow_random_head=True)
  with pytest.raises(ValueError, match=r"seq_length is 16 but the run "
                     r"record of .* has 32"):
    export_testlib.export(str(tmp / "x"), model_dir=model_dir,
                          settings={"max_seq_length": 16})
  foreign = "num_choices" if case != "race" else "num_labels"
  with pytest.raises(ValueError, match=f"--{foreign} does not apply"):
    export_testlib.export(str(tmp / "x"), model_dir=model_dir,
                          settings={foreign: 3})
  assert not os.path.exists(tmp / "x")


@pytest.mark.parametrize("run", ["rte"], indirect=True)
def test_label_names_are_renamed_in_order_only(run):
  _, _, _, model_dir, tmp = run
  for names, error in ((["not_entailment", "entailment"],
                        "give the names in the recorded order"),
                       (["same", "same"], "given twice"),
                       (["", "x"], "is empty"), (["a", "b", "c"], "3 names")):
    with pytest.raises(ValueError, match=error):
      export_testlib.export(str(tmp / "refused_names"), model_dir=model_dir,
                            settings={"label_names": names})
  path = export_testlib.export(str(tmp / "renamed"), model_dir=model_dir,
                               settings={"label_names": ["yes", "no"]})
  out = tf.saved_model.load(path).signatures["serving_default"](
      text_a=tf.constant(["a"]), text_b=tf.constant(["b"]))
  label_id = int(out["label_id"][0])
  assert out["label"][0].numpy().decode() == ["yes", "no"][label_id]
  # run_classifier --mode=export takes the same renaming and refusals (it
  # refused any --label_names as a config change "on resume").
  with open(os.path.join(model_dir, "run_record.json"), "rb") as f:
    record = f.read()

  def run_export(names, export_dir, *flags):
    return tool_server.run(
        [sys.executable, "-m", "albert_tf.run_classifier",
         f"--model_dir={model_dir}", "--mode=export",
         f"--export_dir={tmp / export_dir}", f"--label_names={names}",
         *flags], cwd=ROOT, env=tool_server.tool_env(), capture_output=True,
        text=True, timeout=600)
  proc = run_export("not_entailment,entailment", "refused_by_mode")
  assert proc.returncode == 1
  assert "give the names in the recorded order" in (
      proc.stderr.splitlines()[-1])
  # Another setting: refused saying what an export may change.
  proc = run_export("yes,no", "refused_by_mode", "--max_seq_length=16")
  assert proc.returncode == 1
  assert proc.stderr.splitlines()[-1] == (
      f"ERROR: data.max_seq_length is 16 but the run record of {model_dir} "
      "has 32; --mode=export keeps the run's settings but --label_names "
      "(docs/serving.md)")
  assert not os.path.exists(tmp / "refused_by_mode")
  proc = run_export("yes,no", "renamed_by_mode")
  assert proc.returncode == 0, proc.stderr[-3000:]
  by_mode = str(tmp / "renamed_by_mode" / "1")
  assert _export_info(by_mode)["serving_params"]["label_names"] == [
      "yes", "no"]
  with open(os.path.join(model_dir, "run_record.json"), "rb") as f:
    assert f.read() == record  # an export changes nothing of the run


@pytest.mark.slow
@pytest.mark.parametrize("run", ["squad_simple", "squad_xlnet"], indirect=True)
def test_max_windows_is_settable_for_both_squad_heads(run):
  """Through the command lines: export_savedmodel for the simple head,
  run_squad --mode=export for the xlnet head (the other path of each is
  the in-process export above)."""
  case, _, _, model_dir, tmp = run
  export_dir = str(tmp / "max_windows")
  args = (["-m", "albert_tf.export_savedmodel", f"--model_dir={model_dir}"]
          if case == "squad_simple" else
          ["-m", "albert_tf.run_squad", f"--model_dir={model_dir}",
           "--mode=export"])
  proc = tool_server.run(
      [sys.executable] + args + [f"--export_dir={export_dir}",
                                 "--max_windows=2"],
      cwd=ROOT, env=tool_server.tool_env(),
      capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  serve = tf.saved_model.load(os.path.join(export_dir, "1")).signatures[
      "serving_default"]
  short = serve(question=tf.constant(["who?"]),
                context=tf.constant(["a short one ."]))
  assert int(short["num_windows"][0]) == 1
  context = " ".join(finetune_testlib.botchan_sentences(60, 4, 12)[:12])
  with pytest.raises(tf.errors.InvalidArgumentError, match="max_windows=2"):
    serve(question=tf.constant(["who?"]), context=tf.constant([context]))
  # The run's default (32) serves the same context.
  default = tf.saved_model.load(_default_export(model_dir, tmp)).signatures[
      "serving_default"]
  assert int(default(question=tf.constant(["who?"]),
                     context=tf.constant([context]))["num_windows"][0]) > 2


@pytest.mark.slow
def test_a_pretraining_run_exports_every_kind(tmp_path_factory):
  """encoder (the default), pretraining (+ mlm, sop) and serving (text in,
  the encoder's outputs) from a pretraining run, with its tokenizer."""
  tmp = tmp_path_factory.mktemp("pretraining_exports")
  model_dir = pretrain_testutil.worker_tiny_run(tmp_path_factory)
  paths = {kind: export_testlib.export(str(tmp / kind), model_dir=model_dir,
                                       export_kind=kind)
           for kind in ("pretraining", "serving")}
  # No --export_kind: the encoder.
  paths["encoder"] = export_testlib.export(str(tmp / "encoder"),
                                           model_dir=model_dir)
  signatures = {k: sorted(tf.saved_model.load(p).signatures)
                for k, p in paths.items()}
  assert signatures["encoder"] == ["serving_default"]
  assert signatures["pretraining"] == ["mlm", "serving_default", "sop"]
  assert signatures["serving"] == ["serve_examples", "serve_ids",
                                   "serving_default"]
  served = tf.saved_model.load(paths["serving"]).signatures["serve_ids"]
  encoder = tf.saved_model.load(paths["encoder"]).signatures[
      "serving_default"]
  ids = _sample_inputs(served)
  np.testing.assert_allclose(served(**ids)["pooled_output"].numpy(),
                             encoder(**ids)["pooled_output"].numpy(),
                             rtol=1e-5, atol=1e-6)
  text = tf.saved_model.load(paths["serving"]).signatures["serving_default"]
  assert text(text=tf.constant(["the cat sat ."]))["pooled_output"].shape[0] == 1
