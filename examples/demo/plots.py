"""The demo's figures, titled by stage (not by a temporary run directory).

The pretraining curves are albert_tf.plot_metrics' figure with a stage title;
the fine-tuning figure puts the pretrained and the randomly initialised run
on the same axes, which plot_metrics (one run per figure) does not do.
"""

import os

from albert_tf import plot_metrics


def pretraining_curves(model_dir, output, title):
  """curves.png of the pretraining run (loss, accuracy, learning rate)."""
  return plot_metrics.plot(f"{model_dir}/metrics.jsonl", output, title=title)


def comparison_curves(runs, output, title):
  """One figure for several fine-tuning runs of the same task.

  `runs`: [(label, model_dir), ...]. Panels: dev accuracy (eval records) and
  training loss, one line per run.
  """
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, axes = plt.subplots(1, 2, figsize=(11, 4))
  for label, model_dir in runs:
    by_mode = plot_metrics.read_metrics(f"{model_dir}/metrics.jsonl")
    for ax, mode, key in ((axes[0], "eval", "accuracy"),
                          (axes[1], "train", "loss")):
      points = [(r["step"], r[key]) for r in by_mode.get(mode, [])
                if key in r]
      if points:
        steps, values = zip(*points)
        ax.plot(steps, values, marker="o" if mode == "eval" else None,
                markersize=3, label=label)
  for ax, name in ((axes[0], "dev accuracy"), (axes[1], "training loss")):
    ax.set_title(name)
    ax.set_xlabel("fine-tuning step")
    ax.grid(alpha=0.3)
    if ax.lines:
      ax.legend(fontsize=8)
  axes[0].axhline(0.5, color="gray", linestyle=":", linewidth=1)
  fig.suptitle(title)
  fig.tight_layout()
  tmp = output + ".tmp"
  fig.savefig(tmp, dpi=100, format="png")
  plt.close(fig)
  os.replace(tmp, output)
  return output
