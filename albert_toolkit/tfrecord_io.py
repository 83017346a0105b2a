"""TFRecord writing without importing TensorFlow.

Data-creation workers stay small and start fast because they do not load
TensorFlow. They encode `tf.train.Example` protos by hand (the wire format is
tiny: a map of name -> Int64List/FloatList) and frame them as TFRecords with a
masked CRC32C computed by a vectorised NumPy routine. The files are read back by
TensorFlow, which verifies every CRC: `read_records` is the one checked reader
of the tools and the trainer (it loads TensorFlow when called).
"""

import contextlib
import glob
import gzip
import os
import re
import struct

import numpy as np

from albert_toolkit import output_files

# ---------------------------------------------------------------- CRC32C ----
_POLY = 0x82F63B78  # Castagnoli, reflected.


def _byte_table():
  table = np.arange(256, dtype=np.uint32)
  for _ in range(8):
    table = np.where(table & 1, (table >> 1) ^ np.uint32(_POLY), table >> 1)
  return table


_TABLE = _byte_table()
_TABLE_LIST = [int(x) for x in _TABLE]
_SHIFT_TABLE = _TABLE[np.newaxis]  # grown on demand


def _shift_table(length):
  """[length, 256] table: row k = CRC register of byte b followed by k zeros."""
  global _SHIFT_TABLE
  have = _SHIFT_TABLE.shape[0]
  if have >= length:
    return _SHIFT_TABLE
  out = np.empty((max(length, 2 * have, 1024), 256), dtype=np.uint32)
  out[:have] = _SHIFT_TABLE
  for k in range(have, out.shape[0]):
    out[k] = (out[k - 1] >> np.uint32(8)) ^ _TABLE[out[k - 1] & np.uint32(0xFF)]
  _SHIFT_TABLE = out
  return out


def crc32c(data):
  """CRC32C of `data` (bytes).

  The CRC register update is linear over GF(2), so the register equals the XOR
  of each byte's contribution shifted by the number of bytes after it; a
  non-zero initial value is the same as XOR-ing it into the first four bytes.
  """
  n = len(data)
  if n <= 16:  # short inputs (record headers): plain table loop
    c = 0xFFFFFFFF
    for b in data:
      c = (c >> 8) ^ _TABLE_LIST[(c ^ b) & 0xFF]
    return c ^ 0xFFFFFFFF
  arr = np.frombuffer(data, dtype=np.uint8).copy()
  arr[:4] ^= np.uint8(0xFF)
  contrib = _shift_table(n)[np.arange(n - 1, -1, -1), arr]
  return int(np.bitwise_xor.reduce(contrib)) ^ 0xFFFFFFFF


def masked_crc32c(data):
  crc = crc32c(data)
  return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame_record(payload):
  """One TFRecord: length, masked CRC of length, payload, masked CRC of it."""
  header = struct.pack("<Q", len(payload))
  return b"".join((header, struct.pack("<I", masked_crc32c(header)), payload,
                   struct.pack("<I", masked_crc32c(payload))))


def split_framed(data, offset=0):
  """Concatenated framed records (from frame_record) -> list of each one.

  Only the lengths are read (CRCs are not checked): for our own buffers.
  Raises ValueError if the last record is cut short.
  """
  records, end = [], len(data)
  while offset < end:
    if offset + 12 > end:
      raise ValueError(f"truncated TFRecord header at byte {offset}")
    (length,) = struct.unpack_from("<Q", data, offset)
    stop = offset + 12 + length + 4
    if stop > end:
      raise ValueError(f"truncated TFRecord at byte {offset}")
    records.append(data[offset:stop])
    offset = stop
  return records


# ------------------------------------------------------------- reading ----
# Starts every unreadable-record error; core/actions.py finds it in a
# training loop's error.
CORRUPT_RECORD_ERROR = "Corrupt or truncated TFRecord file"
GZIP_MAGIC = b"\x1f\x8b"


