"""The `tagging` task (token classification on CoNLL files), through
run_finetuning as a user runs it: train_and_eval, predict, export + serve;
and the refusals of its reader."""

import json
import os
import random

import numpy as np
import pytest
import tensorflow as tf
import yaml

from albert_tf.core import run_record
from albert_tf.data import conll_data
from albert_tf.serving import lite
from albert_tf.tasks import registry
from albert_tf.tasks import tagging
from albert_tf.tasks import tagging_metrics
from tests.tasks import test_run_finetuning as generic
from tests.testing import finetune_testlib

ENTITIES = ([("tom", "B-PER")], [("red", "B-COL")],
            [("dark", "B-COL"), ("blue", "I-COL")])


def write_conll(path, n, seed, long=0):
  """`n` sentences of "word POS label" lines, one entity each, after a
  -DOCSTART- line, then `long` sentences of 40 words and more (among them
  words that normalise to no piece); returns the sentences as (word, label)
  lists."""
  rng = random.Random(seed)
  words = "the cat sat on a mat and then it ran home".split()
  sentences = []
  for i in range(n + long):
    sentence = [(w, "O") for w in rng.sample(words, rng.randint(2, 5))]
    if i >= n:
      sentence = [(w, "O") for w in rng.choices(words + ["\u00ad", "\u0301"],
                                                k=40)]
    at = rng.randint(0, len(sentence))
    sentence[at:at] = rng.choice(ENTITIES)
    sentences.append(sentence)
  with open(path, "w", encoding="utf-8") as f:
    f.write("-DOCSTART- -X- O\n\n")
    f.write("\n\n".join("\n".join(f"{w} X {l}" for w, l in s)
                        for s in sentences) + "\n")
  return sentences


