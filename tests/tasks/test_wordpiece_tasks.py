"""Pretraining, fine-tuning and SQuAD alignment with a BERT WordPiece
vocabulary (--vocab_file), on Chinese and mixed Chinese/English text."""

import collections
import json
import math
import os
import random
import shutil

import pytest

from albert_tf.checkpoints import conversion
from albert_tf.checkpoints import restore as restore_lib
from albert_tf.core import experiment_config
from albert_tf.core import run_record
from albert_tf.core import train_lib
from albert_tf.data import conll_data
from albert_tf.data import squad_alignment
from albert_tf.data import squad_data
from albert_tf.modeling.albert_config import AlbertConfig
from albert_tf.modeling.models.albert_pretrainer import AlbertPretrainer
from albert_tf.tasks import hf_export
from albert_tf.tasks import hf_models
from albert_tf.tasks import pretraining
from albert_tf.tasks import sentence_prediction
from data_prep import create_pretraining_data as cpd
from albert_toolkit import output_files
from data_prep import pretraining_config
from data_prep import pretraining_instances as pi
from data_prep import wordpiece
from data_prep.inspect_tfrecord import iter_examples
from tests.testing import export_testlib
from tests.testing import finetune_testlib
from tests.testing import pretrain_testutil
from tests.testing import wordpiece_testlib

SEQ, PRED = 32, 5


@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
  return wordpiece_testlib.write_vocab(tmp_path_factory.mktemp("wp_vocab"))


def _chinese_data(vocab, directory, num_docs, dupe_factor):
  """Pretraining data of a Chinese corpus made with `vocab`; its path."""
  corpus = directory / "zh.txt"
  corpus.write_text(wordpiece_testlib.chinese_corpus(num_docs),
                    encoding="utf-8")
  data = str(directory / "zh.tfrecord")
  cpd.run([str(corpus)], [data], pretraining_config.RunConfig(
      spm_model_file="", vocab_file=vocab, do_lower_case=True,
      instance=pi.InstanceConfig(max_seq_length=SEQ,
                                 max_predictions_per_seq=PRED),
      dupe_factor=dupe_factor), progress_interval=0)
  return data


@pytest.mark.slow
def test_tiny_chinese_pretraining_learns(vocab, tmp_path):
  data = _chinese_data(vocab, tmp_path, num_docs=40, dupe_factor=4)
  size = wordpiece.WordPieceTokenizer(vocab).vocab_size
  config = experiment_config.load_experiment_config(
      pretraining.PretrainingExperimentConfig, [pretrain_testutil.TINY_RECIPE],
      ",".join([f"data.input_path={data}", f"data.eval_input_path={data}",
                f"data.seq_length={SEQ}", f"data.max_predictions_per_seq={PRED}",
                "data.global_batch_size=32", f"model.vocab_size={size}",
                f"model.max_position_embeddings={SEQ}",
                "optimizer.learning_rate=0.003", "trainer.train_steps=300",
                "trainer.steps_per_loop=50", "trainer.checkpoint_interval=300",
                "trainer.eval_interval=300", "trainer.eval_steps=1"]))
  model_dir = tmp_path / "run"
  pretrain_testutil.run_tiny(config, model_dir)
  with open(model_dir / "metrics.jsonl", encoding="utf-8") as f:
    rows = [json.loads(line) for line in f]
  mlm = [(r["masked_lm_loss"], r["masked_lm_accuracy"]) for r in rows
         if "masked_lm_loss" in r]
  # Below the entropy of the masked tokens' own frequencies: the model
  # predicts from the context, not only which characters are common.
  labels = collections.Counter(
      label for ex in iter_examples(data)
      for label, w in zip(ex["masked_lm_ids"], ex["masked_lm_weights"]) if w)
  total = sum(labels.values())
  unigram = -sum(n / total * math.log(n / total) for n in labels.values())
  assert mlm[0][0] > unigram > mlm[-1][0] + 0.3, (unigram, mlm)
  assert mlm[-1][1] > 2 * mlm[0][1], mlm
  facts = run_record.read(str(model_dir)).facts
  assert facts["vocab_file"] == os.path.abspath(vocab)
  assert facts["spm_model_file"] == ""
  assert facts["vocab_sha256"] == output_files.file_sha256(vocab)


def _rows(rng, n):
  """Entailment iff sentence2 says the weather is good (好)."""
  good = ["天气很好。", "很好！", "好"]
  bad = ["天气很大。", "很小！", "大"]
  rows = []
  for i in range(n):
    label = rng.random() < 0.5
    s2 = rng.choice(good if label else bad)
    s1 = rng.choice(["我们喜欢学习中文。", "他是老师，她是学生。",
                     "The cat sat on the mat."])
    rows.append((str(i), s1, s2, "entailment" if label else "not_entailment"))
  return rows


