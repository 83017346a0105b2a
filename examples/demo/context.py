"""What the stages of `make demo` share: the run's settings, its output
directory, the files each stage leaves for the next, and the summary."""

import dataclasses
import os
import time
from typing import Any, Dict, Optional, Tuple

import yaml

from examples.demo import tools

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
PRETRAIN_RECIPE = os.path.join(REPO, "albert_tf", "configs", "pretraining",
                               "albert_demo_cpu.yaml")
SEQ_LENGTH = 64          # the demo recipe's data.seq_length
MAX_PREDICTIONS = 10     # the demo recipe's data.max_predictions_per_seq
# The demo recipe's masking (its YAML says why): pieces one by one.
MASKING_ARGS = ("--ngram=1", "--nodo_whole_word_mask")


@dataclasses.dataclass
class ModelSource:
  """A pretrained model the demo evaluates, fills masks with and fine-tunes:
  this run's, or the shipped one (examples/demo/shipped.py)."""
  name: str                 # "shipped" / "this run's"
  checkpoint: str           # its pretrained weights (prefix or directory)
  random_init: str          # the random weights its pretraining started from
  model_section: Dict[str, Any]
  spm: str
  held_txt: str             # held-out documents (never trained on)
  held_rec: str = ""        # their pretraining TFRecords


@dataclasses.dataclass
class TaskData:
  """A fine-tuning task's GLUE-format data and how it is read and served."""
  name: str                 # --finetune_task
  glue_task: str            # run_classifier's reader: "sst-2" / "mrpc"
  data_dir: str
  label_names: Tuple[str, ...]
  num_text_fields: int
  description: str
  counts: Dict[str, Any]
  majority_baseline: float  # dev
  serve_split: str          # the TSV the fresh processes classify


@dataclasses.dataclass
class DemoRun:
  """One demo run. Each stage reads the files of the stages before it and
  fills in its own (empty until then)."""
  out: str
  settings: Dict[str, Any]
  t0: float = dataclasses.field(default_factory=time.time)
  timings: Dict[str, Dict[str, float]] = dataclasses.field(default_factory=dict)
  summary: Dict[str, Any] = dataclasses.field(default_factory=dict)
  # Stage 1: the raw corpus text.
  raw: str = ""
  # Stage 2: documents for training and held out, vocabulary, TFRecords.
  train_txt: str = ""
  held_txt: str = ""
  spm: str = ""
  train_rec: str = ""
  held_rec: str = ""
  # Stage 3: the pretraining run directory and its config overrides.
  model_dir: str = ""
  pretrain_overrides: str = ""
  # Stages 4-5: export kind / task -> versioned SavedModel directory.
  exports: Dict[str, str] = dataclasses.field(default_factory=dict)
  # The model the fine-tuning stage starts from (shipped or this run's).
  shown: Optional[ModelSource] = None
  # The real task's inputs (real_task.prepare): ground truth, VADER, origin.
  real_task: Dict[str, Any] = dataclasses.field(default_factory=dict)

  def __post_init__(self):
    self.out = os.path.abspath(self.out)
    self.summary.update(settings=self.settings, metrics={}, parameters={})

  def path(self, *parts):
    return os.path.join(self.out, *parts)

  def rel(self, p):
    """`p` relative to the working directory when below it (shorter logs)."""
    rel = os.path.relpath(p, os.getcwd())
    return p if rel.startswith("..") else rel

  def tool(self, name, args, **kw):
    """Runs a project tool (`-m module ...`); its log is logs/<name>.log."""
    return tools.run_tool(args, self.path("logs", f"{name}.log"), cwd=REPO,
                          **kw)


def model_section(model_dir):
  """The `model` section of a run's experiment_config.yaml."""
  with open(os.path.join(model_dir, "experiment_config.yaml"),
            encoding="utf-8") as f:
    return yaml.safe_load(f)["model"]
