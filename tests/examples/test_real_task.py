"""The demo's real task (examples/demo/sentiment_data.py, vader_baseline.py,
real_task.py): the ground truth -> SST-2 conversion, the split, the sdist
check and extraction, the VADER wrapper and the summary's figures. No
download and no TensorFlow: files are written here in the ground truth's
format."""

import collections
import hashlib
import io
import json
import math
import os
import tarfile

import pytest

from albert_tf.data import glue_data
from examples.demo import context
from examples.demo import real_task
from examples.demo import sentiment_data
from examples.demo import stage_report
from examples.demo import vader_baseline
from tests.testing.repo_paths import ROOT

CACHED_SDIST = os.path.join(ROOT, "demo_output", "cache",
                            sentiment_data.VADER_TARBALL)


def write_ground_truth(path, n_pos=60, n_neg=40, n_zero=3, repeat=True):
  """A file shaped like movieReviewSnippets_GroundTruth.txt (CRLF, UTF-8):
  `n_pos` sentences rated > 0, `n_neg` < 0, `n_zero` exactly 0, and one
  repeated sentence (its second copy is dropped)."""
  lines, i = [], 0
  for count, sign in ((n_pos, 1), (n_neg, -1), (n_zero, 0)):
    for k in range(count):
      i += 1
      rating = sign * (0.25 + (k % 7) * 0.5)
      word = {1: "wonderful", -1: "dreadful", 0: "plain"}[sign]
      lines.append(f"{i}\t{rating}\tA {word} film, number {i} \u2014 caf\u00e9.")
  if repeat:
    lines.append(f"{i + 1}\t1.5\tA wonderful film, number 1 \u2014 caf\u00e9.")
  with open(path, "wb") as f:
    f.write(("\r\n".join(lines)).encode("utf-8"))  # no final CRLF, as shipped
  return path


def test_label_rule():
  assert sentiment_data.label_of(0.1) == 1
  assert sentiment_data.label_of(-2.75) == 0
  assert sentiment_data.label_of(0.0) is None


def test_read_ground_truth_strips_crlf_and_parses(tmp_path):
  path = write_ground_truth(str(tmp_path / "gt.txt"))
  rows = sentiment_data.read_ground_truth(path)
  assert len(rows) == 104
  assert rows[0] == sentiment_data.Rated(
      "1", 0.25, "A wonderful film, number 1 \u2014 caf\u00e9.")
  assert not any("\r" in r.text for r in rows)
  assert sum(r.rating == 0 for r in rows) == 3


@pytest.mark.parametrize("line, why", [
    ("7\tgood\tsome text", "2: rating 'good' is not a number"),
    ("7\t1.0", "2: expected id<TAB>mean rating<TAB>text"),
])
def test_malformed_lines_name_file_and_line(tmp_path, line, why):
  path = tmp_path / "gt.txt"
  path.write_bytes(f"1\t0.5\tfine\r\n{line}\r\n".encode())
  with pytest.raises(sentiment_data.GroundTruthError) as e:
    sentiment_data.read_ground_truth(str(path))
  assert str(e.value) == f"{path}:{why}"


def test_sst2_files_counts_and_reader(tmp_path):
  rows = sentiment_data.read_ground_truth(
      write_ground_truth(str(tmp_path / "gt.txt")))
  out = str(tmp_path / "data")
  counts = sentiment_data.write_sst2(rows, out, seed=1234)
  # 60 positive, 40 negative: 80/10/10 of each label.
  assert counts == {"train": {"examples": 80, "positive": 48},
                    "dev": {"examples": 10, "positive": 6},
                    "test": {"examples": 10, "positive": 6},
                    "dropped_zero": 3, "dropped_repeats": 1}
  splits = {}
  for split in ("train", "dev", "test"):
    with open(os.path.join(out, f"{split}.tsv"), encoding="utf-8") as f:
      assert f.readline() == "sentence\tlabel\n"
    splits[split] = sentiment_data.read_sst2(os.path.join(out, f"{split}.tsv"))
    # run_classifier's SST-2 reader reads the same rows and labels (test:
    # the sentences, predicted in this order; the labels stay for scoring).
    examples = glue_data.read_examples("sst-2", out, split)
    assert [e.text_a for e in examples] == [t for t, _ in splits[split]]
    if split != "test":
      assert [int(e.label) for e in examples] == [l for _, l in splits[split]]
  texts = [set(t for t, _ in s) for s in splits.values()]
  assert not (texts[0] & texts[1] or texts[0] & texts[2] or
              texts[1] & texts[2])
  everything = set().union(*texts)
  assert len(everything) == 100 and not any("plain" in t for t in everything)
  by_text = {r.text: sentiment_data.label_of(r.rating) for r in rows
             if r.rating}
  for s in splits.values():
    assert all(by_text[t] == label for t, label in s)


