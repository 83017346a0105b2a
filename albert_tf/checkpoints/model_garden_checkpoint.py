"""The Model Garden (`official.nlp.modeling`) checkpoint layout.

Model Garden's `networks.AlbertEncoder` supports one group with one inner
block. Its attention kernels are EinsumDense shapes: query/key/value kernel
[H, heads, head_size] and bias [heads, head_size], output kernel
[heads, head_size, H]; ours are [H, H] / [H]. Its pretrainer is
`models.BertPretrainerV2` (MLM layer `masked_lm`); the original SOP head is
written as a `next_sentence` `ClassificationHead` whose inner dense is a copy of
the pooler (dense + tanh on [CLS], exactly the pooled output) and whose
`logits` kernel is the SOP `output_weights` transposed ([H, 2]). A head
trained in Model Garden has an inner dense of its own, which our SOP head
cannot represent: reading it is refused, the encoder and MLM head alone
may still be taken.

Checkpoints we write: `tf.train.Checkpoint(encoder=...)` (encoder only, as
Model Garden's `tf2_albert_encoder_checkpoint_converter` writes) or
`tf.train.Checkpoint(**pretrainer.checkpoint_items, model=pretrainer)`.
Reading also accepts the converter's `--converted_model=pretrainer` output
(pretrainer saved under `encoder`) and training checkpoints (`model=`).
"""

import operator
import os
from typing import Callable, Dict, Tuple

import numpy as np
import tensorflow as tf
import tf_keras

from albert_tf.modeling import activations
from albert_tf.checkpoints import canonical_weights as cw
from albert_tf.checkpoints import object_layout
from albert_tf.checkpoints import paths

LAYOUT = "model_garden"
SOP_HEAD_NAME = "next_sentence"
# The inner dense layer of the `next_sentence` head, and what becomes of it.
SOP_DENSE = "pooler_dense"
_SOP_DENSE_IS_POOLER = (f"Model Garden {SOP_HEAD_NAME} {SOP_DENSE} (equal to "
                        "the encoder pooler, which the original SOP head "
                        "uses)")
_SOP_DENSE_DIFFERS = (
    f"Model Garden's {SOP_HEAD_NAME} head has its own inner dense layer "
    f"({SOP_DENSE} is not the encoder's pooler); ALBERT's SOP head reads the "
    "pooled output and cannot represent it")


def check_supported(config) -> None:
  if (config.num_hidden_groups != 1 or config.inner_group_num != 1 or
      config.sharing != "all"):
    raise cw.CheckpointConversionError(
        "Model Garden's AlbertEncoder supports only num_hidden_groups=1, "
        "inner_group_num=1, sharing='all'; config has num_hidden_groups="
        f"{config.num_hidden_groups}, inner_group_num={config.inner_group_num}"
        f", sharing={config.sharing!r}")


def build_encoder(config):
  """A Model Garden AlbertEncoder with our config (dict outputs)."""
  from official.nlp.modeling import networks  # pylint: disable=g-import-not-at-top
  check_supported(config)
  return networks.AlbertEncoder(
      vocab_size=config.vocab_size,
      embedding_width=config.embedding_size,
      hidden_size=config.hidden_size,
      num_layers=config.num_hidden_layers,
      num_attention_heads=config.num_attention_heads,
      max_sequence_length=config.max_position_embeddings,
      type_vocab_size=config.type_vocab_size,
      intermediate_size=config.intermediate_size,
      activation=activations.get_activation(config.hidden_act),
      dropout_rate=config.hidden_dropout_prob,
      attention_dropout_rate=config.attention_probs_dropout_prob,
      initializer=tf_keras.initializers.TruncatedNormal(
          stddev=config.initializer_range),
      dict_outputs=True)


