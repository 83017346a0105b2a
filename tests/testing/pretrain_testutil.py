"""Shared fixtures for the trainer / run_pretraining tests (not a test file).

Builds real pretraining TFRecords once per pytest worker with the data
tools' CLIs (train_sentencepiece + create_pretraining_data) on botchan.txt,
tiny experiment configs that train in seconds on a CPU, and one finished
tiny run per worker for the tests that only read a run.
"""

import os
import shutil
import sys

import tensorflow as tf

from albert_tf.core import experiment_config
from albert_tf.core import train_lib
from albert_tf.core import trainer as trainer_lib
from albert_tf.modeling import albert_config
from albert_tf.tasks import pretraining
from tests.testing import tool_server
from tests.testing.repo_paths import BOTCHAN, ROOT

# The package's own file (bazel test's runfiles hold no official_configs link).
TINY_RECIPE = os.path.join(albert_config.CONFIG_DIR, "pretraining",
                           "albert_tiny_cpu.yaml")
SEQ, PRED, VOCAB = 64, 10, 1000
# The tests' runs of the tiny recipe (2 layers) have one layer unless a test
# asks for more: their subject is the run, not the layer stack.
TINY_LAYERS = 1


def _run(args):
  proc = tool_server.run([sys.executable] + args, cwd=ROOT,
                         env=tool_server.tool_env(), capture_output=True,
                         text=True, timeout=300)
  if proc.returncode:
    raise RuntimeError(f"{args[0]} failed:\n{proc.stdout}\n{proc.stderr}")
  return proc


def make_pretraining_data(base_dir, seq=SEQ, pred=PRED, dupe=3,
                          name="train"):
  """corpus -> SentencePiece (vocab 1000) -> TFRecords via the CLIs.

  Returns (tfrecord_path, spm_model_path). Cached in `base_dir`.
  """
  os.makedirs(base_dir, exist_ok=True)
  corpus = os.path.join(base_dir, "corpus.txt")
  spm = os.path.join(base_dir, "spm")
  if not os.path.exists(spm + ".model"):
    _run(["-c", (
        "from data_prep import prepare_corpus, train_sentencepiece\n"
        f"prepare_corpus.prepare([{BOTCHAN!r}], {corpus!r}, "
        "prepare_corpus.CorpusConfig(doc_boundary='regex', "
        "doc_regex=r'^CHAPTER [IVXLC]+\\.?$'))\n"
        f"train_sentencepiece.train([{corpus!r}], {spm!r}, "
        "train_sentencepiece.SentencePieceConfig("
        f"vocab_size={VOCAB}, num_threads=1))\n")])
  out = os.path.join(base_dir, f"{name}_s{seq}_p{pred}_d{dupe}.tfrecord")
  if not os.path.exists(out):
    _run(["data_prep/create_pretraining_data.py", f"--input_file={corpus}",
          f"--output_file={out}", f"--spm_model_file={spm}.model",
          f"--max_seq_length={seq}", f"--max_predictions_per_seq={pred}",
          f"--dupe_factor={dupe}", "--progress_interval=0"])
  return out, spm + ".model"


def worker_data_dir(tmp_path_factory):
  """The pytest worker's shared data directory: every test file that trains
  on the default data finds it made (once per worker, each worker has its
  own base directory)."""
  return tmp_path_factory.getbasetemp() / "pretrain_data"


def worker_pretraining_data(tmp_path_factory):
  """(tfrecord_path, spm_model_path) of `make_pretraining_data`'s defaults
  in `worker_data_dir`."""
  return make_pretraining_data(str(worker_data_dir(tmp_path_factory)))


def worker_corpus(tmp_path_factory):
  """The sentence-per-line botchan corpus `worker_pretraining_data` is made
  from (written with it)."""
  worker_pretraining_data(tmp_path_factory)
  return str(worker_data_dir(tmp_path_factory) / "corpus.txt")