def test_split_is_deterministic_and_seeded(tmp_path):
  rows = sentiment_data.read_ground_truth(
      write_ground_truth(str(tmp_path / "gt.txt"), 200, 150, 1))
  a = sentiment_data.stratified_split(rows, seed=7)
  b = sentiment_data.stratified_split(list(rows), seed=7)
  c = sentiment_data.stratified_split(rows, seed=8)
  assert a == b and a != c
  for split, share in sentiment_data.SPLITS:
    labels = collections.Counter(label for _, label in a[split])
    assert labels == {1: round(200 * share), 0: round(150 * share)}


def test_too_few_sentences_is_an_error(tmp_path):
  rows = sentiment_data.read_ground_truth(
      write_ground_truth(str(tmp_path / "gt.txt"), 3, 2, 0, repeat=False))
  with pytest.raises(sentiment_data.GroundTruthError, match="too few"):
    sentiment_data.write_sst2(rows, str(tmp_path / "d"), seed=1)


def _tar_gz(members):
  buf = io.BytesIO()
  with tarfile.open(fileobj=buf, mode="w:gz") as tar:
    for name, data in members.items():
      info = tarfile.TarInfo(name)
      info.size = len(data)
      tar.addfile(info, io.BytesIO(data))
  return buf.getvalue()


def test_sdist_is_sha256_checked_then_extracted(tmp_path, monkeypatch):
  truth = b"1\t2.5\tA fine film.\r\n2\t-1.0\tA bad one."
  inner = _tar_gz({sentiment_data.GROUND_TRUTH_MEMBER: truth})
  members = {sentiment_data.RESOURCES_MEMBER: inner}
  for name in sentiment_data.VADER_FILES:
    members[name] = f"contents of {os.path.basename(name)}".encode()
  sdist = tmp_path / sentiment_data.VADER_TARBALL
  sdist.write_bytes(_tar_gz(members))
  with pytest.raises(RuntimeError, match="sha256 .* expected 5d7c06e0"):
    sentiment_data.extract_from_sdist(str(sdist), str(tmp_path / "cache"))
  assert not (tmp_path / "cache").exists()
  monkeypatch.setattr(sentiment_data, "VADER_SHA256",
                      hashlib.sha256(sdist.read_bytes()).hexdigest())
  path = sentiment_data.extract_from_sdist(str(sdist), str(tmp_path / "cache"))
  with open(path, "rb") as f:
    assert f.read() == truth
  assert (tmp_path / "cache" / "vader" / "vader_lexicon.txt").read_text() == \
      "contents of vader_lexicon.txt"
  # fetch() finds the sdist in the cache: no download.
  got, vader_dir, origin = real_task.fetch(str(sdist.parent), log=lambda m: None)
  assert (got, origin) == (str(tmp_path / sentiment_data.GROUND_TRUTH),
                           "cache")
  assert vader_dir == str(tmp_path / "vader")


# A module with VADER's interface (class SentimentIntensityAnalyzer reading
# its lexicon from its own directory, polarity_scores -> {"compound": ...}),
# so the wrapper is tested without the sdist.
TINY_VADER = '''
import os
class SentimentIntensityAnalyzer:
  def __init__(self, lexicon_file="vader_lexicon.txt"):
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, lexicon_file), encoding="utf-8") as f:
      self.lexicon = {w: float(v) for w, v in
                      (line.split("\\t")[:2] for line in f if line.strip())}
  def polarity_scores(self, text):
    total = sum(self.lexicon.get(w.strip(".,!").lower(), 0.0)
                for w in text.split())
    return {"compound": total / (abs(total) + 15) ** 0.5 if total else 0.0}
'''


def test_a_failed_download_names_the_sdist_and_the_alternatives(
    tmp_path, monkeypatch):
  monkeypatch.setattr(sentiment_data, "download_cmd", lambda cache: [
      "sh", "-c", "echo 'ERROR: No matching distribution'; exit 1"])
  lines = []
  with pytest.raises(RuntimeError) as info:
    real_task.fetch(str(tmp_path / "cache"), log=lines.append)
  assert str(info.value) == (
      "could not download vaderSentiment==3.3.2 (exit code 1); run with "
      "--sentiment_file=PATH or --finetune_task=split_words instead")
  assert lines[-1] == "  | ERROR: No matching distribution"


def test_vader_wrapper_loads_from_a_directory(tmp_path):
  (tmp_path / "vaderSentiment.py").write_text(TINY_VADER)
  (tmp_path / "vader_lexicon.txt").write_text("good\t1.9\t0.9\nawful\t-2.0\t1.1\n")
  analyzer = vader_baseline.load_analyzer(str(tmp_path))
  sentences = ["A good film.", "An awful, awful film.", "A film.",
               "Good and awful."]
  # compound > 0 is positive; 0 (no lexicon word) and < 0 are negative.
  assert vader_baseline.vader_labels(analyzer, sentences) == [1, 0, 0, 0]
  with pytest.raises(FileNotFoundError, match="vaderSentiment.py: not found"):
    vader_baseline.load_analyzer(str(tmp_path / "missing"))


@pytest.mark.skipif(not os.path.exists(CACHED_SDIST),
                    reason="the vaderSentiment sdist is not in demo_output/cache "
                    "(make demo fetches it; tests do not download)")
