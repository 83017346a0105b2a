"""Pretraining instances from tokenized documents: SOP/NSP pairs + n-gram masking.

Pure functions over token ids, shared by `create_pretraining_data.py` and the
tests. The algorithm is the original release's (see docs/data_prep.md), with
its quirks fixed on purpose:
  * every random choice comes from the `random.Random` passed in (the original
    drew the n-gram length from NumPy's unseeded global RNG);
  * the random replacement token is never a control/unknown/unused piece;
  * a one-sentence chunk is split at a random word-unit boundary inside the
    sentence (or skipped if it is a single unit) instead of silently taking its
    second segment from another document (an NSP example inside SOP data);
  * whole-word units never continue across [CLS]/[SEP];
  * with `do_permutation`, permuted spans share the `max_predictions_per_seq`
    budget (the original could exceed it and write unreadable examples).
"""

import bisect
import dataclasses
import functools
import hashlib
import itertools
import random

import numpy as np

SENTENCE_PAIR_TASKS = ("sop", "nsp", "none")
MASK_BUDGET_RULE = ("every instance masks max(1, round(tokens * "
                    "masked_lm_prob)) tokens, at most max_predictions_per_seq")


@dataclasses.dataclass(frozen=True)
class InstanceConfig:
  max_seq_length: int = 512
  short_seq_prob: float = 0.1
  sentence_pair_task: str = "sop"
  masked_lm_prob: float = 0.15
  max_predictions_per_seq: int = 20
  ngram: int = 3
  favor_shorter_ngram: bool = True
  do_whole_word_mask: bool = True
  do_permutation: bool = False

  def __post_init__(self):
    if self.sentence_pair_task not in SENTENCE_PAIR_TASKS:
      raise ValueError(f"sentence_pair_task must be one of {SENTENCE_PAIR_TASKS}")
    min_len = 5 if self.sentence_pair_task != "none" else 3
    if self.max_seq_length < min_len:
      raise ValueError(f"max_seq_length must be >= {min_len}")
    if self.ngram < 1:
      raise ValueError("ngram must be >= 1")
    if not 0 < self.masked_lm_prob <= 1:
      raise ValueError(f"masked_lm_prob must be > 0 and <= 1, got "
                       f"{self.masked_lm_prob}: {MASK_BUDGET_RULE}")


@dataclasses.dataclass
class TokenInfo:
  """What masking needs to know about the vocabulary (picklable, no spm)."""
  cls_id: int
  sep_id: int
  mask_id: int
  is_start: list          # bool per id
  replacement_ids: list   # ids allowed as random replacement

  def __post_init__(self):
    self.is_start_np = np.asarray(self.is_start, dtype=bool)

  @classmethod
  def from_tokenizer(cls, tok):
    return cls(cls_id=tok.cls_id, sep_id=tok.sep_id, mask_id=tok.mask_id,
               is_start=[bool(x) for x in tok.is_start],
               replacement_ids=[int(x) for x in tok.replacement_ids])


@dataclasses.dataclass
class Instance:
  tokens: list             # ids incl. [CLS]/[SEP], masked
  segment_ids: list
  token_boundary: list
  masked_lm_positions: list
  masked_lm_ids: list      # original ids at the masked positions
  label: int               # SOP: 1 = swapped; NSP: 1 = random next


def document_rng(seed, doc_index, dupe_pass):
  """RNG for one (document, dupe pass): independent of how work is split."""
  digest = hashlib.sha256(f"{seed}/{doc_index}/{dupe_pass}".encode()).digest()
  return random.Random(int.from_bytes(digest[:16], "little"))


@functools.lru_cache(maxsize=None)
def ngram_cumulative(ngram, favor_shorter_ngram):
  """cum[m] = cumulative p(n) for n in 1..m, p(n) ~ 1/n (or reversed)."""
  weights = [1.0 / n for n in range(1, ngram + 1)]
  if not favor_shorter_ngram:
    weights = weights[::-1]
  cums = [None]
  for m in range(1, ngram + 1):
    total = sum(weights[:m])
    cum = list(itertools.accumulate(w / total for w in weights[:m]))
    cum[-1] = 1.0
    cums.append(cum)
  return cums


