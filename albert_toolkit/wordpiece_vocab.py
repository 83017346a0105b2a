"""A BERT WordPiece vocabulary file (`--vocab_file`), read by one rule
wherever albert_tf reads one: data prep, fine-tuning, export and Lite,
Hugging Face conversion.

The rule is the original release's `tokenization.load_vocab`: lines end at
"\\n" only; a line's token is its first whitespace-separated field (so
`piece<TAB>score` lines read as `piece`); a blank line is the token " ",
which text never produces but which keeps the later ids where they are;
token n - 1 is on line n. Where the original reads on, this refuses in one
line naming the file and line: bytes that are not UTF-8 (it drops them), a
token given twice (it skips the repeat, moving every later id) and a file
without a token or without BERT's special tokens.
"""

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
SPECIAL_TOKENS = (PAD, UNK, CLS, SEP, MASK)
CONTINUATION = "##"  # a word's later pieces start with it
BLANK_LINE_TOKEN = " "
# The original's WordpieceTokenizer: a longer word is one [UNK].
MAX_INPUT_CHARS_PER_WORD = 200


def parse_tokens(data, source):
  """The tokens of a vocabulary file's contents, in id order.

  Args:
    data: the file's contents, bytes or str.
    source: the file's name, for errors.

  Returns:
    A list of str, one per line.

  Raises:
    ValueError: `source:line: ...` for bytes that are not UTF-8, a repeated
      token or a missing special token; `source: ...` for a file with no
      token.
  """
  if isinstance(data, bytes):
    try:
      data = data.decode("utf-8")
    except UnicodeDecodeError as e:
      line = data[:e.start].count(b"\n") + 1
      raise ValueError(f"{source}:{line}: not UTF-8 text (a WordPiece "
                       "vocabulary has one token a line)") from None
  lines = data.split("\n")
  if lines[-1] == "":
    lines.pop()  # the final newline
  tokens, seen = [], {}
  for number, line in enumerate(lines, 1):
    fields = line.split()
    token = fields[0] if fields else BLANK_LINE_TOKEN
    if token in seen:
      raise ValueError(f"{source}:{number}: token {token!r} repeats line "
                       f"{seen[token]}; every id must be one token")
    seen[token] = number
    tokens.append(token)
  if not tokens or tokens == [BLANK_LINE_TOKEN]:
    raise ValueError(f"{source}: empty WordPiece vocabulary")
  missing = [t for t in SPECIAL_TOKENS if t not in seen]
  if missing:
    raise ValueError(f"{source}: no {missing[0]} token (a BERT WordPiece "
                     f"vocabulary has {', '.join(SPECIAL_TOKENS)})")
  return tokens


def read_tokens(vocab_file):
  """`parse_tokens` of the local file `vocab_file`.

  Args:
    vocab_file: the path.

  Raises:
    FileNotFoundError: naming the file, when it cannot be read.
    ValueError: as `parse_tokens`.
  """
  try:
    with open(vocab_file, "rb") as f:
      data = f.read()
  except OSError as e:
    raise FileNotFoundError(
        f"WordPiece vocabulary {vocab_file}: {e.strerror}") from None
  return parse_tokens(data, vocab_file)
