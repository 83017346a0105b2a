"""The JSON summary of a pretraining-data run (local tool and Beam pipeline).

The summary is written last: its presence means every output file is complete.
Its top-level `vocab_size`, `max_seq_length`, `max_predictions_per_seq`,
`feature_names`, `compression`, `records_per_file` and `bytes_per_file`
are what a trainer checks the files against; `config` (the instance
settings) and `masking` (the model's ids) are what dynamic masking re-masks
with (docs/data_prep.md lists every key).
"""

import dataclasses
import glob
import json
import os
import sys

from albert_toolkit import output_files

# Every skipped or repaired item, by reason (all are counted, none silent).
SKIP_KEYS = {
    "invalid_utf8_lines": "lines with invalid UTF-8 (bad bytes dropped)",
    "control_char_lines": "lines with control characters (removed)",
    "huge_lines_split": "lines over max_line_chars (split at whitespace)",
    "bare_cr_line_ends": "lines ended by a bare carriage return (read as "
                         "line ends)",
    "empty_documents": "empty documents (skipped)",
    "long_documents_split": "documents over max_lines_per_document (cut)",
    "lines_without_tokens": "lines with no tokens (skipped)",
    "long_lines_split_into_sentences": "lines longer than one instance, split "
                                       "at sentence ends",
    "long_sentences_cut": "sentences longer than one instance, cut at word "
                          "starts",
    "documents_empty_after_tokenization": "documents with no tokens (skipped)",
    "documents_too_short_for_pair": "documents of < 2 tokens (skipped)",
    "skipped_chunk_single_unit": "one-word chunks that cannot form a pair "
                                 "(skipped)",
    "one_sentence_chunk_split": "one-sentence chunks split inside the sentence "
                                "(repaired)",
    "nsp_no_other_document": "NSP negatives impossible, block has one document "
                             "(in-order pair used)",
    "tokens_truncated": "tokens dropped to fit max_seq_length",
    "instances_under_budget": "instances with fewer masks than the budget",
}


# Above this share of <unk> pieces the vocabulary does not fit the text
# (English text with an English model: well under 0.1%).
UNKNOWN_WARN_FRACTION = 0.02


def feature_names(v2_feature_names):
  ids, seg = (("input_word_ids", "input_type_ids") if v2_feature_names
              else ("input_ids", "segment_ids"))
  return [ids, "input_mask", seg, "token_boundary", "masked_lm_positions",
          "masked_lm_ids", "masked_lm_weights", "next_sentence_labels"]


def build(stats, input_files, records_per_file, run_cfg, vocab_size, elapsed,
          extra_config, bytes_per_file=None):
  """Summary dict. records_per_file: {final output path: record count};
  bytes_per_file: {final output path: size in bytes}."""
  cfg = run_cfg.instance
  keys = (f"{prefix}{what}_{n}gram" for prefix in ("", "permute_")
          for n in range(1, cfg.ngram + 1)
          for what in ("spans", "masked_tokens"))
  ngram = {key: stats[key] for key in keys if stats[key]}
  drawn = {str(n): stats[f"ngram_drawn_{n}"] for n in range(1, cfg.ngram + 1)}
  inst = stats["instances"]
  compression = extra_config.get("compression", "NONE")
  return {
      "config": {**dataclasses.asdict(cfg), "random_seed": run_cfg.random_seed,
                 "dupe_factor": run_cfg.dupe_factor,
                 "do_lower_case": run_cfg.do_lower_case,
                 # The vocabulary: its kind, file (absolute: a reader may
                 # run elsewhere) and content hash (the spm_ keys:
                 # SentencePiece only, as older summaries).
                 "vocab_kind": run_cfg.vocab_kind,
                 "vocab_file": absolute(run_cfg.vocab_file),
                 "vocab_sha256": output_files.file_sha256(run_cfg.vocab_path),
                 "spm_model_file": absolute(run_cfg.spm_model_file),
                 "spm_model_sha256": output_files.file_sha256(run_cfg.spm_model_file),
                 "vocab_size": vocab_size,
                 "v2_feature_names": run_cfg.v2_feature_names,
                 **extra_config},
      # The ids dynamic masking needs (the settings are under "config").
      "masking": _masking_ids_of(run_cfg),
      # What a reader checks against its config.
      "vocab_size": vocab_size,
      "max_seq_length": cfg.max_seq_length,
      "max_predictions_per_seq": cfg.max_predictions_per_seq,
      "sentence_pair_task": cfg.sentence_pair_task,
      "feature_names": feature_names(run_cfg.v2_feature_names),
      "compression": compression,
      "records_per_file": dict(records_per_file),
      "output_files": dict(records_per_file),  # same, older key
      # What tells a reader the summary still describes a file.
      "bytes_per_file": dict(bytes_per_file or {}),
      "input_files": list(input_files),
      "documents_read": stats["documents_read"],
      "documents_used": stats["documents_used"],
      "instances": inst,
      "tokens": stats["tokens"],
      "document_tokens": stats["document_tokens"],
      "masked_tokens": stats["masked_tokens"],
      # <unk> pieces among all tokens the text was encoded to.
      "unknown_tokens": stats["unknown_tokens"],
      "unknown_token_fraction": (
          round(stats["unknown_tokens"] / stats["encoded_tokens"], 6)
          if stats["encoded_tokens"] else 0.0),
      "mask_budget": stats["mask_budget"],
      "masked_by_ngram": ngram,
      "ngram_drawn_full_choice": drawn,
      "pair_labels": {"0": stats["label_0"], "1": stats["label_1"],
                      "fraction_1": stats["label_1"] / inst if inst else 0.0},
      "skipped_or_repaired": {k: stats[k] for k in SKIP_KEYS},
      "elapsed_seconds": round(elapsed, 3),
      "instances_per_second": round(inst / elapsed, 1) if elapsed else None,
  }


