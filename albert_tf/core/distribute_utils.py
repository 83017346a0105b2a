"""Distribution strategy resolution (TPU, GPUs, multi-worker, CPU).

>>> strategy = get_strategy("auto")        # TPU if tpu=..., mirrored if GPUs
>>> strategy = get_strategy("tpu", tpu="local")

Call `configure_cpu_devices` / `get_strategy` before any other TensorFlow op:
logical devices and the TPU system can only be set up before TF initialises
its runtime.
"""

from typing import Optional

from absl import logging
import tensorflow as tf

STRATEGIES = ("auto", "tpu", "mirrored", "multi_worker_mirrored",
              "one_device", "default")


def configure_cpu_devices(num_devices: int) -> None:
  """Splits the (first) physical CPU into `num_devices` logical devices."""
  if num_devices <= 1:
    return
  cpus = tf.config.list_physical_devices("CPU")
  try:
    tf.config.set_logical_device_configuration(
        cpus[0], [tf.config.LogicalDeviceConfiguration()] * num_devices)
  except RuntimeError as e:
    raise RuntimeError(
        "runtime.num_cpu_devices must be applied before TensorFlow "
        f"initialises its devices: {e}") from e


def _tpu_strategy(tpu: str) -> tf.distribute.Strategy:
  # "local": the TPU attached to this VM (TPU VM); else a name or grpc://.
  resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
      tpu="local" if tpu == "local" else tpu)
  if tpu != "local":
    tf.config.experimental_connect_to_cluster(resolver)
  tf.tpu.experimental.initialize_tpu_system(resolver)
  logging.info("TPU %s: %d cores", tpu, resolver.num_accelerators().get(
      "TPU", 0))
  return tf.distribute.TPUStrategy(resolver)


def get_strategy(name: str = "auto", tpu: Optional[str] = None,
                 num_cpu_devices: int = 0) -> tf.distribute.Strategy:
  """Returns the strategy named by `name`.

  auto: TPU if `tpu` is set, mirrored if GPUs are visible, else the default
  (single device) strategy. `mirrored` without GPUs mirrors over the logical
  CPU devices (see `configure_cpu_devices`). `multi_worker_mirrored` reads
  the cluster from TF_CONFIG. A `tpu` or `num_cpu_devices` > 1 the strategy
  would not use is refused.

  Args:
    name: one of STRATEGIES.
    tpu: TPU name, grpc:// address or "local" (strategies tpu and auto).
    num_cpu_devices: logical CPU devices to split the CPU into (mirrored).
  """
  if name not in STRATEGIES:
    raise ValueError(f"unknown distribution strategy {name!r}; expected one "
                     f"of {STRATEGIES}")
  # Settings another strategy would take and ignore.
  if tpu and name not in ("auto", "tpu"):
    raise ValueError(f"runtime.tpu={tpu!r} (--tpu) selects the TPU strategy; "
                     f"runtime.distribution_strategy={name} would not use "
                     "it: drop it or use --strategy=tpu")
  if num_cpu_devices > 1 and name != "mirrored":
    raise ValueError(f"runtime.num_cpu_devices={num_cpu_devices} splits the "
                     "CPU for the mirrored strategy only; runtime.distribution"
                     f"_strategy={name} would run on one device: use "
                     "--strategy=mirrored or drop it")
  configure_cpu_devices(num_cpu_devices)
  if name == "auto":
    name = ("tpu" if tpu else "mirrored"
            if tf.config.list_physical_devices("GPU") else "default")
  if name == "tpu":
    if not tpu:
      raise ValueError("distribution_strategy=tpu needs --tpu=NAME|local")
    strategy = _tpu_strategy(tpu)
  elif name == "mirrored":
    gpus = tf.config.list_logical_devices("GPU")
    devices = [d.name for d in (gpus or tf.config.list_logical_devices("CPU"))]
    strategy = tf.distribute.MirroredStrategy(devices)
  elif name == "multi_worker_mirrored":
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
  elif name == "one_device":
    gpus = tf.config.list_logical_devices("GPU")
    strategy = tf.distribute.OneDeviceStrategy(
        gpus[0].name if gpus else "/cpu:0")
  else:
    strategy = tf.distribute.get_strategy()
  logging.info("distribution strategy %s with %d replica(s)",
               type(strategy).__name__, strategy.num_replicas_in_sync)
  return strategy


def is_chief(strategy: tf.distribute.Strategy) -> bool:
  """True on the worker that writes checkpoints, summaries and logs."""
  resolver = getattr(strategy, "cluster_resolver", None)
  if resolver is None or not resolver.cluster_spec().as_dict():
    return True
  task_type, task_id = resolver.task_type, resolver.task_id
  if task_type in (None, "chief"):
    return True
  has_chief = "chief" in resolver.cluster_spec().as_dict()
  return task_type == "worker" and task_id == 0 and not has_chief


def worker_id(strategy: tf.distribute.Strategy) -> int:
  resolver = getattr(strategy, "cluster_resolver", None)
  return int(getattr(resolver, "task_id", 0) or 0) if resolver else 0


def resolve_precision(dtype: str, strategy: tf.distribute.Strategy) -> str:
  """'auto' -> bfloat16 on TPU, float16 on GPU, float32 on CPU."""
  if dtype != "auto":
    return dtype
  if isinstance(strategy, (tf.distribute.TPUStrategy,
                           tf.distribute.experimental.TPUStrategy)):
    return "bfloat16"
  return ("float16" if tf.config.list_logical_devices("GPU")
          else "float32")


def policy_name(dtype: str) -> str:
  return {"float32": "float32", "bfloat16": "mixed_bfloat16",
          "float16": "mixed_float16"}[dtype]
