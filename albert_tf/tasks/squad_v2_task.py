"""SquadTask's parts for `task.squad_head: xlnet` (the original SQuAD 2.0
recipe): model, loss sums, beam predictions and the original's evaluation.

`question_answering.SquadTask` delegates to these when `uses_xlnet_head`.
"""

from absl import logging
import tensorflow as tf

from albert_tf.checkpoints import squad_v2_checkpoint
from albert_tf.modeling.models import albert_squad_v2
from albert_tf.tasks import finetuning as finetune_lib
from albert_tf.tasks import squad_v2_postprocess

BEAM_OUTPUTS = ("start_top_log_probs", "start_top_index", "end_top_log_probs",
                "end_top_index", "cls_logits")


def validate_config(config):
  """task.squad_head and the fields it needs (one-line errors)."""
  t = config.task
  if t.squad_head not in ("simple", "xlnet"):
    raise ValueError(f"task.squad_head must be 'simple' or 'xlnet', got "
                     f"{t.squad_head!r}")
  if t.squad_head != "xlnet":
    return
  if not config.data.version_2_with_negative:
    raise ValueError("task.squad_head='xlnet' is the SQuAD 2.0 head; set "
                     "data.version_2_with_negative=true")
  if t.with_answerability:
    raise ValueError("task.with_answerability is the simple head's [CLS] "
                     "classifier; with task.squad_head='xlnet' set it false")
  if min(t.start_n_top, t.end_n_top) < 1:
    raise ValueError(f"task.start_n_top / end_n_top must be >= 1, got "
                     f"{t.start_n_top} / {t.end_n_top}")
  if max(t.start_n_top, t.end_n_top) > config.data.max_seq_length:
    raise ValueError(f"task.start_n_top / end_n_top exceed "
                     f"data.max_seq_length ({config.data.max_seq_length})")


def uses_xlnet_head(config):
  return config.task.squad_head == "xlnet"


def build_model(task):
  t = task.config.task
  return albert_squad_v2.AlbertSquadV2(
      task.encoder(), start_n_top=t.start_n_top, end_n_top=t.end_n_top,
      dropout_rate=t.classifier_dropout)


def initialize(task, model):
  """Warm start; a `run_squad_v2.py` checkpoint also brings its head (as
  the original's init_from_checkpoint would)."""
  tc = task.config.trainer
  if (tc.init_checkpoint and not tc.init_from_group0 and
      not task.config.task.init_saved_model and
      squad_v2_checkpoint.has_squad_v2_head(tc.init_checkpoint)):
    report = squad_v2_checkpoint.load_tf1_squad_v2(model, tc.init_checkpoint)
    logging.info("warm-started encoder and SQuAD 2.0 head from %s (%d "
                 "variables)", tc.init_checkpoint, len(report.mapped))
    return
  finetune_lib.initialize_model(model, task.config)


def restore_for_inference(trainer, path):
  """Our checkpoints, or the original's fine-tuned SQuAD 2.0 checkpoint
  (its global_step, when present, becomes the step)."""
  if not squad_v2_checkpoint.has_squad_v2_head(path):
    trainer.restore_model(path)
    return
  squad_v2_checkpoint.load_tf1_squad_v2(trainer.model, path)
  step = squad_v2_checkpoint.global_step(path)
  if step is not None:
    trainer.global_step.assign(step)


def compute_sums(task, model, features, training):
  """The original's loss as sums; accuracies of the start and of the end
  given the gold start."""
  inputs = task.model_inputs(features)  # pylint: disable=protected-access
  start, end = features["start_positions"], features["end_positions"]
  outputs = model.training_outputs(inputs, start, training=training)
  loss = albert_squad_v2.squad_v2_loss(outputs, start, end,
                                       features["is_impossible"])  # [batch]
  w = task.valid(features)

  def hits(log_probs, positions):
    best = tf.argmax(log_probs, -1, output_type=tf.int32)
    return tf.cast(tf.equal(best, tf.cast(positions, tf.int32)), tf.float32)

  return {"loss_sum": tf.reduce_sum(w * loss), "count": tf.reduce_sum(w),
          "start_correct": tf.reduce_sum(w * hits(outputs["start_log_probs"],
                                                  start)),
          "end_correct": tf.reduce_sum(w * hits(outputs["end_log_probs"],
                                                end))}


def beam_results(task, trainer):
  """(examples, eval metadata, unique id -> BeamResult) on predict_file."""
  def output_fn(model, features):
    out = model(task.model_inputs(features), training=False)  # pylint: disable=protected-access
    return {k: out[k] for k in BEAM_OUTPUTS}

  examples, meta, raw = task.raw_predictions(trainer, output_fn)
  results = {uid: squad_v2_postprocess.BeamResult(
      r["start_top_log_probs"], r["start_top_index"], r["end_top_log_probs"],
      r["end_top_index"], float(r["cls_logits"])) for uid, r in raw.items()}
  return examples, meta, results


def predict_answers(task, trainer, output_dir,
                    null_score_diff_threshold=None):
  """Answers at `null_score_diff_threshold` (default data's); writes the
  three JSON files. Returns (predictions, null_scores, files)."""
  if null_score_diff_threshold is None:
    null_score_diff_threshold = task.data.null_score_diff_threshold
  examples, meta, results = beam_results(task, trainer)
  predictions, null_scores, nbest = squad_v2_postprocess.postprocess(
      examples, meta["windows"], meta["tokens"], results,
      n_best_size=task.data.n_best_size,
      max_answer_length=task.data.max_answer_length,
      null_score_diff_threshold=null_score_diff_threshold)
  files = task.write_predictions(output_dir, predictions, nbest, null_scores)
  return predictions, null_scores, files


def evaluate(task, trainer, output_dir, dataset):
  """The original's evaluate_v2 (dev-tuned threshold); writes the files of
  the tuned predictions. Returns the metrics."""
  examples, meta, results = beam_results(task, trainer)
  metrics, predictions, null_scores, nbest = squad_v2_postprocess.evaluate(
      dataset, examples, meta["windows"], meta["tokens"], results,
      n_best_size=task.data.n_best_size,
      max_answer_length=task.data.max_answer_length)
  task.write_predictions(output_dir, predictions, nbest, null_scores)
  return metrics
