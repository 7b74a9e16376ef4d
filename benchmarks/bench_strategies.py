"""Growth strategies benchmark: ``hetero`` (OpenVINO HETERO) and ``mxnet`` (MXNet
PartitionGraph) on random layered DAGs of 1e4 and 1e5 nodes (quick: 1e3 and 1e4), and on the
largest real model (llama, 11k nodes).

    python benchmarks/bench_strategies.py [--quick]          # prints the table
    python benchmarks/run.py --only strategies [--quick]     # through the lead's runner

Graphs: ``clusterkit.testing.synthetic.random_dag(n, mean_out_degree=2, locality=0.9,
unsupported_fraction=0.2)`` built with :func:`clusterkit.graph.fast.graph_from_dag`; two devices in
priority order, ``npu`` = Conv, Relu, Add and ``gpu`` = MatMul, Mul, Conv, default constraints.
Each size runs in its own subprocess; ``build_s`` (graph from arrays + compiling the problem) is
measured apart from the strategies. In the same process the ``singleton`` strategy (every node its
own cluster, no search) is run first as the baseline: ``vs_singleton`` is strategy seconds /
singleton seconds. ``cpu_s`` is process CPU time (steadier than wall time on a shared machine).
``rollbacks`` counts hetero's rolled-back nodes and mxnet's nodes dropped to avoid a cycle;
``split`` the clusters split afterwards because they depended on each other.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path

from _child import spawn_child
from _models import BUNDLED_MODELS

DEVICES = ["npu=ops:Conv,Relu,Add", "gpu=ops:MatMul,Mul,Conv"]
STRATEGIES = ("hetero", "mxnet")
COLUMNS = ["graph", "strategy", "nodes", "edges", "build_s", "seconds", "cpu_s", "vs_singleton",
           "partitions", "offloaded", "cut_MB", "rollbacks", "split", "peak_rss_MB"]


def _child(kind: str, n: int, seed: int) -> list[dict]:
    """Build one graph, run singleton, hetero and mxnet on it; one dict per strategy."""
    from clusterkit import Constraints, run_strategy
    from clusterkit.selection.specs import parse_selectors

    t0 = time.perf_counter()
    if kind == "random":
        from clusterkit.graph.fast import graph_from_dag
        from clusterkit.testing.synthetic import random_dag

        dag = random_dag(n, mean_out_degree=2.0, locality=0.9, unsupported_fraction=0.2,
                         seed=seed)
        graph = graph_from_dag(dag, name=f"random{n}")
        props = parse_selectors(DEVICES)
    else:
        import collections

        from clusterkit.io.loader import load_graph

        graph = load_graph(kind)
        top = [op for op, _ in collections.Counter(graph.op_types).most_common(2)]
        props = parse_selectors([f"npu=ops:{top[0]}", f"gpu=ops:{top[1]}"])
    problem = Constraints.default().compile(graph, props)
    build = time.perf_counter() - t0
    rows = []
    base = None
    for strategy in ("singleton",) + STRATEGIES:
        c0, t0 = time.process_time(), time.perf_counter()
        part = run_strategy(problem, strategy, validate=False)
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        part.validate()
        if base is None:
            base = seconds
        m = part.metrics()
        info = part.info.get(strategy, {})
        rows.append({
            "graph": graph.name, "strategy": strategy, "nodes": graph.n,
            "edges": graph.num_edges, "build_s": build, "seconds": seconds, "cpu_s": cpu,
            "vs_singleton": seconds / base if base else float("nan"),
            "partitions": m["partitions"], "offloaded": m["offloaded_share"],
            "cut_MB": m["cut_bytes"] / 2 ** 20,
            "rollbacks": info.get("rollbacks", info.get("nodes_dropped_for_cycles", 0)),
            "split": info.get("clusters_split_for_cycles", 0),
            "peak_rss_MB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0})
    return rows


def _spawn(kind: str, n: int, seed: int, timeout: float) -> list[dict] | None:
    """Run this script's ``--child`` mode in a fresh interpreter."""
    return spawn_child(__file__, [kind, n, seed], timeout)


def _llama() -> str | None:
    path = BUNDLED_MODELS / "llama_48l_dynamic.onnx"
    return str(path) if path.exists() else None


def run(quick: bool = False) -> dict:
    """The benchmark section for benchmarks/run.py."""
    sizes = (1000, 10000) if quick else (10000, 100000)
    jobs = [("random", n) for n in sizes]
    llama = _llama()
    if llama:
        jobs.append((llama, 0))
    rows, notes = [], []
    for kind, n in jobs:
        got = _spawn(kind, n, 0, timeout=1800)
        if got is None:
            notes.append(f"{Path(kind).stem if kind != 'random' else f'random {n}'}: failed or "
                         "timed out (30 min)")
            continue
        for r in got:
            rows.append([r[c] if not isinstance(r[c], float) else round(r[c], 4)
                         for c in COLUMNS])
    notes.append("random layered DAGs: random_dag(n, mean_out_degree=2, locality=0.9, "
                 "unsupported_fraction=0.2, seed=0); devices npu=Conv,Relu,Add then "
                 "gpu=MatMul,Mul,Conv; llama: its two most frequent op types, one per device.")
    notes.append("vs_singleton = strategy seconds / singleton seconds in the same process; "
                 "build_s (graph from arrays + compiling the problem) is not included in "
                 "seconds.")
    notes.append("rollbacks: hetero's rolled-back nodes / mxnet's nodes dropped to avoid a cycle; "
                 "split: clusters split afterwards because they depended on each other through "
                 "other clusters.")
    return {"title": "Growth strategies (hetero, mxnet) at scale", "columns": COLUMNS,
            "rows": rows, "notes": notes}


def _print(section: dict) -> None:
    cols = section["columns"]
    print(" | ".join(cols))
    for row in section["rows"]:
        print(" | ".join(f"{c:.4g}" if isinstance(c, float) else str(c) for c in row))
    for note in section["notes"]:
        print("-", note)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(json.dumps(_child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))))
    else:
        _print(run(quick="--quick" in sys.argv))
