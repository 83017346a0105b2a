"""The original SQuAD 2.0 head's evaluation (`squad_utils.evaluate_v2`);
its answers come from `data/squad_answers.postprocess_beam`.

Evaluation, as `evaluate_v2`: predict with no threshold, take the v2 script's
best-F1 threshold on the null scores, predict again with it and score that
(with the script's default na_prob_thresh 1.0 applied to the null scores, as
the original's printed numbers do). `exact`, `f1` and the HasAns/NoAns
breakdown are the second pass's; `best_*` and their thresholds are the first
pass's search, so `best_f1_thresh` is the `null_score_diff_threshold` used
(the original printed the second pass's search, on already-thresholded
answers).
"""

from albert_tf.data import squad_answers
from albert_tf.tasks import metrics as finetune_metrics

# The original's `evaluate_v2` scores with the eval script's default.
EVAL_NA_PROB_THRESH = 1.0
_THRESHOLD_SEARCH_KEYS = ("best_exact", "best_exact_thresh", "best_f1",
                          "best_f1_thresh")


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
  # The second pass's best_* were searched on already-thresholded answers;
  # report the first pass's search, the one that chose the threshold.
  metrics.update({k: untuned[k] for k in _THRESHOLD_SEARCH_KEYS})
  return metrics, predictions, null_scores, nbest
