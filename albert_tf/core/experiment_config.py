"""Typed experiment configs (Model Garden `hyperparams.Config` dataclasses).

An experiment is `model` + `data` + `optimizer` + `trainer` + `runtime`.
`ExperimentConfig` holds the generic parts; each task (albert_tf/tasks/)
subclasses it with its own `data` (and `task`) sections and a
`validate_data` method, and reuses the rest.

Configs load from YAML files (applied in order) and a Model Garden style
override string `a.b=c,d.e=f`:

>>> cfg = load_experiment_config(pretraining.PretrainingExperimentConfig,
...                              ["pretraining/albert_tiny_cpu.yaml"],
...                              "trainer.train_steps=10")

A file that does not exist as a path names a packaged config (under
albert_tf/configs/). A YAML file may also be a flat model file
(configs/models/*.yaml) or a released albert_config.json: its keys are then
applied to `model`. The readers live in modeling/albert_config.py, whose
`load_model_config` reads the model alone (export, convert).
"""

import dataclasses
from typing import Any, Mapping, Optional, Sequence, Type, TypeVar

from official.modeling.hyperparams import base_config

from albert_tf.core.distribute_utils import STRATEGIES
from albert_tf.core.settings import DATA_POSITION, SAFE, setting
from albert_tf.modeling import albert_config
from albert_tf.modeling import config_overrides
from albert_tf.optimization import optimizer_config
from albert_tf.optimization import optimizer_factory

PRECISIONS = ("auto", "float32", "bfloat16", "float16")


@dataclasses.dataclass
class TrainerConfig(base_config.Config):
  """The custom training loop (albert_tf.core.trainer.Trainer)."""
  train_steps: int = setting(125000, resume=SAFE,
                             flag="trainer.train_steps.")
  # Steps run inside one tf.function call (one host round trip).
  steps_per_loop: int = setting(1000, resume=SAFE)
  # Save every N steps (rounded up to a multiple of steps_per_loop).
  checkpoint_interval: int = setting(5000, resume=SAFE)
  max_to_keep: int = setting(5, resume=SAFE)
  # Micro-batches per optimizer step (the global batch is split into them).
  gradient_accumulation_steps: int = 1
  # Evaluate every N steps in train_and_eval (rounded like checkpoints).
  eval_interval: int = setting(10000, resume=SAFE)
  # Batches per evaluation; 0: the whole held-out set.
  eval_steps: int = setting(0, resume=SAFE)
  # Metric that picks the best checkpoint (kept under <model_dir>/best);
  # each task's config sets its own default.
  best_metric: str = setting("", resume=SAFE)
  best_metric_mode: str = setting("max", resume=SAFE)
  # Warm start of the model only (any checkpoint layout); a fresh run's
  # only, ignored on resume.
  init_checkpoint: str = setting(
      "", resume=SAFE, flag="Warm start of a fresh run: our checkpoint, an "
      "original TF1 or Model Garden one (trainer.init_checkpoint).")
  # Every layer group starts from group_0 of init_checkpoint.
  init_from_group0: bool = setting(
      False, resume=SAFE, flag="Initialise every layer group from group_0 "
      "of --init_checkpoint (the original's option).")
  # Save the input iterator with checkpoints (exact resume of data order).
  save_data_position: bool = setting(True, resume=DATA_POSITION)
  # continuous_eval: seconds to wait for a new checkpoint before stopping.
  continuous_eval_timeout: int = setting(3600, resume=SAFE)


@dataclasses.dataclass
class RuntimeConfig(base_config.Config):
  """Devices, precision and determinism."""
  distribution_strategy: str = setting(
      "auto", resume=SAFE, flag_name="strategy", choices=STRATEGIES,
      flag="runtime.distribution_strategy. auto: TPU if --tpu, mirrored if "
      "GPUs, else default.")
  # TPU name, grpc address or "local"; implies the TPU strategy.
  tpu: str = setting("", resume=SAFE, flag="TPU name, grpc:// address or "
                     "'local' (runtime.tpu; selects the TPU strategy).")
  # Split the CPU into N logical devices (tests of distribution on CPU).
  num_cpu_devices: int = setting(
      0, resume=SAFE, flag="Split the CPU into N logical devices "
      "(runtime.num_cpu_devices; for testing strategies).")
  # auto: bfloat16 on TPU, float16 (dynamic loss scale) on GPU, else float32.
  mixed_precision_dtype: str = "float32"
  jit_compile: bool = setting(False, resume=SAFE)
  seed: Optional[int] = setting(None, resume=SAFE)
  # tf.config.experimental.enable_op_determinism (bitwise reproducible).
  deterministic: bool = setting(False, resume=SAFE)


