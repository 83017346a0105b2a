"""Strict command lines of the albert_tf tools and the serving client:
words that are not flags, a flag given twice, a repeated --params_override, override values
with YAML flow characters, NaN/infinite floats, a YAML file that is a list.
Each was silently ignored, silently wrong or a traceback before.
"""

import math
import os
import subprocess
import sys

from absl import flags as absl_flags
import pytest
import yaml

from albert_tf import cli_flags
from albert_tf.core import experiment_config as ec
from albert_tf.core import settings
from albert_tf.modeling import albert_config
from albert_tf.tasks import pretraining
from albert_tf.tasks import registry
from albert_toolkit import command_line
from tests.testing import pretrain_testutil as tu
from tests.testing import tool_server
from tests.testing.repo_paths import ROOT

TOOLS = ("run_pretraining", "run_classifier", "run_squad", "run_race",
         "run_finetuning", "export_savedmodel", "convert_checkpoint", "plot_metrics")


def start(module, *args, cwd=ROOT):
  # albert_tf's and data_prep's tools: a fork of their family's tool server;
  # the serving client, which imports no TensorFlow, a process of its own.
  popen = (tool_server.start if module.startswith(("albert_tf.", "data_prep."))
           else subprocess.Popen)
  return popen([sys.executable, "-m", module, *args], cwd=cwd,
               env=tool_server.tool_env(), stdout=subprocess.PIPE,
               stderr=subprocess.PIPE, text=True)


def error_line(proc, code=1):
  """The single error line of a finished tool (no traceback)."""
  _, err = proc.communicate(timeout=300)
  assert proc.returncode == code, err[-3000:]
  assert "Traceback" not in err, err[-3000:]
  lines = [l for l in err.splitlines()
           if l.startswith(("ERROR:", "FATAL Flags parsing error:", "error:"))]
  assert len(lines) == 1, err[-3000:]
  return lines[0]


@pytest.mark.slow
def test_every_tool_refuses_words_that_are_not_flags(tmp_path):
  """`train_steps=5` without dashes, an unquoted glob's second match:
  absl passed them to main, which ignored them."""
  run_dir = str(tmp_path / "run")
  a, b = str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml")
  required = {"export_savedmodel": [f"--model_dir={run_dir}",
                                    f"--export_dir={tmp_path / 'e'}"],
              "convert_checkpoint": [
                  "--from=tf1", "--to=albert_tf", f"--input_checkpoint={a}",
                  f"--output_dir={tmp_path / 'c'}"]}
  procs = [start(f"albert_tf.{tool}",
                 *required.get(tool, [f"--model_dir={run_dir}"]),
                 "--config_file", a, b) for tool in TOOLS[:-1]]
  procs.append(start("albert_tf.plot_metrics", f"--model_dir={run_dir}",
                     "train_steps=5"))
  # `--text hello world`: "world" was dropped from the request.
  procs.append(start("clients.serving_client", "--model_name=m", "--text",
                     "hello", "world"))
  for proc, word in zip(procs, [b] * (len(TOOLS) - 1) + ["train_steps=5", "world"]):
    code = 2 if proc.args[2] == "clients.serving_client" else 1
    line = error_line(proc, code)
    assert f"not a flag: {word!r}" in line, line
  assert os.listdir(tmp_path) == []


def test_every_tool_refuses_a_flag_given_twice(tmp_path):
  """`--model_dir=a --model_dir=b` ran in b and never said a word of a."""
  a, b = str(tmp_path / "a"), str(tmp_path / "b")
  twice = {"convert_checkpoint": [
      "--from=tf1", "--to=albert_tf", f"--input_checkpoint={a}",
      f"--output_dir={a}", f"--output_dir={b}"],
           "export_savedmodel": [f"--model_dir={a}", f"--model_dir={b}",
                                 f"--export_dir={a}"]}
  procs = [start(f"albert_tf.{tool}", *twice.get(
      tool, [f"--model_dir={a}", f"--model_dir={b}"])) for tool in TOOLS]
  procs += [start("data_prep.create_pretraining_data", f"--input_file={a}",
                  f"--output_file={a}", f"--output_file={b}"),
            start("data_prep.prepare_corpus", f"--input_file={a}",
                  "--nolines_are_paragraphs", "--lines_are_paragraphs",
                  f"--output_file={b}")]
  procs.append(start("clients.serving_client", "--model_name=m",
                     "--model_name=n", "--text=hello"))
  flags_given = ["--output_dir" if tool == "convert_checkpoint"
                 else "--model_dir" for tool in TOOLS]
  flags_given += ["--output_file", "--lines_are_paragraphs", "--model_name"]
  for proc, flag in zip(procs, flags_given):
    code = 2 if proc.args[2] == "clients.serving_client" else 1
    line = error_line(proc, code)
    assert f"{flag}: given more than once" in line, line
  assert os.listdir(tmp_path) == []
  # List flags (--config_file, --params_override, the client's --text)
  # stay repeatable.
  values = absl_flags.FlagValues()
  absl_flags.DEFINE_string("model_dir", None, "", flag_values=values)
  absl_flags.DEFINE_bool("whole_lines", False, "", flag_values=values)
  absl_flags.DEFINE_multi_string("config_file", [], "", flag_values=values)
  absl_flags.DEFINE_integer("steps", 1, "", short_name="s",
                            flag_values=values)
  values(["tool", "--config_file=a", "--config_file=b", "--model_dir=x",
          "--whole_lines", "--nowhole_lines", "-s", "2", "--steps=3"])
  assert command_line.repeated_flags(values) == ["--steps", "--whole_lines"]


