"""SQuAD 2.0 beam post-processing against a NumPy/Python transcription of
the original's `accumulate_predictions_v2` + `write_predictions_v2`, on
random beams over overlapping windows."""

import collections

import numpy as np
import pytest

from albert_tf.data import squad_data
from albert_tf.tasks import metrics as finetune_metrics
from albert_tf.data import squad_answers
from albert_tf.tasks import squad_v2_postprocess as pp

SEQ = 24
WORDS = ("alpha", "beta", "gamma", "delta")  # few words: texts repeat


def _check_is_max_context(doc_spans, cur_span_index, position):
  """The original's rule, transcribed."""
  best_score, best_span_index = None, None
  for span_index, (start, length) in enumerate(doc_spans):
    end = start + length - 1
    if position < start or position > end:
      continue
    score = min(position - start, end - position) + 0.01 * length
    if best_score is None or score > best_score:
      best_score, best_span_index = score, span_index
  return cur_span_index == best_span_index


def _make_case(rng, num_examples=6, start_n_top=4, end_n_top=3):
  examples, windows_meta, tokens_meta, results, originals = [], [], [], {}, []
  uid = 0
  for ex_index in range(num_examples):
    words = [WORDS[i] for i in rng.randint(0, len(WORDS),
                                           size=rng.randint(5, 30))]
    context = " ".join(words)
    starts, ends, pos = [], [], 0
    for w in words:
      starts.append(pos)
      ends.append(pos + len(w))
      pos += len(w) + 1
    examples.append(squad_data.SquadExample(f"q{ex_index}", "?", context))
    tokens_meta.append({"starts": starts, "ends": ends})
    q_len = 1 + ex_index % 3
    doc_offset = q_len + 2
    spans = squad_data.doc_windows(len(words), SEQ - q_len - 3, 5)
    features = []
    for w, (w_start, w_len) in enumerate(spans):
      meta = {"example_index": ex_index, "doc_offset": doc_offset,
              "window_start": w_start, "window_length": w_len,
              "max_context": squad_data.max_context_flags(spans, w)}
      windows_meta.append(meta)
      start_idx = rng.choice(SEQ, start_n_top, replace=False)
      end_idx = np.concatenate([rng.choice(SEQ, end_n_top, replace=False)
                                for _ in range(start_n_top)])
      result = squad_answers.BeamResult(
          np.sort(rng.standard_normal(start_n_top))[::-1] - 1.0, start_idx,
          rng.standard_normal(start_n_top * end_n_top) - 1.0, end_idx,
          float(rng.standard_normal()))
      results[uid] = result
      # The original's InputFeatures for this window.
      features.append(collections.namedtuple("F", [
          "unique_id", "tokens", "tok_start_to_orig_index",
          "tok_end_to_orig_index", "token_is_max_context"])(
              uid, ["[CLS]"] + ["q"] * q_len + ["[SEP]"] +
              words[w_start:w_start + w_len] + ["[SEP]"],
              starts[w_start:w_start + w_len],
              [e - 1 for e in ends[w_start:w_start + w_len]],
              {doc_offset + i: _check_is_max_context(spans, w, w_start + i)
               for i in range(w_len)}))
      uid += 1
    originals.append((context, features))
  return examples, windows_meta, tokens_meta, results, originals