def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
  """Drops tokens from the longer side, front or back at random (in place)."""
  # Same random decisions as deleting one token at a time, applied at once.
  lengths = [len(tokens_a), len(tokens_b)]
  cuts = [[0, 0], [0, 0]]  # [front, back] of a and of b
  while sum(lengths) > max_num_tokens:
    side = 0 if lengths[0] > lengths[1] else 1
    cuts[side][0 if rng.random() < 0.5 else 1] += 1
    lengths[side] -= 1
  for toks, (front, back) in zip((tokens_a, tokens_b), cuts):
    if back:
      del toks[len(toks) - back:]
    if front:
      del toks[:front]


def _split_one_sentence(sentence, info, rng):
  """Splits one sentence at a random unit start; None if it is one unit."""
  is_start = info.is_start
  cuts = [j for j in range(1, len(sentence)) if is_start[sentence[j]]]
  if not cuts:
    return None
  j = cuts[rng.randrange(len(cuts))]
  return [sentence[:j], sentence[j:]]


def create_instances_from_document(document, doc_index, block, cfg, info, rng,
                                   stats):
  """Instances from `document` (non-empty sentences, each a list of ids),
  which is `block[doc_index]`: NSP negatives come from the block's other
  documents. `rng`: this (document, dupe pass)'s; `stats` is updated."""
  pair = cfg.sentence_pair_task != "none"
  max_num_tokens = cfg.max_seq_length - (3 if pair else 2)
  target_seq_length = max_num_tokens
  if rng.random() < cfg.short_seq_prob:
    target_seq_length = rng.randint(2, max_num_tokens)

  instances = []
  chunk, length, i = [], 0, 0
  while i < len(document):
    chunk.append(document[i])
    length += len(document[i])
    if i == len(document) - 1 or length >= target_seq_length:
      inst = None
      if not pair:
        tokens_a = [t for s in chunk for t in s]
        stats["tokens_truncated"] += max(0, len(tokens_a) - max_num_tokens)
        truncate_seq_pair(tokens_a, [], max_num_tokens, rng)
        inst = _make_instance(tokens_a, None, 0, cfg, info, rng, stats)
      else:
        was_split = len(chunk) == 1
        if was_split:
          split = _split_one_sentence(chunk[0], info, rng)
          if split is None:
            stats["skipped_chunk_single_unit"] += 1
          else:
            stats["one_sentence_chunk_split"] += 1
          chunk = split
        if chunk is not None:
          inst, i = _pair_instance(chunk, was_split, i, doc_index, block,
                                   target_seq_length, max_num_tokens, cfg,
                                   info, rng, stats)
      if inst is not None:
        instances.append(inst)
      chunk, length = [], 0
    i += 1
  return instances


def _pair_instance(chunk, was_split, i, doc_index, block, target_seq_length,
                   max_num_tokens, cfg, info, rng, stats):
  a_end = rng.randint(1, len(chunk) - 1)
  tokens_a = [t for s in chunk[:a_end] for t in s]
  label = 0
  if cfg.sentence_pair_task == "nsp" and rng.random() < 0.5:
    if len(block) < 2:
      stats["nsp_no_other_document"] += 1
      tokens_b = [t for s in chunk[a_end:] for t in s]
    else:
      label = 1
      other = rng.randrange(len(block) - 1)
      other += other >= doc_index  # any document but this one
      random_document = block[other]
      target_b_length = target_seq_length - len(tokens_a)
      tokens_b = []
      for sent in random_document[rng.randrange(len(random_document)):]:
        tokens_b.extend(sent)
        if len(tokens_b) >= target_b_length:
          break
      # Sentences of this chunk not used go back to the document (the second
      # half of a split sentence is dropped: putting it back would repeat it).
      if not was_split:
        i -= len(chunk) - a_end
  else:
    tokens_b = [t for s in chunk[a_end:] for t in s]
    if cfg.sentence_pair_task == "sop" and rng.random() < 0.5:
      label = 1
      tokens_a, tokens_b = tokens_b, tokens_a
  stats["tokens_truncated"] += max(
      0, len(tokens_a) + len(tokens_b) - max_num_tokens)
  truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
  return _make_instance(tokens_a, tokens_b, label, cfg, info, rng, stats), i


