"""A small vocabulary trained on the real English text of the tests
(tests/testdata/botchan.txt)."""

from data_prep import prepare_corpus
from data_prep import train_sentencepiece
from tests.testing.repo_paths import BOTCHAN


def botchan_spm(tmp_path_factory, vocab_size=3000):
  """Trains (once per session and size) a SentencePiece model with the
  release's recipe on botchan, chapters as documents.

  Returns (model path, prepared corpus path).
  """
  base = tmp_path_factory.getbasetemp() / f"botchan_spm_{vocab_size}"
  model, corpus = base / "spm.model", base / "corpus.txt"
  if not model.exists():
    base.mkdir(exist_ok=True)
    prepare_corpus.prepare([BOTCHAN], str(corpus),
                           prepare_corpus.CorpusConfig(
                               doc_boundary="regex",
                               doc_regex=r"^CHAPTER [IVXLC]+\.?$"))
    train_sentencepiece.train([str(corpus)], str(base / "spm"),
                              train_sentencepiece.SentencePieceConfig(
                                  vocab_size=vocab_size, num_threads=1))
  return str(model), str(corpus)


def other_model_same_size(model, path):
  """The SentencePiece model `model` with two pieces' strings swapped,
  written to `path` (returned): the same size, other ids."""
  from sentencepiece import sentencepiece_model_pb2  # pylint: disable=g-import-not-at-top
  proto = sentencepiece_model_pb2.ModelProto()
  with open(model, "rb") as f:
    proto.ParseFromString(f.read())
  a, b = proto.pieces[100], proto.pieces[200]
  a.piece, b.piece = b.piece, a.piece
  path.write_bytes(proto.SerializeToString())
  return str(path)
