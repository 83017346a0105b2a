r"""Plots loss / accuracy curves from a run's metrics.jsonl to a PNG.

  python -m albert_tf.plot_metrics --model_dir=/tmp/albert_tiny \
      --output=/tmp/albert_tiny/curves.png
"""

import io
import json
import os
import sys
from typing import Dict, List, Optional

from absl import app
from absl import flags
from absl import logging

from albert_toolkit import command_line
from albert_toolkit import output_files
from albert_toolkit import text_files

from albert_tf.core import actions

PANELS = (("loss", ("loss", "masked_lm_loss", "sentence_order_loss")),
          # Pretraining runs log the first two, fine-tuning runs the others.
          ("accuracy", ("masked_lm_accuracy", "sentence_order_accuracy",
                        "accuracy", "f1")),
          ("learning rate", ("learning_rate",)))


def read_metrics(path: str) -> Dict[str, List[dict]]:
  """metrics.jsonl -> {mode: [records sorted by step]}; bad lines name the
  line number. A last line without its newline that does not parse was cut
  by an interrupted write (kill -9): skipped with a warning."""
  by_mode = {}
  text = text_files.read_utf8(path)
  # Universal newlines, as a file opened in text mode.
  for lineno, line in enumerate(io.StringIO(text, newline=None), 1):
    if not line.strip():
      continue
    try:
      record = json.loads(line)
    except json.JSONDecodeError as e:
      if not line.endswith("\n"):  # the last line, cut short
        logging.warning("%s:%d: skipped a line cut short by an interrupted "
                        "write (%d characters)", path, lineno, len(line))
        continue
      raise ValueError(f"{path}:{lineno}: not JSON ({e})") from e
    if not isinstance(record, dict) or not isinstance(record.get("step"),
                                                      int):
      raise ValueError(f"{path}:{lineno}: not a metrics record (a JSON "
                       "object with an integer step)")
    by_mode.setdefault(record.get("mode", "train"), []).append(record)
  for rows in by_mode.values():
    rows.sort(key=lambda r: r["step"])
  return by_mode


def plot(metrics_path: str, output: str, title: Optional[str] = None) -> str:
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  by_mode = read_metrics(metrics_path)
  if not by_mode:
    raise ValueError(f"{metrics_path}: no metrics")
  fig, axes = plt.subplots(1, len(PANELS), figsize=(5 * len(PANELS), 4))
  for ax, (name, keys) in zip(axes, PANELS):
    for mode, rows in sorted(by_mode.items()):
      for key in keys:
        points = [(r["step"], r[key]) for r in rows if key in r]
        if points:
          steps, values = zip(*points)
          ax.plot(steps, values, marker="o" if mode == "eval" else None,
                  markersize=3, label=f"{mode}/{key}")
    ax.set_title(name)
    ax.set_xlabel("step")
    ax.grid(alpha=0.3)
    if ax.lines:
      ax.legend(fontsize=7)
  fig.suptitle(title or os.path.dirname(os.path.abspath(metrics_path)))
  fig.tight_layout()
  image = io.BytesIO()
  fig.savefig(image, dpi=100, format=_image_format(output))
  plt.close(fig)
  return output_files.atomic_write(output, image.getvalue())


def _image_format(output: str) -> str:
  """The image format `output`'s extension names (PNG without one)."""
  ext = os.path.splitext(output)[1].lstrip(".").lower()
  return ext or "png"


def main(argv):
  del argv
  try:
    if not flags.FLAGS.metrics_file and not flags.FLAGS.model_dir:
      raise ValueError("--model_dir or --metrics_file is required")
    path = flags.FLAGS.metrics_file or os.path.join(flags.FLAGS.model_dir,
                                                    actions.METRICS_FILE)
    output = flags.FLAGS.output or os.path.join(os.path.dirname(path),
                                                "curves.png")
    output_files.check_not_inputs(
        [("--output", output)],
        [("--metrics_file" if flags.FLAGS.metrics_file else "--model_dir",
          path)])
    print(plot(path, output))
  except (ValueError, OSError) as e:  # one line, as every tool (cli_flags)
    print(f"ERROR: {e}", file=sys.stderr)
    sys.exit(1)


def define_flags():
  flags.DEFINE_string("model_dir", None, "Run directory with metrics.jsonl.")
  flags.DEFINE_string("metrics_file", None, "Path of metrics.jsonl (default: "
                      "<model_dir>/metrics.jsonl).")
  flags.DEFINE_string("output", None, "PNG path (default: curves.png next to "
                      "metrics.jsonl).")


def cli():
  """Console-script entry point (pyproject.toml)."""
  define_flags()
  # data_prep's parser (which albert_tf.cli_flags uses), without importing
  # TensorFlow into a plotting tool.
  app.run(main, flags_parser=command_line.parse_flags)


if __name__ == "__main__":
  cli()
