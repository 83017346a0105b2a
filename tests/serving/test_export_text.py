"""Text-in exports: preprocessing ids == data_prep ids, serving signatures
(classifier, SQuAD, multiple choice) == in-memory models, bad inputs."""

import hashlib
import os

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from tests.testing import export_testlib as lib
from albert_tf.modeling.models import downstream_models as dm
from albert_tf.serving import export_lib as es
from albert_tf.serving import preprocessing
from albert_tf.modeling.networks.albert_encoder import AlbertEncoder
from albert_tf.tasks import multiple_choice
from albert_tf.tasks import question_answering
from albert_tf.tasks import sentence_prediction
from data_prep import tokenization

# Ten seconds or more in all: handed out first (tests/conftest.py).
pytestmark = pytest.mark.slow

SEQ = 16
TRICKY = [
    "Héllo Wörld, naïve café résumé",
    "  lots \t of\n\u3000space\u00a0and\u2028breaks  ",
    "``LaTeX quotes'' and “curly” ‘quotes’ — dash… «guillemets»",
    "ΟΔΟΣ ΣΟΦΟΣ ΑΣ. final sigma",
    "İstanbul ẞ STRASSE ǅ Ⅻ",
    "日本語のテキスト 中文 한국어",
    "emoji 👍🏽 ❤️ 🇯🇵 family 👨‍👩‍👧",
    "",
    "   ",
    "In 1990, then 2001, and 1990,5",
    "Ａｂｃ ﬁ ½ ① ㎏",
    "a\u00a8b x\u0301 \u0300start",
    "\u200b\u200d\ufeff zero width",
    "\x1c\x1d\x1e\x1f separators \x85 nel",
    "ŉ ǰ ΐ",
    "The old man said: " + "botchan went to the school and " * 120 + "end.",
]


def reference_pack(tok, a, b=None, seq_length=SEQ, max_first=None):
  """The original run_classifier packing, written with Python lists."""
  ids_a = tok.encode_ids(a)
  if b is None:
    ids_a = ids_a[:seq_length - 2]
    ids = [tok.cls_id] + ids_a + [tok.sep_id]
    types = [0] * len(ids)
  else:
    ids_b = tok.encode_ids(b)
    if max_first is not None:  # SQuAD: cap the question, the passage fills.
      ids_a = ids_a[:max_first]
      ids_b = ids_b[:seq_length - 3 - len(ids_a)]
    while len(ids_a) + len(ids_b) > seq_length - 3:
      (ids_a if len(ids_a) > len(ids_b) else ids_b).pop()
    ids = [tok.cls_id] + ids_a + [tok.sep_id] + ids_b + [tok.sep_id]
    types = [0] * (len(ids_a) + 2) + [1] * (len(ids_b) + 1)
  pad = seq_length - len(ids)
  return (np.array(ids + [0] * pad, np.int32),
          np.array([1] * len(ids) + [0] * pad, np.int32),
          np.array(types + [0] * pad, np.int32))


def reference_batch(tok, texts_a, texts_b=None, **kw):
  rows = [reference_pack(tok, a, None if texts_b is None else texts_b[i], **kw)
          for i, a in enumerate(texts_a)]
  return {name: np.stack([r[i] for r in rows])
          for i, name in enumerate(("input_word_ids", "input_mask",
                                    "input_type_ids"))}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("export_text")
  spm_file = lib.train_spm(str(tmp))
  config = lib.tiny_config()
  tf_keras.utils.set_random_seed(2)
  classifier = dm.AlbertClassifier(AlbertEncoder(config), num_labels=3)
  squad = dm.AlbertSpanLabeler(AlbertEncoder(config), with_answerability=True)
  choice = dm.AlbertMultipleChoice(AlbertEncoder(config), num_choices=3)
  dirs = dict(
      prep=es.export_preprocessing(spm_file, str(tmp / "prep"),
                                   seq_length=SEQ, config=config),
      clf=lib.export_serving(sentence_prediction.ClassifierTask, classifier,
                             str(tmp / "clf"), spm_file, max_seq_length=SEQ,
                             num_labels=3, num_text_fields=2,
                             label_names=["neg", "neu", "pos"]),
      squad=lib.export_serving(question_answering.SquadTask, squad,
                               str(tmp / "squad"), spm_file, max_seq_length=24,
                               max_query_length=6, max_answer_length=5,
                               with_answerability=True, doc_stride=0),
      choice=lib.export_serving(multiple_choice.RaceTask, choice,
                                str(tmp / "choice"), spm_file,
                                max_seq_length=SEQ, num_choices=3))
  tok = tokenization.FullTokenizer(spm_file, do_lower_case=True)
  return dict(tmp=tmp, spm=spm_file, config=config, classifier=classifier,
              squad=squad, choice=choice, dirs=dirs, tok=tok)


