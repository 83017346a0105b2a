"""Where a step's time goes: TensorFlow ops by type, from the TF profiler.

`profile(step, steps)` traces `steps` calls of a warmed-up step with
`tf.profiler.experimental` and `summarize` reads the trace (xplane.pb):
every op event on the executor threads (`tf_Compute/...`, event names
"<node name>:<op type>") is summed per op type, and per part of the step
(PARTS: the node's name scope says it). Op time counts an
op while its kernel runs, including the intra-op threads it fans out to; two
ops running at once on the two executor threads both count, so the op time
can exceed the wall time (`op_over_wall`).
"""

import glob
import os
import tempfile
import time

# Op types grouped by what they do (the rest: "other").
KINDS = {
    "matmul": ("MatMul", "BatchMatMul", "Einsum", "FusedMatMul", "Conv"),
    "cast": ("Cast",),
    "transpose / reshape / copy": ("Transpose", "Reshape", "Concat", "Split",
                                   "Slice", "Pack", "Unpack", "Identity",
                                   "Tile", "BroadcastTo"),
    "gather / scatter": ("Gather", "Scatter", "UnsortedSegment",
                         "SparseSoftmax"),
    "reduction": ("Sum", "Mean", "Max", "Min", "Prod", "Norm"),
}
# Parts of the step by the node's top name scope: the tape's gradients (and
# the AddN summing a shared weight's gradients over its layers), clipping and
# the optimizer; the rest is the forward pass and the loss.
PARTS = (("backward", ("gradient_tape/", "AddN")),
         ("clipping + optimizer", ("LAMB/", "clip_by_global_norm/",
                                   "global_norm/")))


# What the non-matmul ops belong to, by a marker in the node name (the
# first that matches; matmuls are "matmul", the rest "other").
COMPONENTS = (("GELU", ("Gelu",)), ("LayerNorm", ("layer_norm",)),
              ("softmax (attention, loss)", ("oftmax",)),
              ("shared-weight gradient sums", ("AddN",)),
              ("clipping + optimizer", ("LAMB/", "clip_by_global_norm/",
                                        "global_norm/")))


def kind_of(op_type):
  """The KINDS group of an op type ("_MklNativeFusedMatMul" -> "matmul")."""
  for kind, markers in KINDS.items():
    if any(m in op_type for m in markers):
      return kind
  return "element-wise / other"


def component_of(node_name, op_type):
  """"matmul", a COMPONENTS name, or "other"."""
  if kind_of(op_type) == "matmul":
    return "matmul"
  for component, markers in COMPONENTS:
    if any(m in node_name for m in markers):
      return component
  return "other"


def part_of(node_name):
  """The PARTS entry of a node, or "forward + loss"."""
  for part, prefixes in PARTS:
    if node_name.startswith(prefixes):
      return part
  return "forward + loss"


def op_events(xspace):
  """(node name, op type, seconds) of every op event on the host's
  executor threads."""
  for plane in xspace.planes:
    if not plane.name.startswith("/host:CPU"):
      continue
    for line in plane.lines:
      if not line.name.startswith("tf_Compute"):
        continue
      for event in line.events:
        name = plane.event_metadata[event.metadata_id].name
        node, sep, op_type = name.rpartition(":")
        if sep and node and op_type and "::" not in name:  # not executor
          yield node, op_type, event.duration_ps * 1e-12


def summarize(xspace, steps, wall_seconds, top=12):
  """Per-step op time: the `top` op types, the KINDS groups, the parts of
  the step and the COMPONENTS, each in seconds and as a share of all op
  time."""
  by_type, by_kind, by_part, by_component = {}, {}, {}, {}
  for node, op_type, seconds in op_events(xspace):
    for table_, key in ((by_type, op_type), (by_kind, kind_of(op_type)),
                        (by_part, part_of(node)),
                        (by_component, component_of(node, op_type))):
      table_[key] = table_.get(key, 0.0) + seconds
  total = sum(by_type.values())

  def table(values, limit=None):
    rows = sorted(values.items(), key=lambda kv: -kv[1])[:limit]
    return [{"name": k, "seconds_per_step": v / steps,
             "share": v / total if total else 0.0} for k, v in rows]
  return {"steps": steps, "wall_seconds_per_step": wall_seconds / steps,
          "op_seconds_per_step": total / steps,
          "op_over_wall": total / wall_seconds if wall_seconds else 0.0,
          "top_ops": table(by_type, top), "kinds": table(by_kind),
          "parts": table(by_part), "components": table(by_component)}


def read_xspace(logdir):
  """The XSpace of the newest trace under `logdir`."""
  # pylint: disable=g-import-not-at-top
  from tensorflow.tsl.profiler.protobuf import xplane_pb2
  paths = sorted(glob.glob(os.path.join(logdir, "**", "*.xplane.pb"),
                           recursive=True), key=os.path.getmtime)
  if not paths:
    raise RuntimeError(f"the profiler wrote no trace under {logdir}")
  xspace = xplane_pb2.XSpace()
  with open(paths[-1], "rb") as f:
    xspace.ParseFromString(f.read())
  return xspace


def profile(step, steps, top=12):
  """Traces `steps` calls of `step` (a warmed-up tf.function returning a
  tensor); returns `summarize`'s dict."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  with tempfile.TemporaryDirectory(prefix="op_profile_") as logdir:
    tf.profiler.experimental.start(logdir)
    start = time.perf_counter()
    try:
      for _ in range(steps):
        step().numpy()
    finally:
      wall = time.perf_counter() - start
      tf.profiler.experimental.stop()
    return summarize(read_xspace(logdir), steps, wall, top)


def report(summary, label):
  """Printable lines of a summary."""
  lines = [f"op profile, {label}: {summary['wall_seconds_per_step']:.3f} "
           f"s/step wall, {summary['op_seconds_per_step']:.3f} op-s/step "
           f"({summary['op_over_wall']:.2f}x wall)"]
  for section in ("parts", "components", "kinds", "top_ops"):
    lines.append(f"  {section}: " + ", ".join(
        f"{r['name']} {r['share']:.1%}" for r in summary[section]))
  return lines