def build_pretrainer(config, encoder=None):
  """BertPretrainerV2 with the MLM layer and a `next_sentence` SOP head."""
  from official.nlp.modeling import layers, models  # pylint: disable=g-import-not-at-top
  encoder = encoder or build_encoder(config)
  init = tf_keras.initializers.TruncatedNormal(stddev=config.initializer_range)
  sop = layers.ClassificationHead(
      inner_dim=config.hidden_size, num_classes=2, activation="tanh",
      dropout_rate=0.0, initializer=init, name=SOP_HEAD_NAME)
  pretrainer = models.BertPretrainerV2(
      encoder_network=encoder,
      mlm_activation=activations.get_activation(config.hidden_act),
      mlm_initializer=init,
      classification_heads=[sop])
  _ = pretrainer(pretrainer.inputs)  # Creates the head variables.
  return pretrainer


# canonical name -> (Model Garden variable, stored array -> ours,
#                    ours -> stored array); NumPy callables, no Python frames.
VariableMap = Dict[str, Tuple[tf.Variable, Callable, Callable]]


def _reshape(shape):
  return operator.methodcaller("reshape", tuple(shape))


def variable_map(encoder, pretrainer=None) -> VariableMap:
  """Canonical name -> (MG variable, to_ours, to_mg) for an MG model."""
  out = {}

  def add(name, var, to_ours=np.asarray, to_mg=np.asarray):
    out[name] = (var, to_ours, to_mg)

  def add_layer(prefix, layer, weights=("kernel", "bias")):
    for weight in weights:
      add(f"{prefix}/{weight}", getattr(layer, weight))

  add("embeddings/word_embeddings", encoder.get_embedding_table())
  add("embeddings/position_embeddings",
      encoder.get_layer("position_embedding")._position_embeddings)  # pylint: disable=protected-access
  add("embeddings/token_type_embeddings",
      encoder.get_layer("type_embeddings").embeddings)
  add_layer("embeddings/layer_norm",
            encoder.get_layer("embeddings/layer_norm"), ("gamma", "beta"))
  if "embedding_projection" in {layer.name for layer in encoder.layers}:
    add_layer("embeddings/embedding_hidden_mapping_in",
              encoder.get_layer("embedding_projection"))
  block = encoder.get_layer("transformer")
  attention = block._attention_layer  # pylint: disable=protected-access
  prefix = "transformer/attention_0"
  for ours, dense in (("query", attention._query_dense),  # pylint: disable=protected-access
                      ("key", attention._key_dense),  # pylint: disable=protected-access
                      ("value", attention._value_dense)):  # pylint: disable=protected-access
    # [H, heads, head_size] <-> [H, H]; [heads, head_size] <-> [H].
    add(f"{prefix}/{ours}/kernel", dense.kernel,
        _reshape((dense.kernel.shape[0], -1)), _reshape(dense.kernel.shape))
    add(f"{prefix}/{ours}/bias", dense.bias, _reshape((-1,)),
        _reshape(dense.bias.shape))
  output = attention._output_dense  # pylint: disable=protected-access
  # [heads, head_size, H] <-> [H, H].
  add(f"{prefix}/output_dense/kernel", output.kernel,
      _reshape((-1, output.kernel.shape[-1])), _reshape(output.kernel.shape))
  add(f"{prefix}/output_dense/bias", output.bias)
  add_layer(f"{prefix}/layer_norm", block._attention_layer_norm,  # pylint: disable=protected-access
            ("gamma", "beta"))
  prefix = "transformer/ffn_0"
  add_layer(f"{prefix}/intermediate", block._intermediate_dense)  # pylint: disable=protected-access
  add_layer(f"{prefix}/output_dense", block._output_dense)  # pylint: disable=protected-access
  add_layer(f"{prefix}/layer_norm", block._output_layer_norm,  # pylint: disable=protected-access
            ("gamma", "beta"))
  add_layer("pooler", encoder.get_layer("pooler_transform"))
  if pretrainer is not None:
    mlm = pretrainer.masked_lm
    add_layer("mlm_head/transform_dense", mlm.dense)
    add_layer("mlm_head/transform_layer_norm", mlm.layer_norm,
              ("gamma", "beta"))
    add("mlm_head/output_bias", mlm.bias)
    sop = _sop_head(pretrainer)
    # Dense kernel [H, 2] <-> original output_weights [2, H].
    add("sop_head/output_weights", sop.out_proj.kernel, np.transpose,
        np.transpose)
    add("sop_head/output_bias", sop.out_proj.bias)
  return out


