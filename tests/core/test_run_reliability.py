"""Runs (docs/reliability.md, "Runs"): a resume that would train nothing, a
read-only run directory, the record of a first start that failed, and a
metrics.jsonl cut by kill -9. Each failed (silently or with a traceback)
before."""

import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile

import pytest

from albert_tf import plot_metrics
from albert_tf.checkpoints import conversion
from albert_tf.checkpoints import restore as restore_lib
from albert_tf.core import actions
from albert_tf.core import experiment_config as ec
from albert_tf.core import run_record
from albert_tf.core import run_restore
from albert_tf.core import train_lib
from albert_tf.tasks import export
from albert_tf.tasks import pretraining
from albert_toolkit import output_files
from albert_toolkit import tfrecord_io
from tests.testing import pretrain_testutil as tu
from tests.testing import tool_server
from tests.testing.repo_paths import ROOT

# Ten seconds or more in all: handed out first (tests/conftest.py).
pytestmark = pytest.mark.slow

HOST = socket.gethostname()


@pytest.fixture(scope="module")
def train_file(tmp_path_factory):
  return tu.worker_pretraining_data(tmp_path_factory)[0]


# The tiny recipe, 2 steps (tests/testing/pretrain_testutil.py).
config, run = tu.tiny_experiment, tu.run_tiny


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
  """A finished 2-step tiny pretraining run (read, or copied to change)."""
  return tu.worker_tiny_run(tmp_path_factory)


def test_resume_below_train_steps_is_an_error(run_dir, train_file, tmp_path):
  """It exited 0 having trained nothing."""
  model_dir = tmp_path / "copy"
  shutil.copytree(run_dir, model_dir)
  with pytest.raises(actions.TrainingError, match=(
      rf"^nothing trained: {model_dir} resumed at step 2, past "
      r"trainer.train_steps=1; pass a larger --train_steps")):
    run(config(train_file, **{"trainer.train_steps": 1}), model_dir)
  # Rerunning the command of a finished run is not an error.
  assert run(config(train_file), model_dir)["train"]["step"] == 2


# --------------------------------------------- the record of a first start ----
def test_record_of_a_first_start_that_failed_is_replaced(run_dir, train_file,
                                                          tmp_path, caplog):
  """A warm start from a checkpoint of another shape fails after the record
  was written; the corrected command was then refused by that record."""
  model_dir = tmp_path / "run"
  init = os.path.join(run_dir, "checkpoints", "ckpt-2")
  wrong = config(train_file, **{"model.hidden_size": 32,
                                "model.intermediate_size": 64,
                                "trainer.init_checkpoint": init})
  with pytest.raises((ValueError, conversion.CheckpointConversionError),
                     match=r"model\.hidden_size is 32 in this run.s config"):
    run(wrong, model_dir)
  assert run_record.read(str(model_dir)).model["hidden_size"] == 32
  assert not run_record.has_checkpoints(str(model_dir))
  fixed = config(train_file, **{"trainer.init_checkpoint": init})
  assert run(fixed, model_dir)["train"]["step"] == 2
  assert run_record.read(str(model_dir)).model["hidden_size"] == 64
  with open(model_dir / run_record.CHANGES_NAME) as f:
    (line,) = [json.loads(l) for l in f]
  assert line["changes"]["model.hidden_size"] == [32, 64]
  # The same command resumed: the warm start is not read again, and the
  # log says so.
  with caplog.at_level(logging.INFO, logger="absl"):
    assert run(config(train_file, **{"trainer.init_checkpoint": init,
                                     "trainer.train_steps": 3}),
               model_dir)["train"]["step"] == 3
  assert ("at step 2 (trainer.init_checkpoint not read: the run continues "
          "its own)") in caplog.text
  # With a checkpoint the record binds: never rewritten.
  before = (model_dir / run_record.RECORD_NAME).read_text()
  with pytest.raises(ValueError, match="model.hidden_size is 32 but the run"):
    run(config(train_file, **{"model.hidden_size": 32,
                              "model.intermediate_size": 64,
                              "trainer.train_steps": 4}), model_dir)
  assert (model_dir / run_record.RECORD_NAME).read_text() == before


