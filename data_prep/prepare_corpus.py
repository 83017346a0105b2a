r"""Raw text -> pretraining input format (one sentence per line, blank line
between documents).

Reads one or many plain or .gz files with wrapped lines and paragraphs, joins
wrapped lines into paragraphs, splits paragraphs into sentences, and writes
documents separated by blank lines. What ends a document is chosen with
--doc_boundary:
  blank_line  a blank line ends a document (each paragraph is a document);
  regex       a line matching --doc_regex starts a new document (e.g. chapter
              headings); blank lines only end paragraphs;
  file        each input file is one document.
The end of an input file ends a document with every choice: no document
spans two files.

Example (the novel used by the tests, split at its chapter headings):
  python -m data_prep.prepare_corpus --input_file=botchan.txt \
    --output_file=botchan_sentences.txt --doc_boundary=regex \
    --doc_regex='^CHAPTER [IVXLC]+\.?$'
"""

import collections
import dataclasses
import re
import sys
from typing import Optional

from absl import app
from absl import flags

from albert_toolkit import command_line
from data_prep import flag_config
from albert_toolkit import output_files
from data_prep import text_reader
from albert_toolkit import tfrecord_io

FLAGS = flags.FLAGS

DOC_BOUNDARIES = ("blank_line", "regex", "file")


@dataclasses.dataclass(frozen=True)
class CorpusConfig:
  """How raw text is cut into documents, paragraphs and sentences (the
  defaults are the command-line flags' defaults)."""
  # What ends a document: a blank line, a line matching doc_regex, or the end
  # of each input file.
  doc_boundary: str = "blank_line"
  # With doc_boundary="regex": a line matching it starts a new document.
  doc_regex: str = r"^(CHAPTER|Chapter)\b"
  # With doc_boundary="regex": drop the matching heading lines.
  drop_boundary_lines: bool = False
  # Every input line is a whole paragraph (unwrapped text).
  lines_are_paragraphs: bool = False
  # Documents with fewer sentences are dropped (counted).
  min_sentences_per_doc: int = 1
  # A longer paragraph is flushed early at a sentence boundary (it holds at
  # most this plus one input line).
  max_paragraph_chars: int = 1000000
  # Longer input lines, and longer written sentences, are split at
  # whitespace.
  max_line_chars: int = 100000

  def __post_init__(self):
    if self.doc_boundary not in DOC_BOUNDARIES:
      raise ValueError(f"doc_boundary: unknown {self.doc_boundary!r}; "
                       f"expected one of {DOC_BOUNDARIES}")
    for name, minimum in (("min_sentences_per_doc", 0),
                          ("max_paragraph_chars", 1), ("max_line_chars", 1)):
      if getattr(self, name) < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got "
                         f"{getattr(self, name)}")
    if self.doc_boundary == "regex":
      try:
        re.compile(self.doc_regex)
      except re.error as e:
        raise ValueError(f"doc_regex {self.doc_regex!r}: {e}") from None


def define_flags():
  """Defines the command-line flags (only when run as a program); their
  defaults are CorpusConfig's."""
  d = CorpusConfig
  flags.DEFINE_string("input_file", None,
                      "Raw text input: comma-separated files or globs (plain or .gz).")
  flags.DEFINE_string("output_file", None,
                      "Output text file (gzip-compressed if it ends in .gz).")
  flags.DEFINE_enum("doc_boundary", d.doc_boundary, DOC_BOUNDARIES,
                    "What ends a document: a blank line, a line matching "
                    "--doc_regex, or the end of each input file (the end of "
                    "a file ends a document with every choice).")
  flags.DEFINE_string("doc_regex", d.doc_regex,
                      "With --doc_boundary=regex: a line matching this Python "
                      "regex starts a new document.")
  flags.DEFINE_bool("drop_boundary_lines", d.drop_boundary_lines,
                    "With --doc_boundary=regex: drop the matching heading lines "
                    "instead of keeping them as the document's first sentence.")
  flags.DEFINE_bool("lines_are_paragraphs", d.lines_are_paragraphs,
                    "Treat every input line as a whole paragraph (unwrapped text, "
                    "e.g. Wikipedia dumps) instead of joining wrapped lines up to "
                    "a blank line.")
  flags.DEFINE_integer("min_sentences_per_doc", d.min_sentences_per_doc,
                       "Documents with fewer sentences are dropped (counted).",
                       lower_bound=0)
  flags.DEFINE_integer("max_paragraph_chars", d.max_paragraph_chars,
                       "A paragraph longer than this is flushed early at a "
                       "sentence boundary (bounds memory on text without blank "
                       "lines).", lower_bound=1)
  flags.DEFINE_integer("max_line_chars", d.max_line_chars,
                       "Input lines and written sentences longer than this "
                       "are split at whitespace (counted).",
                       lower_bound=1)


