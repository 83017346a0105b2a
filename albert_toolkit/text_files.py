"""Reading a small text file whole, as the tools that take one do (a TSV or
JSON lines of rows, a model.json, a metrics.jsonl): UTF-8, a leading
byte-order mark dropped, and a byte that is not UTF-8 a one-line error
naming the file and line. Corpora are read by data_prep's text reader
instead, which repairs such lines and counts them.
"""

import json


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


def read_json_object(path, what=""):
  """The JSON object in the UTF-8 file `path` (`read_utf8`); ValueError in
  one line naming the file (and line) when it cannot be read, is not JSON
  or holds no object (`what` says what the object is, for that error)."""
  try:
    text = read_utf8(path)
  except OSError as e:
    raise ValueError(f"{path}: cannot read ({e.strerror or e})") from e
  try:
    obj = json.loads(text)
  except json.JSONDecodeError as e:
    raise ValueError(f"{path}:{e.lineno}: not valid JSON ({e.msg}, "
                     f"column {e.colno})") from e
  if not isinstance(obj, dict):
    raise ValueError(f"{path}: expected a JSON object{what}, got a "
                     f"{type(obj).__name__}")
  return obj
