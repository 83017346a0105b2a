"""`--params_override`: `a.b=c,d.e=f` (or a YAML/JSON mapping) -> nested dict.

Model Garden's parser (`params_dict.nested_csv_str_to_json_str`) pastes the
values unquoted into one YAML flow mapping, so a value holding a flow
indicator does not parse: `data.input_path=data/train-?????-of-?????` failed
while `/data/...` passed (only values starting with one of `gs:/` get
quoted). Here each value is read as YAML on its own (numbers, booleans,
lists) and kept as the text it is when YAML cannot read it.

Several overrides (a repeated `--params_override`) apply in order, later
values winning, as repeated `--config_file`s do.
"""

import re
from typing import Any, Dict, Sequence, Union

import yaml
from official.modeling.hyperparams import params_dict

Overrides = Union[str, Sequence[str]]

# name=value, where a value is quoted, a [list], a {mapping} or runs to the
# next comma.
_ITEM = re.compile(r"""\s*(?P<name>[A-Za-z_][\w.]*)\s*=\s*
                       (?P<value>'[^']*'|"[^"]*"|\[[^\]]*\]|\{[^}]*\}|[^,]*?)
                       \s*(?:,|$)""", re.X)


class DuplicateKeyError(yaml.constructor.ConstructorError):
  """A mapping names a key twice (YAML itself keeps the last silently)."""


class _StrictLoader(params_dict._LOADER):  # pylint: disable=protected-access
  """Model Garden's loader (reads `1e-6` as a float, plain YAML 1.1 does
  not) refusing a key given twice in one mapping: a repeated section
  (`trainer:` twice) dropped the first one without a word."""

  def construct_mapping(self, node, deep=False):
    if isinstance(node, yaml.MappingNode):
      first = {}
      for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
          continue  # `<<: *base` merges: later keys override on purpose
        key = self.construct_object(key_node, deep=True)
        try:
          repeated = key in first
        except TypeError:
          continue  # an unhashable key: the base class names it
        if repeated:
          raise DuplicateKeyError(
              None, None, f"duplicate key {key!r} (first at line "
              f"{first[key] + 1}): YAML would keep only the last",
              key_node.start_mark)
        first[key] = key_node.start_mark.line
    return super().construct_mapping(node, deep=deep)


YAML_LOADER = _StrictLoader


def _as_list(overrides: Overrides):
  return [overrides] if isinstance(overrides, str) else list(overrides or ())


def describe(overrides: Overrides) -> str:
  """How errors name the overrides: `--params_override 'a=1'` (each one)."""
  return " ".join(f"--params_override {o!r}" for o in _as_list(overrides))


def _one_line(error: yaml.YAMLError) -> str:
  mark = getattr(error, "problem_mark", None)
  problem = getattr(error, "problem", None) or str(error).splitlines()[0]
  return f"{problem} at column {mark.column + 1}" if mark else problem


def _value(text: str) -> Any:
  """One override value: YAML's reading of it (a scalar, or a bracketed
  [list] / {mapping}), else the text itself."""
  if not text:
    return None  # `a.b=`: an empty string field, or None
  try:
    value = yaml.load(text, Loader=YAML_LOADER)
  except yaml.YAMLError:
    return text
  if isinstance(value, (dict, list)) and text[0] not in "[{":
    return text  # `a: b` or `- x` in a path is not YAML structure
  return value


def _items(text: str):
  """[(dotted name, value)] of `a.b=c,...`, or None if `text` is not that."""
  items, pos = [], 0
  while pos < len(text):
    match = _ITEM.match(text, pos)
    if not match or match.end() == pos:
      return None
    items.append((match["name"], _value(match["value"])))
    pos = match.end()
  return items


def _set(values: Dict[str, Any], dotted: str, value: Any, source: str):
  *sections, field = dotted.split(".")
  node = values
  for i, section in enumerate(sections):
    node = node.setdefault(section, {})
    if not isinstance(node, dict):
      raise ValueError(f"{source}: {'.'.join(sections[:i + 1])} is given "
                       "both a value and fields")
  if isinstance(node.get(field), dict):
    raise ValueError(f"{source}: {dotted} is given both a value and fields")
  if field in node:
    raise ValueError(f"{source}: {dotted} is given twice (which one is "
                     "meant?)")
  node[field] = value


def _merge(into: Dict[str, Any], values: Dict[str, Any]) -> Dict[str, Any]:
  """Deep merge, `values` winning."""
  for key, value in values.items():
    if isinstance(value, dict) and isinstance(into.get(key), dict):
      _merge(into[key], value)
    else:
      into[key] = value
  return into


def _parse_one(text: str) -> Dict[str, Any]:
  source = describe(text)
  items = _items(text)
  if items is None:  # a YAML/JSON mapping
    try:
      values = yaml.load(text, Loader=YAML_LOADER)
    except yaml.YAMLError as e:
      raise ValueError(f"{source}: not 'a.b=c,...' nor YAML "
                       f"({_one_line(e)})") from None
    if not isinstance(values, dict):
      raise ValueError(f"{source}: expected 'a.b=c,d.e=f'")
    return values
  values = {}
  for dotted, value in items:
    _set(values, dotted, value, source)
  return values


def parse_override(overrides: Overrides) -> Dict[str, Any]:
  """One override string, or several applied in order -> nested dict."""
  merged = {}
  for text in _as_list(overrides):
    if text:
      _merge(merged, _parse_one(text))
  return merged
