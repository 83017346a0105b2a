"""Dynamic masking: the data tool's masking rule, re-drawn in the input
pipeline, with the settings and ids the data was made with.

`DynamicMasker` re-masks an example every time it is read (so every epoch
differs), from its `token_boundary`, with data_prep's rule
(`data_prep/pretraining_instances.py`: `word_units`, `select_spans`,
`create_masked_lm_predictions`): whole-word units (or single tokens without
`do_whole_word_mask`) that never include [CLS]/[SEP]/padding, n-gram spans
with p(n) ~ 1/n (`ngram_cumulative`, shared), shrunk to fit the budget
min(max_predictions, max(1, round(num_tokens * masked_lm_prob))), 80% [MASK]
/ 10% kept / 10% a random id that is not a control, unknown or unused piece.

`settings_for_files` reads those settings from the files' data summaries
(the `config` the data was made with, and the `masking` ids of its
SentencePiece model; older summaries: the model file they name), so dynamic
masking cannot silently use another [MASK] id or n-gram setting.
"""

import numpy as np
import tensorflow as tf

from data_prep import pretraining_instances as pi
from data_prep import pretraining_summary
from data_prep import tokenization

# InstanceConfig fields (recorded under the summary's "config") that masking
# uses, and the DynamicMasker argument each becomes.
_SETTINGS = {"masked_lm_prob": "masked_lm_prob", "ngram": "ngram",
             "favor_shorter_ngram": "favor_shorter_ngram",
             "do_whole_word_mask": "whole_word"}


def settings_from_summary(summary, summary_path):
  """DynamicMasker keyword arguments (not vocab_size, max_predictions, seed)
  of the data a summary describes; ValueError naming the summary when it
  cannot tell them."""
  config = summary.get("config", {})
  if config.get("do_permutation"):
    raise ValueError(f"{summary_path}: the data was made with "
                     "do_permutation, which dynamic masking does not do; set "
                     "data.dynamic_masking=false")
  missing = [k for k in _SETTINGS if k not in config]
  if missing:
    raise ValueError(f"{summary_path}: no {', '.join(missing)} in its config; "
                     "dynamic masking needs the settings the data was made "
                     "with (regenerate it with create_pretraining_data)")
  ids = summary.get("masking")
  if not ids:  # older summaries: the ids of the model they name
    spm = config.get("spm_model_file")
    try:
      ids = pretraining_summary.masking_ids(tokenization.FullTokenizer(spm))
    except (OSError, ValueError) as e:
      raise ValueError(f"{summary_path}: records no masking ids and its "
                       f"SentencePiece model {spm!r} cannot be read ({e}); "
                       "dynamic masking needs its [CLS]/[SEP]/[MASK] ids") from e
  out = {arg: config[key] for key, arg in _SETTINGS.items()}
  out.update(cls_id=ids["cls_id"], sep_id=ids["sep_id"],
             mask_id=ids["mask_id"], control_ids=tuple(ids["excluded_ids"]))
  return out


def settings_for_files(files, given=None):
  """The masking settings of `files` (all their summaries must agree).

  given: config values that must equal the data's (e.g. {"data.mask_id":
  4}; None entries are not checked). Raises ValueError naming the file or
  field.
  """
  settings, source = None, None
  for path in files:
    summary_path, summary = pretraining_summary.find(path)
    if summary is None:
      raise ValueError(f"{path}: dynamic masking needs its data summary "
                       "(the masking settings and ids it was made with); "
                       "regenerate it with create_pretraining_data")
    these = settings_from_summary(summary, summary_path)
    if settings is not None and these != settings:
      field = sorted(k for k in these if these[k] != settings[k])[0]
      raise ValueError(f"{summary_path}: {field} is {these[field]!r} but "
                       f"{source} has {settings[field]!r}: the files were "
                       "masked differently")
    settings, source = these, summary_path
  for name, value in (given or {}).items():
    key = name.split(".")[-1]
    if value is not None and value != settings[key]:
      raise ValueError(f"{name} is {value!r} but the data was made with "
                       f"{settings[key]!r} ({source}); omit it to use the "
                       "data's")
  return settings