@dataclasses.dataclass
class ExperimentConfig(base_config.Config):
  """The generic experiment: everything but the task's data."""
  model: albert_config.AlbertConfig = dataclasses.field(
      default_factory=albert_config.AlbertConfig)
  optimizer: optimizer_config.OptimizerConfig = dataclasses.field(
      default_factory=optimizer_config.OptimizerConfig)
  trainer: TrainerConfig = dataclasses.field(default_factory=TrainerConfig)
  runtime: RuntimeConfig = dataclasses.field(default_factory=RuntimeConfig)


T = TypeVar("T", bound=ExperimentConfig)


def load_experiment_config(config_cls: Type[T],
                           config_files: Sequence[str] = (),
                           params_override: str = "",
                           flag_values: Optional[Mapping[str, Any]] = None,
                           base: Optional[Mapping[str, Any]] = None,
                           base_source: str = "") -> T:
  """Defaults <- `base` <- each YAML file in order <- `a.b=c,...` <-
  explicit flags.

  The one loader of every tool. Each step is type-checked against the
  dataclasses and errors name the field and the file / override / flag.
  `base`: the resolved config of the run a start continues (its
  experiment_config.yaml), so a resume or an eval need not retype it.
  """
  config = config_cls()
  if base:
    albert_config.apply_values(config, base, base_source)
  for path in config_files or ():
    albert_config.apply_values(config, albert_config.read_config_file(path),
                               path)
  albert_config.apply_values(config,
                             config_overrides.parse_override(params_override),
                             config_overrides.describe(params_override))
  if flag_values:
    albert_config.apply_values(config, flag_values, "command-line flags")
  return validate(config)


# Metrics where lower is better: a best by their maximum is refused.
LOWER_IS_BETTER_SUFFIXES = ("loss", "perplexity")


def validate(config: ExperimentConfig) -> ExperimentConfig:
  """Raises ValueError naming the first bad field."""
  config.model.validate()
  t, o, r = config.trainer, config.optimizer, config.runtime
  for name in ("train_steps", "steps_per_loop", "checkpoint_interval",
               "gradient_accumulation_steps", "eval_interval", "max_to_keep"):
    if getattr(t, name) <= 0:
      raise ValueError(f"trainer.{name} must be > 0, got {getattr(t, name)}")
  if t.eval_steps < 0:
    raise ValueError(f"trainer.eval_steps must be >= 0, got {t.eval_steps}")
  if t.best_metric_mode not in ("max", "min"):
    raise ValueError("trainer.best_metric_mode must be 'max' or 'min', got "
                     f"{t.best_metric_mode!r}")
  if (t.best_metric_mode == "max" and
      t.best_metric.endswith(LOWER_IS_BETTER_SUFFIXES)):
    raise ValueError(
        f"trainer.best_metric={t.best_metric} with trainer.best_metric_mode="
        "max would keep the checkpoint of the highest "
        f"{t.best_metric}; set trainer.best_metric_mode=min")
  if o.name.lower() not in optimizer_factory.OPTIMIZER_NAMES:
    raise ValueError(f"optimizer.name: unknown optimizer {o.name!r}; "
                     f"expected one of {optimizer_factory.OPTIMIZER_NAMES}")
  if o.learning_rate <= 0:
    raise ValueError(f"optimizer.learning_rate must be > 0, got "
                     f"{o.learning_rate}")
  if r.distribution_strategy not in STRATEGIES:
    raise ValueError(f"runtime.distribution_strategy: unknown strategy "
                     f"{r.distribution_strategy!r}; expected one of "
                     f"{STRATEGIES}")
  if r.mixed_precision_dtype not in PRECISIONS:
    raise ValueError(f"runtime.mixed_precision_dtype must be one of "
                     f"{PRECISIONS}, got {r.mixed_precision_dtype!r}")
  # The task's data section checks itself (and may fix task defaults).
  check_data = getattr(config, "validate_data", None)
  if check_data is not None:
    check_data()
  return config
