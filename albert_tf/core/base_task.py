"""What a task is, for the training loop, the run tools and the exporter.

A task supplies the model, the input pipeline and its loss as additive sums,
so replicas and micro-batches can be summed before normalising; its params
(what shapes its model: labels, head, lengths, ...; recorded with the run
and building the training model, the export model and the serving module);
its evaluation and predictions; and its serving export. Every
hook is declared here (abstract, or with the default most tasks want), so
the callers (`trainer.Trainer`, `train_lib.run_experiment`, the exporter)
call them without probing. Concrete tasks live in `albert_tf/tasks/` and
register there (`tasks/registry.py`); core never names one.

  @registry.register_task
  class MyTask(base_task.Task):
    name = "my_task"                                # the run record's task
    config_cls = MyExperimentConfig                 # its experiment config
    serving_params_cls = MyServingParams            # what shapes its model
    def build_inputs(self, input_context, training):
      ...  # tf.data.Dataset of per-replica batches (dicts of tensors)
    def loss_normalizers(self, features):           # from the features only
      return {"count": tf.cast(tf.shape(features["label"])[0], tf.float32)}
    def compute_sums(self, model, features, training):
      ...  # additive float32 scalars: {"loss_sum":..., "correct":..., ...}
    def loss_from_sums(self, sums, normalizers):    # linear in `sums`
      return sums["loss_sum"] / normalizers["count"]
    def metrics_from_sums(self, sums):              # includes "loss"
      return {"loss": ..., "accuracy": ...}
    def serving_params(self, recorded_facts): ...   # MyServingParams
    @classmethod
    def model_for(cls, kind, model_config, params, dropout_rate=0.0): ...
    @classmethod
    def serving_module(cls, kind, model, params, assets): ...  # tf.Module
"""

import abc
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence

from absl import logging
import tensorflow as tf
import tf_keras

from albert_tf.checkpoints import identity
from albert_tf.checkpoints import restore as restore_lib
from albert_tf.core import checkpoint_config

# The export kinds every task has (serving/export_lib.py writes them); a
# task adds its own in `export_kinds`.
ENCODER_EXPORT = "encoder"
SERVING_EXPORT = "serving"


def warm_start(model, source: str, config, setting: str,
               facts: Mapping[str, Any], **restore_args) -> None:
  """The warm start of a fresh run: `source` (a checkpoint of any layout or
  an encoder SavedModel) is checked against the run's model config and
  vocabulary `facts` (`identity.check`; a checkpoint without an identity:
  the config of its run record or the albert_config.json beside it), a
  difference refused in one line naming `setting`; then restored into
  `model`. With trainer.init_from_group0 only the number of groups may
  differ.

  Args:
    model: the run's model.
    source: what `setting` names.
    config: the run's experiment config (`model`, `trainer.init_from_group0`).
    setting: the config field that named `source`, for errors.
    facts: the vocabulary facts a checkpoint's identity must match
      (`vocab_sha256`, `do_lower_case`).
    **restore_args: `checkpoints.restore.restore`'s (`parts`,
      `allow_missing_heads`).
  """
  group0 = config.trainer.init_from_group0
  ignored = identity.GROUP0_FIELDS if group0 else frozenset()
  what, run_model = f"this run's config ({setting})", config.model.as_dict()
  found = identity.check(source, model=run_model, facts=facts, what=what,
                         ignored=ignored)
  # A checkpoint without an identity: the config recorded beside it.
  checked = (checkpoint_config.check_beside(source, run_model, what, ignored)
             if found is None else "model" in found)
  if not checked:
    logging.warning("%s %s records no model config (no identity, run "
                    "record or albert_config.json): the model config could "
                    "not be checked, only the shapes of its weights", setting,
                    source)
  report = restore_lib.restore(model, source, init_from_group0=group0,
                               **restore_args)
  logging.info("warm-started from %s: %s", setting, report.summary())


