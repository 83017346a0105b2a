"""A full read of a pretraining TFRecord file before training.

`scan_file` reads every record once (the trainer already did, to count them
against the data summary) and also checks the token ids against the model's
vocabulary, so a truncated or bit-flipped shard, or a record with an id >=
vocab_size, is a one-line error naming the file and the record before the
first step, instead of a DataLossError naming no file or
`indices[7,5] = 1500 is not in [0, 1000)` in the middle of training.
"""

import numpy as np
import tensorflow as tf

from albert_tf.data import pretraining_dataloader

_CHUNK = 1024  # records parsed at once (vectorised)


def _first_bad(sparse, vocab_size):
  """(row, id) of the first value >= vocab_size in a SparseTensor, or None."""
  values = sparse.values.numpy()
  bad = np.flatnonzero(values >= vocab_size)
  if not bad.size:
    return None
  return int(sparse.indices.numpy()[bad[0], 0]), int(values[bad[0]])


def scan_file(path, vocab_size=None):
  """Reads every record of `path`; returns how many there are.

  Raises ValueError naming the file and the record: a record that cannot be
  read (truncated or corrupt file), or (with `vocab_size`) a token id in the
  input or the MLM labels that is >= vocab_size.
  """
  spec = {key: tf.io.VarLenFeature(tf.int64)
          for key in ("input_ids", "input_word_ids", "masked_lm_ids")}
  count = 0
  try:
    for records in pretraining_dataloader.checked_records(path, "auto",
                                                          _CHUNK):
      if vocab_size is not None:
        parsed = tf.io.parse_example(records, spec)
        for key, sparse in parsed.items():
          bad = _first_bad(sparse, vocab_size)
          if bad is not None:
            raise ValueError(
                f"{path}: record {count + bad[0]}: {key} holds token id "
                f"{bad[1]} but model.vocab_size is {vocab_size}; the data "
                "was made with another SentencePiece model")
      count += len(records)
  except IOError as e:  # the checked reader's message names file and record
    raise ValueError(str(e)) from e
  except tf.errors.InvalidArgumentError as e:  # a record that is no Example
    raise ValueError(f"{path}: record {count} to {count + _CHUNK - 1}: not a "
                     f"tf.train.Example ({e.message.splitlines()[0]})") from e
  return count
