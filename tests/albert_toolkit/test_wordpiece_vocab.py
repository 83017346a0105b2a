"""The one WordPiece vocabulary rule (the original release's load_vocab):
what each kind of line reads as, and what is refused, by file and line."""

import pytest

from albert_toolkit import wordpiece_vocab

SPECIALS = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n"


def test_a_line_is_its_first_field_and_a_blank_line_is_a_space():
  # Lines end at "\n" only (not at "\r", "\x0c" or U+2028, which split
  # fields); no final newline needed; token n - 1 is on line n.
  text = SPECIALS + "piece\t-3.25\n\ncrlf\r\ntwo words\n  lead\na\u2028b\n"
  text += "c\x0cd\nx\ry\nlast"
  tokens = wordpiece_vocab.parse_tokens(text.encode("utf-8"), "v.txt")
  assert tokens == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "piece",
                    " ", "crlf", "two", "lead", "a", "c", "x", "last"]


def test_refusals_name_the_file_and_line(tmp_path):
  cases = [
      (b"[PAD]\n\xff\n", r"v\.txt:2: not UTF-8 text"),
      ((SPECIALS + "a\nb\na 1.0\n").encode(), r"v\.txt:8: token 'a' repeats "
       r"line 6; every id must be one token"),
      ((SPECIALS + "\n\u3000\n").encode(), r"v\.txt:7: token ' ' repeats "
       "line 6"),  # a second blank line
      (b"", r"v\.txt: empty WordPiece vocabulary"),
      (b"\n", r"v\.txt: empty WordPiece vocabulary"),
      (b"[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n", r"v\.txt: no \[MASK\] token"),
  ]
  for data, pattern in cases:
    with pytest.raises(ValueError, match=pattern):
      wordpiece_vocab.parse_tokens(data, "v.txt")
  with pytest.raises(FileNotFoundError, match="missing.txt"):
    wordpiece_vocab.read_tokens(str(tmp_path / "missing.txt"))
  path = tmp_path / "vocab.txt"
  path.write_bytes((SPECIALS + "x\n").encode())
  assert wordpiece_vocab.read_tokens(str(path))[-1] == "x"