def test_real_vader_on_sentences_of_known_polarity(tmp_path):
  sentiment_data.extract_from_sdist(CACHED_SDIST, str(tmp_path))
  analyzer = vader_baseline.load_analyzer(str(tmp_path / "vader"))
  assert vader_baseline.vader_labels(analyzer, [
      "A wonderful, moving film.", "A dull, boring mess.",
      "The film is not good.", "I loved it!"]) == [1, 0, 0, 1]


def test_paired_gain_and_standard_errors():
  a = [1, 1, 1, 0, 1, 0, 1, 1]
  b = [1, 0, 1, 0, 0, 0, 1, 0]
  gain, se = vader_baseline.paired_gain(a, b)
  # Differences 0,1,0,0,1,0,0,1: mean 3/8, sample variance 15/56.
  assert gain == pytest.approx(3 / 8)
  assert se == pytest.approx(math.sqrt(15 / 56 / 8))
  assert vader_baseline.binomial_se(0.8, 100) == pytest.approx(0.04)
  assert vader_baseline.accuracy([1, 0, 1], [1, 1, 1]) == pytest.approx(2 / 3)
  with pytest.raises(ValueError):
    vader_baseline.paired_gain([1], [1, 0])


def test_test_figures_and_summary_keys(tmp_path):
  data = tmp_path / "d"
  data.mkdir()
  (data / "test.tsv").write_text(
      "sentence\tlabel\nA good film.\t1\nAn awful film.\t0\n"
      "Good.\t1\nAwful.\t0\n", encoding="utf-8")
  (data / "dev.tsv").write_text("sentence\tlabel\nA good one.\t1\n",
                                encoding="utf-8")
  (tmp_path / "vaderSentiment.py").write_text(TINY_VADER)
  (tmp_path / "vader_lexicon.txt").write_text("good\t1.9\t0.9\n")
  analyzer = vader_baseline.load_analyzer(str(tmp_path))
  test = real_task.test_figures(str(data / "test.tsv"),
                                {"pretrained": [1, 0, 1, 1],
                                 "random_init": [0, 0, 0, 0]}, analyzer)
  assert test["accuracy"] == {"pretrained": 0.75, "random_init": 0.5}
  # Tiny VADER: "good" positive, the rest 0 -> negative: all 4 right.
  assert test["vader"]["accuracy"] == 1.0
  assert test["pretraining_gain"] == pytest.approx(0.25)
  assert test["vader"]["gain_over_vader"] == pytest.approx(-0.25)
  dev = {"pretrained": 0.7, "random_init": 0.6,
         "vader": real_task.dev_vader_accuracy(str(data / "dev.tsv"),
                                               analyzer)}
  assert dev["vader"] == 1.0
  assert real_task.dev_vader_accuracy(str(data / "dev.tsv"), None) is None
  assert real_task.test_figures(str(data / "test.tsv"),
                                {"pretrained": [1, 0, 1, 1],
                                 "random_init": [0, 0, 0, 0]},
                                None)["vader"] is None
  counts = {"train": {"examples": 8}, "dev": {"examples": 1},
            "test": {"examples": 4}}
  entry = real_task.summary_entry(counts, "cache", dev, test)
  assert set(entry) >= {"name", "source", "train_examples", "dev_examples",
                        "test_examples", "pretrained_test_accuracy",
                        "random_init_test_accuracy", "vader_test_accuracy"}
  assert (entry["name"], entry["train_examples"], entry["test_examples"],
          entry["vader_test_accuracy"]) == ("movie_reviews", 8, 4, 1.0)
  json.dumps(entry)
  rows = {r["name"].strip(): r for r in stage_report.headline({}, entry)}
  assert rows["fine-tuned movie_reviews test accuracy"]["after"] == 0.75
  assert rows["gain from pretraining"]["reached"] is True
  assert rows["gain over VADER (1.000)"]["reached"] is False


def test_read_predictions_checks_the_count(tmp_path):
  path = tmp_path / "SST-2.tsv"
  path.write_text("index\tprediction\n0\t1\n1\t0\n")
  assert real_task.read_predictions(str(path), 2) == [1, 0]
  with pytest.raises(RuntimeError, match="2 predictions for 3 test"):
    real_task.read_predictions(str(path), 3)


def test_the_stage_refuses_a_bad_file_in_one_line(tmp_path):
  bad = tmp_path / "gt.txt"
  bad.write_text("1\t0.5\tfine\n2\tx\tbad\n", encoding="utf-8")
  run = context.DemoRun(str(tmp_path / "out"),
                        {"sentiment_file": str(bad), "seed": 1})
  with pytest.raises(SystemExit) as e:
    real_task.prepare(run, None)
  assert str(e.value) == f"ERROR: {bad}:2: rating 'x' is not a number"
  with pytest.raises(SystemExit) as e:
    real_task.prepare(context.DemoRun(
        str(tmp_path / "out"), {"sentiment_file": str(tmp_path / "none"),
                                "seed": 1}), None)
  assert "--sentiment_file" in str(e.value) and "no such file" in str(e.value)
