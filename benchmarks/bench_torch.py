"""torch.fx peers: torch's ``CapabilityBasedPartitioner`` against ``clusterkit.torch``'s drop-in
on the same fx GraphModules (needs torch, the optional extra; skipped without it).

    python benchmarks/bench_torch.py [--quick]          # prints the table
    python benchmarks/run.py --only torch [--quick]     # through the lead's runner

Graphs: synthetic fx graphs of ``clusterkit.testing.synthetic.long_edge_dag(n, seed=0)`` for n =
1e3, 2e3, 3e3, 1e4, 1e5 (quick: 1e3), ops S0..S15 supported and U0..U3 not; and onnx's light
models inception_v1, inception_v2, densenet121, bvlc_alexnet (quick: bvlc_alexnet; one fx node
per ONNX node, every op supported but LRN, Dropout, Reshape, Transpose, Concat). Both
partitioners get the same ``OpsSupport`` predicate and torch's defaults (no single-node
partitions); ``auto`` is the drop-in's default (fewest partitions first), ``auto cut-first``
auto's own default ranking (cut_bytes first). ``seconds`` is ``propose_partitions()`` alone (for
clusterkit it includes reading the fx graph), each run in its own process after the graph is
built; torch's is stopped after 300 s and not run on larger graphs once it was stopped.
``valid``: the partitions with the other nodes alone form an acyclic graph (checked here).
"""

from __future__ import annotations

import json
import signal
import sys
import time

from _child import spawn_child
from _models import LIGHT_DIR
from run import to_markdown

SIZES = (1000, 2000, 3000, 10000, 100000)
LIGHT = ("inception_v1", "inception_v2", "densenet121", "bvlc_alexnet")
LIGHT_UNSUPPORTED = ("LRN", "Dropout", "Reshape", "Transpose", "Concat")
TORCH_CAP = 300.0
CLUSTERKIT_CAP = 300.0
BUILD_ALLOWANCE = 300.0  # making a 1e5-node fx GraphModule takes a while
PEERS = (("torch", "torch.fx"), ("auto", "auto"), ("auto-cut", "auto cut-first"),
         ("longest-path", "longest-path"))
COLUMNS = ["graph", "nodes", "supported"] + [f"{label} {what}" for _, label in PEERS
                                             for what in ("s", "partitions", "placed", "valid")]


def _graph(kind: str, arg: str):
    """The fx GraphModule and its OpsSupport for a bench graph."""
    from clusterkit.io.loader import load_graph
    from clusterkit.testing.synthetic import LONG_EDGE_SUPPORTED, long_edge_dag
    from clusterkit.torch.synthetic import (
        graph_module_from_dag,
        graph_module_from_graph,
        synthetic_support,
    )

    if kind == "long_edge":
        return (graph_module_from_dag(long_edge_dag(int(arg), 0)),
                synthetic_support(LONG_EDGE_SUPPORTED))
    graph = load_graph(str(LIGHT_DIR / f"light_{arg}.onnx"))
    ops = set(graph.op_types) - set(LIGHT_UNSUPPORTED)
    return graph_module_from_graph(graph), synthetic_support(ops)


def acyclic(gm, partitions) -> bool:
    """The graph of partitions, every other node alone, has no cycle."""
    import numpy as np

    from clusterkit.errors import CycleError
    from clusterkit.graph.algorithms import quotient, topological_order

    nodes = list(gm.graph.nodes)
    pos = {nd: k for k, nd in enumerate(nodes)}
    label = np.arange(len(nodes), dtype=np.int64) + len(partitions)
    for k, p in enumerate(partitions):
        label[[pos[nd] for nd in p.nodes]] = k
    src = [pos[a] for nd in nodes for a in nd.all_input_nodes]
    dst = [pos[nd] for nd in nodes for _ in nd.all_input_nodes]
    _, label = np.unique(label, return_inverse=True)
    qsrc, qdst, _ = quotient(label, np.asarray(src, dtype=np.int64),
                             np.asarray(dst, dtype=np.int64))
    try:
        topological_order(int(label.max()) + 1, qsrc.tolist(), qdst.tolist())
    except CycleError:
        return False
    return True


def _alarm(signum, frame):
    raise TimeoutError


