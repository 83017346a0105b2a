"""CoNLL token-classification files: sentences, IOB2 labels, features,
prediction files.

A file holds one word a line, "word ... label" (columns split at spaces
and tabs: the word first, the label last), a blank line between sentences;
"-DOCSTART-" lines are not sentences (each is kept with the sentence after
it, for the prediction file). LF, CRLF and a bare CR each end a line; a
line holding another control character or a line separator (which some
readers take for a line end, others for a space) is refused, naming it. Labels are IOB2: "O",
"B-TYPE", "I-TYPE". A file read for prediction needs the words only.

Each word is tokenized alone (as the serving export does); a word of which
normalisation leaves no piece (a soft hyphen, a lone combining accent, a
zero-width joiner) is the one piece `<unk>`, so every word has a position.
Its first piece carries the word's label; its other pieces, [CLS], [SEP] and
padding carry IGNORE (no loss, no prediction).

A sentence whose pieces do not fit the sequence is split into windows as
SQuAD splits a document (`windows`): windows of `max_seq_length - 2` pieces
whose starts are `window_stride` pieces apart, each a feature of its own.
Each word is labelled (in training) and predicted in one window only, the
one where its first piece has the most context (`word_positions`); the
serving module (serving/token_module.py) chooses the same way in-graph.
"""

import dataclasses
import itertools
import re
import unicodedata
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import tensorflow as tf

from albert_tf.data import finetune_features
from albert_toolkit import output_files

DOCSTART = "-DOCSTART-"
IGNORE = -1  # the label id of positions the loss and predictions skip
_IOB2 = re.compile(r"^(O|[BI]-\S+)$")
_LINE_END = re.compile(rb"\r\n|\r|\n")
_COLUMN_SEPARATOR = re.compile(r"[ \t]+")


@dataclasses.dataclass
class Sentence:
  path: str
  line: int  # 1-based line of its first word
  lines: List[str]  # the file's lines, stripped
  words: List[str]
  labels: Optional[List[str]]  # None: read for prediction
  # The -DOCSTART- lines between the previous sentence and this one.
  docstarts: List[str] = dataclasses.field(default_factory=list)


def _decoded(path: str, number: int, raw: bytes) -> str:
  """Line `number` of `path` as text; a one-line error if it is not UTF-8.
  A byte-order mark opening the file is dropped."""
  try:
    text = raw.decode("utf-8")
  except UnicodeDecodeError as e:
    raise ValueError(f"{path}:{number}: not UTF-8 (byte "
                     f"0x{raw[e.start]:02x} at column {e.start + 1}); CoNLL "
                     "files are read as UTF-8") from None
  return text[1:] if number == 1 and text.startswith("\ufeff") else text


def _columns(path: str, number: int, line: str) -> List[str]:
  """The columns of a line (stripped of spaces and tabs): split at spaces
  and tabs; a control character or a line/paragraph separator inside it is
  a one-line error."""
  odd = next((c for c in line if c != "\t" and
              unicodedata.category(c) in ("Cc", "Zl", "Zp")), None)
  if odd is not None:
    raise ValueError(f"{path}:{number}: U+{ord(odd):04X} inside the line "
                     "(a control character or line separator); columns are "
                     "split at spaces and tabs, lines end at LF, CRLF or CR")
  return _COLUMN_SEPARATOR.split(line) if line.strip() else []


def read_sentences(path: str, labelled: bool = True) -> List[Sentence]:
  """The sentences of CoNLL file `path`; with `labelled`, each line needs a
  label column holding an IOB2 label (else a one-line error naming the
  line)."""
  sentences, current, docstarts = [], None, []
  with open(path, "rb") as f:
    raws = _LINE_END.split(f.read())
  if raws[-1] == b"":
    raws.pop()  # the final line end
  for number, raw in enumerate(raws, 1):
    line = _decoded(path, number, raw).strip(" \t")
    columns = _columns(path, number, line)
    if not columns or columns[0] == DOCSTART:
      if columns:
        docstarts.append(line)
      current = None
      continue
    if current is None:
      current = Sentence(path, number, [], [], [] if labelled else None,
                         docstarts)
      sentences.append(current)
      docstarts = []
    if labelled:
      if len(columns) < 2:
        raise ValueError(f"{path}:{number}: {line!r} has no label column "
                         "(\"word ... label\")")
      if not _IOB2.match(columns[-1]):
        raise ValueError(f"{path}:{number}: label {columns[-1]!r} is not "
                         "IOB2 (O, B-TYPE or I-TYPE)")
      current.labels.append(columns[-1])
    current.lines.append(line)
    current.words.append(columns[0])
  return sentences


def label_list(sentences: Sequence[Sentence]) -> List[str]:
  """The labels of `sentences`: "O" first, then the others sorted."""
  found = {l for s in sentences for l in s.labels}
  return ["O"] + sorted(found - {"O"})


