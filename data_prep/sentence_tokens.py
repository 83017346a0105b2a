"""Lines of a document -> sentences of token ids that fit in one instance.

A sentence longer than one instance can hold would lose all but its first
max_num_tokens tokens to truncation (a 5 MB line without newlines kept 3,264 of
1,658,318 tokens). Such a line is split at sentence ends (prepare_corpus's
splitter), and a sentence still too long is cut at word-unit starts, so every
token is used. Both repairs are counted.
"""

from data_prep import prepare_corpus


def cut_at_units(ids, max_tokens, is_start):
  """Cuts `ids` into pieces of <= max_tokens, each piece ending before a
  word-unit start where possible (a single over-long unit is cut anywhere)."""
  pieces, start = [], 0
  while len(ids) - start > max_tokens:
    end = start + max_tokens
    cut = end
    while cut > start + 1 and not is_start[ids[cut]]:
      cut -= 1
    if cut == start + 1 and not is_start[ids[cut]]:
      cut = end
    pieces.append(ids[start:cut])
    start = cut
  pieces.append(ids[start:])
  return pieces


def encode_lines(tok, lines, max_tokens, stats):
  """Token id lists of `lines` (str) by `tok` (FullTokenizer): empty lines
  dropped, lines of more than `max_tokens` (what one instance holds) split.
  Counted in `stats`: lines_without_tokens, long_lines_split_into_sentences,
  long_sentences_cut, encoded_tokens and unknown_tokens (<unk> pieces: text
  the vocabulary does not cover)."""
  out = []
  for line, ids in zip(lines, tok.encode_ids_batch(lines)):
    stats["encoded_tokens"] += len(ids)
    stats["unknown_tokens"] += ids.count(tok.unk_id)
    if not ids:
      stats["lines_without_tokens"] += 1
      continue
    if len(ids) <= max_tokens:
      out.append(ids)
      continue
    sentences = prepare_corpus.split_sentences(line)
    if len(sentences) > 1:
      stats["long_lines_split_into_sentences"] += 1
      parts = [s for s in tok.encode_ids_batch(sentences) if s]
    else:
      parts = [ids]
    for part in parts:
      if len(part) > max_tokens:
        stats["long_sentences_cut"] += 1
        out.extend(cut_at_units(part, max_tokens, tok.is_start))
      else:
        out.append(part)
  return out