@pytest.mark.slow
def test_tiny_classifier_finetunes_with_vocab_file(vocab, tmp_path):
  rng = random.Random(0)
  data_dir = tmp_path / "RTE"
  data_dir.mkdir()
  for name, n in (("train.tsv", 256), ("dev.tsv", 64)):
    with open(data_dir / name, "w", encoding="utf-8") as f:
      f.write("index\tsentence1\tsentence2\tlabel\n")
      f.writelines("\t".join(r) + "\n" for r in _rows(rng, n))
  config = finetune_testlib.tiny_finetune_config(
      sentence_prediction.GlueExperimentConfig,
      {"task_name": "rte", "data_dir": str(data_dir), "vocab_file": vocab,
       "max_seq_length": SEQ}, steps=300, lr=2e-3)
  config.model.vocab_size = wordpiece.WordPieceTokenizer(vocab).vocab_size
  model_dir = str(tmp_path / "model")
  task = sentence_prediction.ClassifierTask(config, model_dir)
  assert task.tokenizer.kind == "wordpiece"
  result = train_lib.run_experiment(task, config, model_dir, "train_and_eval")
  assert result["eval"]["accuracy"] >= 0.9, result["eval"]
  facts = run_record.read(model_dir).facts
  assert facts["vocab_file"] == os.path.abspath(vocab)
  assert facts["vocab_sha256"] == output_files.file_sha256(vocab)


@pytest.mark.parametrize("data,problem", [
    ({}, "neither is set"),
    ({"spm_model_file": "a.model", "vocab_file": "v.txt"}, "both are set")])
def test_finetuning_needs_exactly_one_vocabulary(tmp_path, data, problem):
  config = finetune_testlib.tiny_finetune_config(
      sentence_prediction.GlueExperimentConfig,
      dict({"task_name": "rte", "data_dir": str(tmp_path),
            "max_seq_length": SEQ}, **data))
  task = sentence_prediction.ClassifierTask(config, str(tmp_path / "m"))
  with pytest.raises(ValueError) as e:
    task.tokenizer  # pylint: disable=pointless-statement
  assert str(e.value) == (
      "give exactly one of data.spm_model_file (--spm_model_file) "
      "(SentencePiece) and data.vocab_file (--vocab_file) (BERT WordPiece): "
      f"{problem}")


def test_squad_answers_round_trip(vocab):
  tok = wordpiece.WordPieceTokenizer(vocab)
  contexts = ["他是老师，她是学生。北京的天气很好！",
              "The Café  naïve cat played unaffable 上海 ΟΔΟΣ hello",
              "“我们”喜欢学习中文…… hello\u200bworld 😀 ok"]
  checked = 0
  for context in contexts:
    doc = squad_alignment.tokenize_with_offsets(tok, context)
    assert doc.ids == tok.encode_ids(context)
    for first in range(len(doc.ids)):
      for last in range(first, min(first + 4, len(doc.ids))):
        answer = squad_alignment.tokens_to_text(context, doc, first, last)
        start = doc.starts[first]
        span = squad_alignment.char_span_to_tokens(doc, start,
                                                   start + len(answer))
        assert span == (first, last), (context, answer)
        checked += 1
  assert checked > 60
  context = contexts[1]
  example = squad_data.SquadExample(
      qas_id="q", question_text="谁 played?", context_text=context,
      answer_text="naïve cat", answer_start=context.index("naïve"))
  features, _ = next(squad_data.convert_examples([example], tok, SEQ, 16, 8,
                                                 True))
  ids = features["input_word_ids"]
  s, e = features["start_positions"][0], features["end_positions"][0]
  assert tok.convert_ids_to_tokens(ids[s:e + 1]) == ["naive", "cat"]
  meta = squad_data.example_metadata([example], tok)[0]
  q_len = len(tok.encode_ids(example.question_text))
  doc_first, doc_last = s - q_len - 2, e - q_len - 2
  assert context[meta["starts"][doc_first]:meta["ends"][doc_last]] == (
      "naïve cat")


def test_tagging_labels_the_first_piece_of_each_word(vocab):
  tok = wordpiece.WordPieceTokenizer(vocab)
  sentence = conll_data.Sentence(
      words=["北京", "unaffable", "cat", "。"], labels=["B-LOC", "O", "O", "O"],
      lines=["北京 B-LOC", "unaffable O", "cat O", "。 O"], path="t.conll",
      line=1)
  features = next(conll_data.convert_sentences(
      [sentence], tok, {"O": 0, "B-LOC": 1}, 16))
  pieces = tok.convert_ids_to_tokens(
      features["input_word_ids"][:sum(features["input_mask"])])
  assert pieces == ["[CLS]", "北", "京", "un", "##aff", "##able", "cat", "。",
                    "[SEP]"]
  labels = features["label_ids"][:len(pieces)]
  ignore = conll_data.IGNORE
  assert labels == [ignore, 1, ignore, 0, ignore, ignore, 0, 0, ignore]


