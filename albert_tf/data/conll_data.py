"""CoNLL token-classification files: sentences, IOB2 labels, features,
prediction files.

A file holds one word a line, "word ... label" (columns split on
whitespace: the word first, the label last), a blank line between
sentences; "-DOCSTART-" lines are skipped. Labels are IOB2: "O",
"B-TYPE", "I-TYPE". A file read for prediction needs the words only.

Each word is tokenized alone (as the serving export does); its first piece
carries the word's label, its other pieces, [CLS], [SEP] and padding carry
IGNORE (no loss, no prediction). A sentence whose pieces do not fit the
sequence is refused naming the file, the sentence and its line: it is never
cut.
"""

import dataclasses
import itertools
import re
from typing import Dict, Iterator, List, Optional, Sequence

import tensorflow as tf

from albert_tf.data import finetune_features
from albert_toolkit import output_files

DOCSTART = "-DOCSTART-"
IGNORE = -1  # the label id of positions the loss and predictions skip
_IOB2 = re.compile(r"^(O|[BI]-\S+)$")


@dataclasses.dataclass
class Sentence:
  path: str
  line: int  # 1-based line of its first word
  lines: List[str]  # the file's lines, stripped
  words: List[str]
  labels: Optional[List[str]]  # None: read for prediction


def read_sentences(path: str, labelled: bool = True) -> List[Sentence]:
  """The sentences of CoNLL file `path`; with `labelled`, each line needs a
  label column holding an IOB2 label (else a one-line error naming the
  line)."""
  sentences, current = [], None
  with open(path, encoding="utf-8") as f:
    for number, raw in enumerate(f, 1):
      line = raw.strip()
      columns = line.split()
      if not columns or columns[0] == DOCSTART:
        current = None
        continue
      if current is None:
        current = Sentence(path, number, [], [], [] if labelled else None)
        sentences.append(current)
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
  """Piece ids of each word of each sentence (each word tokenized alone)."""
  flat = iter(tokenizer.encode_ids_batch(
      [w for s in sentences for w in s.words]))
  return [list(itertools.islice(flat, len(s.words))) for s in sentences]


def first_positions(pieces: Sequence[Sequence[int]]) -> List[int]:
  """The sequence position of each word's first piece ([CLS] is 0); -1 for
  a word without pieces (text the normalisation drops)."""
  positions = itertools.accumulate(map(len, pieces), initial=1)
  return [position if word else -1 for word, position in zip(pieces, positions)]


def convert_sentences(sentences: Sequence[Sentence], tokenizer,
                      label_ids: Dict[str, int], max_seq_length: int
                      ) -> Iterator[Dict[str, list]]:
  """Feature dicts: the three inputs, `label_ids` [seq] (IGNORE but at each
  word's first piece) and `example_index`."""
  for index, (s, pieces) in enumerate(zip(sentences,
                                          word_pieces(tokenizer, sentences))):
    used = sum(len(p) for p in pieces)
    if used + 2 > max_seq_length:
      raise ValueError(
          f"{s.path}:{s.line}: sentence {index + 1} has {used} pieces, more "
          f"than data.max_seq_length - 2 = {max_seq_length - 2}; raise "
          "data.max_seq_length or split the sentence (it is not cut)")
    ids, labels = [tokenizer.cls_id], [IGNORE]
    for i, word in enumerate(pieces):
      ids += word
      label = label_ids[s.labels[i]] if s.labels is not None else IGNORE
      labels += [label] + [IGNORE] * (len(word) - 1)
    ids.append(tokenizer.sep_id)
    labels.append(IGNORE)
    features = finetune_features.pad_features(ids, [0] * len(ids),
                                              max_seq_length,
                                              tokenizer.pad_id)
    features["label_ids"] = labels + [IGNORE] * (max_seq_length - len(labels))
    features["example_index"] = [index]
    yield features


def feature_spec(max_seq_length):
  return finetune_features.feature_spec(
      [max_seq_length], label_ids=([max_seq_length], tf.int64),
      example_index=([], tf.int64))


def write_predictions(path: str, sentences: Sequence[Sentence],
                      predicted: Sequence[Sequence[str]]) -> str:
  """A CoNLL file: each input line with its predicted label appended (the
  last column), a blank line between sentences."""
  lines = []
  for s, labels in zip(sentences, predicted):
    lines += [f"{line} {label}" for line, label in zip(s.lines, labels)]
    lines.append("")
  return output_files.atomic_write(path, "\n".join(lines))
