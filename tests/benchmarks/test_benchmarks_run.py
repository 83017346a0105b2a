"""The benchmarks cannot rot: every script runs on its smallest setting.

`benchmarks/run_all.py --smoke` runs bench_train_step (with and without XLA,
under mixed_bfloat16, peak-memory children), bench_trainer_loop (data made
by the data_prep tools, the trainer against the bare step, and the orbit
comparison), bench_inference (both exported SavedModels; the low-precision
SavedModel and .tflite forms of a classifier, text and ids in) and
bench_data_prep (local and Beam) on 1-layer models and a tiny corpus, into a
temporary results directory. keras-hub runs only when `.venv-bench` exists
(it needs its own Keras 3 venv; the test downloads nothing). run_all.py, the
scripts and their TensorFlow children (BENCH_RUN) run in forks of the
worker's tool server, which imported TensorFlow once. The timing
rules themselves (bench_common) are checked on made-up timings.
"""

import json
import math
import os
import sys

import pytest

from tests.testing.repo_paths import ROOT

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import bench_common  # pylint: disable=g-import-not-at-top,wrong-import-position
import op_profile  # pylint: disable=g-import-not-at-top,wrong-import-position
from tests.testing import tool_server  # pylint: disable=g-import-not-at-top,wrong-import-position


def test_window_settled_compares_the_last_two_windows():
  assert not bench_common.window_settled([5.0, 4.0], 2, 0.05)  # too few
  assert not bench_common.window_settled([4.75, 4.0, 3.4, 3.1], 2, 0.05)
  assert bench_common.window_settled([4.75, 3.1, 3.12, 3.1], 1, 0.05)
  assert bench_common.window_settled([9.0, 3.1, 3.2, 3.0, 3.1], 2, 0.05)


def test_alternation_warms_up_until_settled_then_times():
  # A fresh process: each side slows down its first calls, then settles.
  a = [4.75, 4.0, 3.4, 3.1, 3.1, 3.1, 3.0, 3.1, 3.1]
  b = [5.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0]
  alt = bench_common.Alternation(["a", "b"], window=2, tolerance=0.05,
                                 max_warmup=10, rounds=3)
  orders = []
  for i, order in enumerate(alt):
    orders.append(order)
    alt.add_round({"a": a[i], "b": b[i]})
  # Settled after round 6 (a's windows [3.1, 3.1] vs [3.4, 3.1] -> medians
  # 3.25 and 3.1 differ by 4.8%); then exactly 3 timed rounds.
  assert alt.settled and len(alt.warmup["a"]) == 6
  assert alt.timed == {"a": a[6:9], "b": b[6:9]}
  assert orders[:3] == [["a", "b"], ["b", "a"], ["a", "b"]]
  assert math.isclose(alt.ratio("a", "b"), 3.1 / 3.0)


def test_alternation_stops_warming_up_at_the_cap():
  alt = bench_common.Alternation(["a"], window=1, tolerance=0.01,
                                 max_warmup=3, rounds=1)
  for seconds in (1.0, 2.0, 4.0, 8.0):
    alt.add_round({"a": seconds})
  assert not alt.settled and alt.warmup["a"] == [1.0, 2.0, 4.0]
  assert alt.timed["a"] == [8.0] and alt.done


def test_cpu_info_reads_the_model_and_the_low_precision_flags(tmp_path):
  cpuinfo = tmp_path / "cpuinfo"
  cpuinfo.write_text(
      "processor\t: 0\nmodel name\t: AMD EPYC 9B14\n"
      "flags\t\t: fpu avx512f avx512_vnni avx512_bf16 sse\n\n"
      "processor\t: 1\nmodel name\t: AMD EPYC 9B14\n"
      "flags\t\t: fpu avx512f avx512_vnni avx512_bf16 sse\n")
  info = bench_common.cpu_info(str(cpuinfo))
  assert info["model"] == "AMD EPYC 9B14"
  assert info["flags"] == {"avx512_vnni": True, "avx_vnni": False,
                           "avx512_bf16": True, "amx_bf16": False,
                           "amx_int8": False}
  missing = bench_common.cpu_info(str(tmp_path / "absent"))
  assert missing["model"] == "unknown" and not any(missing["flags"].values())
  # Every flag, in the file's order (bench_data_prep --runners stores them).
  assert bench_common.read_cpuinfo(str(cpuinfo)) == (
      "AMD EPYC 9B14", ["fpu", "avx512f", "avx512_vnni", "avx512_bf16", "sse"])
  assert bench_common.read_cpuinfo(str(tmp_path / "absent")) == ("unknown", [])


