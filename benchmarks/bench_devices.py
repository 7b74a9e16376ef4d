"""Device choice by cost against priority, with two devices that both take some ops.

Every model of the onnx light set and the bundled models up to 2,500 nodes under the ``two``
selectors of ``clusterkit.testing.shapes.SELECTOR_SETS`` (an NPU and a GPU sharing Conv, Relu
and Add): the proven CP-SAT optimum of cut (60 s, 2 workers), then each heuristic and ``auto``
with ``devices="priority"`` and ``devices="cost"``, as cut / optimum (same process). A figure
is given only when the run has as few fallback nodes as the optimum ("fb+" otherwise). "choice
s" is the device choice alone (its second run); "device cut / opt" is the cut the choice itself
implies (a lower bound for any partition with that choice).

    .venv/bin/python benchmarks/bench_devices.py [--quick]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from _models import bundled_models, light_models

import clusterkit as ck
from clusterkit.passes.devices import device_cut, device_labels
from clusterkit.testing.shapes import SELECTOR_SETS

STRATEGIES = ["cycles", "longest-path", "mxnet", "hetero", "auto"]
QUICK = {"bert_base", "convnext_tiny", "resnet18"}
MAX_NODES = 2500
COLUMNS = ["model", "nodes", "optimum cut", "choice s", "device cut / opt"] + [
    f"{s} prio -> cost" for s in STRATEGIES]


def _ratio(part: ck.Partition, opt: ck.Partition) -> str:
    m, o = part.metrics(), opt.metrics()
    if m["fallback_nodes"] > o["fallback_nodes"]:
        return "fb+"
    if not o["cut_bytes"]:
        return "0" if not m["cut_bytes"] else "inf"
    return f"{m['cut_bytes'] / o['cut_bytes']:.4g}"


def _row(path: Path) -> tuple[list, list[float]] | None:
    graph = ck.load_graph(str(path))
    if graph.n > MAX_NODES:
        return None
    problem = ck.make_problem(graph, SELECTOR_SETS["two"])
    opt = ck.run_strategy(problem, "cpsat", objective="cut", time_limit=60.0, workers=2)
    device_labels(problem, "cost")  # the first call also imports OR-tools' max flow
    start = time.perf_counter()
    labels = device_labels(problem, "cost")
    choice = time.perf_counter() - start
    cut = max(opt.metrics()["cut_bytes"], 1)
    row = [path.stem, graph.n, opt.metrics()["cut_bytes"], round(choice, 4),
           round(device_cut(problem, labels) / cut, 3)]
    worst = []
    for strategy in STRATEGIES:
        pair = [_ratio(ck.run_strategy(problem, strategy, devices=mode), opt)
                for mode in ("priority", "cost")]
        row.append(" -> ".join(pair))
        worst.append(pair)
    return row, worst


def run(quick: bool = False) -> dict:
    rows, worst = [], {s: [1.0, 1.0] for s in STRATEGIES}
    total = time.perf_counter()
    for path in light_models() + bundled_models():
        if quick and path.stem not in QUICK:
            continue
        got = _row(path)
        if got is None:
            continue
        rows.append(got[0])
        for strategy, pair in zip(STRATEGIES, got[1]):
            for k, text in enumerate(pair):
                if text not in ("fb+", "inf"):
                    worst[strategy][k] = max(worst[strategy][k], float(text))
    notes = ["selectors: " + " ".join(SELECTOR_SETS["two"]),
             "worst cut / optimum, priority -> cost: " + "; ".join(
                 f"{s} {w[0]:.3g} -> {w[1]:.3g}" for s, w in worst.items()),
             f"total {time.perf_counter() - total:.1f} s"]
    return {"title": "device choice: cost against priority with two devices",
            "columns": COLUMNS, "rows": rows, "notes": notes}


if __name__ == "__main__":
    import json

    print(json.dumps(run(quick="--quick" in sys.argv), indent=1))