def _make_instance(tokens_a, tokens_b, label, cfg, info, rng, stats):
  tokens = [info.cls_id] + tokens_a + [info.sep_id]
  segment_ids = [0] * len(tokens)
  if tokens_b is not None:
    tokens += tokens_b + [info.sep_id]
    segment_ids += [1] * (len(tokens_b) + 1)
  out, positions, labels, boundary = create_masked_lm_predictions(
      tokens, cfg, info, rng, stats)
  stats["instances"] += 1
  stats["tokens"] += len(tokens)
  stats[f"label_{label}"] += 1
  return Instance(tokens=out, segment_ids=segment_ids, token_boundary=boundary,
                  masked_lm_positions=positions, masked_lm_ids=labels,
                  label=label)


def word_units(tokens, info, whole_word):
  """Returns (unit_starts, unit_ends, token_boundary) as lists.

  A unit is a contiguous position range [start, end) that never contains
  [CLS]/[SEP]. token_boundary is 1 at specials and at word-unit starts (the
  original's definition, kept for readers of the files).
  """
  t = np.asarray(tokens)                                   # [n]
  special = (t == info.cls_id) | (t == info.sep_id)        # [n]
  boundary = special | info.is_start_np[t]                 # [n]
  starts, ends = units_of(special, boundary, whole_word)
  return starts, ends, boundary.view(np.int8).tolist()


def units_of(special, boundary, whole_word):
  """(unit_starts, unit_ends) from bool arrays [n]: positions never masked
  (special) and word starts (boundary: the files' token_boundary)."""
  prev_special = np.concatenate(([True], special[:-1]))    # [n]
  unit_start = ~special & (prev_special | boundary | (not whole_word))
  starts = np.flatnonzero(unit_start)                      # [units]
  breaks = np.append(np.flatnonzero(unit_start | special), len(special))
  ends = breaks[np.searchsorted(breaks, starts, side="right")]
  return starts.tolist(), ends.tolist()


def select_spans(starts, ends, budget, covered, cfg, rng, stats, stat_prefix):
  """The original's greedy n-gram span selection, in unit space.

  Candidates are n-grams starting at each unit, visited in random order (a
  lazy Fisher-Yates shuffle: only the visited prefix is drawn); n is drawn
  with p(n) ~ 1/n, shrunk while the span exceeds the remaining budget, and the
  candidate is skipped if it still does not fit or overlaps a chosen span.
  Returns at most `budget` positions of the units `starts`/`ends` (from
  `word_units`), in selection order; `covered` (a bool per unit) is updated.
  """
  num_units = len(starts)
  # prefix[k] = number of positions in units [0, k)
  prefix = [0, *itertools.accumulate(b - a for a, b in zip(starts, ends))]
  cums = ngram_cumulative(cfg.ngram, cfg.favor_shorter_ngram)
  order = list(range(num_units))
  selected = []
  ngram = cfg.ngram
  random_ = rng.random
  drawn = [0] * (ngram + 1)
  spans = [0] * (ngram + 1)
  span_tokens = [0] * (ngram + 1)
  for k in range(num_units):
    if len(selected) >= budget:
      break
    j = k + int(random_() * (num_units - k))
    order[k], order[j] = order[j], order[k]
    s = order[k]
    n_max = min(ngram, num_units - s)
    n = bisect.bisect_right(cums[n_max], random_()) + 1  # cum[-1] is 1.0
    if n_max == ngram:
      drawn[n] += 1
    # Shrink n until the span fits in the remaining budget.
    room = budget - len(selected)
    size = prefix[s + n] - prefix[s]
    while n > 1 and size > room:
      n -= 1
      size = prefix[s + n] - prefix[s]
    if size > room or any(covered[s:s + n]):
      continue
    for u in range(s, s + n):
      covered[u] = True
      selected.extend(range(starts[u], ends[u]))
    spans[n] += 1
    span_tokens[n] += size
  for n in range(1, ngram + 1):
    if drawn[n]:
      stats[f"{stat_prefix}ngram_drawn_{n}"] += drawn[n]
    if spans[n]:
      stats[f"{stat_prefix}spans_{n}gram"] += spans[n]
      stats[f"{stat_prefix}masked_tokens_{n}gram"] += span_tokens[n]
  return selected