def test_truncation_closed_form_matches_original_loop():
  la, lb = np.meshgrid(np.arange(15), np.arange(15))
  la, lb = la.ravel(), lb.ravel()
  for budget in range(0, 16):
    keep_a, keep_b = preprocessing.truncated_lengths(
        tf.constant(la, tf.int64), tf.constant(lb, tf.int64),
        tf.constant(budget, tf.int64))
    keep_a, keep_b = keep_a.numpy(), keep_b.numpy()
    for i in range(len(la)):
      a, b = la[i], lb[i]
      while a + b > budget:
        if a > b:
          a -= 1
        else:
          b -= 1
      assert (keep_a[i], keep_b[i]) == (a, b), (la[i], lb[i], budget)


def test_in_graph_lowercase_matches_python_str_lower():
  # Includes final sigma, U+0130 (two code points), U+1E9E, titlecase digraphs.
  texts = ["ΟΔΟΣ ΣΟΦΟΣ", "aΣ b", "İ", "ẞ", "ǅ ǈ", "ΑΣ.", "Ａｂｃ", "ᾼ"]
  got = tf.strings.lower(tf.constant(texts), encoding="utf-8").numpy()
  assert [g.decode() for g in got] == [t.lower() for t in texts]
  # case_fold_utf8 would differ: it also NFKC-folds ("ẞ" -> "ss").
  assert preprocessing.normalize_text(tf.constant(["ẞ"])).numpy()[0].decode(
  ) == "ß"


def test_preprocessing_export_matches_data_prep(setup):
  invalid_utf8 = b"abc \xff\xfe def \xe2\x82 x"
  result = lib.run_isolated(f"""
import hashlib
import tensorflow_text
texts = {TRICKY!r}
obj = tf.saved_model.load({setup["dirs"]["prep"]!r})
tok = obj.signatures["tokenize"](text=tf.constant(texts))
lengths = tok["num_tokens"].numpy().tolist()
token_ids = [row[:n] for row, n in zip(tok["token_ids"].numpy().tolist(),
                                       lengths)]
ragged = obj.tokenize(tf.constant(texts)).to_list()
bad = obj.signatures["tokenize"](text=tf.constant([{invalid_utf8!r}]))
single = obj.signatures["serving_default"](text=tf.constant(texts))
pair = obj.signatures["text_pair"](text_a=tf.constant(texts),
                                   text_b=tf.constant(texts[::-1]))
call = obj(tf.constant(texts))
pack_pair = obj.pack_pair(tf.constant(texts), tf.constant(texts[::-1]))
asset = obj.sp_model_file.asset_path.numpy().decode()
def errors():
  out = {{}}
  for key, fn in (
      ("rank2", lambda: obj.signatures["serving_default"](
          text=tf.constant([texts[:2]]))),
      ("int_text", lambda: obj.signatures["serving_default"](
          text=tf.constant([1, 2]))),
      ("pair_batch", lambda: obj.signatures["text_pair"](
          text_a=tf.constant(["a", "b"]), text_b=tf.constant(["c"])))):
    try:
      fn()
      out[key] = None
    except Exception as e:
      out[key] = str(e)[:1500]
  return out
emit(dict(token_ids=token_ids, ragged=ragged,
          invalid=bad["token_ids"].numpy().tolist(),
          single={{k: v.numpy().tolist() for k, v in single.items()}},
          pair={{k: v.numpy().tolist() for k, v in pair.items()}},
          call={{k: v.numpy().tolist() for k, v in call.items()}},
          pack_pair={{k: v.numpy().tolist() for k, v in pack_pair.items()}},
          asset=[os.path.basename(asset),
                 hashlib.sha256(open(asset, "rb").read()).hexdigest()],
          errors=errors()))
""", cwd=str(setup["tmp"]), extra_imports=())
  tok = setup["tok"]
  expected = [tok.encode_ids(t) for t in TRICKY]
  assert any(len(e) > 200 for e in expected)  # the long text is long
  assert any(tok.convert_tokens_to_ids(["1990,"])[0] != tok.unk_id
             for _ in [0])  # the vocab has a "<digit>," piece to fix
  for text, want, got, got_ragged in zip(TRICKY, expected,
                                         result["token_ids"],
                                         result["ragged"]):
    assert got == want, text
    assert got_ragged == want, text
  assert result["invalid"][0] == tok.encode_ids(invalid_utf8)
  single = reference_batch(tok, TRICKY)
  pair = reference_batch(tok, TRICKY, TRICKY[::-1])
  for name in single:
    np.testing.assert_array_equal(result["single"][name], single[name])
    np.testing.assert_array_equal(result["call"][name], single[name])
    np.testing.assert_array_equal(result["pair"][name], pair[name])
    np.testing.assert_array_equal(result["pack_pair"][name], pair[name])
  # The TF-Hub attribute of the tokenizer file: the SentencePiece model.
  with open(setup["spm"], "rb") as f:
    assert result["asset"] == [os.path.basename(setup["spm"]),
                               hashlib.sha256(f.read()).hexdigest()]
  errors = result["errors"]
  assert "text must have rank 1: string [batch]" in errors["rank2"]
  assert "expected to be a string tensor but is a int32 tensor" in (
      errors["int_text"])
  assert "text_a and text_b must have the same batch size" in (
      errors["pair_batch"])


