"""Quality of the heuristics against the proven CP-SAT optimum of cut_bytes.

Every model of the onnx light set and the bundled models, under the three op sets of
``clusterkit.testing.shapes.QUALITY_OP_SETS`` (default constraints): each heuristic strategy and
``auto`` give fallback nodes, cut_bytes and partitions; ``cpsat`` (objective ``cut``: fewest
fallback nodes first, then cut) gives the optimum with its status. The optimum is computed once
and cached in ``bench/quality_cache.json`` (keyed by model, op set and node count); delete the file
to recompute. A strategy's gap is its cut over the optimum minus one when it has as few fallback
nodes as the optimum (otherwise the case counts as "more fallback").

    .venv/bin/python benchmarks/bench_quality.py [--quick]
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

from _models import REPO, bundled_models, light_models

import clusterkit as ck
from clusterkit.io.files import write_atomic
from clusterkit.testing.shapes import QUALITY_OP_SETS

CACHE = REPO / "bench" / "quality_cache.json"
HEURISTICS = ["cycles", "longest-path", "mxnet", "hetero", "auto"]
QUICK = {"light_inception_v2", "light_densenet121", "bert_base", "resnet18", "t5_small"}


def _optimum(problem: ck.Problem, key: str, cache: dict) -> dict:
    if key not in cache:
        start = time.perf_counter()
        part = ck.run_strategy(problem, "cpsat", objective="cut", time_limit=60.0, workers=2)
        fb, cut, parts = part.figures()
        cache[key] = {"fallback_nodes": fb, "cut_bytes": cut, "partitions": parts,
                      "status": part.info.get("status", "?"),
                      "seconds": round(time.perf_counter() - start, 3)}
    return cache[key]


def _cases(quick: bool) -> list[tuple[Path, str]]:
    models = [p for p in light_models() + bundled_models() if not quick or p.stem in QUICK]
    return [(path, name) for path in models for name in QUALITY_OP_SETS]


def _gap(fig: tuple[int, int, int], opt: dict) -> float | None:
    if fig[0] > opt["fallback_nodes"]:
        return None
    return fig[1] / opt["cut_bytes"] - 1.0 if opt["cut_bytes"] else float(fig[1] > 0)


def run(quick: bool = False) -> dict:
    cache = json.loads(CACHE.read_text()) if CACHE.exists() else {}
    rows, gaps = [], {s: [] for s in HEURISTICS}
    more_fallback = {s: 0 for s in HEURISTICS}
    parts_vs_best = {s: 0 for s in HEURISTICS}
    auto_vs_members = 0
    for path, opset in _cases(quick):
        graph = ck.load_graph(str(path))
        problem = ck.make_problem(graph, QUALITY_OP_SETS[opset])
        opt = _optimum(problem, f"{path.stem}|{opset}|{graph.n}", cache)
        parts = {s: ck.run_strategy(problem, s) for s in HEURISTICS}
        figs = {s: part.figures() for s, part in parts.items()}
        best_parts = min(f[2] for s, f in figs.items() if s != "auto")
        fewest_member = min(m["partitions"] for m in parts["auto"].info["auto"]["members"])
        auto_vs_members += figs["auto"][2] <= fewest_member
        row = [path.stem, opset, graph.n, opt["status"], opt["cut_bytes"], opt["partitions"]]
        for s in HEURISTICS:
            gap = _gap(figs[s], opt)
            if gap is None:
                more_fallback[s] += 1
            else:
                gaps[s].append(gap)
            parts_vs_best[s] += figs[s][2] <= best_parts
            row += ["more fallback" if gap is None else f"{gap:+.1%}", figs[s][2]]
        rows.append(row + [fewest_member])
    CACHE.parent.mkdir(exist_ok=True)
    write_atomic(CACHE, json.dumps(cache, indent=1, sort_keys=True))
    cases = len(rows)
    notes = [f"{s}: median gap {statistics.median(gaps[s]):+.1%}, worst {max(gaps[s]):+.1%}, "
             f"within 1% on {sum(g <= 0.01 for g in gaps[s])}/{cases} cases, more fallback "
             f"nodes than the optimum on {more_fallback[s]}, partitions <= the best member's "
             f"on {parts_vs_best[s]}/{cases}" for s in HEURISTICS if gaps[s]]
    notes.append(f"auto forms no more partitions than the fewest of its coalesced members (any "
                 f"cut) on {auto_vs_members}/{cases} cases")
    notes.append("op sets: " + "; ".join(f"{k} = {v}" for k, v in QUALITY_OP_SETS.items()))
    notes.append("optimum: cpsat objective cut, 60 s, 2 workers, cached in "
                 "bench/quality_cache.json; gap = cut / optimum - 1 at equal fallback nodes")
    columns = ["model", "op set", "nodes", "cpsat status", "optimum cut", "cpsat partitions"]
    for s in HEURISTICS:
        columns += [f"{s} gap", f"{s} partitions"]
    columns.append("auto members' fewest partitions")
    return {"title": "Quality: heuristics and auto against the CP-SAT optimum of cut_bytes",
            "columns": columns, "rows": rows, "notes": notes}


if __name__ == "__main__":
    from run import to_markdown
    print(to_markdown(run(quick="--quick" in sys.argv)))
