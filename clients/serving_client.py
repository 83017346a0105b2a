r"""Sends texts to a TF Serving endpoint (REST or gRPC) and prints the results.

REST needs only the standard library (+ numpy for gRPC tensors). gRPC needs
`tensorflow-serving-api` (`pip install tensorflow-serving-api`), imported
only when --protocol=grpc.

The text fields are read from the model's metadata (the string inputs of the
signature) unless --fields names them: the first gets --text, the second
--text_b (e.g. `text_a,text_b` for a pair classifier, `question,context`
for SQuAD). A command that does not fit the model's inputs (a signature
without text inputs such as serve_ids, --text_b for a one-text model, more
than two fields, a second field without one --text_b per --text) exits 2
with one line, before any predict request.

Examples (run as a script, which does not import TensorFlow):

  python albert_tf/serving_client.py --server=http://localhost:8501 \
      --model_name=albert_clf --text="a fine film" --text="a dull film"
  python albert_tf/serving_client.py --server=localhost:8500 --protocol=grpc \
      --model_name=albert_squad --text="who went?" \
      --text_b="botchan went to school"
"""

import base64
import json
import sys
import urllib.error
import urllib.request

DEFAULT_TIMEOUT = 30.0


class ServingError(RuntimeError):
  """The server answered with an error (message from its JSON `error`)."""


class UsageError(ValueError):
  """The command does not fit the model's inputs (the CLI exits 2)."""


# --- REST ---------------------------------------------------------------------


def _model_url(server, model_name, version=None):
  url = f"{server.rstrip('/')}/v1/models/{model_name}"
  if version is not None:
    url += f"/versions/{int(version)}"
  return url


def _http_json(url, body=None, timeout=DEFAULT_TIMEOUT):
  data = None if body is None else json.dumps(body).encode("utf-8")
  request = urllib.request.Request(
      url, data=data, headers={"Content-Type": "application/json"},
      method="GET" if body is None else "POST")
  try:
    with urllib.request.urlopen(request, timeout=timeout) as response:
      return json.loads(response.read().decode("utf-8"))
  except urllib.error.HTTPError as e:
    text = e.read().decode("utf-8", errors="replace")
    try:
      message = json.loads(text).get("error", text)
    except ValueError:
      message = text
    raise ServingError(f"{url}: HTTP {e.code}: {message}") from None
  except urllib.error.URLError as e:
    raise ServingError(f"{url}: cannot connect: {e.reason}") from None


def model_status(server, model_name, version=None, timeout=DEFAULT_TIMEOUT):
  """GET /v1/models/<name>[/versions/<v>] -> the status JSON."""
  return _http_json(_model_url(server, model_name, version), timeout=timeout)


def model_metadata(server, model_name, version=None, timeout=DEFAULT_TIMEOUT):
  """GET /v1/models/<name>/metadata -> signature definitions JSON."""
  return _http_json(_model_url(server, model_name, version) + "/metadata",
                    timeout=timeout)


def predict_rest(server, model_name, instances=None, inputs=None,
                 signature_name="serving_default", version=None,
                 timeout=DEFAULT_TIMEOUT):
  """POST :predict with `instances` (row format) or `inputs` (columnar).

  Returns the parsed JSON: {"predictions": [...]} or {"outputs": {...}}.
  """
  if (instances is None) == (inputs is None):
    raise ValueError("pass exactly one of instances= or inputs=")
  body = {"signature_name": signature_name}
  if instances is not None:
    body["instances"] = instances
  else:
    body["inputs"] = inputs
  return _http_json(_model_url(server, model_name, version) + ":predict",
                    body, timeout=timeout)


def signature_inputs(metadata, signature_name="serving_default"):
  """{input name: dtype ("DT_STRING", ...)} of a signature, from metadata
  JSON."""
  try:
    sig = metadata["metadata"]["signature_def"]["signature_def"][
        signature_name]
  except KeyError:
    raise ServingError(f"metadata has no signature {signature_name!r}"
                       ) from None
  return {name: info.get("dtype") for name, info in sig["inputs"].items()}


def string_inputs(metadata, signature_name="serving_default"):
  """Names of the DT_STRING inputs of a signature, from metadata JSON."""
  return sorted(name for name, dtype in
                signature_inputs(metadata, signature_name).items()
                if dtype == "DT_STRING")


