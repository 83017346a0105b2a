"""The optimizer's settings and their defaults: the one place they are spelled.

`OptimizerConfig` is the `optimizer` section of an experiment config (a
Model Garden `hyperparams.Config`, so it takes YAML and `a.b=c` overrides);
`DEFAULTS` is its default instance, from which `lamb.LAMB`,
`lamb.AdamWeightDecay`, `optimizer_factory.create_optimizer`, the schedule
and the clipping take their default arguments. The defaults are the
original ALBERT pretraining recipe (albert_base: LAMB, lr 0.00176, 3125
warm-up steps, weight decay 0.01, no bias correction, clip norm 1.0).
"""

import dataclasses
from typing import Optional

from official.modeling.hyperparams import base_config


@dataclasses.dataclass
class OptimizerConfig(base_config.Config):
  """Arguments of `optimizer_factory.create_optimizer` plus clipping."""
  # "lamb" (the original) or "adamw" (case-insensitive).
  name: str = "lamb"
  # Peak learning rate, reached at the end of the warm-up.
  learning_rate: float = 0.00176
  num_warmup_steps: int = 3125
  start_warmup_step: int = 0
  # Power of the polynomial decay to 0 at the last training step.
  poly_power: float = 1.0
  weight_decay_rate: float = 0.01
  # Adam's bias correction of the moments (the original has none).
  bias_correction: bool = False
  beta_1: float = 0.9
  beta_2: float = 0.999
  epsilon: float = 1e-6
  # Global-norm clipping after the cross-replica sum; <= 0 disables.
  clip_norm: float = 1.0


DEFAULTS = OptimizerConfig()


def warmup_longer_than_run(config: OptimizerConfig,
                           train_steps: int) -> Optional[str]:
  """One line saying that the warm-up of `config` does not end within
  `train_steps` (the rate then never reaches `learning_rate`: a run
  shortened by an override while the recipe's warm-up stays), else None.

  Args:
    config: the experiment's `optimizer` section.
    train_steps: the run's `trainer.train_steps`.
  """
  end = config.start_warmup_step + config.num_warmup_steps
  if not config.num_warmup_steps or end <= train_steps:
    return None
  # The schedule's highest rate: the warm-up's value at the last update
  # (step train_steps - 1; WarmupPolynomialDecay).
  peak = max(0, train_steps - 1 - config.start_warmup_step) / (
      config.num_warmup_steps)
  start = (f" from optimizer.start_warmup_step={config.start_warmup_step}"
           if config.start_warmup_step else "")
  return (f"optimizer.num_warmup_steps={config.num_warmup_steps}{start} "
          f"outlasts trainer.train_steps={train_steps}: the learning rate "
          f"peaks at {peak:.1%} of optimizer.learning_rate="
          f"{config.learning_rate:g} (its last step); set "
          "optimizer.num_warmup_steps below trainer.train_steps (e.g. a "
          "tenth of it)")
