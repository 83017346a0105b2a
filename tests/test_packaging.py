"""`pip install .` works: the package, its YAML presets and its console
scripts, used from a directory outside the repository.

The fresh venv gets the project's dependencies from the test's own
interpreter (a .pth file naming its site-packages), so the test installs
only albert_tf itself (`--no-deps`) and needs no network.
"""
import os
import shutil
import subprocess
import sys
import sysconfig
import venv

import pytest

from tests.testing import user_env
from tests.testing.repo_paths import ROOT

SCRIPTS = ("albert-run-pretraining", "albert-run-classifier",
           "albert-run-squad", "albert-run-race", "albert-run-finetuning",
           "albert-export-savedmodel",
           "albert-convert-checkpoint", "albert-plot-metrics",
           "albert-prepare-corpus", "albert-train-sentencepiece",
           "albert-create-pretraining-data", "albert-inspect-tfrecord",
           "albert-serving-client")


def _fresh_venv(path):
  # No pip of its own (ensurepip: 4 s): this interpreter's pip installs into
  # it (`pip --python`).
  venv.EnvBuilder(with_pip=False).create(path)
  python = os.path.join(path, "bin", "python")
  site = subprocess.run(
      [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
      capture_output=True, text=True, check=True).stdout.strip()
  # Dependencies (TensorFlow, ...) from this interpreter, not the network.
  with open(os.path.join(site, "_albert_tf_test_deps.pth"), "w",
            encoding="utf-8") as f:
    f.write(sysconfig.get_paths()["purelib"] + "\n")
  return python


def _clean_env():
  return user_env.environ(TF_CPP_MIN_LOG_LEVEL="3")


def _install(python, *args, cwd):
  result = subprocess.run(
      [sys.executable, "-m", "pip", "--python", python, "install", "-q",
       "--no-deps", "--no-build-isolation", *args], cwd=cwd, env=_clean_env(),
      capture_output=True, text=True, timeout=600)
  assert result.returncode == 0, result.stdout + result.stderr


def _source_copy(dest):
  """The repository's tracked files (a clean checkout, as CI has), so that
  building the wheel leaves nothing behind in the working tree."""
  files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True,
                         capture_output=True).stdout.decode().split("\0")
  for rel in filter(None, files):
    src = os.path.join(ROOT, rel)
    if os.path.islink(src) or not os.path.isfile(src):
      continue
    os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
    shutil.copyfile(src, os.path.join(dest, rel))
  return dest


@pytest.mark.slow
@pytest.mark.parametrize("editable", [False, True])
def test_pip_install_then_tools_run_outside_the_repo(tmp_path, editable):
  python = _fresh_venv(str(tmp_path / "venv"))
  source = _source_copy(str(tmp_path / "src"))
  _install(python, *(["-e", source] if editable else [source]), cwd=tmp_path)
  outside = tmp_path / "elsewhere"
  outside.mkdir()
  env = _clean_env()
  bin_dir = os.path.dirname(python)

  # Found, not imported (the console scripts below import it): in the venv,
  # or in the source tree when editable; the preset YAML files are package
  # data beside the modules (AlbertConfig.from_preset reads them there).
  code = ("import importlib.util as u, os; "
          "print(*(u.find_spec(m).origin for m in "
          "('albert_tf', 'data_prep', 'clients'))); "
          "print(os.path.isfile(os.path.join(os.path.dirname(u.find_spec("
          "'albert_tf').origin), 'configs', 'models', 'albert_base_v2.yaml')))")
  where = subprocess.run([python, "-c", code], cwd=outside, env=env,
                         capture_output=True, text=True, timeout=300)
  assert where.returncode == 0, where.stderr
  origins, preset = where.stdout.splitlines()
  home = source if editable else str(tmp_path / "venv")
  assert all(p.startswith(home) for p in origins.split()), origins
  assert preset == "True"

  for script in SCRIPTS:
    exe = os.path.join(bin_dir, script)
    assert os.path.exists(exe), f"console script {script} not installed"
  # absl's --help prints the tool's flags and exits 1. (`python -m
  # albert_tf.<tool>` runs the same main: the tool tests run it that way.)
  for script, flag in (("albert-run-pretraining", "--config_file"),
                       ("albert-create-pretraining-data", "--"),
                       ("albert-serving-client", "--")):
    result = subprocess.run([os.path.join(bin_dir, script), "--help"],
                            cwd=outside, env=env, capture_output=True,
                            text=True, timeout=300)
    assert "Traceback" not in result.stderr, f"{script}: {result.stderr}"
    assert flag in result.stdout, f"{script}: {result.stdout}"
