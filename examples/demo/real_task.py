"""The fine-tuning stage's real task (`--finetune_task=movie_reviews`, the
default): movie-review sentence polarity, human-labelled (Hutto & Gilbert,
ICWSM 2014; sentiment_data.py), in the SST-2 layout; the test split scored
by both fine-tuned runs (`run_classifier --mode=predict`) and by VADER
(vader_baseline.py), the lexicon method published with the data."""

import os

from examples.demo import context
from examples.demo import corpus
from examples.demo import sentiment_data
from examples.demo import vader_baseline

NAME = "movie_reviews"
GLUE_TASK = "sst-2"
DESCRIPTION = ("Rotten Tomatoes sentences, positive (1) when the mean of "
               "~20 human ratings (-4..+4) is > 0, negative (0) when < 0; "
               "a seeded, stratified 80/10/10 train/dev/test split")
# Chosen on the dev split within the demo's time (docs/demo.md): more
# updates and a larger step than the order tasks' 300 steps at 1e-4.
STEPS = 1000
LEARNING_RATE = 3e-4


def fetch(cache_dir, user_file=None, log=print):
  """(ground-truth path, VADER directory or None, origin).

  `user_file`: a file in the ground truth's format used as it is (VADER then
  runs only if an earlier run left its files in `cache_dir`). Else the
  vaderSentiment 3.3.2 sdist in `cache_dir` (downloaded with pip when
  missing), sha256-checked, is extracted on every run, so what is used is
  always what the checked sdist holds.
  """
  vader_dir = os.path.join(cache_dir, "vader")
  have_vader = os.path.isfile(os.path.join(vader_dir,
                                           vader_baseline.MODULE_FILE))
  if user_file:
    if not os.path.isfile(user_file):
      raise SystemExit(f"ERROR: --sentiment_file {user_file}: no such file")
    return os.path.abspath(user_file), vader_dir if have_vader else None, \
        "user"
  os.makedirs(cache_dir, exist_ok=True)
  tarball = os.path.join(cache_dir, sentiment_data.VADER_TARBALL)
  origin = "cache"
  if not os.path.exists(tarball):
    corpus.download_package(
        sentiment_data.download_cmd(cache_dir), tarball,
        sentiment_data.VADER_SDIST,
        "--sentiment_file=PATH or --finetune_task=split_words", log)
    origin = "pypi"
  path = sentiment_data.extract_from_sdist(tarball, cache_dir)
  log(f"{sentiment_data.VADER_TARBALL} ({origin}): sha256 "
      f"{sentiment_data.VADER_SHA256[:16]}... as expected; extracted "
      f"{sentiment_data.GROUND_TRUTH} and VADER's analyser")
  return path, vader_dir, origin


def build(ground_truth, data_dir, seed):
  """Writes the SST-2 TSVs; returns their counts (sentiment_data.write_sst2)."""
  return sentiment_data.write_sst2(
      sentiment_data.read_ground_truth(ground_truth), data_dir, seed)


def read_predictions(path, count):
  """Label ids of run_classifier's SST-2 submission (`index<TAB>prediction`,
  in test-file order)."""
  with open(path, encoding="utf-8") as f:
    lines = f.read().splitlines()
  preds = [int(line.split("\t")[1]) for line in lines[1:] if line]
  if len(preds) != count:
    raise RuntimeError(f"{path}: {len(preds)} predictions for {count} test "
                       "sentences")
  return preds


def test_figures(test_tsv, predictions, analyzer):
  """Test accuracy of each run in `predictions` ({init: [label id]}), the
  gain of pretrained over random init with its paired standard error, and
  the accuracy of VADER's `analyzer` (None: no VADER)."""
  rows = sentiment_data.read_sst2(test_tsv)
  truth = [label for _, label in rows]
  n = len(truth)
  correct = {init: [int(p == t) for p, t in zip(preds, truth)]
             for init, preds in predictions.items()}
  out = {"examples": n,
         "accuracy": {init: sum(c) / n for init, c in correct.items()},
         "majority_baseline": max(sum(truth), n - sum(truth)) / n}
  gain, se = vader_baseline.paired_gain(correct["pretrained"],
                                        correct["random_init"])
  out["pretraining_gain"], out["pretraining_gain_se"] = gain, se
  out["accuracy_se"] = vader_baseline.binomial_se(
      out["accuracy"]["pretrained"], n)
  out["vader"] = None
  if analyzer is not None:
    vader = vader_baseline.vader_labels(analyzer, [s for s, _ in rows])
    vader_correct = [int(p == t) for p, t in zip(vader, truth)]
    gain, se = vader_baseline.paired_gain(correct["pretrained"],
                                          vader_correct)
    out["vader"] = {"accuracy": sum(vader_correct) / n,
                    "gain_over_vader": gain, "gain_over_vader_se": se}
  return out


def dev_vader_accuracy(dev_tsv, analyzer):
  """The accuracy of VADER's `analyzer` on the dev split (None: no VADER)."""
  if analyzer is None:
    return None
  rows = sentiment_data.read_sst2(dev_tsv)
  return vader_baseline.accuracy(
      vader_baseline.vader_labels(analyzer, [s for s, _ in rows]),
      [label for _, label in rows])


