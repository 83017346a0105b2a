"""Encoder and pretraining SavedModel exports: isolated load, numbers, errors,
saved_model_cli, TF-Hub fine-tuning, versioned directories, the CLI."""

import os

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from tests.testing import export_testlib as lib
from tests.testing import tool_server
from tests.testing import user_env
from albert_tf.checkpoints import object_layout
from albert_tf.checkpoints import paths
from albert_tf.serving import export_lib as es
from albert_tf.modeling.models.albert_pretrainer import AlbertPretrainer

# Ten seconds or more in all: handed out first (tests/conftest.py).
pytestmark = pytest.mark.slow

SEQ = 12
SAVED_MODEL_CLI = os.path.join(os.path.dirname(lib.PYTHON), "saved_model_cli")


def _inputs(config, batch=3, seq=SEQ, seed=0):
  rng = np.random.RandomState(seed)
  ids = rng.randint(5, config.vocab_size, size=[batch, seq]).astype(np.int32)
  ids[:, 0] = 2
  mask = np.ones_like(ids)
  mask[1, seq - 4:] = 0  # one padded row
  ids[mask == 0] = 0
  types = np.zeros_like(ids)
  types[:, seq // 2:] = 1
  return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("export_encoder")
  spm_file = lib.train_spm(str(tmp))
  # Two layers: encoder_outputs holds one tensor per application of the
  # shared layer.
  config = lib.tiny_config(num_hidden_layers=2)
  tf_keras.utils.set_random_seed(1)
  pretrainer = AlbertPretrainer(config)
  inputs = _inputs(config)
  inputs["masked_lm_positions"] = np.array([[1, 3], [2, 5], [0, 11]], np.int32)
  pretrainer(inputs)  # build
  # The pretraining export goes through the CLI path: checkpoint -> run().
  ckpt = object_layout.checkpoint_for(pretrainer).write(str(tmp / "ckpt"))
  config_file = str(tmp / "albert_config.json")
  config.to_json_file(config_file)
  pre_dir = lib.export(str(tmp / "pretraining"), export_kind="pretraining",
                       config_files=[config_file], checkpoint=ckpt,
                       settings={"spm_model_file": spm_file})
  enc_dir = es.export_encoder(pretrainer.encoder, str(tmp / "encoder"),
                              spm_model_file=spm_file)
  np.savez(tmp / "inputs.npz", **inputs)
  return dict(tmp=tmp, spm=spm_file, config=config, pretrainer=pretrainer,
              inputs=inputs, enc_dir=enc_dir, pre_dir=pre_dir)


_BAD_INPUT_CODE = """
def call_error(fn, **kw):
  try:
    fn(**kw)
  except Exception as e:  # what a serving client would see
    return type(e).__name__ + ": " + str(e)[:2000]
  return None

def bad_input_errors(sig, base):
  out = {}
  ok = {k: tf.constant(base[k]) for k in
        ("input_word_ids", "input_mask", "input_type_ids")}
  extra = {k: tf.constant(v) for k, v in base.items() if k not in ok}
  def with_(**changes):
    d = dict(ok, **extra); d.update(changes); return d
  ids = base["input_word_ids"]
  out["float_ids"] = call_error(sig, **with_(
      input_word_ids=tf.constant(ids, tf.float32)))
  out["int64_ids"] = call_error(sig, **with_(
      input_word_ids=tf.constant(ids, tf.int64)))
  out["rank1_ids"] = call_error(sig, **with_(
      input_word_ids=tf.constant(ids[0])))
  long = np.tile(ids, [1, 4])  # 48 > max_position_embeddings 32
  out["too_long"] = call_error(sig, **with_(
      input_word_ids=tf.constant(long), input_mask=tf.ones_like(long),
      input_type_ids=tf.zeros_like(long)))
  out["mask_shape"] = call_error(sig, **with_(
      input_mask=tf.constant(base["input_mask"][:, :-1])))
  out["id_range"] = call_error(sig, **with_(
      input_word_ids=tf.constant(ids + 10000)))
  return out
"""


@pytest.fixture(scope="module")
def isolated(setup):
  """Both exports loaded and called in one fresh, import-blocked process."""
  return lib.run_isolated(_BAD_INPUT_CODE + f"""
import os
path = {setup["enc_dir"]!r}
base = dict(np.load({str(setup["tmp"] / "inputs.npz")!r}))
obj = tf.saved_model.load(path)
sig = obj.signatures["serving_default"]
feed = {{k: tf.constant(base[k]) for k in
        ("input_word_ids", "input_mask", "input_type_ids")}}
s = sig(**feed)
c = obj(feed, training=False)
np.savez(os.path.join({str(setup["tmp"])!r}, "enc_out.npz"),
         sig_pooled=s["pooled_output"].numpy(),
         sig_seq=s["sequence_output"].numpy(),
         sig_default=s["default"].numpy(),
         sig_layers=s["encoder_outputs"].numpy(),
         call_pooled=c["pooled_output"].numpy(),
         call_layers=np.stack([t.numpy() for t in c["encoder_outputs"]], 1))
enc_result = (dict(
    signatures=sorted(obj.signatures),
    num_variables=len(obj.variables),
    num_trainable=len(obj.trainable_variables),
    assets=sorted(os.listdir(os.path.join(path, "assets"))),
    do_lower_case=bool(obj.do_lower_case.numpy()),
    errors=bad_input_errors(sig, {{k: base[k] for k in feed}})))

import os
base = dict(np.load({str(setup["tmp"] / "inputs.npz")!r}))
obj = tf.saved_model.load({setup["pre_dir"]!r})
feed = {{k: tf.constant(v) for k, v in base.items()}}
mlm = obj.signatures["mlm"](**feed)["mlm_logits"].numpy()
ids_only = {{k: v for k, v in feed.items() if k != "masked_lm_positions"}}
sop = obj.signatures["sop"](**ids_only)["sop_logits"].numpy()
mlm_fn = obj.mlm(feed)["mlm_logits"].numpy()
sop_fn = obj.sop(ids_only)["sop_logits"].numpy()
pooled = obj.signatures["serving_default"](**ids_only)["pooled_output"].numpy()
np.savez(os.path.join({str(setup["tmp"])!r}, "pre_out.npz"), mlm=mlm,
         sop=sop, mlm_fn=mlm_fn, sop_fn=sop_fn, pooled=pooled)
bad = dict(base, masked_lm_positions=np.array([[1, 40], [0, 0], [0, 0]],
                                             np.int32))
pre_result = (dict(signatures=sorted(obj.signatures),
          num_variables=len(obj.variables),
          mlm_errors=bad_input_errors(obj.signatures["mlm"], base),
          bad_position=call_error(obj.signatures["mlm"], **{{
              k: tf.constant(v) for k, v in bad.items()}})))
emit(dict(enc=enc_result, pre=pre_result))
""", cwd=str(setup["tmp"]))


def test_encoder_export_isolated(setup, isolated):
  result = isolated["enc"]
  encoder = setup["pretrainer"].encoder
  expected = encoder({k: setup["inputs"][k] for k in
                      ("input_word_ids", "input_mask", "input_type_ids")})
  out = np.load(setup["tmp"] / "enc_out.npz")
  pooled = expected["pooled_output"].numpy()
  np.testing.assert_allclose(out["sig_pooled"], pooled, atol=1e-5, rtol=0)
  np.testing.assert_allclose(out["sig_default"], pooled, atol=1e-5, rtol=0)
  np.testing.assert_allclose(out["call_pooled"], pooled, atol=1e-5, rtol=0)
  np.testing.assert_allclose(out["sig_seq"],
                             expected["sequence_output"].numpy(), atol=1e-5,
                             rtol=0)
  layers = np.stack([t.numpy() for t in expected["encoder_outputs"]], 1)
  assert out["sig_layers"].shape == (3, 2, SEQ, 16)
  np.testing.assert_allclose(out["sig_layers"], layers, atol=1e-5, rtol=0)
  np.testing.assert_allclose(out["call_layers"], layers, atol=1e-5, rtol=0)

  assert result["signatures"] == ["serving_default"]
  assert result["num_variables"] == len(encoder.variables)
  assert result["num_trainable"] == len(encoder.trainable_variables)
  assert result["assets"] == ["albert_config.json", "test_spm.model"]
  assert result["do_lower_case"] is True
  errors = result["errors"]
  # Dtypes are checked by the runtime before the graph runs; it names the
  # input by position in the sorted input names (input_word_ids is #2).
  for key, dtype in (("float_ids", "float"), ("int64_ids", "int64")):
    assert ("input #2(zero-based) was expected to be a int32 tensor but is a "
            f"{dtype} tensor") in errors[key]
  assert "input_word_ids must have rank 2: int32 [batch, seq]" in (
      errors["rank1_ids"])
  assert "max_position_embeddings = 32" in errors["too_long"]
  assert "input_mask must have the same shape" in errors["mask_shape"]
  assert "input_word_ids must be < vocab_size = 500" in errors["id_range"]


def test_pretraining_export_isolated(setup, isolated):
  result = isolated["pre"]
  expected = setup["pretrainer"](setup["inputs"])
  out = np.load(setup["tmp"] / "pre_out.npz")
  assert out["mlm"].shape == (3, 2, 500)
  for key in ("mlm", "mlm_fn"):
    np.testing.assert_allclose(out[key], expected["mlm_logits"].numpy(),
                               atol=1e-5, rtol=0)
  for key in ("sop", "sop_fn"):
    np.testing.assert_allclose(out[key], expected["sop_logits"].numpy(),
                               atol=1e-5, rtol=0)
  assert result["signatures"] == ["mlm", "serving_default", "sop"]
  # Hub users get the encoder's variables only (heads are saved separately).
  assert result["num_variables"] == len(setup["pretrainer"].encoder.variables)
  assert "max_position_embeddings = 32" in result["mlm_errors"]["too_long"]
  assert "masked_lm_positions must be < the sequence length" in (
      result["bad_position"])


def test_saved_model_cli_show_and_run(setup):
  env = user_env.environ()
  shown = tool_server.run([SAVED_MODEL_CLI, "show", "--all", "--dir",
                           setup["pre_dir"]], capture_output=True, text=True,
                          env=env, timeout=600, check=True).stdout
  for name in ("signature_def['serving_default']", "signature_def['mlm']",
               "signature_def['sop']", "masked_lm_positions", "mlm_logits",
               "sop_logits", "pooled_output"):
    assert name in shown, name
  outdir = setup["tmp"] / "cli_out"
  ids = setup["inputs"]
  feeds = []
  for k in ("input_word_ids", "input_mask", "input_type_ids"):
    np.save(setup["tmp"] / f"cli_{k}.npy", ids[k])
    feeds.append(f"{k}={setup['tmp'] / f'cli_{k}.npy'}")
  tool_server.run([SAVED_MODEL_CLI, "run", "--dir", setup["enc_dir"],
                   "--tag_set", "serve", "--signature_def", "serving_default",
                   "--inputs", ";".join(feeds), "--outdir", str(outdir)],
                  capture_output=True, text=True, env=env, timeout=600,
                  check=True)
  pooled = np.load(outdir / "pooled_output.npy")
  expected = setup["pretrainer"].encoder(
      {k: ids[k] for k in ("input_word_ids", "input_mask", "input_type_ids")})
  np.testing.assert_allclose(pooled, expected["pooled_output"].numpy(),
                             atol=1e-5, rtol=0)


def test_described_signatures_are_the_loaded_models(setup):
  """The export tool's listing, read from saved_model.pb, shows what
  loading the SavedModel gives."""
  for path in (setup["pre_dir"], setup["enc_dir"]):
    loaded = tf.saved_model.load(path)
    assert es.describe_signatures(path) == "\n".join(
        [f"SavedModel {path}"] + es.signature_lines({
            name: {"inputs": fn.structured_input_signature[1],
                   "outputs": fn.structured_outputs}
            for name, fn in loaded.signatures.items()}))
  lines = es.describe_signatures(setup["pre_dir"]).splitlines()
  assert "  signature 'mlm'" in lines
  assert "    in  masked_lm_positions: int32 (None, None)" in lines


def test_hub_keras_layer_fine_tunes(setup):
  import tensorflow_hub as hub  # pylint: disable=g-import-not-at-top
  layer = hub.KerasLayer(setup["enc_dir"], trainable=True)
  inputs = {k: tf_keras.Input(shape=(SEQ,), dtype=tf.int32, name=k)
            for k in ("input_word_ids", "input_mask", "input_type_ids")}
  pooled = layer(inputs)["pooled_output"]
  logits = tf_keras.layers.Dense(2)(pooled)
  model = tf_keras.Model(inputs, logits)
  feed = {k: setup["inputs"][k] for k in inputs}
  before = layer(feed)["pooled_output"].numpy()
  expected = setup["pretrainer"].encoder(feed)["pooled_output"].numpy()
  np.testing.assert_allclose(before, expected, atol=1e-5, rtol=0)
  assert len(layer.trainable_weights) == len(
      setup["pretrainer"].encoder.trainable_variables)
  model.compile(optimizer=tf_keras.optimizers.SGD(0.5),
                loss=tf_keras.losses.SparseCategoricalCrossentropy(
                    from_logits=True))
  history = model.fit(feed, np.array([0, 1, 1]), epochs=4, verbose=0)
  after = layer(feed)["pooled_output"].numpy()
  assert np.abs(after - before).max() > 1e-3
  assert history.history["loss"][-1] < history.history["loss"][0]


def test_versioned_directories(tmp_path):
  module = tf.Module()
  module.v = tf.Variable(1.0)
  assert es.next_version(str(tmp_path / "none")) == 1
  first = es.save_versioned(module, str(tmp_path), signatures=None)
  second = es.save_versioned(module, str(tmp_path), signatures=None)
  explicit = es.save_versioned(module, str(tmp_path), signatures=None,
                               version=10)
  assert [os.path.basename(p) for p in (first, second, explicit)] == [
      "1", "2", "10"]
  assert paths.existing_versions(str(tmp_path)) == [1, 2, 10]
  assert es.next_version(str(tmp_path)) == 11
  assert not [n for n in os.listdir(tmp_path) if n.startswith(".tmp")]
  with pytest.raises(ValueError, match="already exists"):
    es.save_versioned(module, str(tmp_path), signatures=None, version=2)


def test_cli_requires_checkpoint_and_rejects_missing_head(setup, tmp_path):
  config_file = str(setup["tmp"] / "albert_config.json")
  with pytest.raises(ValueError, match="--checkpoint is required"):
    lib.export(str(tmp_path), config_files=[config_file])
  # A pretraining checkpoint has no classifier head: refuse, unless allowed.
  ckpt = os.path.join(str(setup["tmp"]), "ckpt")
  request = dict(config_files=[config_file], checkpoint=ckpt,
                 task="classification",
                 settings={"spm_model_file": setup["spm"], "num_labels": 2,
                           "max_seq_length": 16})
  with pytest.raises(ValueError, match="not the AlbertClassifier head"):
    lib.export(str(tmp_path / "refused"), **request)
  path = lib.export(str(tmp_path / "smoke"), allow_random_head=True,
                    **request)
  loaded = tf.saved_model.load(path)
  pooler = [v for v in loaded.variables if "pooler" in v.name and
            "kernel" in v.name]
  assert len(pooler) == 1
  np.testing.assert_allclose(
      pooler[0].numpy(), setup["pretrainer"].encoder.pooler.kernel.numpy())