def _xspace(events):
  """An XSpace with one executor line holding (name, microseconds) events,
  and a python line whose event must be ignored."""
  from tensorflow.tsl.profiler.protobuf import xplane_pb2  # pylint: disable=g-import-not-at-top
  xspace = xplane_pb2.XSpace()
  plane = xspace.planes.add(name="/host:CPU")
  names = sorted({n for n, _ in events} | {"step"})
  for i, name in enumerate(names, 1):
    plane.event_metadata[i].id = i
    plane.event_metadata[i].name = name
  ids = {n: i for i, n in enumerate(names, 1)}
  python = plane.lines.add(name="python")
  python.events.add(metadata_id=ids["step"], duration_ps=10**12)
  line = plane.lines.add(name="tf_Compute/1")
  for name, micros in events:
    line.events.add(metadata_id=ids[name], duration_ps=micros * 10**6)
  return xspace


def test_op_profile_sums_op_time_by_type_kind_and_part():
  events = [("model/ffn/matmul:_MklNativeFusedMatMul", 600),
            ("gradient_tape/model/ffn/matmul:_MklMatMul", 200),
            ("gradient_tape/model/ffn/matmul_1:_MklMatMul", 100),
            ("LAMB/update/mul:Mul", 50), ("model/cast:Cast", 30),
            ("AddN_3:AddN", 20), ("ExecutorState::Process", 999)]
  summary = op_profile.summarize(_xspace(events), steps=2,
                                 wall_seconds=0.0005)
  total = 1000e-6  # the op events, without the executor's own
  assert summary["op_seconds_per_step"] == pytest.approx(total / 2)
  assert summary["op_over_wall"] == pytest.approx(total / 0.0005)
  top = {r["name"]: r for r in summary["top_ops"]}
  assert list(top) == ["_MklNativeFusedMatMul", "_MklMatMul", "Mul", "Cast",
                       "AddN"]
  assert top["_MklMatMul"]["seconds_per_step"] == pytest.approx(150e-6)
  assert top["_MklMatMul"]["share"] == pytest.approx(0.3)
  kinds = {r["name"]: r["share"] for r in summary["kinds"]}
  assert kinds == pytest.approx({"matmul": 0.9, "element-wise / other": 0.07,
                                 "cast": 0.03})
  components = {r["name"]: r["share"] for r in summary["components"]}
  assert components == pytest.approx({"matmul": 0.9,
                                      "clipping + optimizer": 0.05,
                                      "other": 0.03,
                                      "shared-weight gradient sums": 0.02})
  parts = {r["name"]: r["share"] for r in summary["parts"]}
  assert parts == pytest.approx({"forward + loss": 0.63, "backward": 0.32,
                                 "clipping + optimizer": 0.05})


def test_percentile_interpolates_like_numpy():
  assert bench_common.percentile([1, 2, 3, 4], 50) == 2.5
  assert bench_common.percentile([10, 20, 30], 99) == pytest.approx(29.8)


def _read(results, name):
  with open(os.path.join(results, name), encoding="utf-8") as f:
    return json.load(f)


