r"""Exports ALBERT as SavedModels: encoder, pretraining, preprocessing, serving.

Every export is written to `<export_dir>/<version>/` (TF Serving's layout;
the version is the next free integer unless --version is given), atomically
(written beside it under a hidden name, then renamed), with the config JSON
(`assets/albert_config.json`) and the tokenizer file (the SentencePiece
model, or the BERT WordPiece vocabulary: albert_tf/serving/wordpiece.py) as
assets. Loading
needs only `tensorflow`, plus `import tensorflow_text` for the text-in
signatures (preprocessing and serving exports).

Kinds written here (no task needed): `encoder` (TF-Hub reusable encoder:
`hub.KerasLayer(path, trainable=True)`; signature `serving_default`, ids
in) and `preprocessing` (text in -> `input_word_ids`, `input_mask`,
`input_type_ids`; signatures `serving_default` for one segment, `text_pair`,
`tokenize`; TF-Hub preprocessor API). A task's own kinds (`serving`: text,
ids and tf.Example signatures for TF Serving; the pretraining task's
`pretraining`: + `mlm` and `sop`) are built by the task
(albert_tf/tasks/export.py) and saved by `export_module`.
"""

import contextlib
import errno
import json
import os
import tempfile
import uuid

import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from albert_tf.checkpoints import paths
from albert_tf.checkpoints.paths import next_version
from albert_tf.modeling import albert_config
from albert_tf.serving import preprocessing
from albert_tf.serving import serving_modules
from albert_tf.serving import wordpiece

PREPROCESSING_EXPORT = "preprocessing"
# The asset saying what an export is and where its weights came from.
EXPORT_INFO_NAME = "export.json"
# Versions a save tries before giving up while other exports take them.
_CLAIM_ATTEMPTS = 100

# --- Versioned directories ---------------------------------------------------


def check_export_dir(export_dir):
  """Fails in one line unless `export_dir` is a directory, or can be made
  one, where this process can create entries: checked before a model is
  built, where the save would fail only after it."""
  if "://" in export_dir:  # URL file systems: their own errors
    return
  path = os.path.abspath(export_dir)
  while not os.path.exists(path):
    path = os.path.dirname(path)
  if not os.path.isdir(path):
    raise ValueError(f"--export_dir {export_dir}: {path} is not a directory")
  try:  # the one reliable test (root passes os.access; /proc refuses)
    os.rmdir(tempfile.mkdtemp(prefix=".probe-", dir=path))
  except OSError as e:
    raise ValueError(f"--export_dir {export_dir}: cannot create a directory "
                     f"in {path} ({e.strerror})") from None


def version_dir(export_dir, version=None):
  """`<export_dir>/<version>` (default: the next free one); fails in one line
  when that version already exists or `export_dir` cannot be written
  (`check_export_dir`)."""
  check_export_dir(export_dir)
  if version is None:
    version = next_version(export_dir)
  if not 0 <= int(version) <= paths.MAX_VERSION:
    raise ValueError(f"--version must be an integer from 0 to "
                     f"{paths.MAX_VERSION} (TF Serving reads versions as "
                     f"int64), got {version}")
  final = os.path.join(export_dir, str(int(version)))
  if tf.io.gfile.exists(final):
    raise ValueError(f"{final} already exists; pass another --version or "
                     "leave it unset to use the next free one")
  return final


def write_versioned(export_dir, write, version=None):
  """Runs `write(directory)` on a hidden directory in `export_dir`, then
  renames it into `<export_dir>/<version>/` (default: the next free
  version); returns the path. TF Serving ignores non-integer names, so a
  server polling `export_dir` never loads a half-written model; a failed
  write leaves nothing behind. The rename never replaces a version: two
  exports into one directory at once land in two versions (the later one
  takes the next free number), and an explicit `version` taken meanwhile
  fails in one line.
  """
  version_dir(export_dir, version)  # a taken version fails before writing
  tf.io.gfile.makedirs(export_dir)
  staged = _staging_dir(export_dir)
  try:
    write(staged)
    return _claim_version(staged, export_dir, version)
  except BaseException:
    if tf.io.gfile.exists(staged):
      tf.io.gfile.rmtree(staged)
    raise


def _staging_dir(export_dir):
  """A new hidden directory in `export_dir`, this export's alone (two
  exports in one process, e.g. threads, never share it)."""
  staged = os.path.join(export_dir, f".tmp-{uuid.uuid4().hex}")
  if "://" in export_dir:
    tf.io.gfile.makedirs(staged)
  else:
    # A plain mkdir (mode 0777 less the umask), not mkdtemp's 0700: the
    # version directory is this one renamed, and a server running as
    # another user must read it.
    os.mkdir(staged)
  return staged


