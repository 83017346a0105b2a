"""The original SQuAD 2.0 head's evaluation (`squad_utils.evaluate_v2`);
its answers come from `data/squad_answers.postprocess_beam`.

Evaluation, as `evaluate_v2`: predict with no threshold, take the v2 script's
best-F1 threshold on the null scores, predict again with it and score that
(with the script's default na_prob_thresh 1.0 applied to the null scores, as
the original's printed numbers do).
"""

from albert_tf.data import squad_answers
from albert_tf.tasks import metrics as finetune_metrics

# The original's `evaluate_v2` scores with the eval script's default.
EVAL_NA_PROB_THRESH = 1.0


def evaluate(dataset, examples, windows_meta, tokens_meta, results,
             n_best_size=20, max_answer_length=30):
  """The original's `evaluate_v2`: (metrics, predictions, null_scores,
  nbest) at the dev-tuned threshold (`metrics["null_score_diff_threshold"]`).
  """
  args = (examples, windows_meta, tokens_meta, results, n_best_size,
          max_answer_length)
  predictions, null_scores, _ = squad_answers.postprocess_beam(*args)
  untuned = finetune_metrics.squad_metrics(dataset, predictions, null_scores)
  threshold = untuned["best_f1_thresh"]
  predictions, null_scores, nbest = squad_answers.postprocess_beam(
      *args, null_score_diff_threshold=threshold)
  metrics = finetune_metrics.squad_metrics(
      dataset, predictions, null_scores, null_threshold=EVAL_NA_PROB_THRESH)
  metrics["null_score_diff_threshold"] = threshold
  return metrics, predictions, null_scores, nbest
