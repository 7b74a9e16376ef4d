"""Strategies benchmark: every fast strategy (``singleton``, ``cycles``, ``longest-path``,
``mxnet``, ``hetero``) on two kinds of synthetic DAG from 1e3 to 1e5 nodes (quick: 1e3 and 1e4),
and on the largest real model (llama, 11k nodes).

    python benchmarks/bench_strategies.py [--quick]          # prints the table
    python benchmarks/run.py --only strategies [--quick]     # through the lead's runner

Graphs, built with :func:`clusterkit.graph.fast.graph_from_dag`:

- ``random``: ``random_dag(n, mean_out_degree=2, locality=0.9, unsupported_fraction=0.2)``, two
  devices in priority order, ``npu`` = Conv, Relu, Add and ``gpu`` = MatMul, Mul, Conv;
- ``long``: ``long_edge_dag(n)`` (ids in a hidden random order, 5% of the edges span the whole
  graph, 20% of the nodes carry one of four unsupported ops), one device taking the sixteen
  supported ops;
- llama with ``batch=1, seq=16``, one device taking every op type, and again with the shipped
  ``tensorrt`` selector.

Each (graph, strategy) runs in its own subprocess with a timeout. ``seconds`` is the strategy's
wall time (``cpu_s`` its process CPU time, steadier on a shared machine), ``build_s`` (graph
from arrays + compiling the problem) is apart. ``vs_traversal`` is the strategy's CPU seconds /
the CPU seconds (``traversal_s``) of one pure-Python traversal of the same graph (Kahn's
topological sort over the successor lists, best of three) measured in the same process;
``vs_graph_traversal`` the same over one traversal of the graph's node and tensor objects
(``graph_traversal_s``: Kahn's sort following each node's output tensors to their consumers,
what a loop over the public object model costs, about ten times the plain-list one).
``rollbacks`` counts hetero's rolled-back nodes and mxnet's nodes
dropped to avoid a cycle; ``split`` the clusters split afterwards because they depended on each
other.
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
STRATEGIES = ("singleton", "cycles", "longest-path", "mxnet", "hetero")
COLUMNS = ["graph", "strategy", "nodes", "edges", "build_s", "seconds", "cpu_s", "traversal_s",
           "vs_traversal", "graph_traversal_s", "vs_graph_traversal", "partitions", "offloaded",
           "cut_MB", "rollbacks", "split", "peak_rss_MB"]
TIMEOUT = 600.0


def traversal_seconds(graph) -> float:
    """CPU seconds of one pure-Python traversal of ``graph``: Kahn's topological sort over its
    successor lists (every node and edge visited once); the best of three runs."""
    succ = graph.succ_lists
    best = float("inf")
    for _ in range(3):
        t0 = time.process_time()
        indeg = [0] * len(succ)
        for ws in succ:
            for w in ws:
                indeg[w] += 1
        ready = [v for v, d in enumerate(indeg) if d == 0]
        seen = 0
        while ready:
            v = ready.pop()
            seen += 1
            for w in succ[v]:
                indeg[w] -= 1
                if indeg[w] == 0:
                    ready.append(w)
        best = min(best, time.process_time() - t0)
    return best


def graph_traversal_seconds(graph) -> float:
    """CPU seconds of one pure-Python traversal of ``graph``'s node and tensor objects: Kahn's
    sort that follows each node's output tensors to their consumers (what a loop over the
    public object model costs); the best of three runs."""
    nodes, tensors = graph.nodes, graph.tensors
    best = float("inf")
    for _ in range(3):
        t0 = time.process_time()
        indeg = [0] * len(nodes)
        for nd in nodes:
            for t in nd.outputs:
                for c in tensors[t].consumers:
                    indeg[c] += 1
        ready = [nd for nd in nodes if indeg[nd.index] == 0]
        while ready:
            nd = ready.pop()
            for t in nd.outputs:
                for c in tensors[t].consumers:
                    indeg[c] -= 1
                    if indeg[c] == 0:
                        ready.append(nodes[c])
        best = min(best, time.process_time() - t0)
    return best


def _problem(kind: str, n: int, seed: int):
    """The graph's problem for one benchmark kind."""
    from clusterkit import Constraints
    from clusterkit.graph.fast import graph_from_dag
    from clusterkit.selection.specs import parse_selectors

    if kind == "random":
        from clusterkit.testing.synthetic import random_dag

        dag = random_dag(n, mean_out_degree=2.0, locality=0.9, unsupported_fraction=0.2,
                         seed=seed)
        graph, selectors = graph_from_dag(dag, name=f"random{n}"), DEVICES
    elif kind == "long":
        from clusterkit.testing.synthetic import LONG_EDGE_SUPPORTED, long_edge_dag

        graph = graph_from_dag(long_edge_dag(n, seed=seed), name=f"long{n}")
        selectors = ["ops:" + ",".join(LONG_EDGE_SUPPORTED)]
    else:
        from clusterkit.io.loader import load_graph

        path, _, shipped = kind.partition("@")     # "model.onnx@tensorrt": a shipped selector
        graph = load_graph(path, dims={"batch": 1, "seq": 16})
        selectors = [shipped] if shipped else ["ops:" + ",".join(sorted(set(graph.op_types)))]
        if shipped:
            graph.name = f"{graph.name}@{shipped}"
    return Constraints.default().compile(graph, parse_selectors(selectors))


