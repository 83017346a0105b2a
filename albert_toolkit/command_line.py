"""Strict command lines: what absl lets through is refused here.

absl hands the words that are not flags to `main` as positional arguments,
and every tool ignored them: `--input_file in/*.txt` unquoted read only the
first file (the shell's other matches became such words), `dupe_factor=5`
(no dashes) changed nothing. A flag given twice keeps its last value and
drops the first without a word (`--model_dir=a --model_dir=b`). Float flags
take `nan` and `inf`, which pass every range check (`nan < 0` is false).
Every command-line tool, of data_prep and (through albert_tf/cli_flags.py)
of albert_tf, parses its flags with `parse_flags`, which refuses all three
with a one-line error, and makes `--help` list the tool's own flags
(wherever they are defined).
"""

import contextlib
import math
import signal
import sys
from typing import List, Sequence

from absl import flags

_SHOWN = 3  # stray words named in the error (a glob can expand to thousands)


def stray_words_error(words: Sequence[str]) -> str:
  """The error for command-line words that are not flags."""
  shown = ", ".join(repr(w) for w in words[:_SHOWN])
  if len(words) > _SHOWN:
    shown += f" and {len(words) - _SHOWN} more"
  return (f"not a flag: {shown} (flags are --name=value; quote a glob so the "
          "shell does not expand it: --input_file='dir/*.txt')")


def unknown_flag_name(word: str) -> str:
  """`--dupe-factor=5` -> `--dupe-factor` (as typed), with a hint when the
  name is spelled with dashes (our flags use underscores)."""
  name = word.split("=", 1)[0]
  bare = name.lstrip("-")
  if "-" in bare:
    return f"{name} (flag names use underscores: --{bare.replace('-', '_')})"
  return name


def repeated_flags(flag_values: flags.FlagValues) -> List[str]:
  """`--name` of every flag given more than once that does not take a list
  (a `DEFINE_multi_*` flag is repeatable by design)."""
  seen, repeated = set(), []
  for name in sorted(flag_values):
    flag = flag_values[name]
    if id(flag) in seen:  # a short name of a flag already looked at
      continue
    seen.add(id(flag))
    if flag.present > 1 and not isinstance(flag, flags.MultiFlag):
      repeated.append(f"--{flag.name}")
  return repeated


def _repeated_error(flag_values: flags.FlagValues) -> str:
  """The error for the flags given twice ("" when none was)."""
  repeated = repeated_flags(flag_values)
  if not repeated:
    return ""
  return (f"{', '.join(repeated)}: given more than once (the last value "
          "would silently replace the others)")


def non_finite_flags(flag_values: flags.FlagValues) -> List[str]:
  """`--name=value` of every float flag whose value is NaN or infinite."""
  bad = []
  for name in sorted(flag_values):
    flag = flag_values[name]
    if not isinstance(flag.parser, flags.FloatParser) or flag.value is None:
      continue
    values = flag.value if isinstance(flag.value, list) else [flag.value]
    bad += [f"--{name}={v}" for v in values if not math.isfinite(v)]
  return bad


# Packages whose flags are a tool's own: each tool defines only its own
# flags (its define_flags, run from its cli()), some in shared modules
# (pretraining_config, albert_tf/cli_flags.py).
_OWN_PACKAGES = ("data_prep.", "albert_tf.", "clients.", "examples.")


def adopt_tool_flags(flag_values: flags.FlagValues) -> None:
  """Makes every flag our modules defined a key flag of the program, so
  `--help` (absl's --helpshort: the main module's key flags) lists the
  tool's flags with their help, wherever they were defined; `--helpfull`
  adds absl's and TensorFlow's. absl's main module is sys.argv[0]."""
  main = sys.argv[0]
  for module, defined in flag_values.flags_by_module_dict().items():
    if module.startswith(_OWN_PACKAGES):
      for flag in defined:
        flag_values.register_key_flag_for_module(main, flag)


def _fail(message: str):
  sys.stderr.write(f"FATAL Flags parsing error: {message}\n")
  sys.exit(1)


def parse_flags(argv: Sequence[str], known_only: bool = False) -> List[str]:
  """The `flags_parser` of `absl.app.run`: parses `argv` into FLAGS and exits
  with one line on an unknown flag, a bad value, a word that is not a flag,
  a flag given twice or a NaN/infinite float. Returns [program] (with
  `known_only`: [program] + the arguments left for another parser, e.g.
  Beam's options)."""
  adopt_tool_flags(flags.FLAGS)
  try:
    rest = flags.FLAGS(list(argv), known_only=known_only)
  except flags.Error as e:
    # A validator's complaint may come from the value a repeat replaced.
    _fail(_repeated_error(flags.FLAGS) or str(e))
  if not known_only and len(rest) > 1:
    _fail(stray_words_error(rest[1:]))
  repeated = _repeated_error(flags.FLAGS)
  if repeated:
    _fail(repeated)
  bad = non_finite_flags(flags.FLAGS)
  if bad:
    _fail(f"{', '.join(bad)}: not a finite number")
  return rest


@contextlib.contextmanager
def exit_on_error(tool, *errors):
  """Ends the program (status 1) with one line `tool: error: ...` on an
  OSError, ValueError or one of `errors`: their messages name the file or
  setting, a traceback would bury it."""
  try:
    yield
  except (OSError, ValueError, *errors) as e:
    sys.stderr.write(f"{tool}: error: {e}\n")
    sys.exit(1)


def exit_on_sigterm():
  """SIGTERM (kill, a scheduler's stop) exits like Ctrl-C, through the
  tools' cleanup: temporary outputs deleted, output claims released. Its
  default action ended the process at once and left them behind."""
  def _exit(signum, frame):
    del frame
    raise SystemExit(128 + signum)
  signal.signal(signal.SIGTERM, _exit)
