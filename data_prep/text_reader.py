"""Streaming, repairing text reader shared by the data tools.

Reads plain or gzip files line by line with bounded memory and repairs what it
can, counting every repair in a `collections.Counter` so nothing is lost
silently:
  invalid_utf8_lines:   lines with invalid UTF-8 (bad bytes dropped)
  control_char_lines:   lines with control/format characters (removed; a
                        zero-width space made a space: tokenization.py); a
                        byte-order mark starting a file is dropped, not
                        counted
  huge_lines_split:     lines longer than max_line_chars (split at whitespace)
  bare_cr_line_ends:    lines ended by a carriage return alone (a line end,
                        as LF and CRLF)
An unreadable file raises `OSError` naming the path; a file that is not
text (a TFRecord, UTF-16/32 text, or over 5% control bytes in its first
8 KB: any binary file) raises `ValueError` naming it, before a line is read: a glob
that also matches a previous run's TFRecords must not be tokenized as text.
"""

import gzip
import io
import re
import struct
import sys

from albert_toolkit import tfrecord_io
from data_prep import tokenization

_SNIFF_BYTES = 8192
# C0 controls except tab, newline, vertical tab, form feed, carriage
# return; and DEL.
_BINARY_BYTES = tuple(b for b in range(32) if b not in b"\t\n\v\f\r") + (
    127,)
# What errors="surrogateescape" makes of bytes that are not UTF-8.
_INVALID_UTF8 = re.compile("[\udc80-\udcff]")
_BOM = "\ufeff"


def whitespace_cut(text, limit):
  """Where to cut `text` so the first part is shorter than `limit`: at its
  last space before `limit`, else at `limit` (a word that long is cut)."""
  cut = text.rfind(" ", 0, limit)
  return cut if cut > 0 else limit


def open_binary(path, opener=None):
  """Opens `path` for binary reading, transparently gunzipping.

  `opener(path)` -> binary file object (default: the builtin open; the Beam
  pipeline passes one that reads any Beam filesystem, e.g. gs://).
  Returns (file object, raw file object whose tell() gives bytes consumed).
  """
  try:
    raw = opener(path) if opener else open(path, "rb")
  except OSError as e:
    raise OSError(f"Cannot read input file {path}: {e.strerror or e}") from e
  head = raw.read(2)
  raw.seek(0)
  if head == tfrecord_io.GZIP_MAGIC or path.endswith(".gz"):
    return gzip.GzipFile(fileobj=raw, mode="rb"), raw
  return raw, raw


def not_text_reason(head):
  """Why bytes starting a file are not text, or None if they may be.

  A TFRecord starts with an 8-byte length and its masked CRC32C. Otherwise
  more than 5% control bytes other than whitespace (NUL, ...; random or
  compressed bytes have about 11%, UTF-16/32 text up to 75%) mean a binary
  file. Text with a few stray control bytes or in another 8-bit encoding is
  read (the bytes are removed or repaired, and counted).
  """
  if len(head) >= 12:
    (crc,) = struct.unpack_from("<I", head, 8)
    if crc == tfrecord_io.masked_crc32c(head[:8]):
      return "a TFRecord file"
  wide = wide_encoding(head)
  if wide:
    return f"{wide} text"
  control = sum(head.count(bytes([b])) for b in _BINARY_BYTES)
  if head and control > 0.05 * len(head):
    return (f"a binary file ({control} of its first {len(head)} bytes are "
            "control bytes)")
  return None