def text_columns(fields, texts, texts_b=None, named_by="--fields names"):
  """{field: texts}: --text for the first field, --text_b for the second.

  Raises UsageError (one line) when a text would be dropped or missing:
  more than two fields, --text_b for a one-field model, a second field
  without one --text_b per --text.

  Args:
    fields: the text input names, in packing order.
    texts, texts_b: the --text and --text_b values (texts_b may be None).
    named_by: where `fields` came from, for the message ("--fields names",
      "signature 'serving_default' takes").
  """
  fields = list(fields)
  if len(fields) > 2:
    raise UsageError(f"{named_by} {len(fields)} text inputs "
                     f"({', '.join(fields)}); the client fills at most two "
                     "(--text, --text_b)")
  if len(fields) == 1 and texts_b:
    raise UsageError(f"--text_b given but {named_by} one text input "
                     f"({fields[0]}); drop --text_b")
  columns = {fields[0]: list(texts)}
  if len(fields) > 1:
    if not texts_b or len(texts_b) != len(texts):
      raise UsageError(f"model takes {fields}: give one --text_b per --text")
    columns[fields[1]] = list(texts_b)
  return columns


def build_rest_request(fields, texts, texts_b=None, request_format="instances",
                       named_by="--fields names"):
  """Texts -> `instances` (list of dicts) or `inputs` (dict of lists);
  `text_columns` checks them."""
  columns = text_columns(fields, texts, texts_b, named_by)
  if request_format == "inputs":
    return {"inputs": columns}
  if request_format == "instances":
    return {"instances": [dict(zip(columns, row))
                          for row in zip(*columns.values())]}
  raise ValueError(f"request_format must be instances or inputs, got "
                   f"{request_format!r}")


def rows_from_response(response):
  """REST answer (either format) -> list of per-example dicts."""
  if "predictions" in response:
    rows = response["predictions"]
    return [r if isinstance(r, dict) else {"output": r} for r in rows]
  outputs = response.get("outputs")
  if not isinstance(outputs, dict):
    return [{"output": o} for o in outputs]
  n = len(next(iter(outputs.values())))
  return [{k: v[i] for k, v in outputs.items()} for i in range(n)]


# --- gRPC ---------------------------------------------------------------------


def _grpc_modules():
  try:
    import grpc  # pylint: disable=g-import-not-at-top
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    from tensorflow_serving.apis import predict_pb2  # pylint: disable=g-import-not-at-top
    from tensorflow_serving.apis import prediction_service_pb2_grpc  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise ImportError(
        f"gRPC needs the tensorflow-serving-api package ({e}); install it "
        "with `pip install tensorflow-serving-api` (matching your "
        "TensorFlow version) or use --protocol=rest.") from e
  return grpc, tf, predict_pb2, prediction_service_pb2_grpc


def predict_grpc(target, model_name, inputs, signature_name="serving_default",
                 version=None, timeout=DEFAULT_TIMEOUT):
  """Predict over gRPC; `inputs` maps names to lists/arrays (strings ok).

  Returns a dict name -> numpy array.
  """
  grpc, tf, predict_pb2, service = _grpc_modules()
  request = predict_pb2.PredictRequest()
  request.model_spec.name = model_name
  request.model_spec.signature_name = signature_name
  if version is not None:
    request.model_spec.version.value = int(version)
  for name, value in inputs.items():
    request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
  with grpc.insecure_channel(target) as channel:
    stub = service.PredictionServiceStub(channel)
    response = stub.Predict(request, timeout=timeout)
  return {name: tf.make_ndarray(proto)
          for name, proto in response.outputs.items()}


def rows_from_arrays(outputs):
  """gRPC outputs (name -> array, batch first) -> list of per-example dicts."""
  n = len(next(iter(outputs.values())))
  rows = []
  for i in range(n):
    row = {}
    for k, v in outputs.items():
      x = v[i]
      x = x.decode("utf-8", "replace") if isinstance(x, bytes) else (
          x.tolist() if hasattr(x, "tolist") else x)
      row[k] = x
    rows.append(row)
  return rows


# --- Printing and CLI ---------------------------------------------------------

# Outputs that are short enough to print in full; others print their shape.
_SHORT_KEYS = ("label", "label_id", "probabilities", "score", "choice",
               "answer_text", "answer_start", "answer_end", "answer_score",
               "answerable_probability")


def _shape(value):
  shape = []
  while isinstance(value, list):
    shape.append(len(value))
    value = value[0] if value else None
  return shape


def format_rows(texts, rows):
  """One block per example: the input text and its outputs."""
  lines = []
  for text, row in zip(texts, rows):
    lines.append(f"text: {text!r}")
    for key in sorted(row):
      value = row[key]
      if isinstance(value, dict) and "b64" in value:
        value = base64.b64decode(value["b64"]).decode("utf-8", "replace")
      if key in _SHORT_KEYS or not isinstance(value, list):
        lines.append(f"  {key}: {value}")
      else:
        lines.append(f"  {key}: <{'x'.join(map(str, _shape(value)))} values>")
  return "\n".join(lines)