def detect_compression(path):
  """'GZIP' if the file starts with the gzip magic bytes, else ''."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  with tf.io.gfile.GFile(path, "rb") as f:
    return "GZIP" if f.read(2) == GZIP_MAGIC else ""


def read_records(path, compression="auto"):
  """Yields the records of `path` ("auto", "GZIP", "" or "NONE"), every CRC
  checked. A record that cannot be read raises IOError
  "Corrupt or truncated TFRecord file PATH at record N: why"; a file that
  cannot be opened, OSError naming it."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  # pylint: disable=g-import-not-at-top,g-direct-tensorflow-import
  from tensorflow.python.util import deprecation
  path = path.decode() if isinstance(path, bytes) else path
  compression = (compression.decode() if isinstance(compression, bytes)
                 else compression)
  if compression == "auto":
    compression = detect_compression(path)
  options = tf.io.TFRecordOptions(
      compression_type="" if compression in (None, "NONE") else compression)
  count = 0
  try:
    # The v1 iterator is the only reader whose errors surface in Python,
    # where the file and record can be named.
    with deprecation.silence():
      for record in tf.compat.v1.io.tf_record_iterator(path, options):
        yield record
        count += 1
  except (tf.errors.NotFoundError, tf.errors.PermissionDeniedError) as e:
    raise OSError(f"Cannot read {path}: {e.message}") from e
  except (tf.errors.OpError, OSError, EOFError, gzip.BadGzipFile) as e:
    msg = " ".join(getattr(e, "message", str(e)).split())
    raise IOError(f"{CORRUPT_RECORD_ERROR} {path} at record {count}: "
                  f"{msg}") from e


# ----------------------------------------------------- tf.train.Example ----
def _varint(value):
  return _SMALL_VARINTS[value] if value < _SMALL else _varint_slow(value)


def _varint_slow(value):
  out = bytearray()
  while value > 0x7F:
    out.append(value & 0x7F | 0x80)
    value >>= 7
  out.append(value)
  return bytes(out)


# Features whose values are 0/1 by construction (skips a max() per record).
_BINARY_FEATURES = frozenset(
    ("input_mask", "segment_ids", "input_type_ids", "token_boundary",
     "next_sentence_labels"))
_SMALL = 1 << 14
_SMALL_VARINTS = [_varint_slow(i) for i in range(_SMALL)]


class ExampleEncoder:
  """Encodes dicts of int/float lists as serialized `tf.train.Example`s."""

  def __init__(self, max_int=1 << 16):
    self._varints = [_varint(i) for i in range(max_int)]
    self._keys = {}

  def _key(self, name):
    k = self._keys.get(name)
    if k is None:
      key = name.encode("utf-8")
      k = self._keys[name] = b"\x0a" + _varint(len(key)) + key + b"\x12"
    return k

  def _int_payload(self, name, values):
    # One byte per value (the byte itself) when all are < 128.
    if name in _BINARY_FEATURES or max(values, default=0) < 128:
      return bytes(values)
    vt = self._varints
    try:
      return b"".join([vt[v] for v in values])
    except (IndexError, TypeError):
      return b"".join(_varint(int(v)) for v in values)

  def encode(self, int_features, float_features=()):
    """int_features / float_features: sequences of (name, list of values).

    Values must be non-negative ints (all ALBERT features are).
    """
    v = _varint
    parts = []
    # Feature{int64_list=3} / Feature{float_list=2}, each a packed list.
    packed = [(name, b"\x1a", self._int_payload(name, values))
              for name, values in int_features]
    packed += [(name, b"\x12", np.asarray(values, dtype="<f4").tobytes())
               for name, values in float_features]
    for name, kind, values in packed:
      lp = v(len(values))
      inner = 1 + len(lp) + len(values)          # Int64List / FloatList
      li = v(inner)
      feature_len = 1 + len(li) + inner          # Feature
      lf = v(feature_len)
      key = self._key(name)                      # MapEntry key + value tag
      parts += (b"\x0a", v(len(key) + len(lf) + feature_len), key, lf,
                kind, li, b"\x0a", lp, values)
    features = b"".join(parts)
    return b"\x0a" + v(len(features)) + features


