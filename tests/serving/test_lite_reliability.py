"""The .tflite runner and predict_lite under misuse: one LiteModel shared by
threads, export directories whose newest version is not a .tflite, a
model.json that is broken or another export's, bad flags and input files,
an output file that is an input. Every refusal is one line naming the
file, row, field or flag."""

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from albert_tf import predict_lite
from albert_tf.serving import lite
from albert_tf.tasks import export_request
from tests.testing import export_testlib as lib
from tests.testing import tool_server
from tests.testing.repo_paths import ROOT

LABELS = ["neg", "neutral", "pos"]
# Texts of different lengths: each call resizes the interpreter's inputs.
TEXTS = [" ".join(lib._training_lines(limit=60)[i:i + 1 + i % 4])  # pylint: disable=protected-access
         for i in range(12)]


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
  """(the tiny SentencePiece model, an albert_config.json)."""
  tmp = tmp_path_factory.mktemp("lite_reliability")
  config_file = str(tmp / "albert_config.json")
  lib.tiny_config().to_json_file(config_file)
  return lib.train_spm(str(tmp)), config_file


def _export(sources, export_dir):
  spm, config_file = sources
  return lib.export(
      str(export_dir), task="classification",
      form=export_request.ExportForm("tflite"),
      config_files=[config_file], random_init=True,
      settings=dict(spm_model_file=spm, max_seq_length=24, num_labels=3,
                    num_text_fields=2, label_names=LABELS))


@pytest.fixture(scope="module")
def export(sources, tmp_path_factory):
  """A tiny classification .tflite: its version directory."""
  return _export(sources, tmp_path_factory.mktemp("export"))


def _copy(version_dir, target):
  shutil.copytree(version_dir, target)
  return str(target)


def _one_line(error):
  message = str(error.value)
  assert "\n" not in message and "array(" not in message, message
  return message


# --- Threads ------------------------------------------------------------------


@pytest.mark.parametrize("max_interpreters", [None, 1])
def test_one_model_shared_by_threads(export, max_interpreters):
  """Four threads call one LiteModel with different inputs at once: each
  gets its own outputs (one interpreter shared returned other threads'
  outputs or failed inside the interpreter)."""
  model = lite.LiteModel(export, max_interpreters=max_interpreters)
  want = {t: model("serving_default", text_a=[t], text_b=[TEXTS[0]])["logits"]
          for t in TEXTS}
  assert len({w.tobytes() for w in want.values()}) > len(TEXTS) // 2
  start = threading.Barrier(4)
  wrong, errors = [], []

  def work(k):
    start.wait()
    for j in range(40):
      text = TEXTS[(k * 5 + j) % len(TEXTS)]
      try:
        got = model("serving_default", text_a=[text], text_b=[TEXTS[0]])
      except ValueError as e:
        errors.append(str(e))
        continue
      if not np.allclose(got["logits"], want[text], atol=1e-6):
        wrong.append(text)

  threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  assert not errors, errors[:2]
  assert not wrong, len(wrong)
  most = max_interpreters or lite.usable_cores()
  assert 1 <= model._loaded <= most  # pylint: disable=protected-access


# --- Which file runs ----------------------------------------------------------


def test_newest_version_not_a_tflite_is_named(export, tmp_path):
  """An export directory whose version 2 is a SavedModel ran version 1's
  .tflite without a word; naming version 2 said 'no model.tflite'."""
  base = tmp_path / "exports"
  _copy(export, base / "1")
  (base / "2").mkdir()
  (base / "2" / "saved_model.pb").write_bytes(b"")
  (base / "3").mkdir()  # an empty version directory
  model = lite.LiteModel(str(base))
  assert model.path == str(base / "1" / "model.tflite")
  assert model.note == (f"version 1 of {base} runs; newer version 3: no "
                        "model.tflite; version 2: a SavedModel "
                        "(saved_model.pb), not a .tflite")
  assert lite.LiteModel(str(base / "1")).note is None
  with pytest.raises(ValueError) as e:
    lite.LiteModel(str(base / "2"))
  assert _one_line(e).startswith(
      f"{base / '2'}: a SavedModel (saved_model.pb), not a .tflite")
  os.remove(base / "1" / "model.tflite")
  with pytest.raises(ValueError) as e:
    lite.LiteModel(str(base))
  assert "version 2: a SavedModel" in _one_line(e)