def summary_entry(counts, origin, dev, test):
  """summary.json's `real_task` object."""
  vader = test["vader"]
  return {"name": NAME,
          "source": sentiment_data.SOURCE,
          "origin": origin,
          "label_rule": "1 when the mean rating > 0, 0 when < 0, 0 dropped",
          "train_examples": counts["train"]["examples"],
          "dev_examples": counts["dev"]["examples"],
          "test_examples": counts["test"]["examples"],
          "pretrained_dev_accuracy": dev["pretrained"],
          "random_init_dev_accuracy": dev["random_init"],
          "vader_dev_accuracy": dev["vader"],
          "pretrained_test_accuracy": test["accuracy"]["pretrained"],
          "random_init_test_accuracy": test["accuracy"]["random_init"],
          "vader_test_accuracy": vader["accuracy"] if vader else None,
          "test_accuracy_se": test["accuracy_se"],
          "pretraining_gain": test["pretraining_gain"],
          "pretraining_gain_se": test["pretraining_gain_se"],
          "gain_over_vader": vader["gain_over_vader"] if vader else None,
          "gain_over_vader_se": vader["gain_over_vader_se"] if vader else None,
          "majority_baseline": test["majority_baseline"]}


def prepare(run, source):
  """The fine-tuning stage's data for the real task: fetched (cached,
  sha256-checked) or --sentiment_file, converted to the SST-2 layout under
  finetune/data/; returns a context.TaskData."""
  data_dir = run.path("finetune", "data")
  try:
    path, vader_dir, origin = fetch(
        run.path("cache"), run.settings.get("sentiment_file"),
        log=lambda m: print("  " + m, flush=True))
    counts = build(path, data_dir, run.settings["seed"])
  except (RuntimeError, sentiment_data.GroundTruthError) as e:
    raise SystemExit(f"ERROR: {e}") from None
  run.real_task = {"ground_truth": path, "vader_dir": vader_dir,
                   "origin": origin}
  print(f"  the {source.name} model; the real task {NAME!r}: {DESCRIPTION}"
        f"\n  from {run.rel(path)} ({origin}); {_count_line(counts)}",
        flush=True)
  rows = sentiment_data.read_sst2(os.path.join(data_dir, "train.tsv"))
  print(f"  a training row: label {rows[0][1]} "
        f"({sentiment_data.LABEL_NAMES[rows[0][1]]})  {rows[0][0]!r}",
        flush=True)
  dev = counts["dev"]
  majority = max(dev["positive"], dev["examples"] - dev["positive"])
  return context.TaskData(NAME, GLUE_TASK, data_dir,
                          sentiment_data.LABEL_NAMES, 1, DESCRIPTION, counts,
                          majority / dev["examples"], "test")


def _count_line(counts):
  parts = [f"{split} {counts[split]['examples']:,} "
           f"({counts[split]['positive']:,} positive)"
           for split in ("train", "dev", "test")]
  return (", ".join(parts) + f"; dropped: {counts['dropped_zero']} rated "
          f"exactly 0, {counts['dropped_repeats']} repeated sentences")


def evaluate_test(run, data, config_path, run_dirs, dev_results):
  """Both fine-tuned runs predict the test split (`run_classifier
  --mode=predict`, the final checkpoint, as evaluated on dev); VADER scores
  dev and test; the figures go to summary.json's `real_task`."""
  predictions = {}
  test_tsv = os.path.join(data.data_dir, "test.tsv")
  count = len(sentiment_data.read_sst2(test_tsv))
  for init, run_dir in run_dirs.items():
    out_dir = os.path.join(run_dir, "test_predictions")
    run.tool(f"predict_test_{init}", [
        "-m", "albert_tf.run_classifier", f"--config_file={config_path}",
        f"--model_dir={run_dir}", f"--output_dir={out_dir}",
        "--mode=predict"])
    predictions[init] = read_predictions(os.path.join(out_dir, "SST-2.tsv"),
                                         count)
  vader_dir = run.real_task["vader_dir"]
  analyzer = vader_baseline.load_analyzer(vader_dir) if vader_dir else None
  test = test_figures(test_tsv, predictions, analyzer)
  dev = {"pretrained": dev_results["pretrained"]["accuracy"],
         "random_init": dev_results["random_init"]["accuracy"],
         "vader": dev_vader_accuracy(os.path.join(data.data_dir, "dev.tsv"),
                                     analyzer)}
  entry = summary_entry(data.counts, run.real_task["origin"], dev, test)
  run.summary["real_task"] = entry
  print_figures(entry)


def print_figures(entry):
  """The real task's figures (summary.json's `real_task`), as printed."""
  fmt = lambda v: "-" if v is None else f"{v:.3f}"
  print(f"  {entry['name']} ({entry['test_examples']:,} test sentences; one "
        f"standard error of an accuracy ~{entry['test_accuracy_se']:.3f}):",
        flush=True)
  print(f"    {'':<37}{'dev':>7}{'test':>7}")
  for label, key in (("fine-tuned from the pretrained model", "pretrained"),
                     ("fine-tuned from random init", "random_init"),
                     ("VADER (lexicon, compound > 0)", "vader")):
    print(f"    {label:<37}{fmt(entry[key + '_dev_accuracy']):>7}"
          f"{fmt(entry[key + '_test_accuracy']):>7}")
  print(f"    gain from pretraining (test): "
        f"{100 * entry['pretraining_gain']:+.1f} +- "
        f"{100 * entry['pretraining_gain_se']:.1f} points (paired standard "
        "error)")
  if entry["gain_over_vader"] is not None:
    print(f"    gain over VADER (test): {100 * entry['gain_over_vader']:+.1f}"
          f" +- {100 * entry['gain_over_vader_se']:.1f} points")
  else:
    print("    VADER: not run (its files come with the vaderSentiment sdist, "
          "which this run did not fetch)")
