r"""Makes the Hugging Face fixtures in tests/testdata/hf/ with transformers.

The independent reference for albert_tf's Hugging Face conversion: tiny
random-init ALBERT models of every transformers head class, saved with
`save_pretrained` (safetensors), with their tokenizers and, in each
directory, `expected.npz`: the inputs (ids from transformers' tokenizer on a
few sentences, masks, type ids) and transformers' float32 outputs. Also
`tokenizer_strings.json`: transformers' ids for ordinary and tricky strings.

Not part of albert_tf: it runs only in a separate environment with torch and
transformers (albert_tf's own environment has neither), e.g.

  python3 -m venv /work/hfvenv
  /work/hfvenv/bin/pip install torch==2.13.0 transformers safetensors \
      sentencepiece tokenizers numpy protobuf
  # The two SentencePiece models, trained on botchan with albert_tf's recipe
  # (vocabulary 600; nmt_nfkc: the release's normaliser with its charsmap;
  # identity: no charsmap, 9 KB, for the model fixtures):
  for r in nmt_nfkc identity; do
    PYTHONPATH=. .venv/bin/python -m data_prep.train_sentencepiece \
      --input_file=tests/testdata/botchan.txt --model_prefix=/tmp/spm_$r \
      --vocab_size=600 --num_threads=1 --normalization_rule_name=$r
  done
  /work/hfvenv/bin/python tools/make_hf_fixtures.py \
      --spm_nfkc=/tmp/spm_nmt_nfkc.model --spm_identity=/tmp/spm_identity.model \
      --output_dir=tests/testdata/hf

Made with torch 2.13.0 (CPU), transformers 5.24.0, tokenizers 0.23.3.
"""

import argparse
import json
import os
import shutil

import numpy as np
import torch
import transformers

SEQ = 16
SENTENCES = ("The quick brown fox jumps over the lazy dog.",
             "I am a cat; as yet I have no name.")
PAIR = ("Where did Botchan go in the morning?",
        "He went to the school, and came back at night.")

# Ordinary and tricky strings for the tokenizer test.
STRINGS = (
    "The quick brown fox jumps over the lazy dog.",
    "I am a cat; as yet I have no name.",
    "What is the matter with you?",
    "He said: \"No, thank you.\"",
    "don't won't it's",
    "Café naïve résumé",
    "Ünïcödé ÀÉÎÕÜ",
    "``Quoted'' text",
    "It cost 1,000,000 yen in 1905, or so.",
    "12,345, and 6,",
    "multiple   spaces\tand\ttabs",
    "  leading and trailing  ",
    "ＦＵＬＬ－ＷＩＤＴＨ　ｆｏｒｍｓ １２３",
    "ﬁne ligature",
    "(parenthesised) - dash – en dash £5 €10",
    "e-mail: a.b@c.d",
    "",
)

# name -> (class, config overrides). Every head class; 1 and 2 groups,
# 1 and 2 inner layers; gelu (exact), gelu_new (tanh) and relu.
FIXTURES = {
    "model": ("AlbertModel", dict(hidden_act="gelu_new")),
    "pretraining": ("AlbertForPreTraining", dict(
        num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2,
        hidden_act="gelu")),
    "masked_lm": ("AlbertForMaskedLM", dict(inner_group_num=2,
                                            hidden_act="relu")),
    "classifier": ("AlbertForSequenceClassification", dict(
        num_hidden_groups=2, hidden_act="gelu_new",
        id2label={0: "negative", 1: "neutral", 2: "positive"},
        label2id={"negative": 0, "neutral": 1, "positive": 2})),
    "regression": ("AlbertForSequenceClassification", dict(
        num_labels=1, problem_type="regression", hidden_act="gelu")),
    "question_answering": ("AlbertForQuestionAnswering", dict(
        hidden_act="gelu_new")),
    "token_classification": ("AlbertForTokenClassification", dict(
        hidden_act="relu",
        id2label={0: "O", 1: "B-PER", 2: "I-PER", 3: "B-LOC"},
        label2id={"O": 0, "B-PER": 1, "I-PER": 2, "B-LOC": 3})),
    "multiple_choice": ("AlbertForMultipleChoice", dict(
        num_hidden_groups=2, inner_group_num=2, hidden_act="gelu")),
}
# The one model fixture saved as transformers 5 saves it (tokenizer.json,
# no spiece.model); the others carry spiece.model (transformers 4's files).
JSON_ONLY = "token_classification"


def tiny_config(vocab_size, **overrides):
  base = dict(vocab_size=vocab_size, embedding_size=8, hidden_size=16,
              num_hidden_layers=2, num_hidden_groups=1, num_attention_heads=2,
              intermediate_size=32, inner_group_num=1,
              max_position_embeddings=32, type_vocab_size=2,
              hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
              classifier_dropout_prob=0.0, pad_token_id=0, bos_token_id=2,
              eos_token_id=3)
  base.update(overrides)
  return transformers.AlbertConfig(**base)


