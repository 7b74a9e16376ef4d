"""Benchmark of the exact ``cpsat`` strategy on the real models.

Every model of the onnx light set and the bundled models (tests/data/models) up to 2,500 nodes,
under the ``ops:`` selectors of tests/test_cpsat.py, objective ``cut``, 60 s and 2 workers: status
(OPTIMAL means proven), optimum and bound, the best heuristic's cut as a ratio to the optimum (same
process), how far the reductions shrank the model, and the wall time (heuristic warm start
included). The full run adds the two larger models (swin_t, llama_48l_dynamic) as extra rows.

The LNS part (``method="auto"``: large-neighbourhood search beyond a few hundred super-nodes)
solves objectives with pair terms - ``partitions``, a weighted one, ``cut`` with
``max_size`` - on 10,000-node synthetic graphs (long_edge_dag, random_dag) and on
llama_48l_dynamic (dims batch=1, seq=16) under a near-total selector: status, the warm start's
objective and LNS's, the proven bound, the gap and the wall time; its rows are notes of the
section (``--lns``: that table alone; ``--quick``: 1,000-node graphs).

    .venv/bin/python benchmarks/bench_cpsat.py [--quick] [--lns]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from _models import bundled_models, light_models
from run import to_markdown

from clusterkit.testing.shapes import SELECTOR_SETS

# the ops: selectors of tests/test_cpsat.py
SELECTORS = SELECTOR_SETS
MAX_NODES = 2500
QUICK = ["resnet18", "squeezenet1_1", "light_bvlc_alexnet"]
#: (model, selector) solved again without reductions, for the speed-up note (full run only)
NO_REDUCTION = [("light_inception_v2", "wide"), ("gpt2", "wide"), ("t5_small", "two"),
                ("light_densenet121", "two")]

COLUMNS = ["model", "nodes", "selector", "status", "cut optimum", "bound", "best heuristic",
           "heuristic / optimum", "super-nodes", "parts", "largest part", "seconds"]


def _models() -> list[Path]:
    return light_models() + bundled_models()


def run(quick: bool = False) -> dict:
    from clusterkit import load_graph, make_problem
    from clusterkit.engines.cpsat.strategy import optimize as solve

    time_limit = 20.0 if quick else 60.0
    rows, notes, not_optimal, ratios = [], [], [], []
    total = time.perf_counter()
    for path in _models():
        stem = path.stem
        if quick and stem not in QUICK:
            continue
        graph = load_graph(str(path))
        extra = graph.n > MAX_NODES
        if extra and quick:
            continue
        selectors = ["two"] if quick else list(SELECTORS)
        for sel in selectors:
            problem = make_problem(graph, SELECTORS[sel])
            start = time.perf_counter()
            res = solve(problem, "cut", time_limit=time_limit, workers=2, seed=0)
            seconds = time.perf_counter() - start
            ws = res.info.get("warm_start", {})
            red = res.info.get("reductions", {})
            heur = ws.get("objective")
            ratio = (heur / res.objective if res.objective else
                     (1.0 if heur == res.objective else float("inf"))) \
                if heur is not None and res.objective is not None else None
            if ratio is not None and ws.get("fallback_nodes") == res.fallback_nodes:
                ratios.append(ratio)
            label = stem + (" (extra, > 2,500 nodes)" if extra else "")
            rows.append([label, graph.n, sel, res.status, _int(res.objective), _int(res.bound),
                         ws.get("strategy"), None if ratio is None else round(ratio, 4),
                         red.get("super_nodes"), red.get("parts"), red.get("largest_part"),
                         round(seconds, 2)])
            if res.status != "OPTIMAL" and not extra:
                not_optimal.append(f"{stem}/{sel}: {res.status} ({res.reason or 'time limit'})")
    notes.append(f"objective cut, time limit {time_limit:g} s, 2 workers, seed 0; 'seconds' "
                 "includes the heuristic warm start and the reductions")
    if not_optimal:
        notes.append("not proven OPTIMAL: " + "; ".join(not_optimal))
    elif quick:
        notes.append("every run above is proven OPTIMAL (quick: three small models)")
    else:
        notes.append("every model up to 2,500 nodes is proven OPTIMAL under every selector")
    if not quick:
        notes.append("reductions (same process, same warm start): " + "; ".join(
            _without_reductions(time_limit)))
    if ratios:
        ratios.sort()
        notes.append(f"best heuristic / optimum: median {ratios[len(ratios) // 2]:.3f}, worst "
                     f"{ratios[-1]:.3f} over {len(ratios)} runs")
    notes.extend(" | ".join(str(v) for v in row) for row in [LNS_COLUMNS] + lns_rows(quick))
    notes.append(f"total {time.perf_counter() - total:.1f} s")
    return {"title": "cpsat: proven optimal cut on the real models", "columns": COLUMNS,
            "rows": rows, "notes": notes}


LNS_COLUMNS = ["LNS: graph", "nodes", "objective", "max_size", "method", "status",
               "warm start", "objective value", "bound", "gap", "value / warm", "seconds"]
#: (graph, objective, max_size) of the LNS rows; graphs: long / random DAGs of N nodes, llama
LNS_CASES = [("long", "partitions", None), ("long", "cut=1,partitions=100000", None),
             ("long", "cut", 32), ("random", "partitions", None), ("llama", "partitions", None)]


def lns_rows(quick: bool = False) -> list[list]:
    """One row per case of :data:`LNS_CASES` (10,000-node DAGs; quick: 1,000, no llama)."""
    from clusterkit import Constraints, make_problem
    from clusterkit.engines.cpsat.strategy import optimize as solve

    n, time_limit = (1000, 10.0) if quick else (10000, 60.0)
    rows = []
    for kind, objective, max_size in LNS_CASES:
        if quick and kind == "llama":
            continue
        graph, selector = _lns_graph(kind, n)
        cons = Constraints.default(max_size=max_size)
        problem = make_problem(graph, [selector], constraints=cons)
        start = time.perf_counter()
        res = solve(problem, objective, time_limit=time_limit, workers=2, seed=0)
        seconds = time.perf_counter() - start
        warm = res.info["warm_start"].get("objective")
        gap = (res.objective - res.bound) / res.objective if res.objective else 0.0
        rows.append([kind, graph.n, objective, max_size, res.info.get("method"), res.status,
                     _int(warm), _int(res.objective), _int(res.bound), f"{gap:.1%}",
                     round(res.objective / warm, 4) if warm else None, round(seconds, 1)])
    return rows


def _lns_graph(kind: str, n: int):
    """The graph and the selector of an LNS row."""
    from clusterkit import load_graph
    from clusterkit.graph.fast import graph_from_dag
    from clusterkit.testing.synthetic import (
        DEFAULT_OP_TYPES,
        LONG_EDGE_SUPPORTED,
        long_edge_dag,
        random_dag,
    )

    if kind == "long":
        return graph_from_dag(long_edge_dag(n, seed=0)), "npu=ops:" + ",".join(
            LONG_EDGE_SUPPORTED)
    if kind == "random":
        return graph_from_dag(random_dag(n, seed=0)), "npu=ops:" + ",".join(DEFAULT_OP_TYPES)
    path = next(p for p in bundled_models() if p.stem == "llama_48l_dynamic")
    graph = load_graph(str(path), dims={"batch": 1, "seq": 16})
    ops = sorted({nd.op_type for nd in graph.nodes} - set(NOT_TAKEN))
    return graph, "npu=ops:" + ",".join(ops)


#: the ops the near-total selector of the llama rows leaves on the host
NOT_TAKEN = ("Shape", "Gather", "Cast")


def _without_reductions(time_limit: float) -> list[str]:
    """Seconds with and without the reductions of clusterkit.engines.cpsat.reduce, and the ratio."""
    from clusterkit import load_graph, make_problem
    from clusterkit.engines.cpsat.strategy import optimize as solve

    out = []
    paths = {p.stem: p for p in _models()}
    for stem, sel in NO_REDUCTION:
        if stem not in paths:
            continue
        problem = make_problem(load_graph(str(paths[stem])), SELECTORS[sel])
        times, statuses = [], []
        for reduce in (True, False):
            start = time.perf_counter()
            res = solve(problem, "cut", time_limit=time_limit, workers=2, reduce=reduce)
            times.append(time.perf_counter() - start)
            statuses.append(res.status)
        out.append(f"{stem}/{sel} {times[0]:.2f} s ({statuses[0]}) vs {times[1]:.2f} s without "
                   f"({statuses[1]}): x{times[1] / max(times[0], 1e-9):.1f}")
    return out


def _int(value):
    """Whole numbers as int (the table prints floats with 4 digits)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value




if __name__ == "__main__":
    if "--lns" in sys.argv:
        print(to_markdown({"title": "cpsat LNS", "columns": LNS_COLUMNS,
                           "rows": lns_rows(quick="--quick" in sys.argv), "notes": []}))
    else:
        print(to_markdown(run(quick="--quick" in sys.argv)))
