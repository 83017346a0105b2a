"""The data_prep tools' settings travel as frozen config dataclasses.

An entry point defines its flags with the config's field defaults
(`flags.DEFINE_integer("vocab_size", SentencePieceConfig.vocab_size, ...)`),
and `main` builds the config with `from_flags` and passes it down: no
function below `main` reads FLAGS, and library callers (tests, the demo,
benchmarks) build the same config in code.
"""

import dataclasses


def from_flags(config_cls, flag_values, **given):
  """`config_cls` with every field not `given` taken from the flag of the
  same name in the parsed `flag_values` (absl FlagValues); the config checks
  the values."""
  return config_cls(**{f.name: flag_values[f.name].value
                       for f in dataclasses.fields(config_cls)
                       if f.name not in given}, **given)
