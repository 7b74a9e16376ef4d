"""Speed on real models: every fast strategy on every bundled model with every shipped selector.

    python benchmarks/bench_speed.py [--quick]          # prints the table
    python benchmarks/run.py --only speed [--quick]     # through the lead's runner

Each bundled model (llama with ``batch=1, seq=16``) is read once in its own subprocess; for each
shipped selector the problem is compiled (default constraints) and each strategy runs on it
three times, after one untimed ``singleton`` run that fills the graph's lazily built arrays
(their cost is reading the model, not partitioning it; no run reuses another's work: every
strategy builds its own structures per run). ``cpu_s`` is the strategy's process CPU time, the
least of the three runs as for the traversal baseline (steadier than wall time on a shared
machine, where other jobs only ever add time), ``wall_s`` the least wall time; one row per strategy
gives the slowest case, the median and how many cases took more than 0.5 s. ``vs_traversal``
is the slowest case's CPU seconds over one pure-Python traversal of the same graph (Kahn's sort
over the successor lists, best of three) measured in the same process. Quick: five models.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

from _child import spawn_child
from _models import bundled_models
from bench_strategies import traversal_seconds

STRATEGIES = ("singleton", "cycles", "longest-path", "mxnet", "hetero", "auto")
SELECTORS = ("coreml", "nnapi", "xnnpack", "qnn", "dnnl", "tensorrt", "openvino_npu")
QUICK = ("resnet18", "bert_base", "swin_t", "t5_small", "squeezenet1_1")
LIMIT = 0.5
COLUMNS = ["strategy", "cases", "max_cpu_s", "max_wall_s", "slowest", "median_cpu_s",
           f"over_{LIMIT}s", "vs_traversal"]
TIMEOUT = 1800.0
REPEAT = 3


def _child(path: str) -> list[dict]:
    """Every (selector, strategy) on one model: the least seconds of ``REPEAT`` runs."""
    from clusterkit import Constraints, run_strategy
    from clusterkit.io.loader import load_graph
    from clusterkit.selection.specs import parse_selectors

    dims = {"batch": 1, "seq": 16} if "llama" in path else None
    graph = load_graph(path, dims=dims)
    base = traversal_seconds(graph)
    rows = []
    for sel in SELECTORS:
        problem = Constraints.default().compile(graph, parse_selectors([sel]))
        run_strategy(problem, "singleton", validate=False)  # fills the graph's lazy caches
        for strategy in STRATEGIES:
            cpu, wall = [], []
            for _ in range(REPEAT):
                c0, t0 = time.process_time(), time.perf_counter()
                run_strategy(problem, strategy, validate=False)
                cpu.append(time.process_time() - c0)
                wall.append(time.perf_counter() - t0)
            rows.append({"case": f"{graph.name}@{sel}", "strategy": strategy,
                         "cpu_s": min(cpu), "wall_s": min(wall), "traversal_s": base})
    return rows


def run(quick: bool = False, timeout: float = TIMEOUT) -> dict:
    """The benchmark section for benchmarks/run.py."""
    models = [p for p in bundled_models() if not quick or p.stem in QUICK]
    results, notes = [], []
    for path in models:
        got = spawn_child(__file__, [str(path)], timeout)
        if got is None:
            notes.append(f"{path.stem}: failed or timed out ({timeout:.0f} s)")
            continue
        results += got
    rows = []
    for strategy in STRATEGIES:
        mine = [r for r in results if r["strategy"] == strategy]
        if not mine:
            continue
        worst = max(mine, key=lambda r: r["cpu_s"])
        rows.append([strategy, len(mine), round(worst["cpu_s"], 4),
                     round(max(r["wall_s"] for r in mine), 4), worst["case"],
                     round(statistics.median(r["cpu_s"] for r in mine), 4),
                     sum(r["cpu_s"] > LIMIT for r in mine),
                     round(worst["cpu_s"] / worst["traversal_s"], 1)])
    notes.append(f"{len(models)} bundled models x {len(SELECTORS)} shipped selectors "
                 f"({', '.join(SELECTORS)}), default constraints; llama with batch=1, seq=16.")
    notes.append(f"over_{LIMIT}s counts the cases whose CPU seconds exceed {LIMIT}; slowest is "
                 "the case with the most CPU seconds, vs_traversal its CPU seconds over one "
                 "pure-Python traversal of the same graph in the same process.")
    return {"title": "Speed on real models (every bundled model x every shipped selector)",
            "columns": COLUMNS, "rows": rows, "notes": notes}


def _print(section: dict) -> None:
    from run import to_markdown

    print(to_markdown(section))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(json.dumps(_child(sys.argv[2])))
    else:
        _print(run(quick="--quick" in sys.argv))