def _record_by(model_dir, created_by):
  """A record without checkpoints, written by `created_by` (None: by a
  version that did not say)."""
  run_record.write(str(model_dir), ec.load_experiment_config(
      pretraining.PretrainingExperimentConfig, [tu.TINY_RECIPE]),
                   {"task": "pretraining"})
  path = model_dir / run_record.RECORD_NAME
  facts = json.loads(path.read_text())
  facts["created_by"] = created_by
  path.write_text(json.dumps(facts))


def test_record_binds_while_its_writer_may_be_starting(tmp_path):
  """A start still building its model (no checkpoint yet), on this host or
  another, or a record of an older version: checked as before. A writer
  that is gone (failed, kill -9): replaced."""
  other = ec.load_experiment_config(pretraining.PretrainingExperimentConfig,
                                    [tu.TINY_RECIPE], "model.hidden_act=relu")
  live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
  gone = subprocess.Popen([sys.executable, "-c", "pass"])
  gone.wait()
  try:
    for i, writer in enumerate([{"pid": live.pid, "host": HOST},
                                {"pid": gone.pid, "host": "elsewhere"},
                                None]):
      _record_by(tmp_path / str(i), writer)
      with pytest.raises(ValueError, match="model.hidden_act is 'relu'"):
        run_record.prepare(str(tmp_path / str(i)), other,
                           {"task": "pretraining"})
  finally:
    live.kill()
    live.wait()
  _record_by(tmp_path / "gone", {"pid": gone.pid, "host": HOST})
  run_record.prepare(str(tmp_path / "gone"), other,
                     {"task": "sentence_prediction"})
  record = run_record.read(str(tmp_path / "gone"))
  assert record.model["hidden_act"] == "relu"
  assert record.task == "sentence_prediction"


# --------------------------------------------------- read-only run dir ----
def _as_other_user(command):
  """`command` as a user who cannot write root's files (root ignores
  permission bits); None when that is not possible here."""
  if os.geteuid() != 0:
    return command
  setpriv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
  if not shutil.which("setpriv"):
    return None
  # In a user namespace (bazel test's sandbox) the other user is not mapped.
  if subprocess.run(setpriv + ["true"], capture_output=True,
                    check=False).returncode != 0:
    return None
  return setpriv + command


def test_read_only_run_directory_is_a_one_line_error(run_dir, train_file):
  """Eval ended in a PermissionError traceback from the summary writer."""
  command = _as_other_user([sys.executable, "-m", "albert_tf.run_pretraining"])
  if command is None:
    pytest.skip("running as root, and setpriv cannot switch user here")
  base = tempfile.mkdtemp(dir="/tmp")  # reachable by the other user
  try:
    model_dir = os.path.join(base, "run")
    shutil.copytree(run_dir, model_dir)
    for name in (train_file, train_file + output_files.SUMMARY_SUFFIX):
      shutil.copy(name, base)
    data = os.path.join(base, os.path.basename(train_file))
    for dirpath, _, files in os.walk(base):
      os.chmod(dirpath, 0o555)
      for name in files:
        os.chmod(os.path.join(dirpath, name), 0o444)
    proc = subprocess.run(
        command + [f"--config_file={tu.TINY_RECIPE}", "--mode=eval",
                   "--params_override=" + tu.tiny_overrides(
                       data, **{"trainer.eval_steps": 1,
                                "data.allow_unverified_input": True}),
                   f"--model_dir={model_dir}"],
        cwd=ROOT, env=tool_server.tool_env(HOME="/tmp"), capture_output=True,
        text=True, timeout=600)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert (f"ERROR: --model_dir {model_dir}: cannot write to {model_dir} "
            "(permission denied") in proc.stderr
  finally:
    for dirpath, _, _ in os.walk(base):
      os.chmod(dirpath, 0o755)
    shutil.rmtree(base)