def make_question_reply_data(base_dir, dupe=20):
  """Real text with a sentence-order cue a 2-layer model can find quickly.

  Documents are botchan's dialogue turns: a line ending in "?" and the line
  after it (104 pairs), so in-order pairs tend to have the "?" in segment A.
  On plain botchan a tiny model stays at chance SOP accuracy for 800+ steps.
  Written by the create_pretraining_data CLI like the other fixtures.
  """
  _, spm = make_pretraining_data(base_dir)
  qa_text = os.path.join(base_dir, "question_reply.txt")
  out = os.path.join(base_dir, f"question_reply_d{dupe}.tfrecord")
  if not os.path.exists(out):
    with open(os.path.join(base_dir, "corpus.txt"), encoding="utf-8") as f:
      lines = [l.strip() for l in f]
    docs = [f"{q}\n{a}" for q, a in zip(lines, lines[1:])
            if q.endswith("?") and a]
    with open(qa_text, "w", encoding="utf-8") as f:
      f.write("\n\n".join(docs) + "\n")
    _run(["data_prep/create_pretraining_data.py", f"--input_file={qa_text}",
          f"--output_file={out}", f"--spm_model_file={spm}",
          f"--max_seq_length={SEQ}", f"--max_predictions_per_seq={PRED}",
          f"--dupe_factor={dupe}", "--progress_interval=0"])
  return out


def tiny_overrides(train_file, eval_file="", **kw):
  """A params_override string for the tiny recipe on the test data (global
  batch 16 and one layer unless given: fast steps for the mechanics tests)."""
  values = {"data.input_path": train_file,
            "data.eval_input_path": eval_file or train_file,
            "data.global_batch_size": 16,
            "model.num_hidden_layers": TINY_LAYERS}
  values.update(kw)
  return ",".join(f"{k}={v}" for k, v in values.items())


def tiny_experiment(train_file, eval_file="", **overrides):
  """The tiny recipe on the test data as an experiment config: 2 steps, a
  checkpoint at step 2, one eval batch (`overrides`: "a.b" -> value)."""
  values = {"trainer.train_steps": 2, "trainer.steps_per_loop": 2,
            "trainer.checkpoint_interval": 2, "trainer.eval_steps": 1}
  values.update(overrides)
  return experiment_config.load_experiment_config(
      pretraining.PretrainingExperimentConfig, [TINY_RECIPE],
      tiny_overrides(train_file, eval_file, **values))


def tiny_trainer(train_file, model_dir, task_class=None,
                 restore_data_position=True, **overrides):
  """A Trainer of `task_class` (default: pretraining) on the tiny recipe
  (`overrides`: "a.b" -> value)."""
  config = experiment_config.load_experiment_config(
      pretraining.PretrainingExperimentConfig, [TINY_RECIPE],
      tiny_overrides(train_file, **overrides))
  task = (task_class or pretraining.PretrainingTask)(config)
  return trainer_lib.Trainer(task, config, str(model_dir),
                             restore_data_position=restore_data_position)


def checkpoint_step(trainer):
  """The step of `trainer`'s newest checkpoint, or None."""
  latest = tf.train.latest_checkpoint(trainer.checkpoint_dir)
  return int(latest.rsplit("-", 1)[1]) if latest else None


def run_tiny(config, model_dir, mode="train"):
  """train_lib.run_experiment of the pretraining task."""
  return train_lib.run_experiment(pretraining.PretrainingTask(config),
                                  config, str(model_dir), mode)


def worker_tiny_run(tmp_path_factory):
  """A finished `tiny_experiment` run on `worker_pretraining_data`, made once
  per worker in `worker_data_dir` (written under a temporary name, then
  renamed). Tests read it, or change a copy of it."""
  model_dir = worker_data_dir(tmp_path_factory) / "tiny_run"
  if not model_dir.exists():
    train_file, _ = worker_pretraining_data(tmp_path_factory)
    partial = model_dir.with_name("tiny_run.partial")
    shutil.rmtree(partial, ignore_errors=True)
    run_tiny(tiny_experiment(train_file), partial)
    os.rename(partial, model_dir)
  return str(model_dir)