def _claim_version(staged, export_dir, version):
  """Renames `staged` to `version`, or to the next free version, trying
  the next while another export takes the one chosen; returns the path."""
  for _ in range(_CLAIM_ATTEMPTS):
    # The rename alone says whether a version is still free (an explicit
    # one was when the export began; the next one may be taken meanwhile).
    final = os.path.join(export_dir, str(
        int(version) if version is not None else next_version(export_dir)))
    try:
      _rename_no_replace(staged, final)
      return final
    except FileExistsError:
      if version is not None:
        raise ValueError(f"{final} was written by another export meanwhile; "
                         "pass another --version or leave it unset to use "
                         "the next free one") from None
  raise ValueError(f"{export_dir}: no free version after "
                   f"{_CLAIM_ATTEMPTS} attempts (other exports keep taking "
                   "them); export again")


def _rename_no_replace(source, target):
  """Renames directory `source` to `target`; FileExistsError when `target`
  exists. A local directory renamed onto a directory that has files fails
  in the rename itself (POSIX), so two exports cannot both win."""
  if "://" in target:  # URL file systems: checked, then renamed
    try:
      tf.io.gfile.rename(source, target, overwrite=False)
    except tf.errors.AlreadyExistsError as e:
      raise FileExistsError(target) from e
    return
  try:
    os.rename(source, target)
  except OSError as e:
    if e.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR):
      raise FileExistsError(target) from e
    raise


def save_versioned(module, export_dir, signatures, version=None):
  """Saves `module` to `<export_dir>/<version>/` atomically (`write_versioned`);
  returns the path."""
  return write_versioned(
      export_dir,
      lambda tmp: tf.saved_model.save(module, tmp, signatures=signatures),
      version)


@contextlib.contextmanager
def _config_asset(config):
  """A temporary `albert_config.json` file to attach as an asset."""
  with tempfile.TemporaryDirectory(prefix="albert_export_",
                                   ignore_cleanup_errors=True) as tmp:
    path = os.path.join(tmp, albert_config.CONFIG_JSON_NAME)
    config.to_json_file(path)
    yield path


@contextlib.contextmanager
def _info_asset(info):
  """A temporary `export.json` of `info` (a JSON-able dict) to attach as an
  asset; None without `info`."""
  if info is None:
    yield None
    return
  with tempfile.TemporaryDirectory(prefix="albert_export_",
                                   ignore_cleanup_errors=True) as tmp:
    path = os.path.join(tmp, EXPORT_INFO_NAME)
    with open(path, "w", encoding="utf-8") as f:
      json.dump(info, f, indent=2, sort_keys=True, default=str)
      f.write("\n")
    yield path


# --- Export functions ---------------------------------------------------------


def export_encoder(encoder, export_dir, spm_model_file=None,
                   do_lower_case=True, version=None, vocab_file=None,
                   info=None):
  """Exports an AlbertEncoder (or a model's `.encoder`) as a TF-Hub encoder;
  returns the versioned directory written."""
  encoder = getattr(encoder, "encoder", encoder)
  if spm_model_file:
    preprocessing.check_spm_model(spm_model_file, encoder.config.vocab_size)
  if vocab_file:
    wordpiece.check_vocab(vocab_file, encoder.config.vocab_size)

  def build(assets):
    module = serving_modules.EncoderModule(encoder, encoder.config, **assets)
    module.trace()
    return module
  return export_module(build, encoder.config, export_dir, spm_model_file,
                       do_lower_case, version, vocab_file, info)


def export_module(build_module, config, export_dir, spm_model_file=None,
                  do_lower_case=True, version=None, vocab_file=None,
                  info=None):
  """Saves the module `build_module(assets)` returns (a tf.Module with
  `signatures()`) to `<export_dir>/<version>/`; `assets` are its asset
  arguments: the model config (as a file) and the tokenizer file (the
  SentencePiece model or the WordPiece vocabulary). `info` (a JSON-able
  dict: kind, task, settings, the weights' source) becomes the asset
  `export.json`, the loaded object's `export_info_file`."""
  version_dir(export_dir, version)  # an existing version fails before tracing
  with _config_asset(config) as config_file, _info_asset(info) as info_file:
    module = build_module(dict(
        config_file=config_file, spm_model_file=spm_model_file,
        vocab_file=vocab_file,
        do_lower_case=(do_lower_case if spm_model_file or vocab_file
                       else None)))
    if info_file:
      module.export_info_file = tf.saved_model.Asset(info_file)
    return save_versioned(module, export_dir, module.signatures(), version)


