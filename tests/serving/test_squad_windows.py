"""The SQuAD export's text signature slides doc-stride windows over a long
context and returns the offline predictor's answer (squad_data windows +
postprocess) on a context four times seq_length."""


import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data import squad_answers
from albert_tf.data import squad_data
from albert_tf.modeling.albert_config import AlbertConfig
from albert_tf.modeling.models import albert_squad_v2
from albert_tf.modeling.models import downstream_models
from albert_tf.modeling.networks.albert_encoder import AlbertEncoder
from albert_tf.serving import squad_windows
from albert_tf.tasks import question_answering
from tests.testing import export_testlib
from tests.testing import finetune_testlib

SEQ, STRIDE, MAX_QUERY, MAX_ANSWER = 32, 8, 8, 6


def _offline(model, tokenizer, question, context):
  """(answer text, start + end logit) of the offline predictor."""
  example = squad_data.SquadExample("q", question, context)
  metas, results = [], {}
  for uid, (feats, meta) in enumerate(squad_data.convert_examples(
      [example], tokenizer, SEQ, STRIDE, MAX_QUERY, False)):
    metas.append(meta)
    out = model({k: np.array([feats[k]], np.int32)
                 for k in ("input_word_ids", "input_mask", "input_type_ids")})
    results[uid] = squad_answers.WindowResult(out["start_logits"][0].numpy(),
                                           out["end_logits"][0].numpy())
  predictions, _, nbest = squad_answers.postprocess_logits(
      [example], metas, squad_data.example_metadata([example], tokenizer),
      results, n_best_size=20, max_answer_length=MAX_ANSWER)
  best = nbest["q"][0]
  return predictions["q"], best["start_logit"] + best["end_logit"], len(metas)


def _norm(text):
  return " ".join(text.lower().replace("``", '"').replace("''", '"').split())


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("squad_windows")
  spm = finetune_testlib.spm_model(tmp_path_factory)
  config = AlbertConfig(**dict(finetune_testlib.TINY_CONFIG,
                               max_position_embeddings=SEQ))
  tf.keras.utils.set_random_seed(3)
  model = downstream_models.AlbertSpanLabeler(AlbertEncoder(config))
  path = export_testlib.export_serving(
      question_answering.SquadTask, model, str(tmp / "export"), spm,
      max_seq_length=SEQ, max_query_length=MAX_QUERY,
      max_answer_length=MAX_ANSWER, doc_stride=STRIDE, max_windows=40)
  return model, finetune_testlib.tokenizer(tmp_path_factory), path


def test_windows_answer_like_the_offline_predictor(exported):
  model, tokenizer, path = exported
  serve = tf.saved_model.load(path).signatures["serving_default"]
  sentences = finetune_testlib.botchan_sentences(200, 4, 12)
  questions = ["Who went to the school?", "What did he say to the master?"]
  contexts = [" ".join(sentences[10:24]), " ".join(sentences[40:46])]
  assert len(tokenizer.encode_ids(contexts[0])) >= 4 * SEQ
  got = serve(question=tf.constant(questions), context=tf.constant(contexts))
  for b, (question, context) in enumerate(zip(questions, contexts)):
    text, score, num_windows = _offline(model, tokenizer, question, context)
    assert int(got["num_windows"][b]) == num_windows
    assert text and _norm(got["answer_text"][b].numpy().decode()) == _norm(text)
    np.testing.assert_allclose(float(got["answer_score"][b]), score,
                               rtol=1e-4, atol=1e-4)
  assert int(got["num_windows"][0]) > 4  # the long context is windowed


def test_too_many_windows_is_refused(exported):
  _, _, path = exported
  serve = tf.saved_model.load(path).signatures["serving_default"]
  context = " ".join(finetune_testlib.botchan_sentences(400, 4, 12))
  with pytest.raises(tf.errors.InvalidArgumentError, match="max_windows=40"):
    serve(question=tf.constant(["Who?"]), context=tf.constant([context]))


def test_window_layout_is_doc_windows():
  for n, room, stride in [(0, 5, 2), (5, 5, 2), (6, 5, 2), (23, 7, 3),
                          (40, 10, 20)]:
    count, step = squad_windows.window_layout(
        tf.constant([n], tf.int64), tf.constant([room], tf.int64), stride)
    windows = squad_data.doc_windows(n, room, stride)
    assert int(count[0]) == len(windows)
    assert [w[0] for w in windows] == [int(step[0]) * k
                                       for k in range(len(windows))]
    starts = np.array([[s for s, _ in windows]], np.int64)
    lengths = np.array([[length for _, length in windows]], np.int64)
    for w in range(len(windows)):
      flags = squad_windows.max_context(
          tf.constant(starts), tf.constant(lengths), tf.constant([w], tf.int64),
          room).numpy()[0]
      expected = squad_data.max_context_flags(windows, w)
      assert list(flags[:len(expected)]) == expected


def test_export_tool_serves_windows_by_default(tmp_path, tmp_path_factory):
  config_file = str(tmp_path / "albert_config.json")
  AlbertConfig(**dict(finetune_testlib.TINY_CONFIG,
                      max_position_embeddings=SEQ)).to_json_file(config_file)
  path = export_testlib.export(
      str(tmp_path / "export"), config_files=[config_file], random_init=True,
      task="squad", settings=dict(
          spm_model_file=finetune_testlib.spm_model(tmp_path_factory),
          max_seq_length=SEQ, max_query_length=MAX_QUERY))
  serve = tf.saved_model.load(path).signatures["serving_default"]
  context = " ".join(finetune_testlib.botchan_sentences(200, 4, 12)[10:24])
  got = serve(question=tf.constant(["Who?"]), context=tf.constant([context]))
  assert int(got["num_windows"][0]) > 4


