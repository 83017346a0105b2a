"""The two SQuAD span heads of `question_answering.SquadTask`, chosen by
`task.squad_head`: each builds its model and warm-starts it, gives
its loss sums, its predictions and evaluation, and its serving module.

  SimpleHead  start/end dense layers (+ an optional [CLS] answerability
              logit for SQuAD 2.0); the BERT-style recipe.
  XlnetHead   the original `run_squad_v2.py` head: the end conditioned on
              the start, a beam of start_n_top x end_n_top, an answer class;
              SQuAD 2.0 only; the original's evaluation (tuned threshold).
"""

from absl import logging
import tensorflow as tf

from albert_tf.data import squad_answers
from albert_tf.checkpoints import squad_v2_checkpoint
from albert_tf.modeling.models import albert_squad_v2
from albert_tf.modeling.models import downstream_models
from albert_tf.serving import squad_module
from albert_tf.serving import squad_windows
from albert_tf.tasks import finetuning as finetune_lib
from albert_tf.tasks import metrics as finetune_metrics
from albert_tf.tasks import squad_v2_postprocess

BEAM_OUTPUTS = ("start_top_log_probs", "start_top_index", "end_top_log_probs",
                "end_top_index", "cls_logits")


def _span_sums(task, features, loss, start_scores, end_scores):
  """The additive sums of a span head: loss_sum, count, and the hits of the
  best start and end position (`*_scores` [batch, seq]; `loss` [batch])."""
  w = task.valid(features)  # [batch]

  def correct(scores, positions):
    best = tf.argmax(scores, -1, output_type=tf.int32)  # [batch]
    hit = tf.equal(best, tf.cast(features[positions], tf.int32))
    return tf.reduce_sum(w * tf.cast(hit, tf.float32))
  return {"loss_sum": tf.reduce_sum(w * loss), "count": tf.reduce_sum(w),
          "start_correct": correct(start_scores, "start_positions"),
          "end_correct": correct(end_scores, "end_positions")}


class SimpleHead:
  """Start/end logits (+ answerability) over every window position."""

  name = "simple"

  @staticmethod
  def validate(config):
    del config

  @staticmethod
  def build_model(encoder, params, dropout_rate):
    return downstream_models.AlbertSpanLabeler(
        encoder, with_answerability=params.with_answerability,
        dropout_rate=dropout_rate)

  @staticmethod
  def initialize(task, model):
    finetune_lib.initialize_model(model, task.config)

  @staticmethod
  def compute_sums(task, model, features, training):
    outputs = model(task.model_inputs(features), training=training)
    start, end = features["start_positions"], features["end_positions"]
    loss = 0.5 * (
        tf.nn.sparse_softmax_cross_entropy_with_logits(
            start, outputs["start_logits"]) +
        tf.nn.sparse_softmax_cross_entropy_with_logits(
            end, outputs["end_logits"]))  # [batch]
    if "answerable_logits" in outputs:
      answerable = tf.cast(1 - features["is_impossible"], tf.float32)
      loss += tf.nn.sigmoid_cross_entropy_with_logits(
          answerable, outputs["answerable_logits"])
    return _span_sums(task, features, loss, outputs["start_logits"],
                      outputs["end_logits"])

  @staticmethod
  def predict_answers(task, trainer, output_dir):
    """Answers for data.predict_file; writes the JSON files. Returns
    (predictions, null_odds, files)."""
    examples, meta, raw = task.predict_outputs(
        trainer, task.eval_split,
        ("start_logits", "end_logits", "answerable_logits"))
    results = {
        uid: squad_answers.WindowResult(
            r["start_logits"], r["end_logits"],
            float(r["answerable_logits"]) if "answerable_logits" in r
            else None) for uid, r in raw.items()}
    d = task.data
    predictions, null_odds, nbest = squad_answers.postprocess_logits(
        examples, meta["windows"], meta["tokens"], results,
        n_best_size=d.n_best_size, max_answer_length=d.max_answer_length,
        version_2_with_negative=task.v2,
        null_score_diff_threshold=d.null_score_diff_threshold)
    files = task.write_predictions(output_dir, predictions, nbest, null_odds)
    return predictions, null_odds, files

  @classmethod
  def evaluate(cls, task, trainer, output_dir, dataset):
    predictions, null_odds, _ = cls.predict_answers(task, trainer,
                                                    output_dir)
    return finetune_metrics.squad_metrics(
        dataset, predictions, null_odds if task.v2 else None)

  @staticmethod
  def module_for(params):
    """Windows over long contexts when doc_stride > 0, else truncation."""
    if not params.doc_stride:
      return squad_module.SquadModule
    return squad_windows.SquadWindowServingModule