def wide_encoding(head):
  """"UTF-16" / "UTF-32" when bytes starting a file are text in one of them
  (a byte-order mark, or a NUL in the same 1 or 3 of every 2 or 4 bytes, as
  in ASCII text so encoded), else None."""
  if head.startswith((b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")):
    return "UTF-32"
  if head.startswith((b"\xff\xfe", b"\xfe\xff")):
    return "UTF-16"
  n = len(head) - len(head) % 4
  if n < 8:
    return None
  nul = [head[k:n:4].count(0) > 0.9 * (n // 4) for k in range(4)]
  if sum(nul) == 3:
    return "UTF-32"
  if nul in ([False, True, False, True], [True, False, True, False]):
    return "UTF-16"
  return None


def check_is_text(path, f):
  """Raises ValueError naming `path` if its first bytes are not text; `f`
  (seekable, at its start) is left at its start."""
  try:
    head = f.read(_SNIFF_BYTES)
    f.seek(0)
  except Exception as e:  # OSError, EOFError, zlib.error (corrupt gzip)
    raise OSError(f"Error reading input file {path}: {e}") from e
  reason = not_text_reason(head)
  if reason and reason.startswith("UTF-"):
    raise ValueError(f"input file {path} is {reason}, not UTF-8; convert it "
                     f"first (iconv -f {reason.split()[0]} -t UTF-8)")
  if reason:
    raise ValueError(f"input file {path} is {reason}, not text; leave it out "
                     "of --input_file")


def check_text_file(path, opener=None):
  """Raises ValueError naming `path` if it is not text (see check_is_text):
  for launchers, before workers read it."""
  f, _ = open_binary(path, opener)
  with f:
    check_is_text(path, f)


def iter_clean_lines(path, stats, max_line_chars=100_000, progress=None,
                     opener=None):
  """Yields the lines of `path` (plain or .gz text) as clean `str` without
  line terminators, repairs counted in `stats`; longer lines than
  `max_line_chars` are split at whitespace. `progress(bytes read since its
  last call)`, if given, is called as the file is read (for the ETA)."""
  for _, text in iter_numbered_lines(path, stats, max_line_chars, progress,
                                     opener):
    yield text


def iter_numbered_lines(path, stats, max_line_chars=100_000, progress=None,
                        opener=None):
  """iter_clean_lines as (line number, text) pairs: the 1-based number of
  the input line the text comes from (the pieces of a split line share
  it), for messages naming file:line."""
  if max_line_chars < 1:  # 0 would loop forever on the first long line
    raise ValueError(f"max_line_chars must be >= 1, got {max_line_chars}")
  f, raw = open_binary(path, opener)
  try:
    check_is_text(path, f)
  except BaseException:
    f.close()
    raise
  limit = max(16, max_line_chars)  # characters per read
  # Universal line ends: LF, CRLF and a bare CR (old Mac files; mixed
  # files) each end a line, so blank lines still end documents. newline=""
  # keeps the ends, to count bare CRs. Invalid UTF-8 bytes come through as
  # lone surrogates, removed and counted per line.
  text_f = io.TextIOWrapper(f, encoding="utf-8", errors="surrogateescape",
                            newline="")
  pending = ""     # text of a huge line not yet emitted
  in_huge = False
  after_cr = False  # the last read ended at a CR: a LF next belongs to it
  last_pos = 0
  lineno = 0
  invalid_lines, first_invalid = 0, 0
  at_start = True
  try:
    with text_f:
      while True:
        try:
          chunk = text_f.readline(limit)
        except (OSError, EOFError, gzip.BadGzipFile) as e:
          raise OSError(f"Error reading input file {path} after line "
                        f"{lineno}: {e}") from e
        if progress is not None:
          pos = raw.tell()
          progress(pos - last_pos)
          last_pos = pos
        if not chunk:
          break
        if at_start:  # a byte-order mark says "UTF-8", no text: dropped
          chunk = chunk[1:] if chunk.startswith(_BOM) else chunk
          at_start = False
        if after_cr and chunk.startswith("\n"):
          stats["bare_cr_line_ends"] -= 1  # a CRLF cut by the read limit
          chunk = chunk[1:]
          if not chunk:
            after_cr = False
            continue
        after_cr = chunk.endswith("\r")
        if after_cr:
          stats["bare_cr_line_ends"] += 1
        complete = chunk.endswith(("\n", "\r"))
        text = chunk.rstrip("\r\n") if complete else chunk
        if _INVALID_UTF8.search(text):
          text = _INVALID_UTF8.sub("", text)
          stats["invalid_utf8_lines"] += 1
          invalid_lines += 1
          first_invalid = first_invalid or lineno + 1
        # Control characters go and U+200B is a space, as the tokenizer
        # does: words the tokenizer and serving split stay apart.
        text, changed = tokenization.clean_invisible(text)
        if changed:
          stats["control_char_lines"] += 1
        text = pending + text
        if not complete and not in_huge and len(text) >= max_line_chars:
          in_huge = True
          stats["huge_lines_split"] += 1
        # Cut at the last space before max_line_chars (else at it); a line
        # read so far is cut once it reaches max_line_chars, once per read.
        while len(text) > max_line_chars - (not complete):
          cut = whitespace_cut(text, max_line_chars)
          yield lineno + 1, text[:cut]
          text = text[cut:]
          if not complete:
            break
        if not complete:  # the rest of a huge line, or a last line
          pending = text
          continue
        pending = ""
        lineno += 1
        in_huge = False
        yield lineno, text
      if pending:
        yield lineno + 1, pending
    if invalid_lines:  # most likely an 8-bit encoding (bytes dropped)
      sys.stderr.write(
          f"warning: input file {path} is not UTF-8: {invalid_lines} line(s) "
          f"had bytes that are not (first: line {first_invalid}; Latin-1 or "
          "Windows-1252 text?), dropped; convert it first (iconv -f LATIN1 "
          "-t UTF-8)\n")
  except OSError:
    raise
  except Exception as e:  # zlib.error and friends from corrupt gzip streams
    raise OSError(f"Error reading input file {path}: {e}") from e


def iter_documents(paths, stats, max_line_chars=100_000,
                   max_lines_per_document=20_000, progress=None,
                   opener=None):
  """Yields documents (lists of non-empty stripped lines) from `paths`.

  A blank line or the end of a file ends a document. Empty documents are
  skipped (counted as empty_documents); documents longer than
  `max_lines_per_document` are cut into pieces (long_documents_split) so one
  huge document cannot exhaust memory.
  """
  for path in paths:
    doc = []
    for line in iter_clean_lines(path, stats, max_line_chars, progress,
                                 opener):
      line = line.strip()
      if not line:
        if doc:
          yield doc
          doc = []
        else:
          stats["empty_documents"] += 1
        continue
      doc.append(line)
      if len(doc) >= max_lines_per_document:
        stats["long_documents_split"] += 1
        yield doc
        doc = []
    if doc:
      yield doc