@pytest.mark.slow
def test_every_benchmark_runs_on_its_smallest_setting(tmp_path):
  results = tmp_path / "results"
  bench_venv = os.path.join(ROOT, ".venv-bench")
  had_bench_venv = os.path.exists(bench_venv)
  env = tool_server.tool_env(TMPDIR=str(tmp_path),
                             BENCH_RUN="tests.testing.tool_server:run")
  # About 2 minutes on an idle machine; generous for a loaded one.
  proc = tool_server.run(
      [sys.executable, os.path.join(ROOT, "benchmarks", "run_all.py"),
       "--smoke", f"--results_dir={results}"],
      cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
  assert os.path.exists(bench_venv) == had_bench_venv  # nothing installed

  for name in ("train_step.json", "train_step_xla.json",
               "train_step_bf16.json"):
    step = _read(results, name)
    peers = {"albert_tf", "model_garden"} | (
        {"keras_hub"} if had_bench_venv else set())
    assert set(step["models"]) == peers
    assert all(m["seconds_per_step"] > 0 for m in step["models"].values())
    assert step["models"]["albert_tf"]["albert_tf_speedup"] == 1.0
  assert _read(results, "train_step.json")["peak_rss_mb"]["albert_tf"] > 0
  bf16 = _read(results, "train_step_bf16.json")
  assert (bf16["policy"], bf16["matmul_dtype"]) == ("mixed_bfloat16",
                                                     "bfloat16")
  assert bf16["matmul_gflops"] > 0 and bf16["matmul_gflops_float32"] > 0
  for name in ("train_step.json", "train_step_bf16.json"):
    profile = _read(results, name)["op_profile"]
    assert profile["op_seconds_per_step"] > 0
    assert sum(r["share"] for r in profile["parts"]) == pytest.approx(1.0)

  loop = _read(results, "trainer_loop.json")["smoke"]
  assert loop["timed_rounds"] == 2 and loop["warmup_rounds"] >= 1
  assert 0 < loop["loop_over_bare"] < math.inf
  assert loop["load_before"]["matmul_gflops"] > 0
  orbit = _read(results, "trainer_loop_vs_orbit.json")
  assert orbit["ours"]["runs"][0] > 0 and orbit["orbit"]["runs"][0] > 0

  inference = _read(results, "inference.json")
  assert set(inference["batches"]) == {"1"}  # --smoke: one batch size
  row = inference["batches"]["1"]
  # Same weights, two implementations: the outputs agree.
  assert max(row["max_abs_diff"].values()) < 1e-5
  assert row["timed_rounds"] == 3 and row["albert_tf"]["p50_ms"] > 0
  text = inference["text_signatures"]["1"]
  assert {"text", "examples", "ids"} <= set(text)
  assert math.isfinite(text["text_added_ms"])
  sides = inference["forms"]["batches"]["1"]["sides"]
  form_names = ("savedmodel_float32", "savedmodel_bfloat16", "tflite_float32",
                "tflite_float16", "tflite_dynamic_int8", "tflite_int8")
  assert set(sides) == {"model_garden:ids", "savedmodel_float32:examples"} | {
      f"{f}:{kind}" for f in form_names for kind in ("ids", "text")}
  assert all(m["p50_ms"] > 0 for m in sides.values())
  # The same classifier in every form: a float32 .tflite computes what the
  # SavedModel does; the low precisions stay close on this tiny model.
  assert sides["tflite_float32:text"]["logits_max_abs_diff"] < 1e-5
  assert all(m["logits_max_abs_diff"] < 1e-2 for s, m in sides.items()
             if s != "model_garden:ids")
  forms = inference["forms"]
  assert set(forms["cpu"]["flags"]) >= {"avx512_vnni", "avx512_bf16"}
  assert [t["sides"] for t in forms["batches"]["1"]["targets"]] == [
      ["tflite_dynamic_int8:ids", "tflite_int8:ids"]]
  # int8 weights take a quarter of float32's bytes.
  assert 0 < forms["size_bytes"]["tflite_int8"] < forms["size_bytes"][
      "tflite_float32"]
  (rss,) = forms["peak_rss"].values()
  assert rss["peak_rss_mb"] >= rss["baseline_rss_mb"] > 0

  runs = _read(results, "data_prep.json")["runs"]
  assert [r["tool"] for r in runs] == ["local", "beam"]
  assert runs[0]["instances"] == runs[1]["instances"] > 0

  with open(results / "RESULTS.md", encoding="utf-8") as f:
    table = f.read()
  for heading in ("### Pretraining train step", "### run_pretraining loop",
                  "### Inference", "Text-in signatures",
                  "### Inference, low-precision forms", "mixed_bfloat16",
                  "Op profile of albert_tf's step",
                  "### Data prep"):
    assert heading in table
