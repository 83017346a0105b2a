"""A tiny mixed Chinese/English WordPiece vocabulary and corpus for tests."""

import os

from albert_toolkit import wordpiece_vocab

# Characters of the test texts (each CJK character is a token, as in
# vocab_chinese.txt; "##" + a character is a continuation only for Latin).
CHINESE = "我们喜欢学习中文今天天气很好他她是老师学生北京上海的了在有人大小"
EXTENSION = "\U00020000\U0002a700\U0002b740\U0002b820\u3400\uf900\U0002f800"
ENGLISH = ["the", "cat", "sat", "on", "mat", "un", "##aff", "##able", "play",
           "##ing", "##ed", "cafe", "naive", "angstrom", "hello", "world",
           "bert", "albert", "a", "##a", "b", "##b", "x", "##x", "café",
           "Hello", "World", "Café", "ＡＢＣ", "ａｂｃ", "οδος", "οδοσ",
           "istanbul", "##s", "##", "###", "😀", "ok", "##ok", "##中"]
PUNCT = list(".,!?;:()[]{}'\"-#@$%^&*，。！？、：；（）《》“”…")


def tokens(extra=()):
  """The vocabulary's tokens, in id order."""
  out = list(wordpiece_vocab.SPECIAL_TOKENS) + ["[unused1]", "[unused2]"]
  out += ["<S>", "<T>"]
  out += list(CHINESE) + list(EXTENSION) + ENGLISH + PUNCT + list(extra)
  seen = set()
  return [t for t in out if not (t in seen or seen.add(t))]


def write_vocab(directory, name="vocab.txt", extra=()):
  """Writes the vocabulary to `directory`/`name`; returns its path."""
  path = os.path.join(str(directory), name)
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(tokens(extra)) + "\n")
  return path


def chinese_corpus(num_docs=60, sentences=6):
  """Repetitive Chinese documents (one sentence a line, blank line between
  documents) a tiny model learns quickly."""
  templates = ["我们喜欢学习中文。", "今天天气很好。", "他是老师，她是学生。",
               "北京的人很大，上海的人很小。", "我们在北京学习中文。",
               "老师喜欢学生。"]
  docs = []
  for d in range(num_docs):
    lines = [templates[(d + k) % len(templates)] for k in range(sentences)]
    docs.append("\n".join(lines))
  return "\n\n".join(docs) + "\n"
