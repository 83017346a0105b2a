"""Reading a small text file whole, as the tools that take one do (a TSV or
JSON lines of rows, a model.json, a metrics.jsonl): UTF-8, a leading
byte-order mark dropped, and a byte that is not UTF-8 a one-line error
naming the file and line. Corpora are read by data_prep's text reader
instead, which repairs such lines and counts them.
"""


def read_utf8(path):
  """The whole text of the UTF-8 file `path` (a byte-order mark dropped);
  ValueError `path:line: not UTF-8 (byte 0x..)` for a byte that is not."""
  with open(path, "rb") as f:
    data = f.read()
  try:
    return data.decode("utf-8-sig")
  except UnicodeDecodeError as e:
    line = data[:e.start].count(b"\n") + 1
    raise ValueError(f"{path}:{line}: not UTF-8 (byte "
                     f"0x{data[e.start]:02x}); save it as UTF-8") from e