# --- model.json ---------------------------------------------------------------


@pytest.mark.parametrize("content,message", [
    (b'{"text": "caf\xe9"}', "model.json:1: not UTF-8 (byte 0xe9)"),
    (b'{"text": {"do_lower_case": true}', "model.json:1: not valid JSON"),
    (b'[1, 2]', "model.json: expected a JSON object (what the export is), "
                "got a list"),
    (b'{"text": "lower"}', "model.json: text must be a JSON object, got a "
                           "str"),
])
def test_broken_model_json_is_named(export, tmp_path, content, message):
  copy = _copy(export, tmp_path / "v")
  with open(os.path.join(copy, "model.json"), "wb") as f:
    f.write(content)
  with pytest.raises(ValueError) as e:
    lite.LiteModel(copy)
  assert message in _one_line(e)
  assert _one_line(e).startswith(os.path.join(copy, "model.json"))


def test_model_json_with_a_bom_is_read(export, tmp_path):
  copy = _copy(export, tmp_path / "v")
  path = os.path.join(copy, "model.json")
  data = open(path, "rb").read()
  with open(path, "wb") as f:
    f.write(b"\xef\xbb\xbf" + data)
  assert lite.LiteModel(copy).info == json.loads(data)


@pytest.mark.parametrize("change,field", [
    (lambda i: i.update(size_bytes=i["size_bytes"] + 1), "size_bytes"),
    (lambda i: i["serving_params"].update(label_names=["a", "b"]),
     "serving_params.label_names is 2 names there but 3 logits"),
    (lambda i: i["serving_params"].update(num_labels=5),
     "serving_params.num_labels is 5 there but 3 logits"),
    (lambda i: i["signatures"]["serving_default"]["inputs"].pop("text_b"),
     "signatures.serving_default"),
    (lambda i: i["signatures"].pop("serve_ids"), "signatures is"),
])
def test_model_json_of_another_export_is_refused(export, tmp_path, change,
                                                 field):
  """A model.json copied from another export (other size, labels or
  signatures) was used without a word: its casing, vocabulary limits and
  label names are the other export's."""
  copy = _copy(export, tmp_path / "v")
  path = os.path.join(copy, "model.json")
  info = json.loads(open(path, encoding="utf-8").read())
  change(info)
  with open(path, "w", encoding="utf-8") as f:
    json.dump(info, f)
  with pytest.raises(ValueError) as e:
    lite.LiteModel(copy)
  message = _one_line(e)
  assert message.startswith(f"{path} is not the model.json of "
                            f"{os.path.join(copy, 'model.tflite')}: ")
  assert field in message


def _edit_model_json(copy, change):
  path = os.path.join(copy, "model.json")
  info = json.loads(open(path, encoding="utf-8").read())
  change(info)
  with open(path, "w", encoding="utf-8") as f:
    json.dump(info, f)
  return path


@pytest.mark.parametrize("change,message", [
    (lambda i: i.clear(),
     "no size_bytes (the runner checks the file's size with it)"),
    (lambda i: i.update(sha256=7), "sha256 must be a JSON string, got 7"),
    (lambda i: i.pop("model_config"), "no model_config.vocab_size"),
    (lambda i: i["model_config"].pop("max_position_embeddings"),
     "no model_config.max_position_embeddings (the runner checks the "
     "sequence length with it)"),
    (lambda i: i.pop("text"),
     "no text.do_lower_case (the runner checks the casing of text with it)"),
    (lambda i: i["text"].pop("tokenizer"), "no text.tokenizer"),
    (lambda i: i["model_config"].update(vocab_size="500"),
     "model_config.vocab_size must be an integer >= 1, got '500'"),
    (lambda i: i["text"].update(do_lower_case="yes"),
     "text.do_lower_case must be a JSON boolean, got 'yes'"),
])
def test_model_json_without_what_the_checks_need_is_refused(
    export, tmp_path, change, message):
  """A model.json of `{}`, or without model_config or text, loaded: ids
  went unchecked and text was lower-cased on a guess."""
  copy = _copy(export, tmp_path / "v")
  path = _edit_model_json(copy, change)
  with pytest.raises(ValueError) as e:
    lite.LiteModel(copy)
  assert _one_line(e).startswith(f"{path}: {message}")