def reference(originals, results, n_best_size, max_answer_length,
              start_n_top, end_n_top, threshold):
  """accumulate_predictions_v2 + write_predictions_v2, one model."""
  predictions, scores_diff, nbest_all = {}, {}, {}
  for ex_index, (paragraph_text, features) in enumerate(originals):
    result_dict, score_null = {}, 1000000
    for feature in features:
      result = results[feature.unique_id]
      cur = {}
      score_null = min(score_null, result.cls_logits)
      doc_offset = feature.tokens.index("[SEP]") + 1
      for i in range(start_n_top):
        for j in range(end_n_top):
          start_log_prob = result.start_top_log_probs[i]
          start_index = result.start_top_index[i]
          j_index = i * end_n_top + j
          end_log_prob = result.end_top_log_probs[j_index]
          end_index = result.end_top_index[j_index]
          if start_index - doc_offset >= len(feature.tok_start_to_orig_index):
            continue
          if start_index - doc_offset < 0:
            continue
          if end_index - doc_offset >= len(feature.tok_end_to_orig_index):
            continue
          if not feature.token_is_max_context.get(start_index, False):
            continue
          if end_index < start_index:
            continue
          if end_index - start_index + 1 > max_answer_length:
            continue
          key = (start_index - doc_offset, end_index - doc_offset)
          cur.setdefault(key, []).append((start_log_prob, end_log_prob))
      result_dict[feature.unique_id] = cur
    prelim = []
    for feature_index, feature in enumerate(features):
      for (s, e), logprobs in result_dict[feature.unique_id].items():
        prelim.append((feature_index, s, e,
                       sum(x[0] for x in logprobs) / len(logprobs),
                       sum(x[1] for x in logprobs) / len(logprobs)))
    prelim = sorted(prelim, key=lambda x: x[3] + x[4], reverse=True)
    seen, nbest = {}, []
    for feature_index, s, e, slp, elp in prelim:
      if len(nbest) >= n_best_size:
        break
      feature = features[feature_index]
      text = paragraph_text[feature.tok_start_to_orig_index[s]:
                            feature.tok_end_to_orig_index[e] + 1].strip()
      if text in seen:
        continue
      seen[text] = True
      nbest.append((text, slp, elp))
    if not nbest:
      nbest.append(("", -1e6, -1e6))
    total = np.array([s + e for _, s, e in nbest])
    probs = np.exp(total - total.max())
    probs /= probs.sum()
    qid = f"q{ex_index}"
    nbest_all[qid] = [{"text": t, "probability": p, "start_log_prob": s,
                       "end_log_prob": e}
                      for (t, s, e), p in zip(nbest, probs)]
    scores_diff[qid] = score_null
    if threshold is None or score_null < threshold:
      predictions[qid] = nbest[0][0]
    else:
      predictions[qid] = ""
  return predictions, scores_diff, nbest_all


@pytest.mark.parametrize("seed,threshold", [(0, None), (1, 0.0), (2, 0.5), (4, -0.2)])
def test_postprocess_matches_the_original(seed, threshold):
  rng = np.random.RandomState(seed)
  examples, windows, tokens, results, originals = _make_case(rng)
  args = dict(n_best_size=3, max_answer_length=4)
  ours = squad_answers.postprocess_beam(
      examples, windows, tokens, results,
      null_score_diff_threshold=threshold, **args)
  ref = reference(originals, results, start_n_top=4, end_n_top=3,
                  threshold=threshold, **args)
  assert ours[0] == ref[0]
  assert ours[1] == pytest.approx(ref[1])
  for qid in ref[2]:
    assert [e["text"] for e in ours[2][qid]] == [e["text"] for e in ref[2][qid]]
    for key in ("probability", "start_log_prob", "end_log_prob"):
      np.testing.assert_allclose([e[key] for e in ours[2][qid]],
                                 [e[key] for e in ref[2][qid]], rtol=1e-6)
  # The case exercises every branch: answers, nulls, an empty n-best.
  assert any(ours[0].values())
  if threshold is not None:
    assert not all(ours[0].values())


def test_evaluate_tunes_the_threshold_like_evaluate_v2():
  rng = np.random.RandomState(3)
  examples, windows, tokens, results, originals = _make_case(rng, 12)
  untuned = reference(originals, results, 20, 30, 4, 3, None)
  # Gold: half the questions take the untuned answer, half have none.
  dataset = [{"paragraphs": [{"qas": [
      {"id": q, "answers": ([{"text": a}] if i % 2 and a else [])}
      for i, (q, a) in enumerate(sorted(untuned[0].items()))]}]}]
  metrics, predictions, null_scores, _ = pp.evaluate(
      dataset, examples, windows, tokens, results)
  best = finetune_metrics.squad_metrics(dataset, untuned[0], untuned[1])
  thresh = best["best_f1_thresh"]
  assert metrics["null_score_diff_threshold"] == thresh
  tuned = reference(originals, results, 20, 30, 4, 3, thresh)
  assert predictions == tuned[0] and null_scores == pytest.approx(tuned[1])
  assert metrics["f1"] == pytest.approx(finetune_metrics.squad_metrics(
      dataset, tuned[0], tuned[1], null_threshold=1.0)["f1"])