def _child(peer: str, kind: str, arg: str, cap: float) -> dict:
    """Build one graph, propose partitions with one peer, measure, check."""
    from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner as TorchCBP

    from clusterkit.torch import CapabilityBasedPartitioner

    gm, support = _graph(kind, arg)
    supported = sum(1 for nd in gm.graph.nodes if support.is_node_supported({}, nd))
    nodes = sum(1 for nd in gm.graph.nodes if nd.op == "call_function")
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(int(cap))
    start = time.perf_counter()
    try:
        if peer == "torch":
            parts = TorchCBP(gm, support).propose_partitions()
        elif peer == "auto-cut":  # auto's own default ranking: cut_bytes before partitions
            parts = CapabilityBasedPartitioner(gm, support,
                                               options={"prefer": "cut"}).propose_partitions()
        else:
            parts = CapabilityBasedPartitioner(gm, support, strategy=peer).propose_partitions()
    except TimeoutError:
        return {"nodes": nodes, "supported": supported, "timeout": True}
    seconds = time.perf_counter() - start
    signal.alarm(0)
    return {"nodes": nodes, "supported": supported, "seconds": seconds,
            "partitions": len(parts), "placed": sum(len(p.nodes) for p in parts),
            "valid": acyclic(gm, parts)}


def _cells(got: dict | None, cap: float, skipped: str) -> list:
    if skipped:
        return [skipped, "-", "-", "-"]
    if got is None:
        return ["failed", "-", "-", "-"]
    if got.get("timeout"):
        return [f"> {cap:.0f}", "-", "-", "-"]
    return [round(got["seconds"], 3), got["partitions"], got["placed"], got["valid"]]


def _row(kind: str, arg: str, label: str, torch_skip: str) -> tuple[list, bool]:
    """One table row; also whether torch's partitioner was stopped."""
    row, shape, stopped = [label], None, False
    cells = []
    for peer, _ in PEERS:
        cap = TORCH_CAP if peer == "torch" else CLUSTERKIT_CAP
        skip = torch_skip if peer == "torch" else ""
        got = None if skip else spawn_child(__file__, [peer, kind, arg, cap],
                                            cap + BUILD_ALLOWANCE)
        if got is not None and shape is None:
            shape = [got["nodes"], got["supported"]]
        stopped |= peer == "torch" and bool(got and got.get("timeout"))
        cells += _cells(got, cap, skip)
    return row + (shape or ["?", "?"]) + cells, stopped


def run(quick: bool = False) -> dict:
    """The benchmark section for benchmarks/run.py."""
    title = "torch.fx peers: CapabilityBasedPartitioner, torch's and clusterkit.torch's"
    try:
        import torch  # noqa: F401
    except ImportError:
        return {"title": title, "columns": ["graph"], "rows": [],
                "notes": ["torch is not installed (pip install 'clusterkit[torch]'): skipped"]}
    rows, torch_skip = [], ""
    for n in SIZES[:1] if quick else SIZES:
        row, stopped = _row("long_edge", str(n), f"long_edge_dag({n})", torch_skip)
        rows.append(row)
        if stopped:
            torch_skip = f"not run (> {TORCH_CAP:.0f} s at {n})"
    for name in LIGHT[-1:] if quick else LIGHT:
        rows.append(_row("light", name, name, "")[0])
    notes = [
        "graphs: fx GraphModules (clusterkit.torch.synthetic) of long_edge_dag(n, seed=0), S0..S15 "
        "supported, U0..U3 not; onnx light models with LRN, Dropout, Reshape, Transpose, Concat "
        "unsupported. Same OpsSupport predicate and defaults for every peer.",
        "s: seconds of propose_partitions() in a fresh process (the graph built beforehand); "
        "placed: nodes in the proposed partitions (single-node partitions dropped, as torch "
        "does); valid: acyclic graph of partitions, checked by the benchmark.",
        "auto: the drop-in's default ranking (fewest partitions, then cut_bytes); auto cut-first: "
        "auto's own default (cut_bytes, then partitions).",
        f"torch.fx stopped after {TORCH_CAP:.0f} s and not run on larger graphs once stopped; "
        f"clusterkit after {CLUSTERKIT_CAP:.0f} s.",
    ]
    return {"title": title, "columns": COLUMNS, "rows": rows, "notes": notes}




if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(json.dumps(_child(sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]))))
    else:
        print(to_markdown(run(quick="--quick" in sys.argv)))