def spiece_tokenizer_dir(path, spm_file, do_lower_case=True):
  """A transformers-4-style tokenizer directory: spiece.model and
  tokenizer_config.json (what transformers' AlbertTokenizer reads)."""
  os.makedirs(path, exist_ok=True)
  shutil.copyfile(spm_file, os.path.join(path, "spiece.model"))
  with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
    json.dump({"tokenizer_class": "AlbertTokenizer",
               "do_lower_case": do_lower_case, "keep_accents": False,
               "remove_space": True, "model_max_length": 32}, f, indent=2)


def inputs_for(tokenizer, architecture):
  """Fixed inputs: a single sentence and a pair ([choices] for multiple
  choice), padded to SEQ."""
  kwargs = dict(padding="max_length", max_length=SEQ, truncation=True,
                return_tensors="pt", return_token_type_ids=True)
  if architecture == "AlbertForMultipleChoice":
    # 4 choices: the number albert_tf's multiple-choice task defaults to.
    enc = tokenizer([PAIR[0]] * 4,
                    [PAIR[1], SENTENCES[0], SENTENCES[1], "Nowhere."],
                    **kwargs)
    return {k: v.unsqueeze(0) for k, v in enc.items()}  # [1, choices, SEQ]
  return dict(tokenizer([SENTENCES[0], PAIR[0]], [SENTENCES[1], PAIR[1]],
                        **kwargs))


def outputs_of(model, inputs):
  """Every output tensor of the model as float32 numpy."""
  with torch.no_grad():
    out = model(**inputs, output_hidden_states=True)
  arrays = {"hidden_states_last": out.hidden_states[-1]}
  for key in ("last_hidden_state", "pooler_output", "logits",
              "prediction_logits", "sop_logits", "start_logits",
              "end_logits"):
    value = getattr(out, key, None)
    if value is not None:
      arrays[key] = value
  return {k: v.float().numpy() for k, v in arrays.items()}


def make_model_fixture(name, architecture, overrides, spm_file, out_dir,
                       seed):
  path = os.path.join(out_dir, name)
  spiece_tokenizer_dir(path, spm_file)
  tokenizer = transformers.AutoTokenizer.from_pretrained(path)
  if name == JSON_ONLY:
    os.remove(os.path.join(path, "spiece.model"))
    tokenizer.save_pretrained(path)  # transformers 5: tokenizer.json only
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
  torch.manual_seed(seed)
  config = tiny_config(tokenizer.vocab_size, **overrides)
  model = getattr(transformers, architecture)(config).eval()
  # Random-init biases and LayerNorms are 0 and 1: make them random too,
  # so a dropped or swapped bias shows in the outputs.
  with torch.no_grad():
    for param in model.parameters():
      param.add_(0.05 * torch.randn_like(param))
  model.save_pretrained(path, safe_serialization=True)
  inputs = inputs_for(tokenizer, architecture)
  arrays = {k: v.numpy().astype(np.int32) for k, v in inputs.items()}
  arrays.update(outputs_of(model, inputs))
  np.savez_compressed(os.path.join(path, "expected.npz"), **arrays)
  return sorted(arrays)


def strings_table(tokenizers):
  """{"strings": [...], "<fixture>": {"ids": [...], "tokens": [...]}}."""
  table = {"strings": list(STRINGS)}
  for name, tokenizer in tokenizers.items():
    ids = [tokenizer(s)["input_ids"] for s in STRINGS]
    table[name] = {"ids": ids,
                   "tokens": [tokenizer.convert_ids_to_tokens(i) for i in ids]}
  return table


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--spm_nfkc", required=True,
                      help="SentencePiece model with the nmt_nfkc charsmap.")
  parser.add_argument("--spm_identity", required=True,
                      help="SentencePiece model without a charsmap.")
  parser.add_argument("--output_dir", required=True)
  args = parser.parse_args()
  os.makedirs(args.output_dir, exist_ok=True)
  # The tokenizer fixtures: the nmt_nfkc model as spiece.model, and as
  # transformers 5 saves it (tokenizer.json only).
  spiece_dir = os.path.join(args.output_dir, "tokenizer_spiece")
  spiece_tokenizer_dir(spiece_dir, args.spm_nfkc)
  json_dir = os.path.join(args.output_dir, "tokenizer_json")
  transformers.AutoTokenizer.from_pretrained(spiece_dir).save_pretrained(
      json_dir)
  tokenizers = {name: transformers.AutoTokenizer.from_pretrained(
      os.path.join(args.output_dir, name))
                for name in ("tokenizer_spiece", "tokenizer_json")}
  with open(os.path.join(args.output_dir, "tokenizer_strings.json"), "w",
            encoding="utf-8") as f:
    json.dump(strings_table(tokenizers), f, ensure_ascii=False, indent=1)
  for seed, (name, (architecture, overrides)) in enumerate(FIXTURES.items()):
    keys = make_model_fixture(name, architecture, overrides,
                              args.spm_identity, args.output_dir, seed)
    print(f"{name}: {architecture} {keys}")


if __name__ == "__main__":
  main()
