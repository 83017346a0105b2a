"""Shared helpers of the fine-tuning tests (tiny SentencePiece model, config).

The SentencePiece model follows the release recipe (unigram, pad 0, unk 1, no
bos/eos, [CLS] [SEP] [MASK] at 2/3/4) and is trained once per test session
from tests/testdata/botchan.txt.
"""

import json
import os
import random

from albert_tf.core import experiment_config
from albert_tf.tasks import sentence_prediction
from data_prep import tokenization
from data_prep import train_sentencepiece
from tests.testing.repo_paths import BOTCHAN

COLOURS = ("red", "blue", "green", "black")

# One layer: these tests are of heads, data and exports; what repeats per layer
# (sharing, groups, encoder_outputs) is tested with more.
TINY_CONFIG = dict(vocab_size=1000, embedding_size=16, hidden_size=32,
                   num_hidden_layers=1, num_attention_heads=2,
                   intermediate_size=64, max_position_embeddings=64)


def spm_model(tmp_path_factory, vocab_size=1000):
  """Path of a release-recipe SentencePiece model (trained once/session)."""
  base = tmp_path_factory.getbasetemp() / f"finetune_spm_{vocab_size}"
  model = base / "spm.model"
  if not model.exists():
    base.mkdir(exist_ok=True)
    train_sentencepiece.train([BOTCHAN], str(base / "spm"),
                              train_sentencepiece.SentencePieceConfig(
                                  vocab_size=vocab_size, num_threads=1,
                                  input_sentence_size=0))
  return str(model)


def tokenizer(tmp_path_factory, vocab_size=1000):
  return tokenization.FullTokenizer(spm_model(tmp_path_factory, vocab_size))


def botchan_sentences(limit=400, min_words=4, max_words=12):
  """Short lines of the novel (training text for synthetic tasks), without
  the COLOURS words the synthetic tasks use as signal."""
  out = []
  with open(BOTCHAN, encoding="utf-8") as f:
    for line in f:
      words = line.split()
      if set(w.strip('.,;:!?"\'()').lower() for w in words) & set(COLOURS):
        continue
      if min_words <= len(words) <= max_words and "\t" not in line:
        out.append(" ".join(words))
      if len(out) >= limit:
        break
  return out


def tiny_finetune_config(config_cls, data, steps=300, lr=2e-3, batch=32,
                         optimizer="adamw", **task):
  """A `config_cls` (a family's experiment config) of the tiny model for CPU
  tests."""
  return experiment_config.load_experiment_config(config_cls, flag_values={
      "model": dict(TINY_CONFIG, hidden_dropout_prob=0.0,
                    attention_probs_dropout_prob=0.0),
      "data": dict(dict(global_batch_size=batch, eval_batch_size=32,
                        shuffle_buffer_size=1000, seed=1), **data),
      "task": dict(dict(classifier_dropout=0.0), **task),
      "optimizer": {"name": optimizer, "learning_rate": lr,
                    "num_warmup_steps": 20},
      "trainer": {"train_steps": steps, "steps_per_loop": 50,
                  "checkpoint_interval": steps, "eval_interval": steps},
      "runtime": {"distribution_strategy": "default", "seed": 1},
  })


def synthetic_squad(rng, sentences, n, prefix):
  """A learnable SQuAD 2.0 dataset: "Which colour is named?" over short
  lines, half with one COLOURS word inserted (the answer), half with none."""
  paragraphs = []
  for i in range(n):
    words = rng.choice(sentences).split()
    qa = {"id": f"{prefix}{i}", "question": "Which colour is named?"}
    if rng.random() < 0.5:
      colour = rng.choice(COLOURS)
      words.insert(rng.randrange(len(words) + 1), colour)
      context = " ".join(words)
      # Character offset of the inserted word (first whole-word match).
      start = context.split(" ").index(colour)
      offset = len(" ".join(context.split(" ")[:start])) + (1 if start else 0)
      qa["answers"] = [{"text": colour, "answer_start": offset}]
      qa["is_impossible"] = False
    else:
      context = " ".join(words)
      qa["answers"] = []
      qa["is_impossible"] = True
    paragraphs.append({"context": context, "qas": [qa]})
  return {"version": "v2.0", "data": [{"title": "syn",
                                       "paragraphs": paragraphs}]}


def write_synthetic_squad(directory, sizes, seed=0, words=(3, 6)):
  """Writes `synthetic_squad` files `<split>-v2.0.json` into `directory`
  (sizes: split -> number of questions; contexts of `words` (min, max)
  words); returns split -> path."""
  rng = random.Random(seed)
  sentences = botchan_sentences(300, min_words=words[0], max_words=words[1])
  files = {}
  for name, n in sizes.items():
    files[name] = os.path.join(str(directory), f"{name}-v2.0.json")
    with open(files[name], "w", encoding="utf-8") as f:
      json.dump(synthetic_squad(rng, sentences, n, name), f)
  return files


def write_race_split(root, split, rng, sentences, num_files):
  """RACE-layout files of `split` (a synthetic task: the right option is
  the colour word)."""
  words = sorted({w.strip('.,;:!?"\'()').lower()
                  for s in sentences for w in s.split()} - {""})
  for i in range(num_files):
    level = "middle" if i % 2 else "high"
    questions, options, answers = [], [], []
    for _ in range(3):
      answer = rng.randrange(4)
      opts = rng.sample(words, 3)
      opts.insert(answer, rng.choice(COLOURS))
      questions.append("Which one is a colour _ ?" if rng.random() < 0.5
                       else "Which one is a colour?")
      options.append(opts)
      answers.append("ABCD"[answer])
    d = os.path.join(root, split, level)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"{i}.txt"), "w", encoding="utf-8") as f:
      json.dump({"id": f"{level}{i}.txt", "article": rng.choice(sentences),
                 "questions": questions, "options": options,
                 "answers": answers}, f)


def warm_started_classifier(config):
  """The model of a classifier run of `config`, warm-started as a run
  starts (from its trainer.init_checkpoint or task.init_saved_model)."""
  task = sentence_prediction.ClassifierTask(config, "")
  model = task.build_model()
  task.initialize(model)
  return model


def warm_start_error(config):
  """The message of the ValueError refusing `warm_started_classifier`."""
  try:
    warm_started_classifier(config)
  except ValueError as e:
    return str(e)
  raise AssertionError("the warm start was not refused")
