r"""Loads albert_tf's Hugging Face exports with transformers; compares outputs.

For each fixture of tests/testdata/hf/ (tiny models saved by transformers,
with transformers' outputs in expected.npz: tools/make_hf_fixtures.py), the
directory albert_tf wrote for it after a round trip
(`convert_checkpoint --from=hf --to=albert_tf`, then
`--from=albert_tf --to=hf`) is loaded with transformers'
`AutoModelFor...from_pretrained` and `AutoTokenizer.from_pretrained`:
no missing or unexpected weights, the tokenizer gives the fixture's input
ids, and the outputs on the fixture's inputs equal transformers' own
(the maximum absolute difference is printed per output).

Not part of albert_tf: it runs in an environment with torch and
transformers (see tools/make_hf_fixtures.py), on exports made with
albert_tf's own environment:

  for n in model pretraining masked_lm classifier regression \
      question_answering token_classification multiple_choice; do
    PYTHONPATH=. .venv/bin/python -m albert_tf.convert_checkpoint --from=hf \
      --to=albert_tf --input_checkpoint=tests/testdata/hf/$n \
      --output_dir=/tmp/ours/$n
    PYTHONPATH=. .venv/bin/python -m albert_tf.convert_checkpoint \
      --from=albert_tf --to=hf --input_checkpoint=/tmp/ours/$n \
      --output_dir=/tmp/hf_out/$n
  done
  /work/hfvenv/bin/python tools/hf_parity.py --fixtures=tests/testdata/hf \
      --exported=/tmp/hf_out
"""

import argparse
import json
import os
import sys

import numpy as np
import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_hf_fixtures  # pylint: disable=g-import-not-at-top,wrong-import-position


def compare(name, fixture_dir, exported_dir):
  """{output: max abs difference} of the export against expected.npz, and
  the problems found (missing/unexpected keys, other ids, architecture)."""
  architecture = make_hf_fixtures.FIXTURES[name][0]
  problems = []
  with open(os.path.join(exported_dir, "config.json")) as f:
    written = json.load(f).get("architectures")
  if written != [architecture]:
    problems.append(f"architectures {written}, expected [{architecture}]")
  model, info = getattr(transformers, architecture).from_pretrained(
      exported_dir, output_loading_info=True)
  for key in ("missing_keys", "unexpected_keys", "mismatched_keys"):
    if info.get(key):
      problems.append(f"{key}: {sorted(info[key])}")
  model.eval()
  expected = dict(np.load(os.path.join(fixture_dir, "expected.npz")))
  tokenizer = transformers.AutoTokenizer.from_pretrained(exported_dir)
  inputs = make_hf_fixtures.inputs_for(tokenizer, architecture)
  if not np.array_equal(inputs["input_ids"].numpy(), expected["input_ids"]):
    problems.append("the exported tokenizer gives other input ids")
  feed = {k: torch.from_numpy(expected[k].astype(np.int64))
          for k in ("input_ids", "attention_mask", "token_type_ids")}
  outputs = make_hf_fixtures.outputs_of(model, feed)
  diffs = {k: float(np.max(np.abs(v - expected[k])))
           for k, v in outputs.items() if k in expected}
  return diffs, problems


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--fixtures", required=True,
                      help="tests/testdata/hf (the transformers fixtures).")
  parser.add_argument("--exported", required=True,
                      help="Directory of albert_tf's exports, one per fixture.")
  args = parser.parse_args()
  worst, failed = 0.0, False
  print(f"torch {torch.__version__}, transformers {transformers.__version__}")
  for name in make_hf_fixtures.FIXTURES:
    diffs, problems = compare(name, os.path.join(args.fixtures, name),
                              os.path.join(args.exported, name))
    worst = max([worst, *diffs.values()])
    failed |= bool(problems) or max(diffs.values()) > 1e-5
    shown = ", ".join(f"{k} {v:.1e}" for k, v in sorted(diffs.items()))
    print(f"{name} ({make_hf_fixtures.FIXTURES[name][0]}): {shown}"
          + (f"; PROBLEMS: {'; '.join(problems)}" if problems else ""))
  print(f"max abs difference {worst:.1e}")
  sys.exit(1 if failed else 0)


if __name__ == "__main__":
  main()
