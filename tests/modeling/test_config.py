"""albert_tf.modeling.albert_config: presets, validation messages, the release's JSON files.

Fast (no model is built); also the Bazel CI subset's smoke test that the
//albert_tf library and its official_configs data are wired up.
"""
import json

import pytest

from albert_tf.modeling.albert_config import AlbertConfig, as_albert_config, list_presets

# The released sizes (spec section 1): H, L, heads, FFN, E, V, dropout.
RELEASED = {
    "base": (768, 12, 12, 3072, 128, 30000),
    "large": (1024, 24, 16, 4096, 128, 30000),
    "xlarge": (2048, 24, 16, 8192, 128, 30000),
    "xxlarge": (4096, 12, 64, 16384, 128, 30000),
}
DROPOUT = {("v1", "xxlarge"): 0.0, "v1": 0.1, "v2": 0.0}

# A released albert_config.json (albert_base v2), extra keys included.
RELEASE_BASE_V2_JSON = {
    "attention_probs_dropout_prob": 0,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0,
    "embedding_size": 128,
    "hidden_size": 768,
    "initializer_range": 0.02,
    "intermediate_size": 3072,
    "max_position_embeddings": 512,
    "num_attention_heads": 12,
    "num_hidden_layers": 12,
    "num_hidden_groups": 1,
    "net_structure_type": 0,
    "gap_size": 0,
    "num_memory_blocks": 0,
    "inner_group_num": 1,
    "down_scale_factor": 1,
    "type_vocab_size": 2,
    "vocab_size": 30000,
}


def test_every_released_size_has_both_presets():
  presets = set(list_presets())
  for size in RELEASED:
    assert {f"albert_{size}_v1", f"albert_{size}_v2"} <= presets


@pytest.mark.parametrize("size", sorted(RELEASED))
@pytest.mark.parametrize("version", ["v1", "v2"])
def test_preset_matches_release_table(size, version):
  c = AlbertConfig.from_preset(f"albert_{size}_{version}")
  got = (c.hidden_size, c.num_hidden_layers, c.num_attention_heads,
         c.intermediate_size, c.embedding_size, c.vocab_size)
  assert got == RELEASED[size]
  dropout = DROPOUT.get((version, size), DROPOUT[version])
  assert c.hidden_dropout_prob == pytest.approx(dropout)
  assert c.attention_probs_dropout_prob == pytest.approx(dropout)
  assert (c.max_position_embeddings, c.type_vocab_size) == (512, 2)
  assert (c.num_hidden_groups, c.inner_group_num) == (1, 1)
  assert c.hidden_act == "gelu" and c.initializer_range == 0.02


def test_tiny_preset_is_valid_and_small():
  c = as_albert_config("albert_tiny")
  assert c.hidden_size % c.num_attention_heads == 0
  assert c.hidden_size <= 128 and c.num_hidden_layers <= 4


def test_unknown_preset_lists_the_available_ones():
  with pytest.raises(ValueError, match=r"albert_nope.*albert_base_v2"):
    AlbertConfig.from_preset("albert_nope")


@pytest.mark.parametrize("field,value,message", [
    ("hidden_size", 0, r"AlbertConfig\.hidden_size must be a positive integer"),
    ("vocab_size", -5, r"AlbertConfig\.vocab_size"),
    ("num_attention_heads", 7,
     r"hidden_size \(768\) must be divisible by num_attention_heads \(7\)"),
    ("num_hidden_groups", 5,
     r"num_hidden_layers \(12\) must be divisible by num_hidden_groups \(5\)"),
    ("hidden_act", "gleu", r"AlbertConfig\.hidden_act.*'gleu'"),
    ("sharing", "some", r"AlbertConfig\.sharing.*'some'"),
    ("hidden_dropout_prob", 1.0, r"AlbertConfig\.hidden_dropout_prob"),
    ("initializer_range", 0.0, r"AlbertConfig\.initializer_range"),
])
def test_validation_error_names_the_field(field, value, message):
  values = dict(RELEASE_BASE_V2_JSON, **{field: value})
  with pytest.raises(ValueError, match=message):
    AlbertConfig.from_dict(values)


def test_bool_is_not_an_integer_size():
  with pytest.raises(ValueError, match=r"type_vocab_size"):
    AlbertConfig(type_vocab_size=True).validate()


def test_from_json_file_accepts_release_extra_keys(tmp_path):
  path = tmp_path / "albert_config.json"
  path.write_text(json.dumps(RELEASE_BASE_V2_JSON))
  c = AlbertConfig.from_json_file(str(path))
  assert c.as_dict() == AlbertConfig.from_preset("albert_base_v2").as_dict()
  assert not hasattr(c, "net_structure_type")


def test_from_json_file_rejects_a_real_unknown_key_naming_file_and_key(
    tmp_path):
  path = tmp_path / "albert_config.json"
  path.write_text(json.dumps(dict(RELEASE_BASE_V2_JSON, hiden_size=768)))
  with pytest.raises(ValueError, match=r"albert_config\.json.*'hiden_size'"):
    AlbertConfig.from_json_file(str(path))


def test_from_json_file_bad_json_names_the_file(tmp_path):
  path = tmp_path / "broken.json"
  path.write_text('{"vocab_size": 30000,')
  with pytest.raises(ValueError, match=r"broken\.json:1: not valid JSON"):
    AlbertConfig.from_json_file(str(path))


def test_json_round_trip(tmp_path):
  c = AlbertConfig.from_preset("albert_large_v1")
  path = tmp_path / "out.json"
  c.to_json_file(str(path))
  assert AlbertConfig.from_json_file(str(path)).as_dict() == c.as_dict()


def test_config_file_not_utf8_or_with_a_bom(tmp_path):
  """A Latin-1 config raised a codec error naming no file."""
  path = tmp_path / "albert_config.json"
  path.write_bytes(b'{"vocab_size": 300, "hidden_act": "g\xe9lu"}')
  with pytest.raises(ValueError) as e:
    AlbertConfig.from_json_file(str(path))
  assert str(e.value) == (f"{path}: not UTF-8 (byte 0xe9 at offset 36); "
                          "save it as UTF-8")
  path.write_bytes(b"\xef\xbb\xbf" + json.dumps(
      dict(RELEASE_BASE_V2_JSON, vocab_size=300)).encode())
  assert AlbertConfig.from_json_file(str(path)).vocab_size == 300
