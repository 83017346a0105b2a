"""run_finetuning: the one fine-tuning entry point, the task by name, its
flags the task config's settings (core/settings.py)."""

import json
import os
import sys

import yaml

from tests.testing import finetune_testlib
from tests.testing import tool_server
from tests.testing.repo_paths import ROOT


def run_tool(*args, module="albert_tf.run_finetuning"):
  return tool_server.run([sys.executable, "-m", module, *args], cwd=ROOT,
                         env=tool_server.tool_env(), capture_output=True,
                         text=True, timeout=600)


def tiny_config(path):
  """A YAML config of the tiny model and a 2-step run."""
  config = {"model": dict(finetune_testlib.TINY_CONFIG),
            "data": {"global_batch_size": 8, "eval_batch_size": 8,
                     "max_seq_length": 32},
            "trainer": {"train_steps": 2, "steps_per_loop": 1,
                        "checkpoint_interval": 2, "eval_interval": 2},
            "runtime": {"distribution_strategy": "default", "seed": 1}}
  with open(path, "w", encoding="utf-8") as f:
    yaml.safe_dump(config, f)
  return str(path)


def write_rte(directory):
  os.makedirs(directory)
  for name, n in (("train.tsv", 16), ("dev.tsv", 8)):
    with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
      f.write("index\tsentence1\tsentence2\tlabel\n")
      for i in range(n):
        label = ("entailment", "not_entailment")[i % 2]
        f.write(f"{i}\tthe cat sat\tthe {('red', 'blue')[i % 2]} cat\t"
                f"{label}\n")


def test_a_glue_run_through_the_generic_entry_point(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("run_finetuning")
  spm = finetune_testlib.spm_model(tmp_path_factory)
  write_rte(str(tmp / "RTE"))
  model_dir = str(tmp / "run")
  proc = run_tool("--task=sentence_prediction", "--task_name=rte",
                  f"--data_dir={tmp / 'RTE'}", f"--spm_model_file={spm}",
                  f"--config_file={tiny_config(tmp / 'tiny.yaml')}",
                  f"--model_dir={model_dir}", "--train_steps=2")
  assert proc.returncode == 0, proc.stderr[-3000:]
  with open(os.path.join(model_dir, "eval_results.json"),
            encoding="utf-8") as f:
    results = json.load(f)
  assert results["num_examples"] == 8 and 0 <= results["accuracy"] <= 1
  with open(os.path.join(model_dir, "run_record.json"),
            encoding="utf-8") as f:
    assert json.load(f)["task"] == "sentence_prediction"
  # The run continues under run_classifier (the same task, same flags).
  proc = run_tool(f"--model_dir={model_dir}", "--mode=eval",
                  module="albert_tf.run_classifier")
  assert proc.returncode == 0, proc.stderr[-3000:]


def test_flags_are_the_named_tasks_and_others_are_refused(tmp_path):
  # Another task's flag is not a flag of this task's run.
  proc = run_tool("--task=multiple_choice", "--task_name=rte",
                  f"--model_dir={tmp_path / 'r'}")
  assert proc.returncode == 1
  assert "Unknown command line flag 'task_name'" in proc.stderr
  proc = run_tool(f"--model_dir={tmp_path / 'r'}")
  assert proc.returncode == 1
  assert "ERROR: --task is required: one of " in proc.stderr
  assert "sentence_prediction" in proc.stderr.splitlines()[-1]
  proc = run_tool("--task=nope", f"--model_dir={tmp_path / 'r'}")
  assert proc.returncode == 1 and "--task" in proc.stderr
  # --help with a task lists that task's settings only.
  proc = run_tool("--task", "question_answering", "--help")
  assert "--train_file" in proc.stdout and "--max_windows" in proc.stdout
  assert "--task_name" not in proc.stdout
  # An export-only flag outside --mode=export is refused, not ignored.
  proc = run_tool("--task=question_answering", "--max_windows=2",
                  f"--model_dir={tmp_path / 'r'}")
  assert proc.returncode == 1
  assert proc.stderr.splitlines()[-1] == (
      "ERROR: --max_windows applies to --mode=export only "
      "(--mode=train_and_eval)")
  # So is a flag that the mode would ignore: training resumed from the
  # latest checkpoint, not --checkpoint's; eval wrote no export.
  for mode, flag, line in (
      ("train", "--checkpoint=c", "--checkpoint applies to --mode=eval or "
       "predict or export only (--mode=train)"),
      ("train", "--export_dir=e", "--export_dir applies to --mode=export "
       "only (--mode=train)"),
      ("train", "--output_dir=o", "--output_dir applies to --mode=eval or "
       "train_and_eval or predict only (--mode=train)"),
      ("predict", "--export_dir=e", "--export_dir applies to --mode=export "
       "only (--mode=predict)"),
      ("eval", "--init_checkpoint=i", "--init_checkpoint applies to "
       "--mode=train or train_and_eval only (--mode=eval)"),
      ("eval", "--train_steps=100", "--train_steps applies to --mode=train "
       "or train_and_eval or continuous_eval only (--mode=eval)")):
    proc = run_tool("--task=sentence_prediction", f"--mode={mode}", flag,
                    f"--model_dir={tmp_path / 'r'}")
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1] == "ERROR: " + line
  assert os.listdir(tmp_path) == []


RUN = ("config_file", "params_override", "model_dir", "mode", "checkpoint",
       "tpu", "strategy", "init_checkpoint", "train_steps")
FINETUNING = RUN + ("output_dir", "spm_model_file", "do_lower_case",
                    "init_saved_model", "export_dir", "max_seq_length",
                    "skip_malformed_rows")
# The flags scripts use (each derived now from a config or params field).
TOOL_FLAGS = {
    "run_pretraining": RUN + ("init_from_group0", "num_cpu_devices"),
    "run_classifier": FINETUNING + ("task_name", "data_dir"),
    "run_squad": FINETUNING + ("train_file", "predict_file",
                               "version_2_with_negative",
                               "null_score_diff_threshold", "max_windows"),
    "run_race": FINETUNING + ("data_dir",),
    "export_savedmodel": (
        "config_file", "params_override", "albert_config_file", "model_dir",
        "export_dir", "checkpoint", "spm_model_file", "version",
        "max_seq_length", "num_labels", "num_text_fields", "max_answer_length",
        "max_query_length", "doc_stride", "num_choices",
        "max_first_segment_length", "max_windows", "random_init",
        "allow_random_head", "do_lower_case", "with_answerability",
        "export_kind", "task", "label_names", "truncation", "format",
        "precision", "representative_examples"),
}


def test_every_tool_keeps_its_flags():
  for tool, names in TOOL_FLAGS.items():
    out = run_tool("--help", module=f"albert_tf.{tool}").stdout
    listed = {line.split(":")[0].strip()[2:].replace("[no]", "")
              for line in out.splitlines() if line.startswith("  --")}
    assert set(names) <= listed, (tool, sorted(set(names) - listed))
