"""Unicode character classes as RE2 regex classes, computed from the
exporting Python's `unicodedata` (the data tools' Unicode tables)."""

import functools
import sys


@functools.lru_cache(maxsize=None)
def char_class(predicate):
  """RE2 character class (of ranges) of the code points where
  predicate(chr(cp)) holds, surrogates left out."""
  ranges = []
  for cp in range(sys.maxunicode + 1):
    if 0xD800 <= cp <= 0xDFFF or not predicate(chr(cp)):
      continue
    if ranges and ranges[-1][1] == cp - 1:
      ranges[-1][1] = cp
    else:
      ranges.append([cp, cp])
  return "[" + "".join(
      f"\\x{{{first:x}}}" if first == last else
      f"\\x{{{first:x}}}-\\x{{{last:x}}}" for first, last in ranges) + "]"