def mask_units(tokens, starts, ends, num_tokens, cfg, mask_id,
               replacement_ids, rng, stats):
  """The masking rule of static and dynamic masks (dynamic_masking.py):
  spans of units within min(max_predictions_per_seq, max(1, round(num_tokens
  * masked_lm_prob))) tokens, each 80% `mask_id`, 10% kept, 10% a random
  `replacement_ids`. Returns (output, masked positions, covered units)."""
  output = list(tokens)
  budget = min(cfg.max_predictions_per_seq,
               max(1, int(round(num_tokens * cfg.masked_lm_prob))))
  covered = [False] * len(starts)
  masked = select_spans(starts, ends, budget, covered, cfg, rng, stats, "")
  stats["masked_tokens"] += len(masked)
  stats["mask_budget"] += budget
  if len(masked) < budget:
    stats["instances_under_budget"] += 1
  num_repl = len(replacement_ids)
  random_ = rng.random
  for pos in masked:
    if random_() < 0.8:
      output[pos] = mask_id
    elif random_() < 0.5:
      pass  # keep the original token
    else:
      output[pos] = replacement_ids[int(random_() * num_repl)]
  return output, masked, covered


def create_masked_lm_predictions(tokens, cfg, info, rng, stats):
  """Original n-gram whole-word masking with the 80/10/10 rule.

  Returns (output_tokens, positions, label_ids, token_boundary).
  """
  starts, ends, boundary = word_units(tokens, info, cfg.do_whole_word_mask)
  output, masked, covered = mask_units(tokens, starts, ends, len(tokens), cfg,
                                       info.mask_id, info.replacement_ids,
                                       rng, stats)
  labels = {pos: tokens[pos] for pos in masked}
  if cfg.do_permutation:
    room = cfg.max_predictions_per_seq - len(masked)
    permuted = select_spans(starts, ends, room, covered, cfg, rng, stats,
                            "permute_")
    permuted.sort()
    targets = list(permuted)
    rng.shuffle(targets)
    for src, tgt in zip(permuted, targets):
      output[src] = tokens[tgt]
      labels[src] = tokens[src]
  positions = sorted(labels)
  return output, positions, [labels[p] for p in positions], boundary


def instance_features(inst, max_seq_length, max_predictions_per_seq,
                      v2_feature_names=False):
  """Instance -> ((int feature name, values)...), ((float name, values)...)."""
  n = len(inst.tokens)
  if n > max_seq_length:
    raise ValueError(f"instance of length {n} > max_seq_length")
  pad = [0] * (max_seq_length - n)
  mpad = [0] * (max_predictions_per_seq - len(inst.masked_lm_positions))
  ids_name = "input_word_ids" if v2_feature_names else "input_ids"
  seg_name = "input_type_ids" if v2_feature_names else "segment_ids"
  ints = (
      (ids_name, inst.tokens + pad),
      ("input_mask", [1] * n + pad),
      (seg_name, inst.segment_ids + pad),
      ("token_boundary", inst.token_boundary + pad),
      ("masked_lm_positions", inst.masked_lm_positions + mpad),
      ("masked_lm_ids", inst.masked_lm_ids + mpad),
      ("next_sentence_labels", [inst.label]),
  )
  floats = (("masked_lm_weights",
             [1.0] * len(inst.masked_lm_positions) + [0.0] * len(mpad)),)
  return ints, floats
