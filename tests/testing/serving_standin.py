"""A local stand-in for TF Serving's REST API, for tests only.

Loads `<model_base_path>/<latest version>/` with `tf.saved_model.load` (after
`import tensorflow_text`) and answers the documented routes on 127.0.0.1:

  GET  /v1/models/<name>[/versions/<v>]            status
  GET  /v1/models/<name>[/versions/<v>]/metadata   signature defs
  POST /v1/models/<name>[/versions/<v>]:predict    row or columnar predict

JSON values are converted to each signature input's dtype as TF Serving does
(strings may be {"b64": ...}); errors are HTTP 400 {"error": "..."}. The
server binds an ephemeral port, serves at most `max_requests` requests and
stops by itself after `lifetime` seconds.

  server = StandinServer(base_path, "albert").start()
  ... http://127.0.0.1:{server.port} ...
  server.stop()
"""

import base64
import http.server
import json
import os
import re
import threading
import time

import numpy as np
import tensorflow as tf
import tensorflow_text  # pylint: disable=unused-import  (registers ops)

from albert_tf.checkpoints import paths

_ROUTE = re.compile(r"^/v1/models/(?P<name>[^/:]+)(/versions/(?P<version>\d+))?"
                    r"(?P<rest>/metadata|:predict)?$")
_DTYPES = {tf.string: "DT_STRING", tf.int32: "DT_INT32", tf.int64: "DT_INT64",
           tf.float32: "DT_FLOAT"}


def _to_tensor(value, spec, name):
  if spec.dtype == tf.string:
    def enc(x):
      if isinstance(x, list):
        return [enc(y) for y in x]
      if isinstance(x, dict) and "b64" in x:
        return base64.b64decode(x["b64"])
      if not isinstance(x, str):
        raise ValueError(f"input {name}: expected string values, got "
                         f"{type(x).__name__}")
      return x.encode("utf-8")
    return tf.constant(enc(value), tf.string)
  array = np.asarray(value)
  if array.dtype.kind not in "iub" and spec.dtype.is_integer:
    raise ValueError(f"input {name}: expected {spec.dtype.name} values, got "
                     f"{array.dtype}")
  return tf.constant(array.astype(spec.dtype.as_numpy_dtype))


def _to_json(array):
  if array.dtype == object or array.dtype.kind == "S":
    def dec(x):
      if isinstance(x, np.ndarray):
        return [dec(y) for y in x]
      try:
        return x.decode("utf-8")
      except UnicodeDecodeError:
        return {"b64": base64.b64encode(x).decode("ascii")}
    return dec(array)
  return array.tolist()