_SERVING_CODE = """
import tensorflow_text
def load(key):
  return tf.saved_model.load(dirs[key])
def to_py(d):
  return {k: (v.numpy().astype(str).tolist() if v.dtype == tf.string
              else v.numpy().tolist()) for k, v in d.items()}
def err(fn):
  try:
    fn()
  except Exception as e:
    return str(e)[:1500] + str(e)[-1500:]  # graph errors end with it
  return None
def example(**fields):
  feats = {k: tf.train.Feature(bytes_list=tf.train.BytesList(
      value=[x.encode() for x in (v if isinstance(v, list) else [v])]))
      for k, v in fields.items()}
  return tf.train.Example(features=tf.train.Features(feature=feats)
                          ).SerializeToString()
out = {}
clf = load("clf")
s = clf.signatures
out["clf_text"] = to_py(s["serving_default"](text_a=tf.constant(A),
                                             text_b=tf.constant(B)))
ids = {k: tf.constant(v) for k, v in np.load(ids_file).items()}
out["clf_ids"] = to_py(s["serve_ids"](**ids))
out["clf_examples"] = to_py(s["serve_examples"](examples=tf.constant(
    [example(text_a=a, text_b=b) for a, b in zip(A, B)])))
out["clf_errors"] = dict(
    rank=err(lambda: s["serving_default"](text_a=tf.constant([A]),
                                          text_b=tf.constant([B]))),
    batch=err(lambda: s["serving_default"](text_a=tf.constant(A),
                                           text_b=tf.constant(B[:1]))),
    long_ids=err(lambda: s["serve_ids"](**{k: tf.tile(v, [1, 3])
                                         for k, v in ids.items()})),
    missing_feature=err(lambda: s["serve_examples"](examples=tf.constant(
        [example(text_a="only a")]))),
    two_values=err(lambda: s["serve_examples"](examples=tf.constant(
        [example(text_a="a", text_b="b"),
         example(text_a=["one", "two"], text_b="b")]))))
sq = load("squad")
out["squad_text"] = to_py(sq.signatures["serving_default"](
    question=tf.constant(Q), context=tf.constant(C)))
ch = load("choice")
out["choice_text"] = to_py(ch.signatures["serving_default"](
    context=tf.constant(A[:2]), choices=tf.constant(CHOICES)))
out["choice_errors"] = dict(
    wrong_choices=err(lambda: ch.signatures["serving_default"](
        context=tf.constant(A[:2]),
        choices=tf.constant([c[:2] for c in CHOICES]))))
mc_ids = dict(input_word_ids=tf.fill([1, 3, 8], 5),
              input_mask=tf.ones([1, 3, 8], tf.int32),
              input_type_ids=tf.zeros([1, 3, 8], tf.int32))
for key, name, shape in (("mask_shape", "input_mask", [1, 2, 12]),
                         ("types_batch", "input_type_ids", [3, 1, 8])):
  bad = dict(mc_ids, **{name: tf.reshape(mc_ids[name], shape)})
  out["choice_errors"][key] = err(
      lambda: ch.signatures["serve_ids"](**bad))
emit(out)
"""

A = ["the cat sat on the mat", "Héllo Wörld, naïve café", "",
     "a very long first segment " * 10]
B = ["it was happy", "bonjour", "only the second", "short"]
Q = ["who went to school?", "what is the name?"]
C = ["botchan went to the school in the country and taught there",
     "the name of the cat is not known"]