def load(*overrides, files=(tu.TINY_RECIPE,), flag_values=None):
  return ec.load_experiment_config(pretraining.PretrainingExperimentConfig, files,
                                   list(overrides), flag_values)


def test_repeated_params_override_applies_in_order():
  config = load("trainer.train_steps=3,optimizer.learning_rate=0.5",
                "trainer.train_steps=4")
  assert config.trainer.train_steps == 4  # the later one wins
  assert config.optimizer.learning_rate == 0.5  # the first one is kept
  assert load("trainer.train_steps=3").trainer.train_steps == 3
  model = albert_config.load_model_config(
      ["albert_base_v2"], ["model.num_hidden_layers=3", "model.hidden_act=relu"])
  assert (model.num_hidden_layers, model.hidden_act) == (3, "relu")
  with pytest.raises(ValueError, match=(
      r"^--params_override 'trainer.train_steps=2' --params_override "
      r"'trainer.max_to_keep=x': trainer.max_to_keep must be an integer")):
    load("trainer.train_steps=2", "trainer.max_to_keep=x")


def test_override_values_are_read_one_by_one():
  """A relative glob did not parse (`?` inside Model Garden's flow mapping);
  an absolute one did."""
  glob = "data/train.tfrecord-?????-of-?????"
  for path in (glob, "/abs/" + glob, "gs://b/train-*", "a b/c: d?.tfrecord"):
    assert load(f"data.input_path={path}").data.input_path == path
  config = load("optimizer.learning_rate=1e-4, trainer.save_data_position="
                "false,data.input_path='x,y',runtime.tpu=")
  assert config.optimizer.learning_rate == 1e-4
  assert config.trainer.save_data_position is False
  assert config.data.input_path == "x,y"
  assert load("{trainer: {train_steps: 7}}").trainer.train_steps == 7
  with pytest.raises(ValueError, match=r"model is given both a value and "):
    load("model=3,model.hidden_size=4")
  # Within one string a key given twice is refused (across strings the
  # later string wins, above).
  with pytest.raises(ValueError, match=r"^--params_override 'trainer.train_"
                     r"steps=3,trainer.train_steps=4': trainer.train_steps "
                     r"is given twice"):
    load("trainer.train_steps=3,trainer.train_steps=4")
  with pytest.raises(ValueError) as e:
    load("trainer: [")
  assert "\n" not in str(e.value) and "nor YAML" in str(e.value)


@pytest.mark.parametrize("override", [
    "optimizer.learning_rate=nan", "optimizer.learning_rate=inf",
    "optimizer.learning_rate=1e400", "optimizer.clip_norm=nan",
    "optimizer.clip_norm=-inf", "data.masked_lm_prob=.nan",
    "model.initializer_range=nan"])
def test_non_finite_floats_are_refused(override):
  """They passed every range check: clip_norm=nan turned clipping off."""
  field = override.split("=")[0]
  with pytest.raises(ValueError, match=rf"{field} must be a finite number"):
    load(override)


