"""The demo's real task: movie-review sentence polarity, human-labelled.

Hutto & Gilbert (ICWSM 2014) shipped their ground truth with VADER: the
vaderSentiment 3.3.2 source distribution on PyPI (MIT licence) holds
`additional_resources/hutto_ICWSM_2014.tar.gz`, whose
`movieReviewSnippets_GroundTruth.txt` has 10,605 Rotten Tomatoes sentences,
each with the mean of about 20 human ratings on -4..+4 (tab-separated id,
mean, text; UTF-8, CRLF). This module fetches it (cached, sha256-checked)
and writes it in the GLUE SST-2 layout that `run_classifier --task=sst-2`
reads: positive (1) when the mean rating is > 0, negative (0) when < 0,
exactly 0 dropped; a seeded, stratified 80/10/10 train/dev/test split.
"""

import dataclasses
import io
import os
import random
import sys
import tarfile
from typing import Dict, List

from albert_toolkit import output_files

VADER_SDIST = "vaderSentiment==3.3.2"
VADER_TARBALL = "vaderSentiment-3.3.2.tar.gz"
# sha256 of the sdist as PyPI serves it (the sdist is immutable on PyPI).
VADER_SHA256 = ("5d7c06e027fc8b99238edb0d53d970cf"
                "97066ef97654009890b83703849632f9")
RESOURCES_MEMBER = "vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz"
GROUND_TRUTH_MEMBER = "hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt"
GROUND_TRUTH = "movieReviewSnippets_GroundTruth.txt"
# VADER's own analyser, read from the same sdist (run from there, not
# installed: the module needs only the standard library).
VADER_FILES = ("vaderSentiment-3.3.2/vaderSentiment/vaderSentiment.py",
               "vaderSentiment-3.3.2/vaderSentiment/vader_lexicon.txt",
               "vaderSentiment-3.3.2/vaderSentiment/emoji_utf8_lexicon.txt",
               "vaderSentiment-3.3.2/LICENSE.txt")
SOURCE = ("movieReviewSnippets_GroundTruth.txt (Hutto & Gilbert, ICWSM 2014: "
          "Rotten Tomatoes sentences, mean of ~20 human ratings on -4..+4) "
          "from the vaderSentiment 3.3.2 sdist on PyPI (MIT)")
LABEL_NAMES = ("negative", "positive")
SST2_HEADER = "sentence\tlabel"
SPLITS = (("train", 0.8), ("dev", 0.1), ("test", 0.1))


class GroundTruthError(ValueError):
  """A malformed ground-truth line (the message names file and line)."""


@dataclasses.dataclass
class Rated:
  """One rated sentence: its id, mean human rating and text."""
  id: str
  rating: float
  text: str


def download_cmd(cache_dir):
  """`pip download` of the sdist: the user's pip configuration (index,
  proxy) applies, so the data comes from the package registry."""
  return [sys.executable, "-m", "pip", "download", "--no-binary", ":all:",
          "--no-deps", "--disable-pip-version-check", VADER_SDIST,
          "-d", cache_dir]


def check_sdist(tarball):
  """Raises unless `tarball` is the vaderSentiment 3.3.2 sdist (sha256)."""
  got = output_files.file_sha256(tarball)
  if got != VADER_SHA256:
    raise RuntimeError(f"{tarball}: sha256 {got}, expected {VADER_SHA256} "
                       "(the vaderSentiment 3.3.2 sdist); delete it to "
                       "download it again")


def extract_from_sdist(tarball, cache_dir):
  """Extracts the ground truth and VADER's files from the checked sdist into
  `cache_dir` (atomically); returns the ground truth's path."""
  check_sdist(tarball)
  with tarfile.open(tarball, "r:gz") as tar:
    inner = tar.extractfile(RESOURCES_MEMBER)
    if inner is None:
      raise RuntimeError(f"{tarball} has no {RESOURCES_MEMBER}")
    with tarfile.open(fileobj=io.BytesIO(inner.read()), mode="r:gz") as res:
      member = res.extractfile(GROUND_TRUTH_MEMBER)
      if member is None:
        raise RuntimeError(f"{tarball}: {RESOURCES_MEMBER} has no "
                           f"{GROUND_TRUTH_MEMBER}")
      truth = member.read()
    for name in VADER_FILES:
      member = tar.extractfile(name)
      if member is None:
        raise RuntimeError(f"{tarball} has no {name}")
      output_files.atomic_write(
          os.path.join(cache_dir, "vader", os.path.basename(name)),
          member.read())
  path = os.path.join(cache_dir, GROUND_TRUTH)
  output_files.atomic_write(path, truth)
  return path


