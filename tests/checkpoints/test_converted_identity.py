"""A checkpoint converted from a Hugging Face directory carries its identity
as a run's checkpoints do: the model, the vocabulary written beside it (its
sha256) and its casing. The way back (--to=hf) writes that casing and
tokenizer; an export refuses another vocabulary or casing, and takes the
recorded casing when none is given.
"""

import json
import os
import shutil

import pytest

from albert_tf.checkpoints import identity
from albert_tf.checkpoints.canonical_weights import CheckpointConversionError
from albert_tf.tasks import all_tasks  # noqa: F401 (registers the tasks)
from albert_tf.tasks import hf_export
from albert_tf.tasks import hf_models
from albert_toolkit import output_files
from tests.testing import converted_testlib as converted
from tests.testing import export_testlib
from tests.testing import hf_testlib
from tests.testing import wordpiece_testlib
from tests.testing.repo_paths import HF_FIXTURES

SPM = os.path.join(HF_FIXTURES, "model", "spiece.model")
TOKENS = wordpiece_testlib.tokens()


def _cased_hf_dir(directory, kind):
  """A cased (do_lower_case false) AlbertModel directory: SentencePiece
  (spiece.model) or WordPiece (vocab.txt, BertTokenizer)."""
  vocab = 600 if kind == "sentencepiece" else len(TOKENS)
  # classifier_dropout_prob: transformers' default is 0.1.
  config = hf_testlib.hf_config("AlbertModel", vocab,
                                classifier_dropout_prob=0.0)
  hf_testlib.write_hf_dir(str(directory), config, SPM)
  tokenizer_class = "AlbertTokenizer"
  if kind == "wordpiece":
    os.remove(directory / "spiece.model")
    (directory / "vocab.txt").write_text("".join(t + "\n" for t in TOKENS),
                                         encoding="utf-8")
    tokenizer_class = "BertTokenizer"
  (directory / "tokenizer_config.json").write_text(json.dumps(
      {"tokenizer_class": tokenizer_class, "do_lower_case": False}))
  return config


def _vocab_name(kind):
  return "spiece.model" if kind == "sentencepiece" else "vocab.txt"


@pytest.mark.parametrize("kind", ["sentencepiece", "wordpiece"])
def test_casing_and_vocabulary_travel_with_the_checkpoint(tmp_path, kind):
  config = _cased_hf_dir(tmp_path / "hf", kind)
  out = str(tmp_path / "ours")
  hf_models.import_hf(str(tmp_path / "hf"), out)
  vocab = os.path.join(out, _vocab_name(kind))
  saved = identity.read(out)
  assert saved["facts"]["do_lower_case"] is False
  assert saved["facts"]["vocab_sha256"] == output_files.file_sha256(vocab)
  assert saved["model"]["num_attention_heads"] == config[
      "num_attention_heads"]

  back = tmp_path / "back"
  hf_export.export_hf(out, str(back))
  written = json.loads((back / "config.json").read_text())
  for field, value in config.items():
    assert written[field] == value, field
  tok_config = json.loads((back / "tokenizer_config.json").read_text())
  assert tok_config["do_lower_case"] is False
  if kind == "wordpiece":
    tok_json = json.loads((back / "tokenizer.json").read_text())
    assert tok_json["normalizer"]["lowercase"] is False
  with open(vocab, "rb") as f:
    assert (back / _vocab_name(kind)).read_bytes() == f.read()
  again = str(tmp_path / "again")
  hf_models.import_hf(str(back), again)
  assert identity.read(again)["facts"]["do_lower_case"] is False
  first, second = converted.stored_tensors(out), converted.stored_tensors(
      again)
  assert sorted(first) == sorted(second)


def test_the_way_back_takes_the_recorded_vocabulary(tmp_path):
  """Two tokenizer files beside the checkpoint: the one whose sha256 the
  identity records goes out; without an identity, two are refused."""
  _cased_hf_dir(tmp_path / "hf", "wordpiece")
  out = tmp_path / "ours"
  hf_models.import_hf(str(tmp_path / "hf"), str(out))
  shutil.copyfile(SPM, out / "other.model")
  back = tmp_path / "back"
  hf_export.export_hf(str(out), str(back))
  assert (back / "vocab.txt").read_bytes() == (out / "vocab.txt").read_bytes()
  assert not (back / "spiece.model").exists()
  # Not the recorded vocabulary: refused.
  (out / "vocab.txt").write_text("".join(t + "\n" for t in TOKENS[::-1]),
                                 encoding="utf-8")
  with pytest.raises(CheckpointConversionError,
                     match="its identity names the vocabulary with sha256 "):
    hf_export.export_hf(str(out), str(tmp_path / "back2"))


def test_two_vocabularies_without_an_identity_are_refused(tmp_path):
  config = hf_testlib.hf_config("AlbertModel", 600)
  hf_testlib.write_hf_dir(str(tmp_path / "hf"), config, SPM)
  out = tmp_path / "ours"
  hf_models.import_hf(str(tmp_path / "hf"), str(out), to_layout="tf1")
  assert identity.read(str(out)) is None  # the original's layout has none
  (out / "vocab.txt").write_text("".join(t + "\n" for t in TOKENS),
                                 encoding="utf-8")
  with pytest.raises(CheckpointConversionError,
                     match=r"2 tokenizer files beside the checkpoint "
                     r"\(spiece.model, vocab.txt\) and no record"):
    hf_export.export_hf(str(out), str(tmp_path / "back"))


def test_export_checks_the_converted_vocabulary_and_casing(tmp_path):
  _cased_hf_dir(tmp_path / "hf", "wordpiece")
  out = tmp_path / "ours"
  hf_models.import_hf(str(tmp_path / "hf"), str(out))
  swapped = list(TOKENS)
  swapped[-1], swapped[-2] = swapped[-2], swapped[-1]
  other = tmp_path / "swapped.txt"
  other.write_text("".join(t + "\n" for t in swapped), encoding="utf-8")
  request = dict(checkpoint=str(out / "ckpt"),
                 config_files=[str(out / "albert_config.json")])
  vocab = str(out / "vocab.txt")
  with pytest.raises(ValueError,
                     match=r"^the vocabulary \(sha256\) is .* but checkpoint "
                     r".* has .*the weights belong to another vocabulary"):
    export_testlib.export(str(tmp_path / "x"), settings={
        "vocab_file": str(other)}, **request)
  with pytest.raises(ValueError, match=r"^do_lower_case is True in the given "
                     r"config but checkpoint .* has False"):
    export_testlib.export(str(tmp_path / "x"), settings={
        "vocab_file": vocab, "do_lower_case": True}, **request)
  assert not (tmp_path / "x").exists()
  # No --do_lower_case: the checkpoint's casing.
  path = export_testlib.export(str(tmp_path / "x"), settings={
      "vocab_file": vocab}, **request)
  assert identity.read(path)["facts"]["do_lower_case"] is False