def check_labels(sentences: Sequence[Sentence], labels: Sequence[str],
                 source: str) -> None:
  """Raises naming the line of the first label not in `labels`."""
  known = set(labels)
  for s in sentences:
    for i, label in enumerate(s.labels or ()):
      if label not in known:
        raise ValueError(f"{s.path}:{s.line + i}: label {label!r} is not one "
                         f"of the run's labels ({source}: "
                         f"{', '.join(labels)})")


def word_pieces(tokenizer, sentences: Sequence[Sentence]
                ) -> List[List[List[int]]]:
  """Piece ids of each word of each sentence (each word tokenized alone; a
  word without pieces is `[unk_id]`)."""
  flat = iter([ids or [tokenizer.unk_id] for ids in
               tokenizer.encode_ids_batch([w for s in sentences
                                           for w in s.words])])
  return [list(itertools.islice(flat, len(s.words))) for s in sentences]


def window_stride(budget: int) -> int:
  """Pieces between the starts of a long sentence's windows of `budget`
  pieces: half a window, so each piece has a window with context on both
  sides (as SQuAD's doc_stride 128 of 384)."""
  return max(1, budget // 2)


def windows(num_pieces: int, budget: int) -> List[Tuple[int, int]]:
  """(start, length) of the windows of a sentence of `num_pieces` pieces:
  one if it fits `budget`, else starts `window_stride(budget)` apart until
  a window reaches the end."""
  stride, spans, start = window_stride(budget), [], 0
  while True:
    length = min(num_pieces - start, budget)
    spans.append((start, length))
    if start + length >= num_pieces:
      return spans
    start += stride


def context_score(piece: int, start: int, length: int, budget: int) -> int:
  """How well window (start, length) sees `piece` (-1: not in it): the
  pieces on its shorter side first, then the window's length (SQuAD's max
  context, in integers)."""
  if not start <= piece < start + length:
    return -1
  return min(piece - start, start + length - 1 - piece) * (budget + 1) + length


def word_positions(pieces: Sequence[Sequence[int]], budget: int
                   ) -> Tuple[List[Tuple[int, int]], List[Tuple[int, int]]]:
  """(windows, per word (window, position)): the windows of a sentence whose
  words have `pieces`, and for each word the window it is labelled and
  predicted in (the first with the best `context_score` of its first piece)
  and its first piece's position there ([CLS] is 0)."""
  firsts = list(itertools.accumulate(map(len, pieces), initial=0))[:-1]
  spans = windows(sum(map(len, pieces)), budget)
  out = []
  for first in firsts:
    scores = [context_score(first, s, n, budget) for s, n in spans]
    best = scores.index(max(scores))
    out.append((best, 1 + first - spans[best][0]))
  return spans, out


def convert_sentences(sentences: Sequence[Sentence], tokenizer,
                      label_ids: Dict[str, int], max_seq_length: int
                      ) -> Iterator[Dict[str, list]]:
  """Feature dicts, one per window of each sentence (`word_positions`): the
  three inputs, `label_ids` [seq] (IGNORE but at the first piece of each
  word the window owns) and `example_index` (the feature's number)."""
  budget, index = max_seq_length - 2, 0
  for s, pieces in zip(sentences, word_pieces(tokenizer, sentences)):
    flat = list(itertools.chain.from_iterable(pieces))
    spans, positions = word_positions(pieces, budget)
    for w, (start, length) in enumerate(spans):
      ids = [tokenizer.cls_id] + flat[start:start + length] + [tokenizer.sep_id]
      labels = [IGNORE] * max_seq_length
      if s.labels is not None:
        for label, (window, position) in zip(s.labels, positions):
          if window == w:
            labels[position] = label_ids[label]
      features = finetune_features.pad_features(ids, [0] * len(ids),
                                                max_seq_length,
                                                tokenizer.pad_id)
      features["label_ids"] = labels
      features["example_index"] = [index]
      index += 1
      yield features


def feature_spec(max_seq_length):
  return finetune_features.feature_spec(
      [max_seq_length], label_ids=([max_seq_length], tf.int64),
      example_index=([], tf.int64))


def write_predictions(path: str, sentences: Sequence[Sentence],
                      predicted: Sequence[Sequence[str]]) -> str:
  """A CoNLL file: each input line with its predicted label appended (the
  last column; "O" on a -DOCSTART- line, as conlleval reads it), a blank
  line between sentences and after a -DOCSTART- line."""
  lines = []
  for s, labels in zip(sentences, predicted):
    for docstart in s.docstarts:
      lines += [f"{docstart} O", ""]
    lines += [f"{line} {label}" for line, label in zip(s.lines, labels)]
    lines.append("")
  return output_files.atomic_write(path, "\n".join(lines))