def _sop_head(pretrainer):
  for head in pretrainer.classification_heads:
    if head.name == SOP_HEAD_NAME:
      return head
  raise ValueError(f"pretrainer has no {SOP_HEAD_NAME!r} head")


def map_model_garden_keys(path: str, stored, config,
                          with_heads: bool = True):
  """A Model Garden checkpoint (`stored`: its variable names) mapped to
  canonical names in one pass (nothing read): (ConversionReport whose
  `mapped` holds the stored key of each canonical name, transforms to our
  shapes)."""
  encoder = build_encoder(config)
  pretrainer = build_pretrainer(config, encoder)
  vmap = variable_map(encoder, pretrainer)
  by_id = {id(var): name for name, (var, _, _) in vmap.items()}
  sop_dense = _sop_head(pretrainer).dense
  # The SOP head's inner dense: ours has none, so it must be the pooler.
  aux = {id(sop_dense.kernel): "kernel", id(sop_dense.bias): "bias"}
  # The tf.train.Checkpoint roots Model Garden checkpoints are written with.
  label, keys = object_layout.best_root([
      ("encoder", dict(encoder=encoder)),
      ("pretrainer", dict(pretrainer.checkpoint_items, model=pretrainer)),
      ("converter pretrainer", dict(encoder=pretrainer,
                                    masked_lm=pretrainer.masked_lm)),
      ("training", dict(model=pretrainer))], stored)
  report = cw.ConversionReport(layout=f"{LAYOUT} ({label})", source=path)
  for key in sorted(set(stored) & set(keys)):
    name = by_id.get(id(keys[key]), "")
    weight = aux.get(id(keys[key]))
    if weight and with_heads:
      name = f"{cw.SOP_PREFIX}{SOP_DENSE}/{weight}"
      report.mapped[name] = key
      report.tied[name] = (f"pooler/{weight}", _SOP_DENSE_IS_POOLER,
                           _SOP_DENSE_DIFFERS)
    elif weight or (name.startswith(cw.HEAD_PREFIXES) and not with_heads):
      report.skipped[key] = "pretraining head (target is the encoder only)"
    elif name:
      report.mapped[name] = key
  return report, {name: to_ours for name, (_, to_ours, _) in vmap.items()}


def write_model_garden_checkpoint(values: Dict[str, np.ndarray], prefix: str,
                                  config, with_heads: bool = True) -> str:
  """Writes canonical arrays as a Model Garden checkpoint; returns its path."""
  encoder = build_encoder(config)
  pretrainer = build_pretrainer(config, encoder) if with_heads else None
  vmap = variable_map(encoder, pretrainer)
  targets = {name: var for name, (var, _, _) in vmap.items()}
  mg_values = {name: vmap[name][2](np.asarray(values[name]))
               for name in targets if name in values}
  missing_shapes = {n: n for n in targets}
  cw.check_and_assign(targets, mg_values, missing_shapes, "canonical weights")
  root = dict(encoder=encoder)
  if with_heads:
    sop = _sop_head(pretrainer)
    # The SOP head's inner dense is the pooler, so logits equal the original.
    sop.dense.kernel.assign(values["pooler/kernel"])
    sop.dense.bias.assign(values["pooler/bias"])
    root = dict(pretrainer.checkpoint_items, model=pretrainer)
  directory = os.path.dirname(os.path.abspath(prefix))
  tf.io.gfile.makedirs(directory)
  path = tf.train.Checkpoint(**root).write(prefix)
  paths.write_checkpoint_state(directory, os.path.basename(path))
  return path