def absolute(path):
  """`path` absolute (URLs and "" as they are)."""
  return path if not path or "://" in path else os.path.abspath(path)


def masking_ids(tok):
  """The ids masking uses ([CLS], [SEP], [MASK], and those never drawn as a
  random replacement: control, unknown, unused pieces): the summary's
  "masking", read by the input pipeline's dynamic masking."""
  return {"cls_id": tok.cls_id, "sep_id": tok.sep_id, "mask_id": tok.mask_id,
          "excluded_ids": list(tok.control_ids)}


def _masking_ids_of(run_cfg):
  """masking_ids of the run's vocabulary, None if it is not a local file."""
  if not os.path.isfile(run_cfg.vocab_path):
    return None
  return masking_ids(run_cfg.tokenizer())


def vocab_sha256(summary):
  """The content hash of the vocabulary the data was made with (older
  summaries: their SentencePiece model's), or None."""
  return value(summary, "vocab_sha256") or value(summary, "spm_model_sha256")


def vocab_words(summary):
  """'SentencePiece model PATH' or 'WordPiece vocabulary PATH' of a
  summary."""
  if value(summary, "vocab_kind") == "wordpiece":
    return f"WordPiece vocabulary {value(summary, 'vocab_file')}"
  return f"SentencePiece model {value(summary, 'spm_model_file')}"


def value(summary, key):
  """`key` at the top level (newer summaries) or under `config`."""
  if key in summary:
    return summary[key]
  return summary.get("config", {}).get(key)


def records_per_file(summary):
  """file -> record count (`records_per_file`; older: `output_files`)."""
  return summary.get("records_per_file") or summary.get("output_files") or {}


def same_file(listed, path, summary_path):
  """Does the name a summary lists mean `path`?

  The summary lists each file as data_prep was given it (absolute, or
  relative to where it ran). The same path, or the same name with the
  summary in the file's directory: a data directory copied or moved with its
  summary is still described by it.
  """
  if os.path.abspath(listed) == os.path.abspath(path):
    return True
  return (os.path.dirname(os.path.abspath(summary_path)) ==
          os.path.dirname(os.path.abspath(path)) and
          os.path.basename(listed) == os.path.basename(path))


def _listed(table, summary_path, path):
  """`table`'s value for `path` ({file as listed: value}), or None."""
  for name, value in table.items():
    if same_file(name, path, summary_path):
      return value
  return None


def record_count(summary, summary_path, path):
  """The number of records the summary gives for `path`, or None."""
  count = _listed(records_per_file(summary), summary_path, path)
  return count.get("instances") if isinstance(count, dict) else count


def _load(candidate):
  with open(candidate, encoding="utf-8") as f:
    try:
      return json.load(f)
    except json.JSONDecodeError as e:
      raise ValueError(f"{candidate}: corrupt summary ({e})") from None


def _beside(path):
  """The summaries in `path`'s directory, `<path>.summary.json` first."""
  own = path + output_files.SUMMARY_SUFFIX
  found = sorted(glob.glob(os.path.join(
      glob.escape(os.path.dirname(path) or "."),
      "*" + output_files.SUMMARY_SUFFIX)))
  return [own] + [p for p in found if p != own]


def recorded_size(summary, summary_path, path):
  """The size in bytes the summary gives `path`, or None."""
  return _listed(summary.get("bytes_per_file") or {}, summary_path, path)


def find(path):
  """(summary path, summary dict) of the data_prep run that wrote `path`:
  `<path>.summary.json`, or a summary beside it listing `path` among its
  output files; of several, one that gives `path` its present size
  (`check_size` refuses one that does not). (None, None) when there is
  none; ValueError naming a corrupt summary."""
  other_size = None
  for candidate in _beside(path):
    if not os.path.isfile(candidate):
      continue
    summary = _load(candidate)
    own = candidate == path + output_files.SUMMARY_SUFFIX
    if not own and record_count(summary, candidate, path) is None:
      continue
    size = recorded_size(summary, candidate, path)
    if size is None or size == os.path.getsize(path):
      return candidate, summary
    other_size = other_size or (candidate, summary)
  return other_size or (None, None)