# Abbreviations after which a period does not end a sentence.
_ABBREVIATIONS = frozenset("""
mr mrs ms dr prof st jr sr rev gen col capt lt sgt mt vs etc e.g i.e cf no nos
vol fig pp ed eds inc ltd co corp dept univ approx jan feb mar apr jun jul aug
sep sept oct nov dec u.s u.k a.m p.m
""".split())

_END = re.compile(r"""[.!?]+["'\u2019\u201d)\]]*(?=\s+["'\u2018\u201c(\[]*[A-Z0-9])""")


def split_sentences(text):
  """Splits a paragraph into sentences.

  A sentence ends at ., ! or ? (plus closing quotes/brackets) followed by
  whitespace and an upper-case letter, digit or opening quote, unless the
  period follows a known abbreviation (Mr., e.g.) or a single-letter initial.
  """
  text = " ".join(text.split())
  if not text:
    return []
  sentences, start = [], 0
  for m in _END.finditer(text):
    end = m.end()
    if text[m.start()] == ".":
      word = text[start:m.start()].rsplit(" ", 1)[-1].lstrip("\"'(\u201c[")
      if word.lower() in _ABBREVIATIONS or (len(word) == 1 and word.isalpha()):
        continue
    sentence = text[start:end].strip()
    if sentence:
      sentences.append(sentence)
    start = end
  rest = text[start:].strip()
  if rest:
    sentences.append(rest)
  return sentences


def cut_long(sentence, max_chars, stats):
  """`sentence` in pieces of at most `max_chars` characters, cut at the last
  space before the limit (else at it); each cut sentence counted as
  long_sentences_split. Text without sentence ends would otherwise be
  written as one line of a whole paragraph (a million characters)."""
  if len(sentence) <= max_chars:
    return [sentence]
  stats["long_sentences_split"] += 1
  pieces = []
  while len(sentence) > max_chars:
    # A piece may be max_chars long: a space right after it also cuts there.
    cut = min(text_reader.whitespace_cut(sentence, max_chars + 1), max_chars)
    pieces.append(sentence[:cut])
    sentence = sentence[cut:].lstrip(" ")
  return pieces + [sentence] if sentence else pieces


class CorpusWriter:
  """Writes documents; counts documents and sentences."""

  def __init__(self, path, min_sentences, stats, compress, name=None):
    """name: the output the user asked for (in errors), if `path` is a
    temporary file."""
    # Write errors (a full disk) name the output; discard() closes quietly.
    self._out = tfrecord_io.RecordWriter(path, "GZIP" if compress else "NONE",
                                         name=name)
    self._min = min_sentences
    self._stats = stats
    self._doc = []
    self._first = True
    self._opened_doc = False  # part of the current document already written

  def add_sentences(self, sentences):
    self._doc.extend(sentences)
    # Long documents are written as they grow; only the head is buffered.
    if len(self._doc) >= max(self._min, 1) and len(self._doc) > 1000:
      self._write(self._doc[:-1])
      self._doc = self._doc[-1:]

  def _write(self, sentences):
    if not self._opened_doc:
      if not self._first:
        self._out.write(b"\n")
      self._first = False
      self._opened_doc = True
      self._stats["documents"] += 1
    self._out.write("".join(s + "\n" for s in sentences).encode("utf-8"))
    self._stats["sentences"] += len(sentences)

  def end_document(self, count_empty=True):
    """Ends the current document.

    Args:
      count_empty: an empty document is counted as empty_documents (false
        where the document was not opened by a boundary line, e.g. the start
        or the end of a file).
    """
    if self._doc and (self._opened_doc or len(self._doc) >= self._min):
      self._write(self._doc)
    elif self._doc:
      self._stats["short_documents_dropped"] += 1
      self._stats["sentences_dropped"] += len(self._doc)
    elif not self._opened_doc and count_empty:
      self._stats["empty_documents"] += 1
    self._doc = []
    self._opened_doc = False

  def close(self):
    self.end_document(count_empty=False)
    self._out.close()

  def discard(self):
    """Closes without writing or raising (the file is being deleted)."""
    self._out.discard()


