"""End to end: run_classifier fine-tunes a tiny ALBERT on a synthetic but
learnable sentence-pair task in GLUE (RTE) format, writes the GLUE
submission file, and the exported serving model maps text -> label."""

import json
import os
import random
import sys

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.core import train_lib
from albert_tf.data import glue_data
from albert_tf.serving import lite
from albert_tf.tasks import sentence_prediction
from albert_tf.tasks import export as tasks_export
from albert_tf.tasks import export_request
from tests.testing import finetune_testlib
from tests.testing import tool_server
from tests.testing.repo_paths import ROOT


def _rows(rng, sentences, n):
  """Entailment iff sentence2 names a warm colour (red/black)."""
  rows = []
  for i in range(n):
    colour = rng.choice(finetune_testlib.COLOURS)
    label = "entailment" if colour in ("red", "black") else "not_entailment"
    words = rng.choice(sentences).split()
    words.insert(rng.randrange(len(words) + 1), colour)
    rows.append((str(i), rng.choice(sentences), " ".join(words), label))
  return rows


def _write_rte(directory, seed=0):
  rng = random.Random(seed)
  sentences = finetune_testlib.botchan_sentences(300, min_words=1, max_words=3)
  os.makedirs(directory, exist_ok=True)
  for name, n in (("train.tsv", 800), ("dev.tsv", 96)):
    with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
      f.write("index\tsentence1\tsentence2\tlabel\n")
      for row in _rows(rng, sentences, n):
        f.write("\t".join(row) + "\n")
  test_rows = _rows(rng, sentences, 24)
  with open(os.path.join(directory, "test.tsv"), "w", encoding="utf-8") as f:
    f.write("index\tsentence1\tsentence2\n")
    for row in test_rows:
      f.write("\t".join(row[:3]) + "\n")
  return test_rows