@pytest.mark.slow  # trains, predicts, exports a SavedModel and a .tflite
def test_train_eval_predict_export_serve(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("tagging")
  spm = finetune_testlib.spm_model(tmp_path_factory)
  data_dir = tmp / "conll"
  data_dir.mkdir()
  # Sentences of more pieces than the sequence (3x and more), with words
  # that normalise to no piece, in training and in dev.
  write_conll(data_dir / "train.txt", 32, seed=0, long=2)
  dev = write_conll(data_dir / "dev.txt", 8, seed=1, long=2)
  model_dir = str(tmp / "run")
  common = ("--task=tagging", f"--model_dir={model_dir}")
  proc = generic.run_tool(*common, f"--data_dir={data_dir}",
                          f"--spm_model_file={spm}", "--max_seq_length=12",
                          f"--config_file={generic.tiny_config(tmp / 't.yaml')}")
  assert proc.returncode == 0, proc.stderr[-3000:]
  with open(os.path.join(model_dir, "eval_results.json"),
            encoding="utf-8") as f:
    results = json.load(f)
  assert results["num_sentences"] == 10
  assert results["num_true_entities"] == 10
  for key in ("precision", "recall", "f1", "word_accuracy"):
    assert 0.0 <= results[key] <= 1.0, results
  with open(os.path.join(model_dir, "experiment_config.yaml"),
            encoding="utf-8") as f:
    recorded = yaml.safe_load(f)
  # train.txt's labels, kept in the run's config.
  labels = recorded["data"]["label_names"]
  assert labels == ["O", "B-COL", "B-PER", "I-COL"]
  # A new run starts from the task's recipe (finetuning/conll2003.yaml),
  # not the pretraining optimizer; the --config_file given comes after it.
  assert recorded["optimizer"]["name"] == "adamw"
  assert recorded["optimizer"]["learning_rate"] == pytest.approx(5e-5)
  assert recorded["trainer"]["train_steps"] == 2  # the given file's

  # predict (no test.txt: dev.txt): each line with its label appended.
  proc = generic.run_tool(*common, "--mode=predict")
  assert proc.returncode == 0, proc.stderr[-3000:]
  with open(os.path.join(model_dir, "predictions.txt"),
            encoding="utf-8") as f:
    blocks = f.read().strip("\n").split("\n\n")
  # Line for line with dev.txt: its -DOCSTART- line too.
  assert blocks.pop(0) == "-DOCSTART- -X- O O"
  rows = [[line.split() for line in block.split("\n")] for block in blocks]
  assert [[(r[0], r[2]) for r in s] for s in rows] == dev
  assert all(len(r) == 4 and r[1] == "X" and r[3] in labels
             for s in rows for r in s)
  predicted = [[r[3] for r in s] for s in rows]
  # The evaluation scored these very predictions.
  again = tagging_metrics.entity_scores([[l for _, l in s] for s in dev],
                                        predicted)
  assert again["f1"] == pytest.approx(results["f1"])
  # With a test.txt (words only) predict reads it instead.
  (data_dir / "test.txt").write_text(
      "-DOCSTART- X\n\n" +
      "\n\n".join("\n".join(f"{w} X" for w, _ in s) for s in dev) + "\n")
  proc = generic.run_tool(*common, "--mode=predict")
  assert proc.returncode == 0, proc.stderr[-3000:]
  with open(os.path.join(model_dir, "predictions.txt"),
            encoding="utf-8") as f:
    assert f.read() == "-DOCSTART- X O\n\n" + "\n\n".join(
        "\n".join(f"{w} X {p}" for (w, _), p in zip(s, labels_of_s))
        for s, labels_of_s in zip(dev, predicted)) + "\n"

  # export: text in, a label and the offsets of each word out.
  proc = generic.run_tool(*common, "--mode=export",
                          f"--export_dir={tmp / 'export'}")
  assert proc.returncode == 0, proc.stderr[-3000:]
  import tensorflow_text  # noqa: F401  pylint: disable=unused-import
  loaded = tf.saved_model.load(str(tmp / "export" / "1"))
  texts = ["  ".join(w for w, _ in s) for s in dev]
  out = loaded.signatures["serving_default"](text=tf.constant(texts))
  # The long sentences' labels merge windows as predict's do.
  assert sum(map(len, conll_data.word_pieces(
      finetune_testlib.tokenizer(tmp_path_factory),
      [conll_data.Sentence("", 0, [], [w for w, _ in dev[-1]], None)])[0])
             ) >= 3 * 12
  # The .tflite export runs and labels every word as predict did.
  proc = generic.run_tool(f"--model_dir={model_dir}", "--format=tflite",
                          f"--export_dir={tmp / 'lite'}",
                          module="albert_tf.export_savedmodel")
  assert proc.returncode == 0, proc.stderr[-3000:]
  lite_out = lite.LiteModel(str(tmp / "lite"))("serving_default",
                                               text=np.array(texts, object))
  for i, text in enumerate(texts):
    n = int(out["num_words"][i])
    assert n == len(dev[i])
    served = [l.decode() for l in out["label"][i].numpy()]
    assert served[:n] == predicted[i] and set(served[n:]) <= {""}
    assert [l.decode() for l in lite_out["label"][i][:n]] == predicted[i]
    starts, ends = out["word_start"][i].numpy(), out["word_end"][i].numpy()
    assert [text.encode()[s:e].decode() for s, e in zip(starts[:n], ends[:n])
            ] == [w for w, _ in dev[i]]  # byte offsets
  # A train.txt without sentences stops the run with one line.
  empty_dir = tmp / "empty"
  empty_dir.mkdir()
  (empty_dir / "train.txt").write_text("-DOCSTART- -X- O\n\n")
  (empty_dir / "dev.txt").write_text("a O\n")
  proc = generic.run_tool(
      "--task=tagging", f"--model_dir={tmp / 'empty_run'}",
      f"--data_dir={empty_dir}", f"--spm_model_file={spm}",
      f"--config_file={generic.tiny_config(tmp / 't.yaml')}")
  assert proc.returncode == 1
  assert proc.stderr.strip().splitlines()[-1] == (
      f"ERROR: {empty_dir / 'train.txt'}: train.txt has no sentences (a word "
      "a line, a blank line between sentences)"), proc.stderr
  ids = {"input_word_ids": tf.constant([[2, 10, 3, 0]], tf.int32),
         "input_mask": tf.constant([[1, 1, 1, 0]], tf.int32),
         "input_type_ids": tf.zeros([1, 4], tf.int32)}
  by_piece = loaded.signatures["serve_ids"](**ids)
  assert by_piece["logits"].shape == (1, 4, len(labels))
  np.testing.assert_array_equal(
      by_piece["label_id"].numpy(), np.argmax(by_piece["logits"], -1))


def _sentences(tmp_path, text, name="train.txt", labelled=True):
  path = tmp_path / name
  path.write_text(text, encoding="utf-8")
  return str(path), conll_data.read_sentences(str(path), labelled)


def test_reader_refuses_by_file_and_line(tmp_path):
  path, sentences = _sentences(
      tmp_path, "-DOCSTART- O\n\nEU B-ORG\nrejects O\n\nPeter B-PER\n")
  assert [s.words for s in sentences] == [["EU", "rejects"], ["Peter"]]
  assert [s.line for s in sentences] == [3, 6]
  assert conll_data.label_list(sentences) == ["O", "B-ORG", "B-PER"]
  with pytest.raises(ValueError, match=r"train\.txt:2: 'lonely' has no "
                     "label column"):
    _sentences(tmp_path, "a O\nlonely\n")
  with pytest.raises(ValueError, match=r"train\.txt:1: label 'PER' is not "
                     "IOB2"):
    _sentences(tmp_path, "Peter PER\n")
  # A dev label the run does not have.
  _, dev = _sentences(tmp_path, "x O\n\ny B-LOC\n", name="dev.txt")
  with pytest.raises(ValueError, match=r"dev\.txt:3: label 'B-LOC' is not "
                     "one of the run's labels"):
    conll_data.check_labels(dev, ["O", "B-PER"], "train.txt")
  # Words without labels are read for prediction.
  _, test = _sentences(tmp_path, "Peter\nruns\n", "test.txt", False)
  assert test[0].words == ["Peter", "runs"] and test[0].labels is None


def test_line_ends_and_columns(tmp_path):
  """LF, CRLF and a bare CR each end a line (a CR-only file was one word);
  columns split at spaces and tabs only, so a no-break space stays inside
  its word; a vertical tab or a line separator inside a line is refused
  (it hid a word and gave another word's label)."""
  path = tmp_path / "mixed.txt"
  path.write_bytes("EU NNP B-ORG\rrejects\tVBZ O\r\n\r10\u00a0000 CD O\n"
                   " \t\nend O".encode("utf-8"))
  sentences = conll_data.read_sentences(str(path))
  assert [(s.line, s.words, s.labels) for s in sentences] == [
      (1, ["EU", "rejects"], ["B-ORG", "O"]),
      (4, ["10\u00a0000"], ["O"]), (6, ["end"], ["O"])]
  for odd, name in (("\x0b", "000B"), ("\u2028", "2028"), ("\x85", "0085")):
    with pytest.raises(ValueError, match=(
        rf"train\.txt:2: U\+{name} inside the line \(a control character or "
        "line separator\)")):
      _sentences(tmp_path, f"a O\nEU B-ORG{odd}rejects O\n")


def test_predictions_keep_the_documents_line_for_line(tmp_path):
  """predictions.txt dropped the -DOCSTART- lines, so it did not line up
  with the file it labels."""
  text = ("-DOCSTART- -X- -X- O\n\nEU NNP B-ORG\nrejects VBZ O\n\n"
          "-DOCSTART- -X- -X- O\n\nPeter NNP B-PER\n\nruns VBZ O\n")
  _, sentences = _sentences(tmp_path, text, name="dev.txt")
  assert [s.words for s in sentences] == [["EU", "rejects"], ["Peter"],
                                          ["runs"]]
  out = conll_data.write_predictions(
      str(tmp_path / "predictions.txt"), sentences,
      [["B-ORG", "B-PER"], ["B-PER"], ["O"]])
  with open(out, encoding="utf-8") as f:
    written = f.read().split("\n")
  assert written[:-1] == [
      line + (" " + label if line else "") for line, label in zip(
          text.split("\n"), ["O", "", "B-ORG", "B-PER", "", "O", "",
                              "B-PER", "", "O"])]


def test_only_each_words_first_piece_is_labelled(tmp_path, tmp_path_factory):
  tokenizer = finetune_testlib.tokenizer(tmp_path_factory)
  _, sentences = _sentences(tmp_path, "Zyxwqk B-PER\nsat O\n")
  pieces = conll_data.word_pieces(tokenizer, sentences)[0]
  assert len(pieces[0]) > 1  # a word of several pieces
  features = next(conll_data.convert_sentences(
      sentences, tokenizer, {"O": 0, "B-PER": 1}, 16))
  n = len(pieces[0])
  expected = ([-1, 1] + [-1] * (n - 1) + [0] + [-1] * len(pieces[1][1:]) +
              [-1])  # [CLS] Zyxwqk... sat... [SEP]
  assert features["label_ids"][:len(expected)] == expected
  assert set(features["label_ids"][len(expected):]) == {-1}
  assert conll_data.word_positions(pieces, 14)[1] == [(0, 1), (0, 1 + n)]


def test_labels_given_in_the_config_are_checked_on_train_txt(
    tmp_path, tmp_path_factory):
  (tmp_path / "train.txt").write_text("Ann B-PER\nsat O\n\nRome B-LOC\n")
  config = finetune_testlib.tiny_finetune_config(
      tagging.TaggingExperimentConfig, {
          "data_dir": str(tmp_path), "label_names": ["O", "B-PER"],
          "max_seq_length": 32,
          "spm_model_file": finetune_testlib.spm_model(tmp_path_factory)})
  task = tagging.TaggingTask(config, str(tmp_path / "run"))
  assert task.labels == ["O", "B-PER"]
  with pytest.raises(ValueError, match=(
      r"train\.txt:4: label 'B-LOC' is not one of the run's labels")):
    task.read_examples("train")


def test_labels_of_train_txt_are_restored_from_the_run_record(
    tmp_path, tmp_path_factory):
  """train.txt's labels go into the run's config, so every later command of
  the run (rebuilt from its record) has them, whatever train.txt says then."""
  (tmp_path / "train.txt").write_text("Ann B-PER\nsat O\n\nRome B-LOC\n")
  config = finetune_testlib.tiny_finetune_config(
      tagging.TaggingExperimentConfig, {
          "data_dir": str(tmp_path), "max_seq_length": 32,
          "spm_model_file": finetune_testlib.spm_model(tmp_path_factory)})
  model_dir = str(tmp_path / "run")
  facts = tagging.TaggingTask(config, model_dir).record_facts()
  assert config.data.label_names == ["O", "B-LOC", "B-PER"]
  run_record.write(model_dir, config, facts)
  (tmp_path / "train.txt").write_text("Ann B-ORG\n")
  task = registry.task_of_record(run_record.read(model_dir))
  assert task.config.data.label_names == ["O", "B-LOC", "B-PER"]
  assert task.labels == ["O", "B-LOC", "B-PER"]
