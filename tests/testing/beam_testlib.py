"""What the Beam pipeline's tests share: the small botchan corpus, the
instance settings, and TFRecord payloads read with the framing spec."""

import gzip
import struct

from data_prep import pretraining_config
from data_prep import pretraining_instances as pi
from tests.testing.botchan_testlib import botchan_spm

SEQ, PRED, DUPE = 64, 10, 2


def run_cfg(model):
  return pretraining_config.RunConfig(
      spm_model_file=model, do_lower_case=True,
      instance=pi.InstanceConfig(max_seq_length=SEQ,
                                 max_predictions_per_seq=PRED),
      dupe_factor=DUPE)


def instance_flags(model):
  """run_cfg's settings as the tools' command-line flags."""
  return [f"--spm_model_file={model}", f"--max_seq_length={SEQ}",
          f"--max_predictions_per_seq={PRED}", f"--dupe_factor={DUPE}"]


def read_records(path):
  """Payloads of a TFRecord file, read with the framing spec (not our writer)."""
  with open(path, "rb") as f:
    data = f.read()
  if data[:2] == b"\x1f\x8b":
    data = gzip.decompress(data)
  out, pos = [], 0
  while pos < len(data):
    (n,) = struct.unpack_from("<Q", data, pos)
    out.append(data[pos + 12:pos + 12 + n])
    pos += 12 + n + 4
  return out


def small_corpus(tmp_path_factory, documents=6):
  """(SentencePiece model, `documents` botchan chapters of 50 lines): ~220
  instances for 6."""
  model, corpus = botchan_spm(tmp_path_factory)
  with open(corpus, encoding="utf-8") as f:
    docs = f.read().split("\n\n")[:documents]
  small = tmp_path_factory.mktemp("beam_in") / "small.txt"
  small.write_text("\n\n".join("\n".join(d.split("\n")[:50]) for d in docs)
                   + "\n", encoding="utf-8")
  return model, str(small)
