"""Dynamic masking: the data tool's masking rule, re-drawn in the input
pipeline, with the settings and ids the data was made with.

`DynamicMasker` re-masks an example every time it is read (so every epoch
differs), from its `token_boundary`, by calling data_prep's own masking
(`data_prep/pretraining_instances.py`: `units_of`, `mask_units`, the
functions that make the static masks) on a seed drawn in-graph per example:
one rule, not a copy kept equal by tests.

`settings_for_files` reads those settings from the files' data summaries
(the `config` the data was made with, and the `masking` ids of its
SentencePiece model; older summaries: the model file they name), so dynamic
masking cannot silently use another [MASK] id or n-gram setting.
"""

import collections
import random

import numpy as np
import tensorflow as tf

from data_prep import pretraining_instances as pi
from data_prep import pretraining_summary
from data_prep import summary_checks
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
      ids = pretraining_summary.masking_ids(tokenization.FullTokenizer(
          summary_checks.tokenizer_files(summary,
                                         summary_path)["spm_model_file"]))
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
    pretraining_summary.check_size(summary, summary_path, path)
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
  """Re-masks an example in the input pipeline from its token_boundary.

  The masks are drawn by data_prep's own function (`pi.mask_units`, through
  `tf.numpy_function`) on the units of `pi.units_of`, from a seed drawn
  in-graph per example: the static and dynamic masks are one rule.
  """

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
    self.replacement_ids = [i for i in range(vocab_size) if i not in bad]
    self.mask_id = mask_id
    self.cls_id = cls_id
    self.sep_id = sep_id
    self.max_predictions = max_predictions_per_seq
    self.config = pi.InstanceConfig(
        masked_lm_prob=masked_lm_prob, ngram=ngram,
        max_predictions_per_seq=max_predictions_per_seq,
        favor_shorter_ngram=favor_shorter_ngram, do_whole_word_mask=whole_word)
    self.seed = seed

  def mask(self, ids, input_mask, token_boundary, seed):
    """One example's masks (NumPy): (input_word_ids, masked_lm_positions,
    masked_lm_ids, masked_lm_weights), the last three padded."""
    special = (ids == self.cls_id) | (ids == self.sep_id) | (input_mask == 0)
    starts, ends = pi.units_of(special, token_boundary > 0,
                               self.config.do_whole_word_mask)
    tokens = ids.tolist()
    output, masked, _ = pi.mask_units(
        tokens, starts, ends, int(input_mask.sum()), self.config,
        self.mask_id, self.replacement_ids, random.Random(int(seed)),
        collections.Counter())
    masked.sort()
    pad = [0] * (self.max_predictions - len(masked))
    return (np.array(output, np.int32), np.array(masked + pad, np.int32),
            np.array([tokens[p] for p in masked] + pad, np.int32),
            np.array([1.0] * len(masked) + pad, np.float32))

  def __call__(self, ex):
    # Restore the unmasked tokens from the stored labels.
    w = ex["masked_lm_weights"] > 0                             # [P]
    pos = tf.boolean_mask(ex["masked_lm_positions"], w)          # [m]
    ids = tf.tensor_scatter_nd_update(
        ex["input_word_ids"], pos[:, None],
        tf.boolean_mask(ex["masked_lm_ids"], w))                 # [S]
    # In-graph, so a seeded pipeline repeats and every read differs.
    seed = tf.random.uniform([], 0, 2**62, tf.int64, seed=self.seed)
    out = dict(ex)
    keys = ("input_word_ids", "masked_lm_positions", "masked_lm_ids",
            "masked_lm_weights")
    masked = tf.numpy_function(
        self.mask, [ids, ex["input_mask"], ex["token_boundary"], seed],
        [tf.int32, tf.int32, tf.int32, tf.float32], stateful=False)
    for key, value in zip(keys, masked):
      out[key] = tf.ensure_shape(value, ex[key].shape)
    return out
