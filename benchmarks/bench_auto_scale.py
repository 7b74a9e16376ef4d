"""``auto`` at scale: its CPU seconds against one traversal of the graph, and the members it
leaves out for size run on their own.

On ``long_edge_dag(n, seed=0)`` (one device taking the sixteen supported ops, as in
``bench_strategies.py``) for each ``n``: the CPU seconds of ``auto`` (the engine alone, the
problem already compiled), its ratio to one pure-Python traversal of the same graph
(:func:`bench_strategies.traversal_seconds`, Kahn's sort over the successor lists) and to one
traversal of the graph's node and tensor objects (:func:`bench_strategies.graph_traversal_seconds`),
its figures (fallback nodes, cut_bytes, partitions) and winner; then each member of
:data:`clusterkit.engines.auto.SCALE_SKIPPED` that ``auto`` left out at that size, run alone
through the front door and coalesced (as ``auto`` runs its members), with its figures, its CPU
seconds and whether ``auto`` is still at least as good by its own ranking (``ok``) or not
(``WORSE``; there must be none).

    .venv/bin/python benchmarks/bench_auto_scale.py                  # n = 1e5
    .venv/bin/python benchmarks/bench_auto_scale.py 100000 1000000   # the members alone at 1e6
                                                                     # take minutes
    .venv/bin/python benchmarks/bench_auto_scale.py --auto-only 1000000

Each size runs in a fresh interpreter.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _child(n: int, auto_only: bool) -> dict:
    sys.path.insert(0, str(HERE))
    from bench_strategies import _problem, graph_traversal_seconds, traversal_seconds

    import clusterkit as ck
    from clusterkit.engines.auto import MEMBERS

    problem = _problem("long", n, 0)
    base, objects = traversal_seconds(problem.graph), graph_traversal_seconds(problem.graph)
    start = time.process_time()
    part = ck.run_strategy(problem, "auto", validate=False)
    cpu = time.process_time() - start
    record = part.info["auto"]
    order = (lambda k: k) if record["ranking"] == "cut" else (lambda k: (k[0], k[2], k[1]))
    out = {"n": n, "auto_cpu_s": round(cpu, 2), "traversal_s": round(base, 4),
           "vs_traversal": round(cpu / base, 1), "graph_traversal_s": round(objects, 3),
           "vs_graph_traversal": round(cpu / objects, 1), "auto": part.figures(),
           "winner": record["winner"],
           "members": [(m["name"], m["seconds"]) for m in record["members"]],
           "skipped_for_size": record.get("skipped_for_size", []), "skipped": []}
    if auto_only:
        return out
    for name in out["skipped_for_size"]:
        strategy, options = MEMBERS[name]
        start = time.process_time()
        alone = ck.run_strategy(problem, strategy, coalesce_after=True, validate=False,
                                **options)
        seconds = time.process_time() - start
        verdict = "ok" if order(part.figures()) <= order(alone.figures()) else "WORSE"
        out["skipped"].append({"member": name, "figures": alone.figures(),
                               "cpu_s": round(seconds, 2), "auto": verdict})
    return out


def _measure(n: int, auto_only: bool) -> dict:
    done = subprocess.run([sys.executable, __file__, "--child", str(n),
                           "1" if auto_only else "0"], capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


COLUMNS = ["n", "auto cpu s", "traversal s", "vs traversal", "object traversal s",
           "vs object traversal", "auto figures", "winner", "left out for size",
           "each alone: figures, cpu s, auto"]


def run(quick: bool = False) -> dict:
    """The ``make bench`` section: 1e5 with the left-out members run alone, and (not quick)
    1e6 for auto alone."""
    rows = []
    for n, auto_only in [(100_000, False)] + ([] if quick else [(1_000_000, True)]):
        r = _measure(n, auto_only)
        alone = "; ".join(f"{s['member']}: {s['figures']}, {s['cpu_s']} s, {s['auto']}"
                          for s in r["skipped"]) or ("not run" if auto_only else "-")
        rows.append([n, r["auto_cpu_s"], r["traversal_s"], r["vs_traversal"],
                     r["graph_traversal_s"], r["vs_graph_traversal"], r["auto"], r["winner"],
                     ", ".join(r["skipped_for_size"]) or "-", alone])
    return {"title": "auto at scale: its engine against one traversal, and the members it "
                     "leaves out for size run alone", "columns": COLUMNS, "rows": rows,
            "notes": [
                "long_edge_dag(n, seed=0), one device taking the sixteen supported ops; auto's "
                "engine CPU seconds (problem compiled), one fresh interpreter per size",
                "traversal: Kahn's sort over plain successor lists; object traversal: the same "
                "over the graph's node and tensor objects (the issue's reference); target: at "
                "most 10x",
                "figures: (fallback nodes, cut_bytes, partitions); auto: ok when auto is at "
                "least as good as the member alone by its own ranking, WORSE otherwise"]}


def main(argv: list[str]) -> None:
    if argv and argv[0] == "--child":
        print(json.dumps(_child(int(argv[1]), argv[2] == "1")))
        return
    auto_only = "--auto-only" in argv
    sizes = [int(float(a)) for a in argv if not a.startswith("--")] or [100_000]
    for n in sizes:
        print(json.dumps(_measure(n, auto_only)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