def check_size(summary, summary_path, path):
  """Raises ValueError (one line naming both files) when the summary gives
  `path` another size than it has: it describes the file as it was."""
  size = recorded_size(summary, summary_path, path)
  actual = os.path.getsize(path)
  if size is not None and size != actual:
    raise ValueError(
        f"{path} is {actual} bytes but {summary_path} describes a file of "
        f"{size} bytes: the file changed after that summary was written "
        "(rewritten or cut); regenerate the data (or remove the stale "
        "summary)")


def stale_summaries(outputs, keep, stream=None):
  """The summaries of earlier runs that describe `outputs`, each said on
  `stream` (stderr): a run that replaces the outputs removes them.

  Args:
    outputs: the run's output files.
    keep: the run's own summary (written, not removed).
    stream: where the notes go (default: sys.stderr).
  """
  found = _describing(outputs, keep)
  for stale, output, others in found:
    left = (f"; {others} more file(s) it lists are left without a summary"
            if others else "")
    (stream or sys.stderr).write(
        f"note: removing {stale}: it describes {output}, which this run "
        f"replaces{left}\n")
  return [stale for stale, _, _ in found]


def _describing(paths, keep):
  """[(summary, a file of `paths` it describes, how many other files it
  lists)] of the summaries beside `paths` (local files): the ones a run
  that rewrites `paths` leaves stale. `keep`: the run's own summary."""
  found = {}
  for path in paths:
    if "://" in path:
      continue
    for candidate in _beside(path):
      if (candidate in found or not os.path.isfile(candidate) or
          os.path.realpath(candidate) == os.path.realpath(keep)):
        continue
      try:
        summary = _load(candidate)
      except ValueError:  # corrupt: a reader refuses it, naming it
        summary = {}
      if (candidate == path + output_files.SUMMARY_SUFFIX or
          record_count(summary, candidate, path) is not None):
        listed = records_per_file(summary)
        others = sum(1 for name in listed if not any(
            same_file(name, p, candidate) for p in paths))
        found[candidate] = (path, others)
  return [(stale, path, others) for stale, (path, others) in found.items()]


def check_one_tokenizer(described, what):
  """Raises ValueError when the files were tokenized differently.

  `described`: [(file, summary path, summary)]. Two vocabularies (by
  content hash, of either kind) or lower-casing settings in one training
  input make the same id mean different pieces; the error names both files,
  both summaries and both vocabularies. Summaries older than the hash are
  not compared.
  """
  first = described[0] if described else None
  readers = (vocab_sha256, lambda s: value(s, "do_lower_case"))
  for path, summary_path, summary in described[1:]:
    for read in readers:
      mine, theirs = read(first[2]), read(summary)
      if mine is None or theirs is None or mine == theirs:
        continue
      raise ValueError(
          f"{what} mixes data tokenized differently: {first[0]} was made "
          f"with {_tokenizer_words(first[2])} ({first[1]}) but {path} with "
          f"{_tokenizer_words(summary)} ({summary_path}); the same token id "
          "means another piece in each: use one vocabulary's files (move "
          "the others away)")


def _tokenizer_words(summary):
  sha = vocab_sha256(summary) or "unknown"
  return (f"{vocab_words(summary)} (sha256 {sha[:12]}, "
          f"do_lower_case={value(summary, 'do_lower_case')})")


def report(summary, tool, stream=sys.stderr):
  """Human-readable summary on stderr."""
  stream.write(
      f"[{tool}] wrote {summary['instances']} instances from "
      f"{summary['documents_used']}/{summary['documents_read']} documents in "
      f"{summary['elapsed_seconds']:.1f}s "
      f"({summary['instances_per_second']} instances/s); masked "
      f"{summary['masked_tokens']} tokens; pair labels "
      f"{summary['pair_labels']}\n")
  for key, desc in SKIP_KEYS.items():
    n = summary["skipped_or_repaired"][key]
    if n:
      stream.write(f"  {n:>8} {desc}\n")
  warning = unknown_warning(summary)
  if warning:
    stream.write(f"{tool}: warning: {warning}\n")
  stream.write(f"  summary: {summary['summary_file']}\n")


def unknown_warning(summary):
  """The warning for a vocabulary that does not cover the text, or None."""
  fraction = summary.get("unknown_token_fraction") or 0.0
  if fraction <= UNKNOWN_WARN_FRACTION:
    return None
  unknown = "[UNK]" if value(summary, "vocab_kind") == "wordpiece" else "<unk>"
  return (f"{fraction:.1%} of the tokens ({summary['unknown_tokens']}) are "
          f"{unknown}: the {vocab_words(summary)} does not cover this text "
          "(another language or script?); train the vocabulary on this text")