class XlnetHead:
  """The original SQuAD 2.0 head (see the module docstring)."""

  name = "xlnet"

  @staticmethod
  def validate(config):
    t = config.task
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

  @staticmethod
  def build_model(encoder, params, dropout_rate):
    return albert_squad_v2.AlbertSquadV2(
        encoder, start_n_top=params.start_n_top, end_n_top=params.end_n_top,
        dropout_rate=dropout_rate)

  @staticmethod
  def initialize(task, model):
    """Warm start; a `run_squad_v2.py` checkpoint also brings its head (as
    the original's init_from_checkpoint would)."""
    tc = task.config.trainer
    if (tc.init_checkpoint and not tc.init_from_group0 and
        not task.config.task.init_saved_model and
        squad_v2_checkpoint.has_squad_v2_head(tc.init_checkpoint)):
      report = squad_v2_checkpoint.load_tf1_squad_v2(model,
                                                     tc.init_checkpoint)
      logging.info("warm-started encoder and SQuAD 2.0 head from %s (%d "
                   "variables)", tc.init_checkpoint, len(report.mapped))
      return
    finetune_lib.initialize_model(model, task.config)

  @staticmethod
  def compute_sums(task, model, features, training):
    """The original's loss as sums; accuracies of the start and of the end
    given the gold start."""
    inputs = task.model_inputs(features)
    start, end = features["start_positions"], features["end_positions"]
    outputs = model.training_outputs(inputs, start, training=training)
    loss = albert_squad_v2.squad_v2_loss(outputs, start, end,
                                         features["is_impossible"])  # [batch]
    return _span_sums(task, features, loss, outputs["start_log_probs"],
                      outputs["end_log_probs"])

  @staticmethod
  def _beam_results(task, trainer):
    """(examples, windows, tokens, unique id -> BeamResult) on
    predict_file: the first arguments of the beam's postprocessing."""
    examples, meta, raw = task.predict_outputs(trainer, task.eval_split,
                                               BEAM_OUTPUTS)
    results = {uid: squad_answers.BeamResult(
        r["start_top_log_probs"], r["start_top_index"],
        r["end_top_log_probs"], r["end_top_index"], float(r["cls_logits"]))
               for uid, r in raw.items()}
    return examples, meta["windows"], meta["tokens"], results

  @classmethod
  def predict_answers(cls, task, trainer, output_dir):
    """Answers at data.null_score_diff_threshold; writes the three JSON
    files. Returns (predictions, null_scores, files)."""
    predictions, null_scores, nbest = squad_answers.postprocess_beam(
        *cls._beam_results(task, trainer), n_best_size=task.data.n_best_size,
        max_answer_length=task.data.max_answer_length,
        null_score_diff_threshold=task.data.null_score_diff_threshold)
    files = task.write_predictions(output_dir, predictions, nbest,
                                   null_scores)
    return predictions, null_scores, files

  @classmethod
  def evaluate(cls, task, trainer, output_dir, dataset):
    """The original's evaluate_v2 (dev-tuned threshold); writes the files
    of the tuned predictions. Returns the metrics."""
    metrics, predictions, null_scores, nbest = squad_v2_postprocess.evaluate(
        dataset, *cls._beam_results(task, trainer),
        n_best_size=task.data.n_best_size,
        max_answer_length=task.data.max_answer_length)
    task.write_predictions(output_dir, predictions, nbest, null_scores)
    return metrics

  @staticmethod
  def module_for(params):
    """Doc-stride windows always: the beam is per window."""
    if not params.doc_stride:
      raise ValueError("the SQuAD 2.0 (xlnet head) export serves doc-stride "
                       "windows; set doc_stride > 0")
    return squad_windows.SquadWindowServingModule


HEADS = {head.name: head for head in (SimpleHead, XlnetHead)}