@pytest.mark.slow
def test_finetune_predict_export_serve(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("glue_e2e")
  spm = finetune_testlib.spm_model(tmp_path_factory)
  data_dir = str(tmp / "RTE")
  test_rows = _write_rte(data_dir)
  config = finetune_testlib.tiny_finetune_config(
      sentence_prediction.GlueExperimentConfig,
      {"task_name": "rte", "data_dir": data_dir, "spm_model_file": spm,
       "max_seq_length": 32}, steps=400, lr=1e-2,
      # LAMB escapes the initial plateau of this task more reliably than
      # AdamW at this size (>= 0.95 dev accuracy over several seeds).
      optimizer="lamb")
  model_dir = str(tmp / "model")
  task = sentence_prediction.ClassifierTask(config, model_dir)
  result = train_lib.run_experiment(task, config, model_dir, "train_and_eval")
  assert result["eval"]["accuracy"] >= 0.9, result["eval"]
  # In-loop evaluation (trainer) agrees with the full evaluation.
  in_loop = result["train"]["eval"][400]["accuracy"]
  assert in_loop == pytest.approx(result["eval"]["accuracy"])
  assert os.path.exists(os.path.join(model_dir, "best", "best.json"))
  assert os.path.exists(os.path.join(model_dir, "eval_results.json"))
  # Features were cached as TFRecords.
  assert any(n.endswith(".tf_record") for n in
             os.listdir(os.path.join(model_dir, "features")))

  # predict: the GLUE server's RTE.tsv.
  out_dir = str(tmp / "predictions")
  result = train_lib.run_experiment(task, config, model_dir, "predict",
                                    output_dir=out_dir)
  with open(os.path.join(out_dir, "RTE.tsv"), encoding="utf-8") as f:
    lines = f.read().splitlines()
  assert lines[0] == "index\tprediction" and len(lines) == 25
  predicted = [line.split("\t")[1] for line in lines[1:]]
  truth = [row[3] for row in test_rows]
  assert np.mean([p == t for p, t in zip(predicted, truth)]) >= 0.8

  # export: the serving SavedModel maps raw text to the same labels.
  export_base = str(tmp / "export")
  result = train_lib.run_experiment(task, config, model_dir, "export",
                                    export_dir=export_base,
                                    export_fn=tasks_export.run_exporter())
  path = result["export"]
  assert os.path.basename(path) == "1"
  import tensorflow_text  # pylint: disable=g-import-not-at-top,unused-import
  loaded = tf.saved_model.load(path)
  serve = loaded.signatures["serving_default"]
  out = serve(text_a=tf.constant([r[1] for r in test_rows]),
              text_b=tf.constant([r[2] for r in test_rows]))
  served = [s.decode() for s in out["label"].numpy()]
  assert served == predicted
  assert set(served) <= set(glue_data.get_task("rte").labels)

  # export_savedmodel --model_dir: the run record gives the model, labels,
  # text fields, seq length and SentencePiece model; nothing is retyped.
  proc = tool_server.run(
      [sys.executable, "-m", "albert_tf.export_savedmodel",
       f"--model_dir={model_dir}", f"--export_dir={tmp / 'cli_export'}"],
      env=tool_server.tool_env(), cwd=ROOT,
      capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr
  serve = tf.saved_model.load(str(tmp / "cli_export" / "1")).signatures[
      "serving_default"]
  out = serve(text_a=tf.constant([r[1] for r in test_rows]),
              text_b=tf.constant([r[2] for r in test_rows]))
  assert [s.decode() for s in out["label"].numpy()] == predicted

  _check_lite_exports(tmp, model_dir, test_rows, predicted)


def _check_lite_exports(tmp, model_dir, test_rows, predicted):
  """The run as .tflite from the command line: int8 calibrated on the run's
  training data (its model.json names the run's checkpoint and identity),
  dynamic_int8 served by predict_lite from a TSV with the float32 labels;
  and as a bfloat16 SavedModel with the same labels."""
  for precision in ("int8", "dynamic_int8"):
    proc = tool_server.run(
        [sys.executable, "-m", "albert_tf.export_savedmodel",
         f"--model_dir={model_dir}", f"--export_dir={tmp / precision}",
         "--format=tflite", f"--precision={precision}"] +
        (["--representative_examples=16"] if precision == "int8" else []),
        env=tool_server.tool_env(), cwd=ROOT,
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert f"({precision}," in proc.stdout
  info = json.loads((tmp / "int8" / "1" / "model.json").read_text())
  assert info["source"]["checkpoint"].startswith(model_dir)
  assert info["source"]["identity"]["facts"]["task"] == "sentence_prediction"
  assert info["serving_params"]["label_names"] == list(
      glue_data.get_task("rte").labels)
  tsv = tmp / "test_pairs.tsv"
  tsv.write_text("text_a\ttext_b\tlabel\n" + "".join(
      f"{r[1]}\t{r[2]}\t{r[3]}\n" for r in test_rows), encoding="utf-8")
  proc = tool_server.run(
      [sys.executable, "-m", "albert_tf.predict_lite",
       f"--model={tmp / 'dynamic_int8'}", f"--input_file={tsv}",
       f"--output_file={tmp / 'lite_predictions.jsonl'}"],
      env=tool_server.tool_env(), cwd=ROOT,
      capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr
  rows = [json.loads(line) for line in
          (tmp / "lite_predictions.jsonl").read_text().splitlines()]
  assert [r["label"] for r in rows] == predicted
  # int8 (calibrated): close to float32 on this model, whose logits separate
  # the classes by little; fully quantized, it answered one label for all.
  int8 = lite.LiteModel(str(tmp / "int8"))("serving_default",
                                           text_a=[r[1] for r in test_rows],
                                           text_b=[r[2] for r in test_rows])
  agreement = np.mean([l.decode() == p for l, p in zip(int8["label"],
                                                       predicted)])
  assert agreement >= 0.9, agreement
  bf16 = tasks_export.export(export_request.ExportRequest(
      export_dir=str(tmp / "bf16"), model_dir=model_dir,
      form=export_request.ExportForm(precision="bfloat16")))
  out = tf.saved_model.load(bf16).signatures["serving_default"](
      text_a=tf.constant([r[1] for r in test_rows]),
      text_b=tf.constant([r[2] for r in test_rows]))
  assert [s.decode() for s in out["label"].numpy()] == predicted


@pytest.mark.parametrize("source", ["pretraining_checkpoint", "tf1",
                                    "encoder_saved_model"])
def test_warm_start_sources(tmp_path, source):
  """A fine-tuning model starts from our pretraining checkpoint, an original
  (TF1 layout) checkpoint or an exported encoder SavedModel."""
  from albert_tf.checkpoints import conversion  # pylint: disable=g-import-not-at-top
  from albert_tf.serving import export_lib  # pylint: disable=g-import-not-at-top
  from albert_tf.modeling.models.albert_pretrainer import AlbertPretrainer  # pylint: disable=g-import-not-at-top
  config = finetune_testlib.tiny_finetune_config(
      sentence_prediction.GlueExperimentConfig,
      {"task_name": "rte", "data_dir": str(tmp_path), "max_seq_length": 16})
  pretrainer = AlbertPretrainer(config.model)
  ids = np.array([[2, 10, 11, 3, 12, 3, 0, 0]], np.int32)
  inputs = {"input_word_ids": ids, "input_mask": (ids > 0).astype(np.int32),
            "input_type_ids": np.zeros_like(ids)}
  expected = pretrainer.encoder(inputs)["pooled_output"].numpy()
  if source == "pretraining_checkpoint":
    from albert_tf.checkpoints import object_layout  # pylint: disable=g-import-not-at-top
    path = object_layout.checkpoint_for(pretrainer).write(
        str(tmp_path / "pre" / "ckpt"))
    config.override({"trainer": {"init_checkpoint": path}})
  elif source == "tf1":
    path = conversion.write_weights(
        pretrainer, str(tmp_path / "tf1" / "model.ckpt"), "tf1")
    config.override({"trainer": {"init_checkpoint": path}})
  else:
    path = export_lib.export_encoder(pretrainer.encoder,
                                            str(tmp_path / "hub"))
    config.override({"task": {"init_saved_model": str(tmp_path / "hub")}})
  task = sentence_prediction.ClassifierTask(config, str(tmp_path / "model"))
  model = task.build_model()
  task.initialize(model)
  got = model.encoder(inputs)["pooled_output"].numpy()
  np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
  if source == "encoder_saved_model":
    config.override({"trainer": {"init_checkpoint": "x"}})
    with pytest.raises(ValueError, match="only one of"):
      task.initialize(model)