class Task(abc.ABC):
  """What the trainer, train_lib and the exporter need from a task."""

  # --- Identity (class attributes every registered task sets) ---

  # The registry key, recorded in the run record as "task".
  name: str = ""
  # The experiment config dataclass (core.experiment_config.ExperimentConfig
  # subclass) the task is built from: task_cls(config, model_dir).
  config_cls: type = type(None)
  # A packaged config file (albert_tf/configs/) a new run of the run tools
  # starts from, before --config_file: the task's recipe, so that a run
  # without one does not train with the pretraining optimizer ("": none).
  recipe: str = ""
  # The dataclass of what shapes the task's model and its exports
  # (serving_params(); serving/serving_params.py).
  serving_params_cls: type = type(None)
  # Export kinds this task writes with `serving_module` (besides
  # "encoder", which every task's model has), and the default one.
  export_kinds: Sequence[str] = (SERVING_EXPORT,)
  default_export_kind: str = SERVING_EXPORT
  # The serving task names an export without a run directory may give
  # (`--task=...`), each with its params' defaults.
  serving_tasks: Mapping[str, Mapping[str, Any]] = {}

  # Global batch sizes (examples per optimizer step / per eval step).
  global_batch_size: int = 0
  eval_batch_size: int = 0
  # Whether the trainer's periodic evaluation applies (held-out labels).
  in_loop_eval: bool = True
  # Whether train_and_eval ends with `evaluate` (benchmark metrics).
  evaluate_after_training: bool = False
  # Dropout on the encoder's output before the heads, while training.
  head_dropout: float = 0.0

  def __init__(self, config, model_dir: Optional[str] = None):
    self.config = config
    self.model_dir = model_dir

  # --- Model and training ---

  def build_model(self) -> tf_keras.Model:
    """The training model: `model_for` this run's params."""
    return self.model_for(None, self.config.model, self.serving_params({}),
                          self.head_dropout)

  @abc.abstractmethod
  def build_inputs(self, input_context: Optional[tf.distribute.InputContext],
                   training: bool) -> tf.data.Dataset:
    """Per-replica batches (batch = global // num_replicas)."""

  @abc.abstractmethod
  def loss_normalizers(self, features) -> Dict[str, tf.Tensor]:
    """Additive denominators of the loss, computed from the features only.

    The trainer sums them over replicas (and micro-batches) before the
    forward pass, so each replica's loss is already normalised globally.
    """

  @abc.abstractmethod
  def compute_sums(self, model, features, training: bool
                   ) -> Dict[str, tf.Tensor]:
    """Runs the model; additive float32 scalar sums (losses, hits, counts)."""

  @abc.abstractmethod
  def loss_from_sums(self, sums, normalizers) -> tf.Tensor:
    """The loss, linear in `sums` (so per-replica losses add up)."""

  @abc.abstractmethod
  def metrics_from_sums(self, sums) -> Dict[str, Any]:
    """Metrics (must include "loss") from sums added over batches."""

  def eval_metric_names(self) -> Optional[Sequence[str]]:
    """The names `metrics_from_sums` reports for this run, which the
    trainer checks `trainer.best_metric` against when it is built (None:
    not known before the first evaluation, which checks it then)."""
    return None

  @abc.abstractmethod
  def validate_inputs(self, training: bool = True) -> None:
    """Raises a clear error before training on bad/missing input files."""

  @abc.abstractmethod
  def initialize(self, model) -> None:
    """Warm start of a fresh run (e.g. from an init checkpoint)."""

  @classmethod
  def restore_for_inference(cls, model, path: str,
                            step: Optional[tf.Variable] = None,
                            allow_missing_heads: bool = False):
    """Loads checkpoint `path` into the whole `model` (eval, predict,
    export: called by core.run_restore.restore_run, after the
    identity check); `step` receives the checkpoint's step. Returns the
    checkpoints.restore.RestoreReport."""
    return restore_lib.restore(model, path, step=step,
                               allow_missing_heads=allow_missing_heads)

  def checkpoint_items(self, model) -> Dict[str, Any]:
    """Objects saved with the model (default: our layout, encoder + model)."""
    del model
    return {}

  def input_files(self, training: bool) -> List[str]:
    """The input files: whose change resets the saved data position
    (core/data_position.py; default: none known)."""
    del training
    return []

  def record_files(self, training: bool) -> List[str]:
    """The TFRecord files the input pipeline reads, scanned to name a
    corrupt one after a data error (default: `input_files`)."""
    return self.input_files(training)

  def eval_data(self) -> List[str]:
    """What the in-loop evaluation reads, as absolute paths: recorded with
    the best checkpoint, which only an evaluation of the same data may
    replace (default: `input_files(training=False)`)."""
    return [os.path.abspath(p) for p in self.input_files(training=False)]

  def bad_input(self, error: tf.errors.OpError) -> Optional[str]:
    """The bad input file (and record) a failed training loop's `error`
    names in the task's own reader's words, as one line; None when it names
    none (the checked TFRecord reader's errors and a scan of `record_files`
    are the trainer's)."""
    del error
    return None

  # --- The run record ---

  def record_facts(self) -> Dict[str, Any]:
    """What the run record and each checkpoint's identity keep besides the
    config: the tokenizer the weights belong to (from the task's params:
    pretraining's comes from its data, not its config), the task's name and
    the module that registers it (so a tool can rebuild a task defined
    anywhere). Everything else a tool needs follows from the config
    (`serving_params`)."""
    params = self.serving_params({})
    facts = {"do_lower_case": params.do_lower_case}
    for key in ("spm_model_file", "vocab_file"):
      path = getattr(params, key)
      facts[key] = os.path.abspath(path) if path else ""
    facts.update(task=self.name, task_module=type(self).__module__)
    return facts

  # --- Evaluation and prediction ---

  def evaluate(self, trainer, output_dir: str) -> Dict[str, Any]:
    """The task's evaluation of the restored model (default: the loop's
    metrics over the held-out data; the best checkpoint is not touched)."""
    del output_dir
    # A standalone evaluation may differ from the in-loop one (eval_steps,
    # data): it reports, and leaves the best checkpoint alone.
    return trainer.evaluate(keep_best=False)

  def predict(self, trainer, output_dir: str) -> List[str]:
    """Predictions -> the files written."""
    del trainer, output_dir
    raise ValueError(f"--mode=predict is not available for task "
                     f"{self.name!r}")

  # --- Export ---

  @abc.abstractmethod
  def serving_params(self, recorded_facts: Mapping[str, Any]):
    """The task's params (a `serving_params_cls`) for this run's config;
    `recorded_facts` are its run record's (e.g. the tokenizer of
    pretraining data)."""

  @classmethod
  @abc.abstractmethod
  def model_for(cls, kind: Optional[str], model_config, params,
                dropout_rate: float = 0.0) -> tf_keras.Model:
    """The task's one model builder: the model of export `kind` (None: the
    training model) from a model config and params alone, so a run, its
    export and an export without a run directory build the same model."""

  @classmethod
  @abc.abstractmethod
  def serving_module(cls, kind: str, model, params,
                     assets: Mapping[str, Any]) -> tf.Module:
    """The tf.Module of export `kind` (one of `export_kinds`), with a
    `signatures()` method, wrapping `model` with `params`; `assets` are the
    module's asset arguments (config_file, spm_model_file, do_lower_case)."""