def test_non_finite_floats_are_refused_from_files_and_flags(tmp_path):
  path = tmp_path / "f.yaml"
  path.write_text("optimizer:\n  learning_rate: .inf\n")
  with pytest.raises(ValueError, match=r"f.yaml: optimizer.learning_rate "
                     "must be a finite number, got inf"):
    load(files=[tu.TINY_RECIPE, str(path)])
  with pytest.raises(ValueError, match="command-line flags: optimizer.epsilon"):
    load(flag_values={"optimizer": {"epsilon": math.nan}})
  with pytest.raises(ValueError, match="model.hidden_dropout_prob must be a "
                     "finite number"):
    albert_config.load_model_config(["albert_base_v2"],
                                    "model.hidden_dropout_prob=nan")


def test_yaml_list_and_bad_overrides_are_one_line_errors(tmp_path):
  """A YAML file holding a list ended in a 38-line AttributeError."""
  listed = tmp_path / "list.yaml"
  listed.write_text(yaml.safe_dump([{"trainer": {"train_steps": 3}}]))
  with pytest.raises(ValueError, match=rf"^{listed}: expected a mapping .* "
                     "got a list$"):
    albert_config.read_config_file(str(listed))
  run_dir = str(tmp_path / "run")
  listed_cli = start("albert_tf.run_pretraining", f"--config_file={listed}",
                     f"--model_dir={run_dir}")
  # The first of two --params_override was silently dropped.
  two = start("albert_tf.run_pretraining", f"--config_file={tu.TINY_RECIPE}",
              "--params_override=optimizer.learning_rate=nan",
              "--params_override=trainer.train_steps=3",
              f"--model_dir={run_dir}")
  assert f"{listed}: expected a mapping" in error_line(listed_cli)
  assert ("optimizer.learning_rate must be a finite number, got 'nan'"
          in error_line(two))
  assert not os.path.exists(run_dir)


_OWN = ("data_prep.", "albert_tf.", "clients.", "examples.")


def _flags_by_section(text):
  """absl help text -> {section (module) name: [flag names]}."""
  sections, current = {}, None
  for line in text.splitlines():
    if line and not line.startswith(" ") and line.endswith(":"):
      current = sections.setdefault(line[:-1], [])
    elif current is not None and line.startswith("  --"):
      name = line[4:].split(":")[0]
      current.append(name[4:] if name.startswith("[no]") else name)
  return sections


@pytest.mark.slow
def test_help_lists_each_tools_own_flags():
  """`--help` listed no flag of create_pretraining_data and 2 of
  run_pretraining (not --model_dir, --mode, --config_file,
  --params_override): absl lists the main module's flags only, and most are
  defined in shared modules (pretraining_config, cli_flags)."""
  tools = ([f"albert_tf.{t}" for t in TOOLS] +
           [f"data_prep.{t}" for t in (
               "create_pretraining_data", "prepare_corpus",
               "train_sentencepiece", "inspect_tfrecord")])
  procs = {(tool, h): start(tool, f"--{h}") for tool in tools
           for h in ("help", "helpfull")}
  out = {}
  for key, proc in procs.items():
    stdout, err = proc.communicate(timeout=300)
    assert proc.returncode in (0, 1), (key, err[-2000:])  # absl exits 1
    assert "Traceback" not in err, (key, err[-2000:])
    out[key] = _flags_by_section(stdout)
  for tool in tools:
    full, short = out[(tool, "helpfull")], out[(tool, "help")]
    own = {flag for section, names in full.items() for flag in names
           if section.startswith(_OWN) or section.endswith(".py")}
    listed = {flag for names in short.values() for flag in names}
    assert own and own <= listed, (tool, sorted(own - listed))
    # Only the tool's: absl's and TensorFlow's stay in --helpfull.
    assert "alsologtostderr" in {f for n in full.values() for f in n}, tool
    assert "alsologtostderr" not in listed, tool
  run = {f for names in out[("albert_tf.run_pretraining", "help")].values()
         for f in names}
  assert {"model_dir", "mode", "config_file", "params_override"} <= run
  data = {f for names in out[("data_prep.create_pretraining_data",
                              "help")].values() for f in names}
  assert {"input_file", "output_file", "spm_model_file",
          "masked_lm_prob"} <= data


def test_the_flags_derived_from_settings_are_named_in_cli_flags():
  """Every flag a config or serving params field declares is in
  cli_flags.SETTING_FLAGS (so grep finds it), and nothing else is."""
  run = {name for task_cls in registry.tasks()
         for name in settings.flagged(task_cls.config_cls)}
  assert sorted(run) == list(cli_flags.SETTING_FLAGS["run"])
  assert (sorted(cli_flags.all_export_flags()) ==
          list(cli_flags.SETTING_FLAGS["export"]))
