"""Measured per-node times: run a model on onnxruntime's CPU provider with profiling on and
keep, per node, the median of its kernel times over the runs.

The session runs with graph optimizations off, so every node of the model runs as itself and is
timed under its own name (onnxruntime's ``<name>_kernel_time`` events, matched to the model's
node by their ``node_index``). A first run warms the session up and is not counted. The
profiler counts whole microseconds: a kernel under its resolution (0 us) counts half of one.
The file (``{"model", "runs", "unit": "seconds", "nodes": {name: seconds}}``) is what a
platform's ``latencies`` field reads (:mod:`clusterkit.constraints.platform`).
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
from typing import Any

from clusterkit.errors import BackendError
from clusterkit.io.files import write_atomic
from clusterkit.io.loader import load_graph
from clusterkit.runtime.executor import random_inputs

#: seconds a kernel under the profiler's resolution (1 microsecond) counts
UNDER_RESOLUTION = 0.5e-6


def profile_model(path: str | os.PathLike, *, runs: int = 5, seed: int = 0,
                  threads: int = 1) -> dict[str, float]:
    """Median seconds of every node of the model at ``path`` over ``runs`` profiled runs on
    random inputs (:func:`~clusterkit.runtime.executor.random_inputs` with ``seed``), keyed by
    the node's name in clusterkit's graph of the model."""
    import onnxruntime as ort

    if runs < 1:
        raise BackendError(f"profile: runs must be at least 1, got {runs}")
    graph = load_graph(path)
    feeds = random_inputs(graph, seed)
    names = {int(graph.nodes[v].source_index): graph.nodes[v].name for v in range(graph.n)}
    with tempfile.TemporaryDirectory(prefix="clusterkit-profile-") as tmp:
        opts = ort.SessionOptions()
        opts.enable_profiling = True
        opts.profile_file_prefix = os.path.join(tmp, "profile")
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        opts.intra_op_num_threads = threads
        try:
            sess = ort.InferenceSession(os.fspath(path), opts,
                                        providers=["CPUExecutionProvider"])
            for _ in range(runs + 1):
                sess.run(None, feeds)
        except Exception as exc:  # onnxruntime's own types
            raise BackendError(f"profile: onnxruntime cannot run {os.fspath(path)!r}: "
                               f"{' '.join(str(exc).split())}") from None
        with open(sess.end_profiling(), encoding="utf-8") as fh:
            events = json.load(fh)
    return _medians(events, names)


def _medians(events: list[dict[str, Any]], names: dict[int, str]) -> dict[str, float]:
    """Per node name, the median kernel seconds of its events after the first (warm-up)."""
    times: dict[str, list[float]] = {}
    for ev in events:
        if ev.get("cat") != "Node" or not str(ev.get("name", "")).endswith("_kernel_time"):
            continue
        index = int(ev.get("args", {}).get("node_index", -1))
        if index in names:
            times.setdefault(names[index], []).append(float(ev["dur"]) * 1e-6)
    return {name: max(statistics.median(ts[1:] or ts), UNDER_RESOLUTION)
            for name, ts in sorted(times.items())}


def profile_text(model: str, times: dict[str, float], runs: int) -> str:
    """The profile file's JSON text."""
    return json.dumps({"model": os.path.basename(model), "runs": runs, "unit": "seconds",
                       "nodes": times}, indent=1) + "\n"


def write_profile(path: str | os.PathLike, model: str, times: dict[str, float],
                  runs: int) -> None:
    """Write :func:`profile_text` atomically."""
    write_atomic(path, profile_text(model, times, runs))
