r"""The demo's .tflite consumer: a fresh process that serves the fine-tuned
classifier's .tflite export through `albert_tf.serving.lite` (the LiteRT
interpreter with TF Text's kernels; no model code), as savedmodel_client.py
does the SavedModel, with the same output.

  python -m examples.demo.lite_client --model=<export_dir>/<version> \
      --tsv=dev.tsv --label_names=in_order,swapped --output_json=out.json
"""

import argparse
import os
import sys
import time

import numpy as np

from albert_tf.serving import lite
from examples.demo import savedmodel_client


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--model", required=True,
                      help=".tflite export version dir (or the file)")
  parser.add_argument("--tsv", required=True, help="MRPC- or SST-2-layout TSV")
  parser.add_argument("--label_names", default="0,1",
                      help="names of label ids 0,1,... (as exported)")
  parser.add_argument("--show", type=int, default=6, help="pairs printed")
  parser.add_argument("--output_json", help="result file")
  args = parser.parse_args(argv)
  t0 = time.time()
  model = lite.LiteModel(args.model)
  inputs = sorted(model.signatures["serving_default"]["inputs"])
  print(f"loaded {model.path} ({os.path.getsize(model.path):,} bytes, "
        f"{model.info.get('precision')}) in {time.time() - t0:.1f} s with "
        f"the {model.interpreter} interpreter (inputs: {inputs})", flush=True)

  def call(texts_a, texts_b):
    out = model("serving_default", **{
        k: np.array(v, dtype=object)
        for k, v in savedmodel_client.text_inputs(texts_a, texts_b).items()})
    return out["label"], out["probabilities"]

  result = savedmodel_client.classify_pairs(
      args.model, call, savedmodel_client.read_pairs(args.tsv),
      args.label_names.split(","), args.show)
  result["file_bytes"] = os.path.getsize(model.path)
  savedmodel_client.write_json(args.output_json, result)
  return 0


if __name__ == "__main__":
  sys.exit(main())