def test_model_json_without_a_sha256_loads_with_a_warning(export, tmp_path,
                                                          caplog):
  """An export made before model.json recorded the file's sha256 still
  runs, bound to its file by size and signatures, and says so."""
  copy = _copy(export, tmp_path / "v")
  _edit_model_json(copy, lambda i: i.pop("sha256"))
  with caplog.at_level(logging.WARNING, logger="absl"):
    model = lite.LiteModel(copy)
  assert "sha256" not in model.info
  assert any("records no sha256" in r.getMessage() for r in caplog.records)


def test_model_json_of_a_same_size_export_is_refused(export, sources,
                                                     tmp_path):
  """Two exports of one architecture have the same size and signatures:
  the other's model.json (its source checkpoint, labels) was taken for
  this file's."""
  other = _export(sources, tmp_path / "other")
  copy = _copy(export, tmp_path / "v")
  shutil.copy(os.path.join(other, "model.json"), copy)
  # Sizes of two such exports may differ by a few bytes, or not at all
  # (two checkpoints of one run): the equal case.
  _edit_model_json(copy, lambda i: i.update(size_bytes=os.path.getsize(
      os.path.join(export, "model.tflite"))))
  with pytest.raises(ValueError) as e:
    lite.LiteModel(copy)
  assert _one_line(e).startswith(
      f"{os.path.join(copy, 'model.json')} is not the model.json of "
      f"{os.path.join(copy, 'model.tflite')}: sha256 is ")
  assert lite.LiteModel(other).info["sha256"] != lite.LiteModel(
      export).info["sha256"]


def test_num_threads_is_range_checked(export):
  """num_threads=0 was reported as 'not a loadable .tflite'."""
  for bad in (0, -1, 1.5):
    with pytest.raises(ValueError, match="num_threads must be an integer "
                       ">= 1") as e:
      lite.LiteModel(export, num_threads=bad)
    assert export not in _one_line(e)
  assert lite.LiteModel(export, num_threads=1).signatures


# --- predict_lite -------------------------------------------------------------