# ----------------------------------------------------------------- files ----
_SHARD_PATTERN = re.compile(r"^(.*)@(\d+)$")


def _entries(spec):
  """The non-empty entries of a comma-separated list of files."""
  return [part.strip() for part in spec.split(",") if part.strip()]


def expand_output_files(spec):
  """'a,b' -> [a, b]; 'out.tfrecord@3' -> out.tfrecord-0000{0,1,2}-of-00003."""
  files = []
  for part in _entries(spec):
    m = _SHARD_PATTERN.match(part)
    if "@" in os.path.basename(part) and not m:
      raise ValueError(f"output_file {part!r}: the shard count after '@' must "
                       "be a positive integer (PATH@N)")
    if not os.path.basename(m.group(1) if m else part):
      # `@3` would write `-00000-of-00003`; `out/` is a directory.
      raise ValueError(f"output_file {part!r}: no file name (e.g. "
                       "out/train.tfrecord or out/train.tfrecord@8)")
    if m:
      base, n = m.group(1), int(m.group(2))
      if n < 1:
        raise ValueError(f"Bad shard count in output_file {part!r}")
      files.extend(f"{base}-{i:05d}-of-{n:05d}" for i in range(n))
    else:
      files.append(part)
  if not files:
    raise ValueError("output_file is empty")
  return files


def expand_input_files(spec, match=None):
  """Comma-separated list of files or globs -> ordered list of files.

  `match(entry)`: the paths an entry names on another filesystem (the Beam
  launcher's: gs://, ...; every entry is then a pattern); default: local
  files, globbed. Raises FileNotFoundError naming any entry that matches
  nothing. A file given or matched more than once is listed once (with a
  warning).
  """
  files = []
  for part in _entries(spec):
    if match is None and not any(c in part for c in "*?["):
      if not os.path.exists(part):
        raise FileNotFoundError(f"input_file not found: {part}")
      files.append(part)
      continue
    # Our own summaries and temporary files are never corpus text.
    matched = sorted(p for p in (match or glob.glob)(part)
                     if not output_files.is_tool_output(p))
    if not matched:
      raise FileNotFoundError(f"input_file pattern matched no files: {part}")
    files.extend(matched)
  if not files:
    raise ValueError("input_file is empty")
  return output_files.read_once(files)


class RecordWriter:
  """Writes framed records (or any bytes) to one file, optionally GZIP
  compressed.

  Write errors (a full disk) are OSErrors naming `name` (default: the path);
  `discard()` closes without raising, for cleanup after an error.
  """

  def __init__(self, path, compression="NONE", fileobj=None, name=None):
    """fileobj: an open binary file to write to instead of opening `path`;
    name: the file the user asked for, in messages (e.g. the final name of a
    temporary file)."""
    compression = (compression or "NONE").upper()
    if compression not in ("NONE", "GZIP"):
      raise ValueError(f"compression must be NONE or GZIP, got {compression}")
    if fileobj is None:
      os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    self.name = name or path
    raw = self._guard(open, path, "wb") if fileobj is None else fileobj
    if compression == "GZIP":
      # mtime=0 and no file name keep the output byte-identical across runs.
      self._f = gzip.GzipFile(filename="", mode="wb", fileobj=raw,
                              compresslevel=6, mtime=0)
      self._raw = raw
    else:
      self._f, self._raw = raw, None
    self.count = 0

  def _guard(self, fn, *args):
    try:
      return fn(*args)
    except OSError as e:
      raise OSError(e.errno, f"Cannot write output file {self.name}: "
                    f"{e.strerror or e}") from e

  def write(self, framed_record):
    self._guard(self._f.write, framed_record)
    self.count += 1

  def close(self):
    try:
      self._guard(self._f.close)
    finally:
      if self._raw is not None:
        self._guard(self._raw.close)

  def discard(self):
    """Closes, ignoring errors: the file is being deleted (after a failure,
    e.g. a full disk, where flushing the buffer fails again)."""
    for f in (self._f, self._raw):
      if f is not None:
        # A file whose buffered flush failed is still closed by close().
        with contextlib.suppress(OSError, ValueError):
          f.close()