class HubPreprocessor(tf.Module):
  """The TF-Hub text preprocessing API over `preprocessor` (the preprocessing
  export): `module(text)` and `pack_pair(text_a, text_b)` -> packed inputs,
  `tokenize(text)` -> ragged ids; its tokenizer file at the top, as
  `sp_model_file` (SentencePiece) or `vocab_file` (WordPiece).

  Args:
    preprocessor: a `TextPreprocessor` (or `WordPiecePreprocessor`).
  """

  def __init__(self, preprocessor):
    super().__init__()
    self.preprocessor = preprocessor
    for name in ("sp_model_file", "vocab_file"):
      if hasattr(preprocessor, name):
        setattr(self, name, getattr(preprocessor, name))

  @tf.function(autograph=False, input_signature=[preprocessing.STRINGS])
  def __call__(self, text):
    """Single-segment text [batch] -> packed inputs [batch, seq_length]."""
    return self.preprocessor.preprocess([text])

  @tf.function(autograph=False, input_signature=[preprocessing.STRINGS])
  def tokenize(self, text):
    """Text [batch] -> ragged int32 ids [batch, (tokens)], no truncation."""
    return self.preprocessor.tokenize_ids(text)

  @tf.function(autograph=False, input_signature=[preprocessing.STRINGS,
                                                  preprocessing.STRINGS])
  def pack_pair(self, text_a, text_b):
    """Text pair -> packed `[CLS] A [SEP] B [SEP]` inputs."""
    return self.preprocessor.preprocess([text_a, text_b])


def export_preprocessing(spm_model_file, export_dir, seq_length=128,
                         do_lower_case=True, config=None,
                         truncation="longest_first",
                         max_first_segment_length=None, version=None,
                         vocab_file=""):
  """Exports the text preprocessing model (text -> packed int32 inputs),
  tokenizing with the SentencePiece model or the WordPiece vocabulary
  (exactly one).

  Signatures: `serving_default` (`text` -> inputs), `text_pair` (`text_a`,
  `text_b` -> inputs), `tokenize` (`text` -> `token_ids` [batch, max_len]
  zero-padded, `num_tokens` [batch]). The loaded object is also the TF-Hub
  preprocessing API (`HubPreprocessor`).
  """
  if config is not None:
    config = albert_config.as_albert_config(config)
    if seq_length > config.max_position_embeddings:
      raise ValueError(f"seq_length {seq_length} exceeds the model's "
                       f"max_position_embeddings "
                       f"{config.max_position_embeddings}")
    if vocab_file:
      wordpiece.check_vocab(vocab_file, config.vocab_size)
    else:
      preprocessing.check_spm_model(spm_model_file, config.vocab_size)
  preprocessor = preprocessing.make_preprocessor(
      spm_model_file, vocab_file, do_lower_case=do_lower_case,
      seq_length=seq_length, truncation=truncation,
      max_first_segment_length=max_first_segment_length)
  module = HubPreprocessor(preprocessor)
  module.do_lower_case_var = tf.Variable(do_lower_case, trainable=False,
                                         name="do_lower_case")

  text = {"text": preprocessing.STRINGS}

  def checked(texts):
    return [serving_modules.check_rank(t, 1, name, "[batch]")
            for name, t in texts.items()]

  def text_pair(texts):
    return preprocessor.preprocess(list(serving_modules.same_batch(
        *checked(texts), "text_a", "text_b")))

  def tokenize(texts):
    ids = preprocessor.tokenize_ids(checked(texts)[0])
    return {"token_ids": ids.to_tensor(0),
            "num_tokens": tf.cast(ids.row_lengths(), tf.int32)}

  named = serving_modules.named_signature
  signatures = {
      "serving_default": named(lambda t: preprocessor.preprocess(checked(t)),
                               text),
      "text_pair": named(text_pair, dict.fromkeys(("text_a", "text_b"),
                                                  preprocessing.STRINGS)),
      "tokenize": named(tokenize, text)}
  with (_config_asset(config) if config is not None else
        contextlib.nullcontext()) as config_file:
    if config_file:
      module.albert_config_file = tf.saved_model.Asset(config_file)
    return save_versioned(module, export_dir, signatures, version)


# --- Inspection ---------------------------------------------------------------


def describe_signatures(path):
  """Text listing each signature's inputs and outputs (dtype, shape), read
  from the SavedModel's graph file (loading it would restore every weight)."""
  with tf.io.gfile.GFile(os.path.join(path, "saved_model.pb"), "rb") as f:
    saved = saved_model_pb2.SavedModel.FromString(f.read())
  signatures = saved.meta_graphs[0].signature_def

  def specs(infos):
    return {key: [tf.as_dtype(info.dtype).name,
                  tf.TensorShape(info.tensor_shape)]
            for key, info in infos.items()}
  return "\n".join([f"SavedModel {path}"] + signature_lines({
      name: {"inputs": specs(sig.inputs), "outputs": specs(sig.outputs)}
      for name, sig in signatures.items() if name != "__saved_model_init_op"}))


def signature_lines(table):
  """Lines listing {signature: {"inputs" / "outputs": {name: spec}}}, a
  spec being a TensorSpec or a [dtype, shape] pair."""
  lines = []
  for name, sides in sorted(table.items()):
    lines.append(f"  signature {name!r}")
    for side, short in (("inputs", "in "), ("outputs", "out")):
      for key, spec in sorted(sides[side].items()):
        dtype, shape = ((spec.dtype.name, spec.shape)
                        if isinstance(spec, tf.TensorSpec) else spec)
        lines.append(f"    {short} {key}: {dtype} {shape}")
  return lines
