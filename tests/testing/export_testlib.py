"""Shared helpers for the export / serving tests (not a test file).

- `train_spm(dir)`: a tiny SentencePiece model with the release recipe
  (unigram, pad 0, unk 1, no bos/eos, [CLS] [SEP] [MASK] = 2, 3, 4, the
  release's user symbols) trained on tests/testdata/botchan.txt. "1990," is
  added as a user symbol so the vocabulary holds a "<digit>," piece and the
  original's digit-comma fix is exercised (the release vocabulary has many).
- `write_wordpiece_vocab(dir)`: a tiny BERT WordPiece vocabulary (the
  specials, "##" pieces, CJK characters, accented and full-width forms);
  `WORDPIECE_VOCAB_SIZE` tokens.
- `tiny_config(vocab_size)`: a 1-layer ALBERT small enough for fast tests
  (tests of what repeats per layer ask for more).
- `export_serving(task_cls, model, dir, spm, **settings)`: a task's serving
  export of a model the test built, with the task's serving params (spm
  None and `vocab_file=` in settings: a WordPiece export).
- `Tokenize(preprocessor)`: a module whose one signature is a
  preprocessor's tokenizer (to convert to TFLite and compare ids).
- `export(export_dir, **request)`: export_savedmodel's path in process
  (tasks/export.py `ExportRequest`).
- `run_isolated(code, ...)`: runs Python in a user's process (forked from
  a server that imported TensorFlow alone, tests/testing/tool_server.py)
  where importing albert_tf, official, tf_keras, tensorflow_hub or data_prep
  raises ImportError (a sys.meta_path finder), so a SavedModel that needs
  them fails to load.
"""

import json
import os
import sys
import textwrap

import pytest
import sentencepiece as spm
import tensorflow as tf

from albert_tf.tasks import all_tasks  # pylint: disable=unused-import
from albert_tf.tasks import export as tasks_export
from albert_tf.tasks import export_request
from tests.testing import tool_server
from tests.testing import user_env
from tests.testing.repo_paths import BOTCHAN, ROOT

PYTHON = sys.executable
USER_SYMBOLS = ["(", ")", '"', "-", ".", "\u2013", "\u00a3", "\u20ac", "1990,"]
SPM_VOCAB_SIZE = 500
WORDPIECE_TOKENS = (
    ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] +
    "the man is eat ##ing a food un ##aff ##able cafe café naive resume "
    "##s ##e e ##a istanbul strasse ß ﬁ fi ο ##δ ##ος ##ς σ α ##σ , . ! # "
    "( ) 1 ##2 ##3 １ ##２ ａ ##ｂ ##ｃ ひらがな".split() +
    list("我爱北京天安门。测试（）模型很好用中国人") +
    # A compatibility ideograph and its NFD form (lower-casing maps one to
    # the other), CJK extensions B and A, an accented piece.
    ["\uf900", "\u8c48", "\U00020000", "\u3400", "##\u00e9", "\u00e9"])
WORDPIECE_VOCAB_SIZE = len(WORDPIECE_TOKENS)

# Not "keras": `import tensorflow` 2.20 itself imports Keras 3.
BLOCKED_MODULES = ("albert_tf", "official", "tf_keras", "tensorflow_hub",
                   "data_prep")

_ISOLATION_PREAMBLE = textwrap.dedent("""
    import importlib.abc
    import importlib.machinery
    import os
    import sys
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
    sys.path = [p for p in sys.path if p not in ("", %r)]
    BLOCKED = %r
    class _Refuse(importlib.abc.Loader):
      def create_module(self, spec):
        raise ImportError("blocked in this test: " + spec.name)
      def exec_module(self, module):
        raise ImportError("blocked in this test: " + module.__name__)
    class _Blocker(importlib.abc.MetaPathFinder):
      # Probes (importlib.util.find_spec) see a spec; importing raises.
      def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
          return importlib.machinery.ModuleSpec(name, _Refuse())
        return None
    sys.meta_path.insert(0, _Blocker())
    import json
    import numpy as np
    import tensorflow as tf
    _loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
    assert not _loaded, "imported anyway: %%s" %% _loaded[:5]
""") % (ROOT, BLOCKED_MODULES)