CHOICES = [["it was red", "it was blue", "it was green"],
           ["yes", "no", "maybe not"]]


def test_serving_exports_match_in_memory_models(setup):
  tok = setup["tok"]
  clf_ids = reference_batch(tok, A, B)
  ids_file = str(setup["tmp"] / "clf_ids.npz")
  np.savez(ids_file, **clf_ids)
  code = (f"dirs = {setup['dirs']!r}\nids_file = {ids_file!r}\n"
          f"A, B, Q, C, CHOICES = {A!r}, {B!r}, {Q!r}, {C!r}, {CHOICES!r}\n"
          + _SERVING_CODE)
  result = lib.run_isolated(code, cwd=str(setup["tmp"]))

  # Classifier: text, ids and tf.Example signatures agree with Keras.
  logits = setup["classifier"](clf_ids)["logits"].numpy()
  probs = tf.nn.softmax(logits).numpy()
  for key in ("clf_text", "clf_ids", "clf_examples"):
    got = result[key]
    np.testing.assert_allclose(got["logits"], logits, atol=1e-5, rtol=0)
    np.testing.assert_allclose(got["probabilities"], probs, atol=1e-5, rtol=0)
    assert got["label_id"] == logits.argmax(-1).tolist()
    assert got["label"] == [["neg", "neu", "pos"][i]
                            for i in logits.argmax(-1)]
  errors = result["clf_errors"]
  assert "text_a must have rank 1: string [batch]" in errors["rank"]
  assert "text_a and text_b must have the same batch size" in errors["batch"]
  assert "max_position_embeddings = 32" in errors["long_ids"]
  assert ("feature text_b must hold exactly one string in each "
          "tf.Example" in errors["missing_feature"])
  # Two `text_a` values said only "Can't parse serialized Example".
  assert ("serve_examples: feature text_a must hold exactly one string in "
          "each tf.Example; strings per example:" in errors["two_values"])
  assert "[1 2]" in errors["two_values"]

  # SQuAD: logits match; the span is the best valid one (NumPy search).
  sq_ids = reference_batch(tok, Q, C, seq_length=24, max_first=6)
  expected = setup["squad"](sq_ids)
  got = result["squad_text"]
  start = expected["start_logits"].numpy()
  end = expected["end_logits"].numpy()
  np.testing.assert_allclose(got["start_logits"], start, atol=1e-5, rtol=0)
  np.testing.assert_allclose(got["end_logits"], end, atol=1e-5, rtol=0)
  np.testing.assert_allclose(
      got["answerable_probability"],
      tf.sigmoid(expected["answerable_logits"]).numpy(), atol=1e-5, rtol=0)
  for b in range(len(Q)):
    ids = sq_ids["input_word_ids"][b]
    context = [i for i in range(24) if sq_ids["input_type_ids"][b, i] == 1
               and sq_ids["input_mask"][b, i] == 1 and ids[i] != tok.sep_id]
    best = max(((start[b, i] + end[b, j], i, j) for i in context
                for j in context if 0 <= j - i < 5))
    # Context positions: 0 is the context's first token.
    assert (got["answer_start"][b], got["answer_end"][b]) == (
        best[1] - context[0], best[2] - context[0])
    np.testing.assert_allclose(got["answer_score"][b], best[0], atol=1e-5)
    span = tok.decode_ids(ids[best[1]:best[2] + 1].tolist())
    assert got["answer_text"][b] == span

  # Multiple choice: [CLS] context [SEP] choice [SEP] per choice.
  mc_ids = reference_batch(tok, [a for a in A[:2] for _ in range(3)],
                           [c for row in CHOICES for c in row])
  mc_ids = {k: v.reshape(2, 3, SEQ) for k, v in mc_ids.items()}
  mc_logits = setup["choice"](mc_ids)["logits"].numpy()
  np.testing.assert_allclose(result["choice_text"]["logits"], mc_logits,
                             atol=1e-5, rtol=0)
  assert result["choice_text"]["choice"] == mc_logits.argmax(-1).tolist()
  assert "choices must have shape [batch, 3]" in (
      result["choice_errors"]["wrong_choices"])
  # Ids of other shapes than input_word_ids were reshaped to [-1, seq] and
  # mixed rows (another batch size too).
  assert "input_mask must have the same shape as input_word_ids" in (
      result["choice_errors"]["mask_shape"])
  assert "input_type_ids must have the same shape as input_word_ids" in (
      result["choice_errors"]["types_batch"])
