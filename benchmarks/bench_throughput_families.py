"""The default throughput heuristic (``auto --objective throughput``: the chain heuristic) on
instance families it was never tuned on (:mod:`throughput_families`), against the proven
contiguous optimum.

    .venv/bin/python benchmarks/bench_throughput_families.py [--quick]
    .venv/bin/python benchmarks/run.py --only throughput_families [--quick]

Families: random layered DAGs with skewed costs (50 to 2,000 nodes), every bundled and light
ONNX model under two of three device descriptions (:data:`throughput_families.DEVICES`, by
turns), and ResNet-34-like chains where the CPU was left the bottleneck. Per instance: the
heuristic's max load and seconds, and CP-SAT's contiguous answer (``cpsat --objective
throughput``, 60 s, 2 workers, warm-started from the heuristic when its split is contiguous,
else from the all-CPU split) with its proven bound. ``ratio`` is the heuristic over CP-SAT's
answer (the optimum where CP-SAT proves it), ``gap`` the heuristic over the bound (where CP-SAT
does not prove it in time, an upper bound of the excess). A split that is not contiguous (the
heuristic may put host-only nodes apart on the first CPU) can be below the contiguous optimum.
``vs_traversal``: the slowest heuristic run over one pure-Python traversal of the same graph in
the same process, a figure that survives a noisy machine better than seconds.
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any

import numpy as np
from _models import bundled_models, light_models
from bench_strategies import traversal_seconds
from throughput_families import DEVICES, families, model_instance

from clusterkit.engines.cpsat.throughput import solve_throughput
from clusterkit.engines.throughput import chain_heuristic
from clusterkit.io.loader import load_graph
from clusterkit.io.placement_instance import HOST, PlacementInstance, instance_graph

TIME_LIMIT = 60.0
TARGET = 1.05
QUICK_MODELS = ("resnet18", "squeezenet1_1", "light_inception_v1")
COLUMNS = ["family", "instances", "nodes", "proven", "not contiguous", "worst ratio",
           "mean ratio", "worst gap", "over 1.05", "max heur s", "mean heur s", "vs_traversal"]


def model_family(quick: bool) -> list[PlacementInstance]:
    """Every bundled and light model under two of :data:`DEVICES` (by turns)."""
    out = []
    paths = [p for p in bundled_models() + light_models()
             if not quick or p.stem in QUICK_MODELS]
    for i, path in enumerate(paths):
        dims = {"batch": 1, "seq": 16} if "llama" in path.stem else None
        graph = load_graph(str(path), dims=dims)
        for d in (DEVICES[i % 3], DEVICES[(i + 1) % 3]):
            inst = model_instance(graph, d)
            inst.name = f"{path.stem}@{d.name}"
            out.append(inst)
    return out


def measure(inst: PlacementInstance, time_limit: float) -> dict[str, Any]:
    """The heuristic and CP-SAT's contiguous answer on one instance."""
    start = time.perf_counter()
    heur = chain_heuristic(inst)
    secs = time.perf_counter() - start
    warm = heur.device if heur.contiguous else np.full(inst.n, HOST, dtype=np.int64)
    exact = solve_throughput(inst, contiguous=True, time_limit=time_limit, workers=2,
                             warm=warm if inst.cpus >= 1 or heur.contiguous else None)
    return {"name": inst.name, "nodes": inst.n, "heuristic": heur.max_load,
            "contiguous": heur.contiguous, "seconds": secs, "cpsat": exact.max_load,
            "bound": exact.bound, "status": exact.status,
            "ratio": heur.max_load / exact.max_load,
            "gap": heur.max_load / exact.bound if exact.bound > 0 else 1.0,
            "traversal": traversal_seconds(instance_graph(inst))}


def summary(family: str, got: list[dict[str, Any]]) -> list[Any]:
    """One table row of a family."""
    ratios = [g["ratio"] for g in got]
    slow = max(got, key=lambda g: g["seconds"])
    return [family, len(got), f"{min(g['nodes'] for g in got)}-{max(g['nodes'] for g in got)}",
            sum(g["status"] == "OPTIMAL" for g in got), sum(not g["contiguous"] for g in got),
            round(max(ratios), 4),
            round(statistics.mean(ratios), 4), round(max(g["gap"] for g in got), 4),
            sum(r > TARGET for r in ratios), round(slow["seconds"], 3),
            round(statistics.mean(g["seconds"] for g in got), 3),
            round(slow["seconds"] / max(slow["traversal"], 1e-9), 1)]


def run(quick: bool = False) -> dict:
    """The benchmark section for benchmarks/run.py."""
    limit = 10.0 if quick else TIME_LIMIT
    fams = {**families(quick), "models": model_family(quick)}
    rows, detail, notes = [], {}, []
    for name, insts in fams.items():
        got = []
        for inst in insts:
            got.append(measure(inst, limit))
            g = got[-1]
            print(f"{name}: {g['name']} n={g['nodes']} heur={g['heuristic']:.6g} "
                  f"({g['seconds']:.2f} s) cpsat={g['cpsat']:.6g} [{g['bound']:.6g}] "
                  f"{g['status']} ratio={g['ratio']:.4f}", flush=True)
        rows.append(summary(name, got))
        detail[name] = got
        notes += [f"{name}: {g['name']} ratio {g['ratio']:.4f}" for g in got
                  if g["ratio"] > TARGET]
    notes += [f"ratio: auto's max load over cpsat's contiguous answer ({limit:g} s, 2 "
              "workers; proven = how many cpsat proves optimal); gap: over cpsat's bound; "
              f"target ratio <= {TARGET} on every instance; not contiguous: splits with "
              "host-only nodes apart on the first CPU, which can be far below the contiguous "
              "optimum (ratio < 1)",
              "reproduce: .venv/bin/python benchmarks/run.py --only throughput_families"]
    return {"title": "Throughput heuristic on unseen instance families vs the contiguous "
            "optimum", "columns": COLUMNS, "rows": rows, "notes": notes, "instances": detail}


if __name__ == "__main__":
    from run import to_markdown

    print(to_markdown(run(quick="--quick" in sys.argv)))