def prepare(input_files, output_file, config: Optional[CorpusConfig] = None):
  """Converts `input_files` into `output_file`; returns a stats Counter.

  `config`: how (default: CorpusConfig(), a blank line ends a document).
  """
  c = config or CorpusConfig()
  output_files.check_disjoint(input_files, [output_file])
  stats = collections.Counter()
  pattern = re.compile(c.doc_regex) if c.doc_boundary == "regex" else None
  # Written under a temporary name, renamed when complete (output_files.py).
  staged = output_files.StagedOutputs([output_file])
  writer = CorpusWriter(staged.temp_paths[0], c.min_sentences_per_doc, stats,
                        compress=output_file.endswith(".gz"), name=output_file)
  para = []
  para_chars = 0

  def flush_paragraph(final=True):
    nonlocal para, para_chars
    if not para:
      return
    sentences = [piece for sentence in split_sentences(" ".join(para))
                 for piece in cut_long(sentence, c.max_line_chars, stats)]
    para, para_chars = [], 0
    if not final and len(sentences) > 1:
      para, para_chars = [sentences[-1]], len(sentences[-1])
      sentences = sentences[:-1]
    stats["paragraphs"] += final
    writer.add_sentences(sentences)

  try:
    for path in input_files:
      stats["files"] += 1
      # Only the stretch between two boundary lines of one file is an empty
      # document; the text before a file's first one is not.
      after_boundary_line = False
      for line in text_reader.iter_clean_lines(path, stats,
                                               c.max_line_chars):
        stripped = line.strip()
        if pattern is not None and stripped and pattern.search(stripped):
          flush_paragraph()
          writer.end_document(count_empty=after_boundary_line)
          after_boundary_line = True
          stats["boundary_lines"] += 1
          if not c.drop_boundary_lines:
            writer.add_sentences([" ".join(stripped.split())])
          continue
        if not stripped:
          flush_paragraph()
          if c.doc_boundary == "blank_line":
            writer.end_document(count_empty=after_boundary_line)
            after_boundary_line = True
          continue
        para.append(stripped)
        para_chars += len(stripped)
        if c.lines_are_paragraphs:
          flush_paragraph()
        elif para_chars > c.max_paragraph_chars:
          flush_paragraph(final=False)
      flush_paragraph()
      # A document never spans two files (sentence pairs would join books).
      # An empty file is an empty document only where files are documents.
      writer.end_document(count_empty=c.doc_boundary == "file")
    flush_paragraph()
    writer.close()
    if not stats["sentences"]:
      raise ValueError(_no_sentences(input_files, stats, c))
  except BaseException:
    writer.discard()  # close() would write (and fail) again
    staged.abort()
    raise
  staged.commit()
  return stats


def _no_sentences(input_files, stats, config):
  """The error for a run that wrote no sentence (nothing is written)."""
  shown = ", ".join(input_files[:3]) + (
      f" and {len(input_files) - 3} more" if len(input_files) > 3 else "")
  if stats["short_documents_dropped"]:
    return (f"no sentences: every document of the input ({shown}) had "
            "fewer than min_sentences_per_doc="
            f"{config.min_sentences_per_doc} sentences "
            f"({stats['short_documents_dropped']} dropped); nothing written")
  return f"no sentences: the input ({shown}) holds no text; nothing written"


def main(argv):
  del argv
  command_line.exit_on_sigterm()
  if not FLAGS.input_file or not FLAGS.output_file:
    raise app.UsageError("--input_file and --output_file are required")
  with command_line.exit_on_error("prepare_corpus"):
    config = flag_config.from_flags(CorpusConfig, FLAGS)
    files = tfrecord_io.expand_input_files(FLAGS.input_file)
    stats = prepare(files, FLAGS.output_file, config)
  sys.stderr.write("[prepare_corpus] " + ", ".join(
      f"{k}={v}" for k, v in sorted(stats.items())) + "\n")


def cli():
  """Console-script entry point (pyproject.toml)."""
  define_flags()
  app.run(main, flags_parser=command_line.parse_flags)


if __name__ == "__main__":
  cli()