class DynamicMasker:
  """Re-masks an example in-graph from its token_boundary (module doc)."""

  def __init__(self, vocab_size, mask_id, cls_id, sep_id, control_ids,
               max_predictions_per_seq, masked_lm_prob, ngram,
               favor_shorter_ngram=True, whole_word=True, seed=None):
    """The ids and settings the data was made with (`settings_for_files`):
    control_ids are the ids never used as a random replacement (with
    mask_id, cls_id and sep_id), as data_prep's `TokenInfo.replacement_ids`.
    """
    if None in (vocab_size, mask_id, cls_id, sep_id, control_ids):
      raise ValueError("dynamic masking needs vocab_size and the SentencePiece "
                       "model's mask_id, cls_id, sep_id and control_ids "
                       "(dynamic_masking.settings_for_files)")
    bad = set(int(i) for i in control_ids) | {mask_id, cls_id, sep_id}
    self.replacement_ids = tf.constant(
        [i for i in range(vocab_size) if i not in bad], tf.int32)
    self.mask_id = mask_id
    self.cls_id = cls_id
    self.sep_id = sep_id
    self.max_predictions = max_predictions_per_seq
    self.masked_lm_prob = masked_lm_prob
    self.ngram = ngram
    self.whole_word = whole_word
    # p(n) ~ 1/n: data_prep's own table (row m: the choice among 1..m).
    cums = pi.ngram_cumulative(ngram, favor_shorter_ngram)
    cum = np.ones([ngram + 1, ngram], np.float32)
    for m in range(1, ngram + 1):
      cum[m, :m] = cums[m]
    self.cum = tf.constant(cum)
    self.seed = seed

  def _seed(self, k):
    # Distinct op seeds: equal op seeds would give identical random streams.
    return None if self.seed is None else self.seed * 4 + k

  def __call__(self, ex):
    seq_len = tf.shape(ex["input_word_ids"])[0]
    # Restore the unmasked tokens from the stored labels.
    w = ex["masked_lm_weights"] > 0                             # [P]
    pos = tf.boolean_mask(ex["masked_lm_positions"], w)          # [m]
    ids = tf.tensor_scatter_nd_update(
        ex["input_word_ids"], pos[:, None],
        tf.boolean_mask(ex["masked_lm_ids"], w))                 # [S]
    special = ((ids == self.cls_id) | (ids == self.sep_id) |
               (ex["input_mask"] == 0))                          # [S]
    maskable = tf.logical_not(special)
    prev_special = tf.concat([[True], special[:-1]], 0)          # [S]
    word_start = ex["token_boundary"] > 0 if self.whole_word else True
    unit_start = maskable & (prev_special | word_start)          # [S]
    unit_of_pos = tf.cumsum(tf.cast(unit_start, tf.int32)) - 1   # [S]
    num_units = tf.reduce_sum(tf.cast(unit_start, tf.int32))
    unit_or_drop = tf.where(maskable, unit_of_pos, -1)          # [S]
    sizes = tf.math.unsorted_segment_sum(
        tf.ones_like(unit_or_drop), unit_or_drop, num_units)     # [U]
    prefix = tf.concat([[0], tf.cumsum(sizes)], 0)               # [U+1]
    num_tokens = tf.reduce_sum(ex["input_mask"])
    budget = tf.minimum(
        self.max_predictions,
        tf.maximum(1, tf.cast(tf.round(
            tf.cast(num_tokens, tf.float64) * self.masked_lm_prob), tf.int32)))
    order = tf.random.shuffle(tf.range(num_units), seed=self._seed(0))
    draws = tf.random.uniform([num_units], seed=self._seed(1))
    ns = tf.range(1, self.ngram + 1)                             # [N]
    unit_range = tf.range(num_units)

    def body(k, selected, covered):
      s = order[k]
      n_max = tf.minimum(self.ngram, num_units - s)
      n = 1 + tf.reduce_sum(tf.cast(draws[k] >= self.cum[n_max], tf.int32))
      span = tf.gather(prefix, tf.minimum(s + ns, num_units)) - prefix[s]
      fits = (ns <= n) & (span <= budget - selected)             # [N]
      n_fit = tf.reduce_max(tf.where(fits, ns, 0))
      in_span = (unit_range >= s) & (unit_range < s + n_fit)     # [U]
      ok = (n_fit > 0) & tf.logical_not(tf.reduce_any(covered & in_span))
      size = tf.where(ok, prefix[tf.minimum(s + n_fit, num_units)] - prefix[s],
                      0)
      covered = tf.where(ok, covered | in_span, covered)
      return k + 1, selected + size, covered

    _, _, covered = tf.while_loop(
        lambda k, selected, covered: (k < num_units) & (selected < budget),
        body, [0, 0, tf.zeros([num_units], tf.bool)])
    covered = tf.concat([covered, [False]], 0)                  # [U+1]
    chosen = tf.gather(covered, tf.where(maskable, unit_of_pos,
                                         num_units))             # [S]
    r = tf.random.uniform([seq_len], seed=self._seed(2))
    rand_ids = tf.gather(self.replacement_ids, tf.random.uniform(
        [seq_len], maxval=tf.shape(self.replacement_ids)[0], dtype=tf.int32,
        seed=self._seed(3)))
    new_ids = tf.where(r < 0.8, self.mask_id, tf.where(r < 0.9, ids, rand_ids))
    out = dict(ex)
    out["input_word_ids"] = tf.where(chosen, new_ids, ids)
    positions = tf.cast(tf.where(chosen)[:, 0], tf.int32)        # [m]
    count = tf.shape(positions)[0]
    pad = self.max_predictions - count
    out["masked_lm_positions"] = tf.pad(positions, [[0, pad]])
    out["masked_lm_ids"] = tf.pad(tf.gather(ids, positions), [[0, pad]])
    out["masked_lm_weights"] = tf.pad(tf.ones([count], tf.float32), [[0, pad]])
    for k in ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights"):
      out[k] = tf.ensure_shape(out[k], [self.max_predictions])
    return out