def metadata_fields(metadata, signature_name="serving_default"):
  """The text inputs of a signature in packing order; UsageError when it
  takes none (e.g. serve_ids: ids, which this client does not send)."""
  names = string_inputs(metadata, signature_name)
  if not names:
    inputs = signature_inputs(metadata, signature_name)
    raise UsageError(f"signature {signature_name!r} takes no text inputs "
                     f"(its inputs: {', '.join(sorted(inputs))}); the client "
                     "sends texts only")
  # Order the known pairs as the model packs them.
  order = {"text": 0, "text_a": 0, "question": 0, "context": 1, "text_b": 1}
  return sorted(names, key=lambda n: (order.get(n, 2), n))


def run(server, model_name, texts, texts_b=None, protocol="rest",
        fields=None, signature_name="serving_default",
        request_format="instances", version=None, timeout=DEFAULT_TIMEOUT):
  """Sends the texts; returns the list of per-example result dicts."""
  if protocol == "grpc":
    if not fields:
      raise UsageError("--fields is required with --protocol=grpc (e.g. "
                       "text, or text_a,text_b)")
    columns = text_columns(fields, texts, texts_b)
    return rows_from_arrays(predict_grpc(server, model_name, columns,
                                         signature_name, version, timeout))
  if protocol != "rest":
    raise ValueError(f"protocol must be rest or grpc, got {protocol!r}")
  named_by = "--fields names"
  if not fields:
    fields = metadata_fields(model_metadata(server, model_name, version,
                                            timeout), signature_name)
    named_by = f"signature {signature_name!r} takes"
  body = build_rest_request(fields, texts, texts_b, request_format, named_by)
  response = predict_rest(server, model_name, signature_name=signature_name,
                          version=version, timeout=timeout, **body)
  return rows_from_response(response)


def define_flags(flags):
  """The CLI's flags (absl is imported by `cli()` only: the client functions
  above need nothing but the standard library)."""
  flags.DEFINE_string("server", "http://localhost:8501",
                      "REST base URL (http://host:8501) or gRPC host:port "
                      "(localhost:8500).")
  flags.DEFINE_enum("protocol", "rest", ["rest", "grpc"], "Transport.")
  flags.DEFINE_string("model_name", None, "Served model name.")
  flags.DEFINE_integer("model_version", None, "Version (default: latest).")
  flags.DEFINE_string("signature_name", "serving_default", "Signature.")
  flags.DEFINE_multi_string("text", [], "Text (first field); repeatable.")
  flags.DEFINE_multi_string("text_b", [],
                            "Second field, one per --text (pair models).")
  flags.DEFINE_list("fields", None,
                    "Input names for --text/--text_b (REST default: read "
                    "from the model metadata).")
  flags.DEFINE_enum("request_format", "instances", ["instances", "inputs"],
                    "REST body: row (instances) or columnar (inputs).")
  flags.DEFINE_float("timeout", DEFAULT_TIMEOUT, "Seconds per request.")
  flags.DEFINE_bool("json", False, "Print raw JSON rows instead of text.")


def main(fl, extra_args=()):
  """Runs the request described by the parsed flags `fl`; the exit code.
  `extra_args`: the command-line words that are not flags (refused, as is
  a flag other than --text and --text_b given twice)."""
  if extra_args:  # `--text hello world`: "world" would be dropped
    sys.stderr.write(f"error: not a flag: {', '.join(map(repr, extra_args))}"
                     " (flags are --name=value; quote a text with spaces: "
                     "--text='hello world')\n")
    return 2
  # A flag given twice would keep its last value and drop the first.
  repeated = sorted({f"--{fl[name].name}" for name in fl
                     if fl[name].present > 1
                     and not fl[name].flag_type().startswith("multi")})
  if repeated:
    sys.stderr.write(f"error: {', '.join(repeated)}: given more than once\n")
    return 2
  if not fl.model_name or not fl.text:
    sys.stderr.write("--model_name and at least one --text are required\n")
    return 2
  try:
    rows = run(fl.server, fl.model_name, fl.text, fl.text_b or None,
               protocol=fl.protocol, fields=fl.fields,
               signature_name=fl.signature_name,
               request_format=fl.request_format, version=fl.model_version,
               timeout=fl.timeout)
  except UsageError as e:  # the command, not the server
    sys.stderr.write(f"error: {e}\n")
    return 2
  except (ServingError, ValueError, ImportError) as e:
    sys.stderr.write(f"error: {e}\n")
    return 1
  print(json.dumps(rows) if fl.json else format_rows(fl.text, rows))
  return 0


def cli():
  """Console-script entry point (pyproject.toml)."""
  from absl import app  # pylint: disable=g-import-not-at-top
  from absl import flags  # pylint: disable=g-import-not-at-top
  define_flags(flags)
  app.run(lambda argv: sys.exit(main(flags.FLAGS, argv[1:])))


if __name__ == "__main__":
  cli()