def test_writable_check_names_what_each_mode_writes(tmp_path):
  fresh = str(tmp_path / "new" / "run")  # made later: its parent is checked
  train_lib.check_writable("train", fresh, fresh, None)
  train_lib.check_writable("export", "/proc/x", "/proc/x", str(tmp_path))
  train_lib.check_writable("eval", "gs://bucket/run", "gs://bucket/run", None)
  blocker = tmp_path / "file"  # nothing can be made below a file
  blocker.write_text("")
  with pytest.raises(PermissionError, match=rf"^--export_dir {blocker}/e/1: "
                     rf"cannot write to {blocker} "):
    train_lib.check_writable("export", fresh, fresh, f"{blocker}/e/1")


# ------------------------------------------------------- metrics.jsonl ----
ROWS = [{"mode": "train", "step": s, "loss": 7 - s / 10,
         "learning_rate": 1e-3} for s in (10, 20)]


def test_plot_metrics_skips_a_line_cut_by_kill9(tmp_path, caplog):
  path = tmp_path / "metrics.jsonl"
  path.write_text("".join(json.dumps(r) + "\n" for r in ROWS) +
                  json.dumps(ROWS[0])[:17])
  with caplog.at_level(logging.WARNING):
    rows = plot_metrics.read_metrics(str(path))["train"]
  assert [r["step"] for r in rows] == [10, 20]
  assert f"{path}:3: skipped a line cut short" in caplog.text
  proc = tool_server.run(
      [sys.executable, "-m", "albert_tf.plot_metrics",
       f"--metrics_file={path}", f"--output={tmp_path / 'c.png'}"],
      cwd=ROOT, env=tool_server.tool_env(), capture_output=True, text=True,
      timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"
  # A complete line that is not JSON is still an error naming it.
  path.write_text("not json\n" + json.dumps(ROWS[0]) + "\n")
  with pytest.raises(ValueError, match="metrics.jsonl:1: not JSON"):
    plot_metrics.read_metrics(str(path))


def test_record_appended_after_a_cut_line_stands_alone(tmp_path):
  """An eval after kill -9 glued its record to the cut line: both lost."""
  path = tmp_path / "metrics.jsonl"
  path.write_text(json.dumps(ROWS[0]) + "\n" + json.dumps(ROWS[1])[:17])
  actions.append_metrics(str(path), "eval", 20, {"loss": 2.5})
  lines = [json.loads(l) for l in path.read_text().splitlines()]
  assert [(r["mode"], r["step"]) for r in lines] == [("train", 10),
                                                     ("eval", 20)]


# ----------------------------------------------- data regenerated in place ----
def _place(data_file, path, records=None):
  """`data_file` (or its first `records` records) and its summary as `path`
  (what a rerun of data prep under the same name leaves)."""
  with open(data_file, "rb") as f:
    framed = tfrecord_io.split_framed(f.read())[:records]
  with open(path, "wb") as f:
    f.write(b"".join(framed))
  with open(data_file + output_files.SUMMARY_SUFFIX) as f:
    summary = json.load(f)
  summary["records_per_file"] = summary["output_files"] = {path: len(framed)}
  output_files.write_json(path + output_files.SUMMARY_SUFFIX, summary)


def _regenerated_run(tmp_path, tmp_path_factory, steps):
  """A run trained `steps` steps on a file then regenerated in place under
  the same name with fewer records: (the old file, the training file, the
  run directory, run_to(n) training the run on to step n)."""
  base = tu.worker_data_dir(tmp_path_factory)
  big, _ = tu.make_pretraining_data(str(base), dupe=3)
  small, _ = tu.make_pretraining_data(str(base), dupe=1, name="small")
  train = str(tmp_path / "train.tfrecord")
  _place(big, train)
  model_dir = tmp_path / "run"
  settings = {"trainer.steps_per_loop": 1, "trainer.checkpoint_interval": 1,
              "data.shuffle_buffer_size": 1}

  def run_to(n):
    return run(config(train, **settings, **{"trainer.train_steps": n}),
               model_dir)

  run_to(steps)
  _place(small, train, records=40)  # the same name, fewer records
  return big, train, model_dir, run_to


def test_resume_after_the_data_was_regenerated_in_place(tmp_path,
                                                       tmp_path_factory,
                                                       caplog):
  """A resume after the training file was regenerated under its name does
  not restore the saved data position (it points into the old file) and
  says why; the next resume, on the same files, restores it again."""
  big, train, model_dir, run_to = _regenerated_run(tmp_path,
                                                   tmp_path_factory, 6)
  caplog.set_level(logging.WARNING)
  result = run_to(8)
  assert result["train"]["step"] == 8
  assert (f"the training input changed since the checkpoint it resumes "
          f"from was saved ({train}: {os.path.getsize(big)} -> "
          f"{os.path.getsize(train)} bytes): its saved data position belongs "
          "to the old files; the input pipeline starts over") in caplog.text
  # The run's change log says so (it said nothing, or "data_position_reset":
  # false beside a setting changed at the same start).
  with open(os.path.join(model_dir, run_record.CHANGES_NAME)) as f:
    lines = [json.loads(line) for line in f]
  assert [(l["mode"], l["data_position_reset"], l.get("input_files_changed"))
          for l in lines][-1] == (
              "train", True, f"{train}: {os.path.getsize(big)} -> "
              f"{os.path.getsize(train)} bytes")
  # The next resume, on the same files, restores the position again.
  caplog.clear()
  run_to(9)
  assert "the training input changed" not in caplog.text
  assert "restore_data_position=False" not in caplog.text


def test_a_resume_that_falls_back_checks_the_data_of_its_own_checkpoint(
    tmp_path, tmp_path_factory, caplog):
  """The data position of the checkpoint actually restored is judged against
  the files of the start that saved it: when the newest checkpoints (saved
  after the data was regenerated) are unreadable, the resume falls back to
  one saved before, whose position belongs to the old files."""
  big, train, model_dir, run_to = _regenerated_run(tmp_path,
                                                   tmp_path_factory, 4)
  caplog.set_level(logging.WARNING)
  run_to(6)
  assert "the training input changed" in caplog.text
  for step in (5, 6):  # saved on the new files: unreadable now
    _truncate(os.path.join(model_dir, "checkpoints", f"ckpt-{step}"))
  caplog.clear()
  result = run_to(7)
  assert result["train"]["step"] == 7
  assert "using the one before it" in caplog.text
  # ckpt-4's position belongs to the old (big) file, not to today's.
  assert (f"the training input changed since the checkpoint it resumes "
          f"from was saved ({train}: {os.path.getsize(big)} -> "
          f"{os.path.getsize(train)} bytes)") in caplog.text


# ------------------------------------------- export of a run in progress ----
def _truncate(prefix):
  (data,) = [p for p in os.listdir(os.path.dirname(prefix))
             if p.startswith(os.path.basename(prefix) + ".data")]
  path = os.path.join(os.path.dirname(prefix), data)
  with open(path, "r+b") as f:
    f.truncate(os.path.getsize(path) // 2)


def test_export_skips_an_unreadable_newest_checkpoint(train_file, tmp_path,
                                                      caplog):
  """A truncated newest checkpoint gave a 43-line traceback (IndexError:
  Read less bytes than requested); one a running trainer rotated away
  mid-export gave 'wrong config for this checkpoint?'."""
  model_dir = tmp_path / "run"
  run(config(train_file, **{"trainer.steps_per_loop": 1,
                            "trainer.checkpoint_interval": 1}), model_dir)
  first, newest = (os.path.join(model_dir, "checkpoints", f"ckpt-{n}")
                   for n in (1, 2))
  copy = tmp_path / "copy"
  shutil.copytree(model_dir, copy)
  _truncate(newest)
  caplog.set_level(logging.WARNING)
  written = export.export(export.ExportRequest(
      export_dir=str(tmp_path / "export"), model_dir=str(model_dir)))
  assert os.path.exists(os.path.join(written, "saved_model.pb"))
  assert (f"checkpoint {newest} is truncated or unreadable: ") in caplog.text
  assert "using the one before it" in caplog.text
  # A checkpoint asked for by name is not replaced: one line naming it.
  with pytest.raises(actions.CheckpointError) as info:
    export.export(export.ExportRequest(
        export_dir=str(tmp_path / "e2"), model_dir=str(model_dir),
        checkpoint=newest))
  assert str(info.value).startswith(
      f"no readable checkpoint: {newest} (truncated or unreadable: ")
  assert "\n" not in str(info.value)
  # Rotated away by the trainer while it was read: the one before it, said.
  model = pretraining.PretrainingTask(config(train_file)).build_model()
  rotated = str(copy / "checkpoints" / "ckpt-2")

  def rotating_restore(path):
    if path == rotated:
      for name in os.listdir(os.path.dirname(path)):
        if name.startswith("ckpt-2."):
          os.remove(os.path.join(os.path.dirname(path), name))
    return restore_lib.restore(model, path)

  caplog.clear()
  path, _ = run_restore.restore_given_or_newest(rotating_restore,
                                                      str(copy))
  assert path == str(copy / "checkpoints" / "ckpt-1")
  assert (f"checkpoint {rotated} is deleted while it was read: a training "
          "run keeps only its newest trainer.max_to_keep checkpoints; using "
          "the one before it") in caplog.text


def test_resume_logs_each_line_once_and_no_identity_warning(run_dir,
                                                            tmp_path):
  """Every resume printed TensorFlow's '(root).identity ... not restored'
  warnings, each twice (TensorFlow's handler and absl's), and every ERROR
  line twice."""
  model_dir = tmp_path / "copy"
  shutil.copytree(run_dir, model_dir)
  procs = [tool_server.run(
      [sys.executable, "-m", "albert_tf.run_pretraining",
       f"--model_dir={model_dir}", f"--train_steps={steps}"], cwd=ROOT,
      env=tool_server.tool_env(), capture_output=True, text=True, timeout=300)
           for steps in (3, 1)]  # one after the other
  resumed, refused = (p.stderr for p in procs)
  assert procs[0].returncode == 0, resumed[-3000:]
  for err in (resumed, refused):
    assert "(root).identity" not in err
    assert "WARNING:tensorflow:" not in err  # TensorFlow's own handler
  assert procs[1].returncode == 1
  assert [l for l in refused.splitlines() if "nothing trained" in l] == [
      f"ERROR: nothing trained: {model_dir} resumed at step 3, past "
      "trainer.train_steps=1; pass a larger --train_steps to train on, or "
      "--mode=eval to evaluate the checkpoint"]


def test_plot_metrics_refuses_its_input_as_output_in_one_line(tmp_path):
  """--output equal to --metrics_file replaced the metrics with a PNG; a
  bad file or a missing flag ended in a traceback."""
  path = tmp_path / "metrics.jsonl"
  path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
  before = path.read_bytes()
  latin1 = tmp_path / "latin1.jsonl"
  latin1.write_bytes(b'{"step": 1, "loss": 2.0}\n{"step": 2, "note": "\xe9"}\n')
  listed = tmp_path / "listed.jsonl"
  listed.write_text("[1, 2]\n")
  (tmp_path / "link.png").symlink_to(path)
  for flags, message in (
      ([f"--metrics_file={path}", f"--output={tmp_path / 'link.png'}"],
       f"--output {tmp_path / 'link.png'} is also an input (--metrics_file "
       f"{path}); refusing to overwrite it"),
      ([f"--model_dir={tmp_path}", f"--output={path}"],
       f"--output {path} is also an input (--model_dir {path}); refusing "
       "to overwrite it"),
      ([f"--metrics_file={latin1}"], f"{latin1}:2: not UTF-8 (byte 0xe9)"),
      ([f"--metrics_file={listed}"], f"{listed}:1: not a metrics record"),
      ([], "--model_dir or --metrics_file is required")):
    proc = tool_server.run(
        [sys.executable, "-m", "albert_tf.plot_metrics", *flags],
        cwd=ROOT, env=tool_server.tool_env(), capture_output=True,
        text=True, timeout=300)
    errors = [l for l in proc.stderr.splitlines() if l.startswith("ERROR")]
    assert proc.returncode == 1 and len(errors) == 1, proc.stderr[-2000:]
    assert errors[0].startswith("ERROR: " + message), errors
    assert "Traceback" not in proc.stderr
  assert path.read_bytes() == before
