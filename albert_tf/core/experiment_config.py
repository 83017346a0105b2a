"""Typed experiment configs (Model Garden `hyperparams.Config` dataclasses).

An experiment is `model` + `data` + `optimizer` + `trainer` + `runtime`.
`ExperimentConfig` holds the generic parts; `PretrainingExperimentConfig`
adds the pretraining data section. A fine-tuning experiment subclasses
`ExperimentConfig` with its own `data` section and reuses the rest.

Configs load from YAML files (applied in order) and a Model Garden style
override string `a.b=c,d.e=f`:

>>> cfg = load_experiment_config(PretrainingExperimentConfig,
...                              ["pretraining/albert_tiny_cpu.yaml"],
...                              "trainer.train_steps=10")

A file that does not exist as a path names a packaged config (under
albert_tf/configs/). A YAML file may also be a flat model file
(configs/models/*.yaml) or a released albert_config.json: its keys are then
applied to `model`. Every value is type-checked against the dataclass
annotations; errors name the field and the file, override or flag. The
readers live in modeling/albert_config.py, whose `load_model_config` reads
the model alone (export, convert).
"""

import dataclasses
from typing import Any, Mapping, Optional, Sequence, Type, TypeVar

from official.modeling.hyperparams import base_config

from albert_tf.modeling import albert_config
from albert_tf.optimization import optimizer_factory

STRATEGIES = ("auto", "tpu", "mirrored", "multi_worker_mirrored",
              "one_device", "default")
PRECISIONS = ("auto", "float32", "bfloat16", "float16")


@dataclasses.dataclass
class PretrainingDataConfig(base_config.Config):
  """Pretraining TFRecords (data_prep/create_pretraining_data.py output)."""
  # Comma-separated files or globs.
  input_path: str = ""
  # Held-out files for evaluation (the `eval` modes).
  eval_input_path: str = ""
  seq_length: int = 512
  max_predictions_per_seq: int = 20
  global_batch_size: int = 4096
  # 0: same as global_batch_size.
  eval_batch_size: int = 0
  # Re-mask every example on the fly (needs token_boundary in the files),
  # with the masking settings and ids the data was made with (its summary).
  dynamic_masking: bool = False
  # None: the data's. A value other than the data's is refused.
  masked_lm_prob: Optional[float] = None
  mask_id: Optional[int] = None
  shuffle_buffer_size: int = 10000
  cycle_length: int = 8
  # Seed of file/record shuffling; None: from runtime.seed.
  seed: Optional[int] = None
  # Train on files without a matching <file>.summary.json (data_prep's
  # record of counts, vocab_size and lengths); see tasks/pretraining.py.
  allow_unverified_input: bool = False


@dataclasses.dataclass
class OptimizerConfig(base_config.Config):
  """Arguments of `optimizer_factory.create_optimizer` plus clipping."""
  name: str = "lamb"
  learning_rate: float = 0.00176
  num_warmup_steps: int = 3125
  start_warmup_step: int = 0
  poly_power: float = 1.0
  weight_decay_rate: float = 0.01
  bias_correction: bool = False
  beta_1: float = 0.9
  beta_2: float = 0.999
  epsilon: float = 1e-6
  # Global-norm clipping after the cross-replica sum; <= 0 disables.
  clip_norm: float = 1.0


@dataclasses.dataclass
class TrainerConfig(base_config.Config):
  """The custom training loop (albert_tf.core.trainer.Trainer)."""
  train_steps: int = 125000
  # Steps run inside one tf.function call (one host round trip).
  steps_per_loop: int = 1000
  # Save every N steps (rounded up to a multiple of steps_per_loop).
  checkpoint_interval: int = 5000
  max_to_keep: int = 5
  # Micro-batches per optimizer step (the global batch is split into them).
  gradient_accumulation_steps: int = 1
  # Evaluate every N steps in train_and_eval (rounded like checkpoints).
  eval_interval: int = 10000
  # Batches per evaluation; 0: the whole held-out set.
  eval_steps: int = 0
  # Metric that picks the best checkpoint (kept under <model_dir>/best).
  best_metric: str = "masked_lm_accuracy"
  best_metric_mode: str = "max"
  # Warm start of the model only (any checkpoint layout).
  init_checkpoint: str = ""
  # Every layer group starts from group_0 of init_checkpoint.
  init_from_group0: bool = False
  # Save the input iterator with checkpoints (exact resume of data order).
  save_data_position: bool = True
  # continuous_eval: seconds to wait for a new checkpoint before stopping.
  continuous_eval_timeout: int = 3600


@dataclasses.dataclass
class RuntimeConfig(base_config.Config):
  """Devices, precision and determinism."""
  distribution_strategy: str = "auto"
  # TPU name, grpc address or "local"; implies the TPU strategy.
  tpu: str = ""
  # Split the CPU into N logical devices (tests of distribution on CPU).
  num_cpu_devices: int = 0
  # auto: bfloat16 on TPU, float16 (dynamic loss scale) on GPU, else float32.
  mixed_precision_dtype: str = "float32"
  jit_compile: bool = False
  seed: Optional[int] = None
  # tf.config.experimental.enable_op_determinism (bitwise reproducible).
  deterministic: bool = False


@dataclasses.dataclass
class ExperimentConfig(base_config.Config):
  """The generic experiment: everything but the task's data."""
  model: albert_config.AlbertConfig = dataclasses.field(
      default_factory=albert_config.AlbertConfig)
  optimizer: OptimizerConfig = dataclasses.field(
      default_factory=OptimizerConfig)
  trainer: TrainerConfig = dataclasses.field(default_factory=TrainerConfig)
  runtime: RuntimeConfig = dataclasses.field(default_factory=RuntimeConfig)


@dataclasses.dataclass
class PretrainingExperimentConfig(ExperimentConfig):
  data: PretrainingDataConfig = dataclasses.field(
      default_factory=PretrainingDataConfig)

  def validate_data(self):
    """Raises ValueError naming the first bad data field."""
    data, t = self.data, self.trainer
    if data.seq_length > self.model.max_position_embeddings:
      raise ValueError(
          f"data.seq_length ({data.seq_length}) exceeds "
          f"model.max_position_embeddings "
          f"({self.model.max_position_embeddings})")
    for name in ("seq_length", "max_predictions_per_seq", "global_batch_size"):
      if getattr(data, name) <= 0:
        raise ValueError(f"data.{name} must be > 0, got {getattr(data, name)}")
    if data.global_batch_size % t.gradient_accumulation_steps:
      raise ValueError(
          f"data.global_batch_size ({data.global_batch_size}) must be "
          "divisible by trainer.gradient_accumulation_steps "
          f"({t.gradient_accumulation_steps})")


T = TypeVar("T", bound=ExperimentConfig)
RESOLVED_CONFIG_NAME = albert_config.RUN_CONFIG_NAME


def load_experiment_config(config_cls: Type[T] = PretrainingExperimentConfig,
                           config_files: Sequence[str] = (),
                           params_override: str = "",
                           flag_values: Optional[Mapping[str, Any]] = None
                           ) -> T:
  """Defaults <- each YAML file in order <- `a.b=c,...` <- explicit flags.

  The one loader of every tool. Each step is type-checked against the
  dataclasses and errors name the field and the file / override / flag.
  """
  config = config_cls()
  for path in config_files or ():
    albert_config.apply_values(config, albert_config.read_config_file(path),
                               path)
  albert_config.apply_values(config,
                             albert_config.parse_override(params_override),
                             f"--params_override {params_override!r}")
  if flag_values:
    albert_config.apply_values(config, flag_values, "command-line flags")
  return validate(config)


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