@pytest.fixture(scope="module")
def wordpiece_run(vocab, tmp_path_factory):
  """A 2-step pretraining run on WordPiece data (its summary names the
  vocabulary), with a vocabulary of the tiny model's size."""
  base = tmp_path_factory.mktemp("wp_run")
  data = _chinese_data(vocab, base, num_docs=8, dupe_factor=1)
  size = wordpiece.WordPieceTokenizer(vocab).vocab_size
  config = pretrain_testutil.tiny_experiment(
      data, **{"data.seq_length": SEQ, "data.max_predictions_per_seq": PRED,
               "model.vocab_size": size,
               "model.max_position_embeddings": SEQ})
  model_dir = base / "run"
  pretrain_testutil.run_tiny(config, model_dir)
  return str(model_dir)


def test_pretraining_export_reads_the_wordpiece_vocabulary(wordpiece_run,
                                                           vocab, tmp_path):
  """The run's export ships the data's WordPiece vocabulary (its record and
  its data summary name it), by the record and by export mode."""
  version = export_testlib.export(str(tmp_path / "e"), model_dir=wordpiece_run)
  assets = os.listdir(os.path.join(version, "assets"))
  with open(vocab, "rb") as f:
    want = f.read()
  shipped = [a for a in assets if a.endswith(".txt")]
  assert shipped, assets
  with open(os.path.join(version, "assets", shipped[0]), "rb") as f:
    assert f.read() == want
  config = run_record.read(wordpiece_run).config
  task = pretraining.PretrainingTask(
      experiment_config.load_experiment_config(
          pretraining.PretrainingExperimentConfig, base=config),
      wordpiece_run)
  task.validate_inputs(training=True)  # the data summary read
  assert task.serving_params({}).vocab_file == os.path.abspath(vocab)


def test_export_from_flags_checks_the_wordpiece_vocabulary(wordpiece_run,
                                                           vocab, tmp_path):
  """--checkpoint with --vocab_file: the weights' vocabulary fingerprint is
  checked (another vocabulary of the same size is refused)."""
  checkpoint = os.path.join(wordpiece_run, "checkpoints", "ckpt-2")
  copied = tmp_path / "copied"
  copied.mkdir()
  for name in os.listdir(os.path.dirname(checkpoint)):
    if name.startswith("ckpt-2."):
      shutil.copy(os.path.join(os.path.dirname(checkpoint), name), copied)
  prefix = str(copied / "ckpt-2")
  config_file = str(tmp_path / "albert_config.json")
  output_files.write_json(config_file, run_record.read(wordpiece_run).model)
  other = str(tmp_path / "other.txt")  # the same size, other ids
  tokens = wordpiece_testlib.tokens()
  with open(other, "w", encoding="utf-8") as f:
    f.write("\n".join(tokens[:5] + tokens[5:][::-1]) + "\n")
  request = dict(checkpoint=prefix, config_files=[config_file])
  with pytest.raises(ValueError) as e:
    export_testlib.export(str(tmp_path / "bad"), {"vocab_file": other},
                          **request)
  assert str(e.value).startswith(
      f"the vocabulary (sha256) is {output_files.file_sha256(other)!r} in the "
      f"given config but checkpoint {prefix} has "
      f"{output_files.file_sha256(vocab)!r}"), str(e.value)
  assert not os.path.exists(tmp_path / "bad")
  export_testlib.export(str(tmp_path / "good"), {"vocab_file": vocab},
                        **request)


def test_pretraining_run_to_hugging_face_and_back(wordpiece_run, vocab,
                                                  tmp_path):
  """A WordPiece pretraining run -> AlbertForPreTraining with BertTokenizer
  files -> ours: the run's weights and vocabulary."""
  back = str(tmp_path / "hf")
  assert hf_export.export_hf(wordpiece_run, back)[1] == "AlbertForPreTraining"
  with open(os.path.join(back, "vocab.txt"), "rb") as f, open(vocab,
                                                             "rb") as g:
    assert f.read() == g.read()
  with open(os.path.join(back, "tokenizer_config.json")) as f:
    assert json.load(f)["tokenizer_class"] == "BertTokenizer"
  again = str(tmp_path / "again")
  hf_models.import_hf(back, again)
  config = AlbertConfig.from_json_file(os.path.join(again,
                                                    "albert_config.json"))
  reference, converted = AlbertPretrainer(config), AlbertPretrainer(config)
  restore_lib.restore(reference, wordpiece_run)
  restore_lib.restore(converted, again)
  for a, b in zip(reference.variables, converted.variables):
    assert (a.numpy() == b.numpy()).all(), a.name
  assert conversion.find_vocab_files(os.path.join(again, "ckpt")) == [
      os.path.join(again, "vocab.txt")]
