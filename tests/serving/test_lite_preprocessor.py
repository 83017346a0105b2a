"""The TFLite text preprocessor packs text as data_prep tokenizes it.

With a vocabulary that has no "<digit>," pieces (no expansion table) the
FastSentencepieceTokenizer's ids come back with int32 row splits; packing
them must still work and give data_prep's ids (`FullTokenizer.encode_ids`).
"""

import numpy as np
import tensorflow as tf

from albert_tf.serving import lite_preprocessing
from albert_tf.serving import preprocessing
from tests.testing import finetune_testlib

TEXTS = ["Whenever I think of it, I feel like laughing.",
         "My parents liked my elder brother better than me. 1,000 yen"]


def test_lite_packing_without_expansion_matches_data_prep(tmp_path_factory):
  spm = finetune_testlib.spm_model(tmp_path_factory)
  tokenizer = finetune_testlib.tokenizer(tmp_path_factory)
  seq = 24
  lite = lite_preprocessing.LitePreprocessor(spm, seq_length=seq)
  assert lite._expansion is None  # pylint: disable=protected-access
  packed = lite.preprocess([tf.constant(TEXTS)])
  for row, text in enumerate(TEXTS):
    pieces = tokenizer.encode_ids(text)[:seq - 2]
    want = [tokenizer.cls_id] + pieces + [tokenizer.sep_id]
    want += [tokenizer.pad_id] * (seq - len(want))
    np.testing.assert_array_equal(packed["input_word_ids"][row], want)
    np.testing.assert_array_equal(packed["input_mask"][row],
                                  [1] * (len(pieces) + 2) +
                                  [0] * (seq - len(pieces) - 2))
  # And the same packing as the SavedModel's preprocessor.
  saved = preprocessing.TextPreprocessor(spm, seq_length=seq)
  for key, value in saved.preprocess([tf.constant(TEXTS)]).items():
    np.testing.assert_array_equal(packed[key], value)