def _training_lines(limit=2000):
  with open(BOTCHAN, encoding="utf-8") as f:
    lines = [line.strip() for line in f if line.strip()][:limit]
  return lines + ["it was in 1990, and again in 2001, that we met."] * 20


def train_spm(directory, vocab_size=SPM_VOCAB_SIZE):
  """Trains the tiny test SentencePiece model; returns the .model path."""
  prefix = os.path.join(directory, "test_spm")
  spm.SentencePieceTrainer.train(
      sentence_iterator=iter(_training_lines()), model_prefix=prefix,
      vocab_size=vocab_size, model_type="unigram",
      character_coverage=0.99995, pad_id=0, unk_id=1, bos_id=-1, eos_id=-1,
      control_symbols=["[CLS]", "[SEP]", "[MASK]"],
      user_defined_symbols=USER_SYMBOLS, num_threads=1, minloglevel=2)
  return prefix + ".model"


def write_wordpiece_vocab(directory):
  """Writes `WORDPIECE_TOKENS` one a line; returns the vocab.txt path."""
  path = os.path.join(directory, "vocab.txt")
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(WORDPIECE_TOKENS) + "\n")
  return path


class Tokenize(tf.Module):
  """The ids of a text preprocessor's tokenizer as a signature `tokenize`
  (`signatures()`, as a serving module): text [batch] -> ids [batch, most]
  (-1 padded), lengths [batch]."""

  def __init__(self, preprocessor):
    super().__init__()
    self.preprocessor = preprocessor

  def signatures(self):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string,
                                                name="text")])
    def tokenize(text):
      ids = self.preprocessor.tokenize_ids(text)
      return {"ids": ids.to_tensor(-1),
              "lengths": tf.cast(ids.row_lengths(), tf.int32)}
    return {"tokenize": tokenize}


def export_serving(task_cls, model, export_dir, spm_file, **settings):
  """`task_cls`'s serving export of `model` (built by the test)."""
  params = task_cls.serving_params_cls(spm_model_file=spm_file or "",
                                       **settings)
  params.validate()
  return tasks_export.export_model(task_cls, "serving", model, params,
                                   export_dir)


def export(export_dir, settings=None, **request):
  """export_savedmodel in process: `request` holds ExportRequest fields,
  `settings` the serving params flags."""
  return tasks_export.export(export_request.ExportRequest(
      export_dir=export_dir, settings=dict(settings or {}), **request))


def one_line_error(fn, *args, errors=ValueError, **kwargs):
  """The message of the `errors` that `fn(*args, **kwargs)` raises, after
  asserting it is one line."""
  with pytest.raises(errors) as e:
    fn(*args, **kwargs)
  message = str(e.value)
  assert "\n" not in message, message
  return message


def tiny_config(vocab_size=SPM_VOCAB_SIZE, **overrides):
  from albert_tf.modeling import albert_config  # pylint: disable=g-import-not-at-top
  values = dict(vocab_size=vocab_size, embedding_size=8, hidden_size=16,
                num_hidden_layers=1, num_attention_heads=2,
                intermediate_size=32, max_position_embeddings=32)
  values.update(overrides)
  return albert_config.AlbertConfig(**values)


def run_isolated(code, cwd, timeout=600, extra_imports=()):
  """Runs `code` after the import blocker in a user's process; returns the
  JSON object the code prints on its last stdout line (`emit(obj)`)."""
  script = _ISOLATION_PREAMBLE
  for name in extra_imports:
    script += f"import {name}\n"
  script += textwrap.dedent("""
      def emit(obj):
        print(json.dumps(obj))
  """)
  script += textwrap.dedent(code)
  path = os.path.join(cwd, "isolated_check.py")
  with open(path, "w", encoding="utf-8") as f:
    f.write(script)
  # A serving user's environment (the suite's TF_USE_LEGACY_KERAS=1 would
  # name tf_keras, which the import blocker hides).
  env = user_env.environ(CUDA_VISIBLE_DEVICES="")
  proc = tool_server.run([PYTHON, path], cwd=cwd, env=env,
                         capture_output=True, text=True, timeout=timeout)
  if proc.returncode != 0:
    raise AssertionError(f"isolated check failed ({proc.returncode}):\n"
                         f"{proc.stderr[-4000:]}\n{proc.stdout[-2000:]}")
  return json.loads(proc.stdout.strip().splitlines()[-1])