def _child(kind: str, n: int, seed: int, strategy: str) -> dict:
    """Build one graph, time one traversal and one strategy on it."""
    from clusterkit import run_strategy

    t0 = time.perf_counter()
    problem = _problem(kind, n, seed)
    build = time.perf_counter() - t0
    graph = problem.graph
    base = traversal_seconds(graph)
    objects = graph_traversal_seconds(graph)
    c0, t0 = time.process_time(), time.perf_counter()
    part = run_strategy(problem, strategy, validate=False)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    part.validate()
    m = part.metrics()
    info = part.info.get(strategy, {})
    return {
        "graph": graph.name, "strategy": strategy, "nodes": graph.n, "edges": graph.num_edges,
        "build_s": build, "seconds": seconds, "cpu_s": cpu, "traversal_s": base,
        "vs_traversal": cpu / base, "graph_traversal_s": objects,
        "vs_graph_traversal": cpu / objects,
        "partitions": m["partitions"], "offloaded": m["offloaded_share"],
        "cut_MB": m["cut_bytes"] / 2 ** 20,
        "rollbacks": info.get("rollbacks", info.get("nodes_dropped_for_cycles", 0)),
        "split": info.get("clusters_split_for_cycles", 0),
        "peak_rss_MB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}


def _llama() -> str | None:
    path = BUNDLED_MODELS / "llama_48l_dynamic.onnx"
    return str(path) if path.exists() else None


def run(quick: bool = False, timeout: float = TIMEOUT) -> dict:
    """The benchmark section for benchmarks/run.py."""
    sizes = (1000, 10000) if quick else (1000, 10000, 100000)
    jobs = [(kind, n) for kind in ("random", "long") for n in sizes]
    llama = _llama()
    if llama:
        jobs += [(llama, 0), (llama + "@tensorrt", 0)]
    rows, notes = [], []
    for kind, n in jobs:
        for strategy in STRATEGIES:
            got = spawn_child(__file__, [kind, n, 0, strategy], timeout)
            if got is None:
                name = Path(kind).stem if n == 0 else f"{kind} {n}"
                notes.append(f"{name} {strategy}: failed or timed out ({timeout:.0f} s)")
                continue
            rows.append([got[c] if not isinstance(got[c], float) else round(got[c], 4)
                         for c in COLUMNS])
    notes.append("random: random_dag(n, mean_out_degree=2, locality=0.9, unsupported_fraction="
                 "0.2, seed=0), devices npu=Conv,Relu,Add then gpu=MatMul,Mul,Conv; long: "
                 "long_edge_dag(n, seed=0), one device taking S0..S15; llama (batch=1, seq=16): "
                 "one device taking every op type (llama@tensorrt: the shipped tensorrt "
                 "selector).")
    notes.append("vs_traversal = strategy CPU seconds / CPU seconds of one pure-Python traversal "
                 "(Kahn's sort over the successor lists) of the same graph in the same process; "
                 "vs_graph_traversal: the same over one traversal of the graph's node and "
                 "tensor objects (Kahn's sort through each node's output tensors); build_s (graph "
                 "from arrays + compiling the problem) is not included in seconds.")
    notes.append("rollbacks: hetero's rolled-back nodes / mxnet's nodes dropped to avoid a cycle; "
                 "split: clusters split afterwards because they depended on each other through "
                 "other clusters.")
    return {"title": "Strategies at scale (random and long-edge DAGs, llama)", "columns": COLUMNS,
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
        print(json.dumps(_child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])))
    else:
        _print(run(quick="--quick" in sys.argv))
