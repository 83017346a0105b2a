"""`make demo` end to end (--quick) on the test copy of botchan.txt, plus the
demo's settings, its made-up fine-tuning tasks and its headline.

The demo runs every tool as a subprocess; this test reads back what they
wrote: TFRecords, checkpoints, SavedModels (loaded and called), metrics.
No download: --corpus points at tests/testdata/botchan.txt, and the real
fine-tuning task (movie_reviews) reads a small file shaped like its ground
truth (--sentiment_file).
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # pylint: disable=unused-import  (registers ops)
import yaml

from examples.demo import demo
from examples.demo import order_tasks
from examples.demo import real_task
from examples.demo import shipped
from examples.demo import stage_report
from examples.demo import tools
from tests.examples import test_real_task
from tests.testing import tool_server
from tests.testing.repo_paths import BOTCHAN, ROOT

SEQ = 64
HIDDEN = 128  # albert_demo_cpu.yaml

# The longest test module: handed out early (`make test` gives each worker
# whole files, so the demo below runs once).
pytestmark = pytest.mark.slow


# --- Settings, the order tasks, the headline (no TensorFlow) ------------------


_SETTINGS = """
import json, sys
from absl import flags
from examples.demo import demo
demo.define_flags()
flags.FLAGS(["demo"] + sys.argv[1:])
print(json.dumps(demo.settings_from_flags()))
"""


def demo_settings(*args):
  """The demo's settings for these flags (in a process of its own: the demo
  defines flags other tools define too)."""
  proc = tool_server.run([sys.executable, "-c", _SETTINGS, *args],
                         cwd=ROOT, env=tool_server.tool_env(),
                         capture_output=True, text=True, timeout=300)
  return proc.returncode, proc.stdout, proc.stderr


def test_long_and_quick_settings():
  code, out, err = demo_settings("--long")
  assert code == 0, err[-2000:]
  long_run = json.loads(out)
  assert {k: long_run[k] for k in ("corpus", "pretrain_steps", "vocab_size",
                                   "dupe_factor",
                                   "heldout_fraction", "evals", "sizes")} == {
      "corpus": "imdb", "pretrain_steps": demo.LONG_PRETRAIN_STEPS,
      "vocab_size": demo.LONG_VOCAB_SIZE, "dupe_factor": 2,
      "heldout_fraction": 0.05, "evals": 12, "sizes": []}
  code, out, _ = demo_settings("--long", "--pretrain_steps=20",
                               "--corpus=my.txt", "--heldout_fraction=0.1")
  given = json.loads(out)
  assert (given["pretrain_steps"], given["corpus"],
          given["heldout_fraction"]) == (20, "my.txt", 0.1)
  assert (long_run["shipped_model"], long_run["bundle"]) == (
      False, os.path.join("demo_output", "bundle"))
  code, out, _ = demo_settings()
  full = json.loads(out)
  assert (full["corpus"], full["pretrain_steps"], full["heldout_fraction"],
          full["dupe_factor"], full["vocab_size"], full["shipped_model"],
          full["bundle"]) == (None, 3000, 0.2, 10, demo.VOCAB_SIZE, True, None)
  # The real task by default, with its steps and learning rate (chosen on
  # its dev split); the order tasks keep theirs.
  assert (full["finetune_task"], full["finetune_steps"],
          full["finetune_learning_rate"]) == (
              "movie_reviews", real_task.STEPS, real_task.LEARNING_RATE)
  code, out, _ = demo_settings("--finetune_task=split_words")
  order = json.loads(out)
  assert (order["finetune_steps"], order["finetune_learning_rate"]) == (
      demo.FINETUNE_STEPS, 1e-4)
  code, _, err = demo_settings("--finetune_task=split_words",
                               "--sentiment_file=x.txt")
  assert code != 0 and "--sentiment_file: only with" in err
  code, out, _ = demo_settings("--corpus=my.txt")
  assert json.loads(out)["shipped_model"] is False
  code, _, err = demo_settings("--long", "--shipped_model")
  assert code != 0 and "--long pretrains the model that is shipped" in err
  code, _, err = demo_settings("--write_bundle=x")
  assert code != 0 and "only --long writes a bundle" in err
  code, _, err = demo_settings("--quick", "--long")
  assert code != 0 and "--quick and --long: pick one" in err


def test_tools_get_the_repository_first_on_their_path_once(tmp_path,
                                                          monkeypatch):
  monkeypatch.delenv("DEMO_POPEN", raising=False)
  monkeypatch.setenv("PYTHONPATH", os.pathsep.join([ROOT, "/elsewhere", ROOT]))
  lines = tools.run_tool(["-c", "import os; print(os.environ['PYTHONPATH'])"],
                         str(tmp_path / "tool.log"), show=False)
  assert lines == [os.pathsep.join([ROOT, "/elsewhere"])]


def read_task_rows(data_dir):
  """{split: [[label, id1, id2, text_a, text_b], ...]} of a written task."""
  rows = {}
  for split in ("train", "dev"):
    with open(data_dir / f"{split}.tsv", encoding="utf-8") as f:
      lines = f.read().splitlines()
    assert lines[0] == order_tasks.MRPC_HEADER
    rows[split] = [l.split("\t") for l in lines[1:]]
  return rows


def test_sentence_order_task_labels_mean_swapped(tmp_path):
  doc = [f"sentence number {i} here." for i in range(20)]
  counts = order_tasks.write_sentence_order_task([doc], str(tmp_path), seed=3)
  rows = read_task_rows(tmp_path)
  for label, _, _, a, b in rows["train"] + rows["dev"]:
    ia, ib = int(a.split()[2]), int(b.split()[2])
    assert abs(ia - ib) == 1  # consecutive sentences
    assert label == ("1" if ia > ib else "0")
  # 19 pairs: 14 train pairs in both orders, 5 dev pairs in one order.
  assert counts == {"train": {"examples": 28, "swapped": 14},
                    "dev": {"examples": 5,
                            "swapped": sum(r[0] == "1" for r in rows["dev"])}}
  train_sents = {s for r in rows["train"] for s in r[3:]}
  dev_sents = {s for r in rows["dev"] for s in r[3:]}
  assert len(train_sents & dev_sents) <= 1  # only the boundary sentence


def test_split_sentence_task_rows_rejoin_to_held_out_sentences(tmp_path):
  doc = [" ".join(f"w{i}x{j}" for j in range(8)) + "." for i in range(20)]
  doc.insert(5, "too short to cut.")  # < 6 words: not used
  counts = order_tasks.write_split_sentence_task([doc], str(tmp_path), seed=5)
  source = {s: i for i, s in enumerate(doc)}
  rows = read_task_rows(tmp_path)
  used = {}
  for split, split_rows in rows.items():
    for label, _, _, a, b in split_rows:
      head, tail = (a, b) if label == "0" else (b, a)
      sentence = head + " " + tail
      assert sentence in source, sentence  # the parts rejoin exactly
      assert 2 <= len(head.split()) <= 6  # cut in the middle half of 8 words
      used.setdefault(split, set()).add(source[sentence])
  # The last quarter of the 20 usable sentences is dev; none is in both.
  assert not used["train"] & used["dev"]
  assert len(used["dev"]) == 5 and max(used["train"]) < min(used["dev"])
  assert source["too short to cut."] not in used["train"] | used["dev"]
  # Train: 4 cuts x 2 orders per sentence; dev: 1 cut x 2 orders.
  assert counts == {"train": {"examples": 15 * 8, "swapped": 15 * 4},
                    "dev": {"examples": 5 * 2, "swapped": 5}}
  with pytest.raises(ValueError, match="too few examples"):
    order_tasks.write_split_sentence_task([doc[:3]], str(tmp_path / "small"))


def test_words_only_drops_punctuation_keeps_words():
  assert order_tasks.words_only('"Is it on the other side of Hakone?" '
                                "I said -- don't, Koga-san's.") == (
      "Is it on the other side of Hakone I said don't Koga-san's")
  assert order_tasks.words_only("... !") == ""


def test_split_words_task_is_split_sentence_without_punctuation(tmp_path):
  doc = [f"Word{i}, and w{i}x; then y{i}z ends here, {i}!" for i in range(12)]
  order_tasks.write_split_words_task([doc], str(tmp_path / "w"), seed=2)
  order_tasks.write_split_sentence_task(
      [[order_tasks.words_only(s) for s in doc]], str(tmp_path / "s"), seed=2)
  words = read_task_rows(tmp_path / "w")
  assert words == read_task_rows(tmp_path / "s")
  for label, _, _, a, b in words["train"] + words["dev"]:
    assert not set(a + b) & set(",;!.")
    head = a if label == "0" else b
    assert head.startswith("Word")


def test_headline_compares_with_the_targets():
  metrics = {
      "pretraining": {"steps": 10,
                      "before": {"masked_lm_accuracy": 0.01,
                                 "sentence_order_accuracy": 0.5},
                      "after": {"masked_lm_accuracy": 0.31,
                                "sentence_order_accuracy": 0.6}},
      "fill_mask": {"top5_accuracy": 0.35},
      "finetuning": {"task": "split_words", "steps": 5,
                     "pretrained": {"dev": {"accuracy": 0.7}},
                     "random_init": {"dev": {"accuracy": 0.65}},
                     "pretraining_gain": 0.05}}
  rows = {r["name"].strip(): r for r in stage_report.headline(metrics)}
  mlm = rows["held-out masked_lm_accuracy"]
  assert (mlm["before"], mlm["after"], mlm["reached"]) == (0.01, 0.31, True)
  assert rows["held-out sentence_order_accuracy"]["reached"] is False
  assert rows["fill-mask top-5 (held-out words)"]["reached"] is True
  ft = rows["fine-tuned split_words dev accuracy"]
  assert (ft["before"], ft["after"], ft["reached"]) == (0.65, 0.7, None)
  assert rows["gain from pretraining"]["reached"] is False
  assert stage_report.headline({}) == []


# --- The demo, end to end -----------------------------------------------------


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
  base = tmp_path_factory.mktemp("demo")
  out = base / "demo_output"
  truth = test_real_task.write_ground_truth(str(base / "ground_truth.txt"),
                                            120, 100, 2)
  # The demo and its tools in forks of servers that imported their family's
  # modules once (tests/testing/tool_server.py).
  env = tool_server.tool_env(
      DEMO_POPEN="tests.testing.tool_server:popen_streaming")
  proc = tool_server.run(
      [sys.executable, "-m", "examples.demo.demo", "--quick", f"--corpus={BOTCHAN}",
       f"--output_dir={out}", "--sizes=base", "--num_workers=1",
       "--shipped_model", f"--sentiment_file={truth}"],
      cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
      text=True, timeout=900, check=False)
  assert proc.returncode == 0, proc.stdout[-6000:]
  with open(out / "summary.json", encoding="utf-8") as f:
    summary = json.load(f)
  return out, proc.stdout, summary


def test_prints_every_stage_and_streams_tools(demo_run):
  _, stdout, _ = demo_run
  for i in range(1, 9):
    assert f"[stage {i}/8]" in stdout
  # The tools' own progress lines are streamed.
  assert "[create_pretraining_data] wrote" in stdout
  assert "step 100/100" in stdout
  assert "ALBERT-base" in stdout and "12M" in stdout


def test_tfrecords_parse_and_match_the_summary(demo_run):
  out, _, summary = demo_run
  spec = {
      "input_ids": tf.io.FixedLenFeature([SEQ], tf.int64),
      "input_mask": tf.io.FixedLenFeature([SEQ], tf.int64),
      "segment_ids": tf.io.FixedLenFeature([SEQ], tf.int64),
      "masked_lm_positions": tf.io.FixedLenFeature([10], tf.int64),
      "masked_lm_ids": tf.io.FixedLenFeature([10], tf.int64),
      "masked_lm_weights": tf.io.FixedLenFeature([10], tf.float32),
      "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
  }
  for name in ("train", "heldout"):
    path = str(out / "data" / f"{name}.tfrecord")
    n, labels = 0, []
    for raw in tf.data.TFRecordDataset(path):
      ex = tf.io.parse_single_example(raw, spec)
      ids = ex["input_ids"].numpy()
      length = int(ex["input_mask"].numpy().sum())
      assert ids[0] == 2 and ids[length - 1] == 3  # [CLS] ... [SEP]
      assert ids.max() < 1000
      pos = ex["masked_lm_positions"].numpy()
      w = ex["masked_lm_weights"].numpy()
      assert np.all(pos[w > 0] < length) and np.all(pos[w > 0] > 0)
      labels.append(int(ex["next_sentence_labels"].numpy()[0]))
      n += 1
    assert n == summary["data"]["instances"][name] > 0
    assert 0.3 < np.mean(labels) < 0.7  # SOP: about half swapped


def test_pretraining_learned_and_checkpoints_exist(demo_run):
  out, _, summary = demo_run
  assert tf.train.latest_checkpoint(str(out / "pretrain" / "checkpoints")
                                    ).endswith("ckpt-100")
  assert tf.train.latest_checkpoint(
      str(out / "pretrain_init" / "initial")).endswith("ckpt-0")
  p = summary["metrics"]["pretraining"]
  # At init the MLM loss is about ln(vocab) = 6.9; 100 steps must lower it.
  assert abs(p["before"]["masked_lm_loss"] - np.log(1000)) < 0.3
  assert p["after"]["masked_lm_loss"] < p["before"]["masked_lm_loss"] - 0.5
  assert p["after"]["masked_lm_accuracy"] > p["before"]["masked_lm_accuracy"]
  assert 0.0 <= p["after"]["sentence_order_accuracy"] <= 1.0
  with open(out / "curves.png", "rb") as f:
    assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_exports_load_and_answer(demo_run):
  out, _, summary = demo_run
  ex = summary["exports"]
  ids = tf.constant([[2, 20, 21, 22, 3, 0]], tf.int32)
  mask = tf.cast(ids > 0, tf.int32)
  enc = tf.saved_model.load(ex["encoder"]).signatures["serving_default"]
  pooled = enc(input_word_ids=ids, input_mask=mask,
               input_type_ids=tf.zeros_like(ids))["pooled_output"]
  assert pooled.shape == (1, HIDDEN)
  pre = tf.saved_model.load(ex["pretraining"]).signatures["mlm"]
  logits = pre(input_word_ids=ids, input_mask=mask,
               input_type_ids=tf.zeros_like(ids),
               masked_lm_positions=tf.constant([[1, 2]]))["mlm_logits"]
  assert logits.shape == (1, 2, 1000)
  serving = tf.saved_model.load(ex["serving"]).signatures["serving_default"]
  text_out = serving(text=tf.constant(["I was a hard-headed boy."]))
  assert text_out["pooled_output"].shape == (1, HIDDEN)
  clf = tf.saved_model.load(ex["movie_reviews"]).signatures[
      "serving_default"]
  res = clf(text=tf.constant(["A wonderful film.", "A dreadful film."]))
  probs = res["probabilities"].numpy()
  np.testing.assert_allclose(probs.sum(-1), 1.0, rtol=1e-5)
  assert set(res["label_id"].numpy().tolist()) <= {0, 1}
  fm = summary["metrics"]["fill_mask"]
  assert fm["masked_words"] > 50 and 0 <= fm["top1_accuracy"] <= \
      fm["top5_accuracy"] <= 1


def test_finetuning_runs_from_pretrained_and_random_init(demo_run):
  out, stdout, summary = demo_run
  ft = summary["metrics"]["finetuning"]
  assert ft["task"] == "movie_reviews"
  # 120 rated > 0, 100 < 0 (2 at 0 and 1 repeat dropped): 80/10/10 of each.
  assert ft["examples"]["train"] == {"examples": 176, "positive": 96}
  assert ft["examples"]["dev"] == {"examples": 22, "positive": 12}
  assert ft["majority_baseline"] == pytest.approx(12 / 22)
  for init in ("pretrained", "random_init"):
    dev = ft[init]["dev"]
    assert dev["num_examples"] == 22
    with open(out / "finetune" / init / "eval_results.json",
              encoding="utf-8") as f:
      assert json.load(f)["accuracy"] == dev["accuracy"]
    assert tf.train.latest_checkpoint(
        str(out / "finetune" / init / "checkpoints")).endswith("ckpt-40")
  # The shipped model was fine-tuned; the random run started from the
  # initial weights its pretraining started from (rewritten in this run).
  assert ft["model"] == "shipped"
  assert "warm-started" in open(out / "logs" / "run_classifier_random_init.log",
                                encoding="utf-8").read()
  assert "shipped/initial" in stdout
  assert "--init_checkpoint=" + shipped.BUNDLE_DIR in stdout
  real = summary["real_task"]
  assert (real["name"], real["train_examples"], real["dev_examples"],
          real["test_examples"]) == ("movie_reviews", 176, 22, 22)
  assert real["pretrained_dev_accuracy"] == ft["pretrained"]["dev"]["accuracy"]
  # Test accuracy from run_classifier --mode=predict, read back here.
  with open(out / "finetune" / "data" / "test.tsv", encoding="utf-8") as f:
    truth = [int(l.rsplit("\t", 1)[1]) for l in f.read().splitlines()[1:]]
  for init in ("pretrained", "random_init"):
    with open(out / "finetune" / init / "test_predictions" / "SST-2.tsv",
              encoding="utf-8") as f:
      preds = [int(l.split("\t")[1]) for l in f.read().splitlines()[1:]]
    assert real[f"{init}_test_accuracy"] == pytest.approx(
        np.mean(np.array(preds) == np.array(truth)))
  assert real["pretraining_gain"] == pytest.approx(
      real["pretrained_test_accuracy"] - real["random_init_test_accuracy"])
  # No sdist in this run: no VADER figures, said so.
  assert real["vader_test_accuracy"] is None
  assert "VADER: not run" in stdout
  # The served SavedModel and .tflite (raw text in) label the test sentences
  # as the training run's predict mode did (same final checkpoint).
  assert ft["pretrained"]["served_split"] == "test"
  assert abs(ft["pretrained"]["served_accuracy"] -
             real["pretrained_test_accuracy"]) <= 1 / 22 + 1e-9
  assert ft["lite"]["label_agreement"] >= 0.9


def test_shipped_model_is_evaluated_and_served(demo_run):
  """The shipped model's held-out MLM/SOP accuracy, measured in this run on
  held-out records made from its text with its vocabulary, equals what the
  --long run that wrote it recorded (same weights, same records); its
  pretraining export fills masks in a fresh process."""
  out, _, summary = demo_run
  s = summary["metrics"]["shipped"]
  recorded = shipped.verify()["figures"]
  for key in ("masked_lm_accuracy", "sentence_order_accuracy",
              "masked_lm_loss"):
    assert s["pretraining"]["after"][key] == pytest.approx(
        recorded["pretraining"]["after"][key], abs=1e-4), key
  # --quick: the random weights it started from as recorded (not evaluated
  # again), uniform over its vocabulary.
  assert s["pretraining"]["before"] == recorded["pretraining"]["before"]
  with open(os.path.join(shipped.BUNDLE_DIR, "model.yaml"),
            encoding="utf-8") as f:
    vocab_size = yaml.safe_load(f)["vocab_size"]
  assert abs(s["pretraining"]["before"]["masked_lm_loss"] -
             np.log(vocab_size)) < 0.3
  assert not os.path.exists(out / "shipped" / "eval_initial")
  assert s["fill_mask"] == recorded["fill_mask"]
  assert set(summary["exports"]) >= {"shipped_pretraining"}
  rows = {r["name"].strip(): r for r in summary["headline"]}
  assert rows["held-out masked_lm_accuracy"]["after"] == \
      s["pretraining"]["after"]["masked_lm_accuracy"]


def test_summary_has_timings_files_and_parameters(demo_run):
  out, stdout, summary = demo_run
  assert set(summary["timings"]) >= {"corpus", "data", "pretrain", "export",
                                     "shipped", "finetune", "sizes"}
  assert all(t["seconds"] >= 0 for t in summary["timings"].values())
  for name in ("corpus", "vocab", "data", "pretrain", "shipped", "exports",
               "finetune", "curves.png", "finetune_curves.png"):
    assert summary["files"][name] > 0
  with open(out / "finetune_curves.png", "rb") as f:
    assert f.read(8) == b"\x89PNG\r\n\x1a\n"
  names = [r["name"].strip() for r in summary["headline"]]
  assert names == ["held-out masked_lm_accuracy",
                   "held-out sentence_order_accuracy",
                   "fill-mask top-5 (held-out words)",
                   "fine-tuned movie_reviews test accuracy",
                   "gain from pretraining"]
  # The learned figures come first in the closing report.
  report = stdout[stdout.index("[stage 8/8]"):]
  assert report.index("the model shown: the shipped one") < report.index(
      "what the demo model learned")
  assert report.index("what the demo model learned") < report.index("output:")
  params = summary["parameters"]
  # Demo recipe, vocab 1000: embeddings alone are (1000 + 64 + 2) * 64.
  assert params["demo_encoder"] > (1000 + 64 + 2) * 64
  base = params["released_sizes"]["base"]
  assert abs(base["encoder"] / 1e6 - base["paper_millions"]) < 0.5
  with open(out / "model_sizes.json", encoding="utf-8") as f:
    assert json.load(f)[0]["size"] == "base"