def test_squad_v2_head_export_answers_like_the_offline_predictor(
    tmp_path, tmp_path_factory):
  """The original's v2 head: best beam span, null score and threshold as
  squad_v2_postprocess on the same windows."""
  tokenizer = finetune_testlib.tokenizer(tmp_path_factory)
  config = AlbertConfig(**dict(finetune_testlib.TINY_CONFIG,
                               max_position_embeddings=SEQ))
  tf.keras.utils.set_random_seed(5)
  model = albert_squad_v2.AlbertSquadV2(AlbertEncoder(config))
  sentences = finetune_testlib.botchan_sentences(200, 4, 12)
  questions = ["Who went to the school?", "What did he say?", "Why?"]
  contexts = [" ".join(sentences[10:20]), " ".join(sentences[40:46]),
              " ".join(sentences[60:68])]
  examples = [squad_data.SquadExample(f"q{i}", q, c)
              for i, (q, c) in enumerate(zip(questions, contexts))]
  metas, results = [], {}
  for uid, (feats, meta) in enumerate(squad_data.convert_examples(
      examples, tokenizer, SEQ, STRIDE, MAX_QUERY, False)):
    metas.append(meta)
    out = model({k: np.array([feats[k]], np.int32)
                 for k in ("input_word_ids", "input_mask", "input_type_ids")})
    results[uid] = squad_answers.BeamResult(
        *(out[k][0].numpy() for k in ("start_top_log_probs",
                                      "start_top_index", "end_top_log_probs",
                                      "end_top_index")),
        float(out["cls_logits"][0]))
  tokens = squad_data.example_metadata(examples, tokenizer)
  _, null, nbest = squad_answers.postprocess_beam(
      examples, metas, tokens, results, max_answer_length=MAX_ANSWER)
  scores = sorted(null.values())
  threshold = (scores[0] + scores[1]) / 2  # q with the lowest score answers
  predictions, _, _ = squad_answers.postprocess_beam(
      examples, metas, tokens, results, max_answer_length=MAX_ANSWER,
      null_score_diff_threshold=threshold)
  path = export_testlib.export_serving(
      question_answering.SquadTask, model, str(tmp_path / "export"),
      finetune_testlib.spm_model(tmp_path_factory), squad_head="xlnet",
      max_seq_length=SEQ, max_query_length=MAX_QUERY,
      max_answer_length=MAX_ANSWER, doc_stride=STRIDE,
      null_score_diff_threshold=threshold)
  got = tf.saved_model.load(path).signatures["serving_default"](
      question=tf.constant(questions), context=tf.constant(contexts))
  for i, example in enumerate(examples):
    best = nbest[example.qas_id][0]
    np.testing.assert_allclose(float(got["null_score"][i]),
                               null[example.qas_id], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(float(got["answer_score"][i]),
                               best["start_log_prob"] + best["end_log_prob"],
                               rtol=1e-4, atol=1e-4)
    assert (_norm(got["answer_text"][i].numpy().decode()) ==
            _norm(predictions[example.qas_id]))
  assert sum(bool(p) for p in predictions.values()) == 1
  with pytest.raises(ValueError, match="doc_stride"):
    export_testlib.export_serving(
        question_answering.SquadTask, model, str(tmp_path / "no_windows"),
        finetune_testlib.spm_model(tmp_path_factory), squad_head="xlnet",
        max_seq_length=SEQ, max_query_length=MAX_QUERY, doc_stride=0)


def test_both_modes_give_context_positions_and_minus_one_for_none(
    exported, tmp_path, tmp_path_factory):
  """answer_start / answer_end count context tokens (0: the first after
  the question's [SEP]) with windows and with --doc_stride=0 alike; no
  answer is -1, -1 (0, 0 is a first-token answer)."""
  model, tokenizer, windowed = exported
  truncating = export_testlib.export_serving(
      question_answering.SquadTask, model, str(tmp_path / "truncating"),
      finetune_testlib.spm_model(tmp_path_factory), max_seq_length=SEQ,
      max_query_length=MAX_QUERY, max_answer_length=MAX_ANSWER, doc_stride=0)
  sentences = finetune_testlib.botchan_sentences(200, 4, 12)
  questions = ["Who went?", "What did he say?", "Why?"]
  contexts = [sentences[3], sentences[7], ""]  # one window each; no context
  outputs = [tf.saved_model.load(path).signatures["serving_default"](
      question=tf.constant(questions), context=tf.constant(contexts))
             for path in (windowed, truncating)]
  for b, (question, context) in enumerate(zip(questions, contexts)):
    got = [(int(o["answer_start"][b]), int(o["answer_end"][b]),
            o["answer_text"][b].numpy().decode()) for o in outputs]
    assert got[0] == got[1], (context, got)
    start, end, text = got[0]
    if not context:
      assert (start, end, text) == (-1, -1, "")
      continue
    # The Keras model's best span over the context, in context positions.
    (feats, _), = squad_data.convert_examples(
        [squad_data.SquadExample("q", question, context)], tokenizer, SEQ,
        STRIDE, MAX_QUERY, False)
    out = model({k: np.array([feats[k]], np.int32)
                 for k in ("input_word_ids", "input_mask", "input_type_ids")})
    offset = sum(1 for t, m in zip(feats["input_type_ids"],
                                   feats["input_mask"]) if m and not t)
    n = len(tokenizer.encode_ids(context))
    logits = out["start_logits"][0].numpy(), out["end_logits"][0].numpy()
    best = max((logits[0][offset + i] + logits[1][offset + j], i, j)
               for i in range(n) for j in range(i, min(n, i + MAX_ANSWER)))
    assert (start, end) == best[1:]
    assert _norm(text) == _norm(tokenizer.decode_ids(
        tokenizer.encode_ids(context)[start:end + 1]))