def read_ground_truth(path):
  """[Rated] of a ground-truth file: `id<TAB>mean<TAB>text` lines (CRLF or
  LF); blank lines are skipped, anything else malformed is an error."""
  rows = []
  with open(path, encoding="utf-8", newline="") as f:
    for number, line in enumerate(f, 1):
      line = line.rstrip("\r\n")
      if not line.strip():
        continue
      fields = line.split("\t", 2)
      if len(fields) != 3 or not fields[2].strip():
        raise GroundTruthError(f"{path}:{number}: expected id<TAB>mean "
                               "rating<TAB>text")
      try:
        rating = float(fields[1])
      except ValueError:
        raise GroundTruthError(f"{path}:{number}: rating {fields[1]!r} is "
                               "not a number") from None
      rows.append(Rated(fields[0].strip(), rating,
                        " ".join(fields[2].split())))
  if not rows:
    raise GroundTruthError(f"{path}: no rated sentences")
  return rows


def label_of(rating):
  """1 (positive) when the mean rating is > 0, 0 when < 0, None at 0."""
  return None if rating == 0 else int(rating > 0)


def stratified_split(rows, seed):
  """{split: [(text, label)]}: per label, a seeded shuffle cut 80/10/10, so
  each split has the labels in the corpus's proportions; each split is then
  shuffled (seeded). Ratings of exactly 0 and repeated texts (after the
  first) are dropped, so no sentence is in two splits."""
  rng = random.Random(seed)
  by_label: Dict[int, List[str]] = {0: [], 1: []}
  seen = set()
  for row in rows:
    label = label_of(row.rating)
    if label is None or row.text in seen:
      continue
    seen.add(row.text)
    by_label[label].append(row.text)
  splits = {name: [] for name, _ in SPLITS}
  for label in (0, 1):
    texts = by_label[label]
    rng.shuffle(texts)
    start = 0
    for i, (name, share) in enumerate(SPLITS):
      end = (len(texts) if i == len(SPLITS) - 1
             else start + int(round(len(texts) * share)))
      splits[name] += [(t, label) for t in texts[start:end]]
      start = end
  for name in splits:
    rng.shuffle(splits[name])
  return splits


def write_sst2(rows, data_dir, seed):
  """Writes train/dev/test.tsv (header `sentence<TAB>label`, SST-2 layout)
  and returns the counts: {split: {examples, positive}, dropped_zero,
  dropped_repeats}."""
  splits = stratified_split(rows, seed)
  if any(len(examples) < 2 for examples in splits.values()):
    raise GroundTruthError(f"too few rated sentences to split 80/10/10 "
                           f"({len(rows)})")
  counts = {}
  for name, examples in splits.items():
    text = SST2_HEADER + "\n" + "".join(f"{t}\t{l}\n" for t, l in examples)
    output_files.atomic_write(os.path.join(data_dir, f"{name}.tsv"),
                              text.encode("utf-8"))
    counts[name] = {"examples": len(examples),
                    "positive": sum(l for _, l in examples)}
  counts["dropped_zero"] = sum(r.rating == 0 for r in rows)
  counts["dropped_repeats"] = (len(rows) - counts["dropped_zero"] -
                               sum(len(s) for s in splits.values()))
  return counts


def read_sst2(path):
  """[(sentence, label)] of a TSV written by write_sst2."""
  with open(path, encoding="utf-8") as f:
    lines = f.read().splitlines()
  if not lines or lines[0] != SST2_HEADER:
    raise GroundTruthError(f"{path}:1: expected the header {SST2_HEADER!r}")
  out = []
  for number, line in enumerate(lines[1:], 2):
    text, sep, label = line.rpartition("\t")
    if not sep or label not in ("0", "1"):
      raise GroundTruthError(f"{path}:{number}: expected sentence<TAB>0|1")
    out.append((text, int(label)))
  return out