def _predict(*flags):
  proc = tool_server.run([sys.executable, "-m", "albert_tf.predict_lite",
                          *flags], env=tool_server.tool_env(), cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
  errors = [l for l in proc.stderr.splitlines() if l.startswith("ERROR")]
  return proc, errors


def test_predict_lite_output_that_is_an_input_is_refused(export, tmp_path):
  """--output_file equal to --input_file replaced the input with
  predictions; so did a symlink to it or a relative spelling."""
  tsv = tmp_path / "rows.tsv"
  tsv.write_text("text_a\ttext_b\n" + f"{TEXTS[1]}\t{TEXTS[2]}\n",
                 encoding="utf-8")
  before = tsv.read_bytes()
  (tmp_path / "link.jsonl").symlink_to(tsv)
  model_json = os.path.join(export, "model.json")
  relative = os.path.relpath(tsv, ROOT)
  for output, flag, given in (
      (str(tsv), "--input_file", str(tsv)),
      (str(tmp_path / "link.jsonl"), "--input_file", str(tsv)),
      (relative, "--input_file", str(tsv)),
      (model_json, "--model", model_json)):
    proc, errors = _predict(f"--model={export}", f"--input_file={tsv}",
                            f"--output_file={output}")
    assert proc.returncode == 1
    assert errors == [f"ERROR: --output_file {output} is also an input "
                      f"({flag} {given}); refusing to overwrite it"]
  assert tsv.read_bytes() == before
  assert json.loads(open(model_json, encoding="utf-8").read())["task"]


def test_predict_lite_reads_a_bom_and_names_bad_files(export, tmp_path):
  """A TSV saved with a byte-order mark was refused as 'row 1 lacks
  text_a'; a Latin-1 file raised a codec error naming no file; a version
  that is not a .tflite ran an older one silently."""
  base = tmp_path / "exports"
  _copy(export, base / "1")
  (base / "2").mkdir()
  (base / "2" / "saved_model.pb").write_bytes(b"")
  rows = "text_a\ttext_b\tlabel\n" + f"{TEXTS[3]}\t{TEXTS[4]}\tpos\n"
  plain, bom = tmp_path / "plain.tsv", tmp_path / "bom.tsv"
  plain.write_text(rows, encoding="utf-8")
  bom.write_bytes(b"\xef\xbb\xbf" + rows.encode("utf-8"))
  outputs = []
  for tsv in (plain, bom):
    out = tmp_path / f"{tsv.stem}.jsonl"
    proc, errors = _predict(f"--model={base}", f"--input_file={tsv}",
                            f"--output_file={out}")
    assert proc.returncode == 0 and not errors, proc.stderr[-2000:]
    assert (f"model: {base / '1' / 'model.tflite'} (version 1 of {base} "
            "runs; newer version 2: a SavedModel") in proc.stderr
    outputs.append(out.read_text())
  assert outputs[0] == outputs[1] and json.loads(outputs[0])["label"] in LABELS
  latin1 = tmp_path / "latin1.tsv"
  latin1.write_bytes(b"text_a\ttext_b\nok\tok\ncaf\xe9\tok\n")
  bad_rows = tmp_path / "rows.jsonl"
  bad_rows.write_text('{"text_a": "x", "text_b": "y"}\n'
                      '{"text_a": 3, "text_b": "y"}\n')
  for flags, message in (
      ([f"--input_file={latin1}"],
       f"ERROR: {latin1}:3: not UTF-8 (byte 0xe9); save it as UTF-8"),
      ([f"--input_file={bad_rows}"],
       f"ERROR: {bad_rows}: rows 1-2: text_a must hold strings, got int"),
      ([f"--input_file={plain}", "--num_threads=0"],
       "ERROR: --num_threads must be an integer >= 1 (or unset: the "
       "interpreter's default), got 0"),
      ([f"--input_file={plain}", f"--model={base / '2'}"],
       f"ERROR: {base / '2'}: a SavedModel (saved_model.pb), not a .tflite; "
       "run it with TF Serving, or export with --format=tflite")):
    if not any(f.startswith("--model") for f in flags):
      flags = [f"--model={export}"] + flags
    proc, errors = _predict(*flags)
    assert proc.returncode == 1 and errors == [message], proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("content,message", [
    ("text_a\ttext_b\ttext_a\na\tb\tc\n",
     "dup.tsv:1: column 'text_a' appears twice in the header"),
    ("text_a\ttext_b\nonly one column\n",
     "dup.tsv:2: 1 field but the header has 2"),
    ("text_a\ttext_b\n\nx\ty\ta\tb\n",
     "dup.tsv:3: 4 fields but the header has 2"),
])
def test_predict_lite_tsv_header_and_widths(tmp_path, content, message):
  """A repeated header column used its last field without a word; a short
  row was reported with the header's width as its own."""
  tsv = tmp_path / "dup.tsv"
  tsv.write_text(content, encoding="utf-8")
  with pytest.raises(ValueError) as e:
    predict_lite.read_rows(str(tsv), ["text_a", "text_b"])
  assert _one_line(e) == f"{tmp_path}/{message}"
  tsv.write_text("text_a\ttext_b\tlabel\n\nx\ty\tpos\n", encoding="utf-8")
  assert predict_lite.read_rows(str(tsv), ["text_a", "text_b"]) == (
      [{"text_a": "x", "text_b": "y", "label": "pos"}], ["label"])


def test_sigterm_during_a_tflite_export_removes_its_staging(sources,
                                                            tmp_path):
  """SIGTERM while converting left the staging SavedModel
  (albert_tflite_*) in the temporary directory."""
  spm, config_file = sources
  tmp = tmp_path / "tmp"
  tmp.mkdir()
  proc = tool_server.start(
      [sys.executable, "-m", "albert_tf.export_savedmodel",
       "--task=classification", "--num_labels=2", "--random_init",
       f"--config_file={config_file}", f"--spm_model_file={spm}",
       "--max_seq_length=16", "--format=tflite",
       f"--export_dir={tmp_path / 'out'}"],
      env=tool_server.tool_env(TMPDIR=str(tmp)), cwd=ROOT,
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  deadline = time.time() + 300
  staging = []
  while not staging and proc.poll() is None:
    assert time.time() < deadline
    time.sleep(0.02)
    staging = [n for n in os.listdir(tmp) if n.startswith("albert_tflite_")]
  proc.send_signal(signal.SIGTERM)
  _, stderr = proc.communicate(timeout=120)
  assert staging, stderr[-2000:]
  assert proc.returncode == 143, stderr[-2000:]
  assert os.listdir(tmp) == []
  assert not (tmp_path / "out").exists() or not [
      v for v in os.listdir(tmp_path / "out") if v.isdigit()]