class StandinServer:
  """TF-Serving-like REST server for one SavedModel base path."""

  def __init__(self, model_base_path, model_name, max_requests=50,
               lifetime=120.0):
    path = paths.latest_version_dir(model_base_path)
    if path is None:
      raise ValueError(f"{model_base_path}: no integer version directory "
                       "with a saved_model.pb")
    self.version = int(os.path.basename(path))
    self.model_name = model_name
    self.model = tf.saved_model.load(path)
    self.max_requests = max_requests
    self.lifetime = lifetime
    self.requests = 0
    self._httpd = None

  # --- request handling ---

  def status(self):
    return {"model_version_status": [{
        "version": str(self.version), "state": "AVAILABLE",
        "status": {"error_code": "OK", "error_message": ""}}]}

  def metadata(self):
    sigs = {}
    for name, fn in self.model.signatures.items():
      inputs = {k: {"dtype": _DTYPES.get(s.dtype, s.dtype.name),
                    "tensor_shape": {"dim": [{"size": str(d or -1)}
                                             for d in s.shape]},
                    "name": f"{name}_{k}:0"}
                for k, s in fn.structured_input_signature[1].items()}
      outputs = {k: {"dtype": _DTYPES.get(s.dtype, s.dtype.name)}
                 for k, s in fn.structured_outputs.items()}
      sigs[name] = {"inputs": inputs, "outputs": outputs,
                    "method_name": "tensorflow/serving/predict"}
    return {"model_spec": {"name": self.model_name,
                           "version": str(self.version)},
            "metadata": {"signature_def": {"signature_def": sigs}}}

  def predict(self, body):
    signature_name = body.get("signature_name", "serving_default")
    if signature_name not in self.model.signatures:
      raise ValueError(f"Serving signature name: \"{signature_name}\" not "
                       "found in signature def")
    fn = self.model.signatures[signature_name]
    specs = fn.structured_input_signature[1]
    if ("instances" in body) == ("inputs" in body):
      raise ValueError("JSON object must have exactly one of 'instances' or "
                       "'inputs'")
    row_format = "instances" in body
    if row_format:
      rows = body["instances"]
      if rows and all(isinstance(r, dict) for r in rows):
        columns = {k: [r.get(k) for r in rows] for k in specs}
        missing = [k for k, v in columns.items() if any(x is None for x in v)]
        if missing:
          raise ValueError(f"instances are missing input(s) {missing}")
      elif len(specs) == 1:
        columns = {next(iter(specs)): rows}
      else:
        raise ValueError("instances must be objects naming the inputs "
                         f"{sorted(specs)}")
    else:
      columns = body["inputs"]
      if not isinstance(columns, dict):
        if len(specs) != 1:
          raise ValueError(f"inputs must name the inputs {sorted(specs)}")
        columns = {next(iter(specs)): columns}
    unknown = sorted(set(columns) - set(specs))
    if unknown:
      raise ValueError(f"unknown input(s) {unknown}; signature takes "
                       f"{sorted(specs)}")
    feeds = {k: _to_tensor(v, specs[k], k) for k, v in columns.items()}
    outputs = {k: v.numpy() for k, v in fn(**feeds).items()}
    if not row_format:
      out = {k: _to_json(v) for k, v in outputs.items()}
      return {"outputs": out if len(out) > 1 else next(iter(out.values()))}
    names = sorted(outputs)
    batch = len(outputs[names[0]])
    predictions = []
    for i in range(batch):
      row = {k: _to_json(outputs[k][i:i + 1])[0] for k in names}
      predictions.append(row if len(row) > 1 else row[names[0]])
    return {"predictions": predictions}

  def handle(self, method, path, body):
    """(http status, JSON object) for one request."""
    match = _ROUTE.match(path)
    if not match or match.group("name") != self.model_name:
      return 404, {"error": f"Servable not found for request: {path}"}
    version = match.group("version")
    if version is not None and int(version) != self.version:
      return 404, {"error": f"Servable not found: version {version}"}
    rest = match.group("rest")
    try:
      if method == "GET" and rest is None:
        return 200, self.status()
      if method == "GET" and rest == "/metadata":
        return 200, self.metadata()
      if method == "POST" and rest == ":predict":
        return 200, self.predict(json.loads(body or b"{}"))
    except (ValueError, TypeError, tf.errors.OpError) as e:
      message = getattr(e, "message", None) or str(e)
      return 400, {"error": message}
    return 404, {"error": f"unsupported {method} {path}"}

  # --- lifecycle ---

  def start(self):
    server = self

    class Handler(http.server.BaseHTTPRequestHandler):

      def _reply(self, method):
        server.requests += 1
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        code, obj = server.handle(method, self.path, body)
        data = json.dumps(obj).encode("utf-8")
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        if server.requests >= server.max_requests:
          threading.Thread(target=server.stop, daemon=True).start()

      def do_GET(self):  # pylint: disable=invalid-name
        self._reply("GET")

      def do_POST(self):  # pylint: disable=invalid-name
        self._reply("POST")

      def log_message(self, *args):
        pass

    self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    self._httpd.timeout = 1.0
    self.port = self._httpd.server_address[1]
    self.url = f"http://127.0.0.1:{self.port}"
    deadline = time.monotonic() + self.lifetime

    httpd = self._httpd

    def serve():
      while self._httpd is httpd and time.monotonic() < deadline:
        try:
          httpd.handle_request()
        except OSError:  # closed by stop()
          break
      self.stop()

    threading.Thread(target=serve, daemon=True).start()
    return self

  def stop(self):
    httpd, self._httpd = self._httpd, None
    if httpd is not None:
      httpd.server_close()
