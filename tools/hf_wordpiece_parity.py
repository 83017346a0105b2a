r"""Loads albert_tf's WordPiece Hugging Face exports with transformers;
compares token ids with albert_tf's WordPiece tokenizer.

For a directory written by `convert_checkpoint --from=albert_tf --to=hf` of
a WordPiece run (vocab.txt, tokenizer_config.json, tokenizer.json), the ids
of transformers' `AutoTokenizer.from_pretrained` and of the `tokenizers`
library's `Tokenizer.from_file(tokenizer.json)` are compared with
albert_tf's (data_prep/wordpiece.py on the directory's vocab.txt and
do_lower_case) on a table of Chinese, mixed and tricky strings; every
difference is printed.

Not part of albert_tf: it runs in an environment with transformers and
tokenizers (torch not needed); data_prep/wordpiece.py needs only numpy:

  PYTHONPATH=. /tmp/hfvenv/bin/python tools/hf_wordpiece_parity.py \
      --exported=/tmp/hf_out/zh_classifier

`--make_fixture=DIR --vocab=VOCAB_TXT` writes tests/testdata/hf/tokenizer_wordpiece
instead: transformers' own BertTokenizer of the vocabulary (its specials
moved to bert-base-chinese's places: [PAD] first, the others last) saved
with `save_pretrained`, and its ids on TABLE (expected_ids.json).
"""

import argparse
import json
import os
import sys

import tokenizers
import transformers

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
from albert_toolkit import wordpiece_vocab  # pylint: disable=g-import-not-at-top,wrong-import-position
from data_prep import wordpiece  # pylint: disable=g-import-not-at-top,wrong-import-position

TABLE = [
    "我们喜欢学习中文。", "BERT模型很好用!!! 北京人", "ＡＢＣ　ａｂｃ（学生）１２３ ①",
    "\uf900 \u8c48 \U00020000\U00020001 \u3400 \U00030000",
    "Café CAFÉ naïve RÉSUMÉS é", "İstanbul STRASSE ß ﬁ",
    "ΟΔΟΣ ΑΣ. Σ ΑΣ\x01Β α\u00adΣ ΑΣ\u0301",
    "the\x00man\x01is\u200beat\ufeffing a\u00adfood \x7f\ufffd",
    "tab\tnew\nline\rcr \x0b\x0c\x1c\x85 \u2028 \u00a0nbsp",
    "emoji 👍🏽 ❤️ 🇯🇵 家👨‍👩‍👧", "unaffable unaffx ## #the a##a eat##ing",
    "ひらがな カタカナ 한국어", "Hello, World! 你好…", "", "   ",
    "a" * 100, "a" * 101, "a" * 150 + " 我", "a" * 200, "a" * 201,
]


def compare(exported):
  """[(tokenizer name, text, its ids, ours)] of every difference."""
  with open(os.path.join(exported, "tokenizer_config.json")) as f:
    lower = json.load(f).get("do_lower_case", True)
  ours = wordpiece.WordPieceTokenizer(os.path.join(exported, "vocab.txt"),
                                      lower)
  theirs = {
      "AutoTokenizer": lambda t, tok=transformers.AutoTokenizer
      .from_pretrained(exported): tok(t, add_special_tokens=False)[
          "input_ids"],
      "tokenizers": lambda t, tok=tokenizers.Tokenizer.from_file(
          os.path.join(exported, "tokenizer.json")): tok.encode(
              t, add_special_tokens=False).ids,
  }
  differences = []
  for name, encode in theirs.items():
    for text in TABLE:
      want = ours.encode_ids(text)
      got = encode(text)
      if got != want:
        differences.append((name, text, got, want))
  return differences


def make_fixture(vocab_txt, directory):
  """transformers' BertTokenizer of `vocab_txt` saved in `directory`, with
  its ids on TABLE."""
  with open(vocab_txt, encoding="utf-8") as f:
    tokens = [line.rstrip("\n") for line in f]
  rest = [t for t in tokens if t not in wordpiece_vocab.SPECIAL_TOKENS]
  tokens = ([wordpiece_vocab.PAD] + rest +
            list(wordpiece_vocab.SPECIAL_TOKENS[1:]))
  tok = transformers.BertTokenizer(vocab={t: i for i, t in enumerate(tokens)},
                                   do_lower_case=True)
  tok.save_pretrained(directory)
  ids = [[t, tok(t, add_special_tokens=False)["input_ids"]] for t in TABLE]
  with open(os.path.join(directory, "expected_ids.json"), "w",
            encoding="utf-8") as f:
    json.dump({"transformers": transformers.__version__, "ids": ids}, f,
              ensure_ascii=False, indent=1)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--exported",
                      help="a directory written by --to=hf (WordPiece)")
  parser.add_argument("--make_fixture", help="write the test fixture here")
  parser.add_argument("--vocab", help="the fixture's vocabulary (vocab.txt)")
  args = parser.parse_args()
  if args.make_fixture:
    make_fixture(args.vocab, args.make_fixture)
    return
  differences = compare(args.exported)
  print(f"transformers {transformers.__version__}, tokenizers "
        f"{tokenizers.__version__}: {len(TABLE)} strings, "
        f"{len(differences)} differences")
  for name, text, got, want in differences:
    print(f"  {name}: {text[:30]!r}... {got[:8]} vs ours {want[:8]}")


if __name__ == "__main__":
  main()
