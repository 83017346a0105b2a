"""Stage 1's corpus: botchan.txt from PyPI (or the user's text), cleaned,
split into documents and a held-out part."""

import glob
import os
import re
import subprocess
import sys
import tarfile

from data_prep import output_files


SENTENCEPIECE_SDIST = "sentencepiece==0.2.1"
BOTCHAN_MEMBER = "sentencepiece-0.2.1/test/botchan.txt"
CHAPTER_REGEX = r"^CHAPTER [IVXLC]+\.?$"


def fetch_botchan(cache_dir, log=print):
  """botchan.txt from the sentencepiece sdist on PyPI, cached in `cache_dir`.

  `pip download` goes through the user's pip configuration (index, proxy), so
  the corpus comes from the package registry, not the network at large.
  """
  os.makedirs(cache_dir, exist_ok=True)
  target = os.path.join(cache_dir, "botchan.txt")
  if os.path.exists(target) and os.path.getsize(target) > 0:
    log(f"cached: {target}")
    return target, "cache"
  tarballs = glob.glob(os.path.join(cache_dir, "sentencepiece-0.2.1.tar.gz"))
  if not tarballs:
    cmd = [sys.executable, "-m", "pip", "download", "--no-binary", ":all:",
           "--no-deps", "--disable-pip-version-check", SENTENCEPIECE_SDIST,
           "-d", cache_dir]
    log("$ " + " ".join(cmd))
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, check=False)
    for line in proc.stdout.splitlines()[-3:]:
      log("  | " + line)
    tarballs = glob.glob(os.path.join(cache_dir,
                                      "sentencepiece-0.2.1.tar.gz"))
    if proc.returncode or not tarballs:
      raise RuntimeError(
          "could not download the sentencepiece 0.2.1 source distribution "
          f"from PyPI (pip exit code {proc.returncode}); run with "
          "--corpus=PATH to use a local text file instead")
  with tarfile.open(tarballs[0], "r:gz") as tar:
    member = tar.extractfile(BOTCHAN_MEMBER)
    if member is None:
      raise RuntimeError(f"{tarballs[0]} has no {BOTCHAN_MEMBER}")
    data = member.read()
  output_files.atomic_write(target, data)
  log(f"extracted {BOTCHAN_MEMBER} ({len(data):,} bytes) -> {target}")
  return target, "pypi"


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


def split_heldout(docs, fraction):
  """The last `fraction` of each document is held out (contiguous text).

  Holding out a tail of every document (rather than whole documents) works
  for corpora of any number of documents, including one.
  """
  train, heldout = [], []
  for doc in docs:
    n = int(round(len(doc) * fraction))
    if len(doc) >= 4 and n >= 2:
      train.append(doc[:-n])
      heldout.append(doc[-n:])
    else:
      train.append(doc)
  if not heldout:
    raise ValueError("the corpus is too small to hold out text: need "
                     "documents of at least 4 sentences")
  return train, heldout
