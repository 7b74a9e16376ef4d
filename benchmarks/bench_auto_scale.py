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
    .venv/bin/python benchmarks/bench_auto_scale.py --fast 1000000   # all but SLOW_ALONE alone
    .venv/bin/python benchmarks/bench_auto_scale.py --random 100000  # random_dag, two devices

Each size runs in a fresh interpreter.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


#: members too slow to run alone at 1e6 in a benchmark run (minutes each): with ``fast``
#: only the others run alone there
SLOW_ALONE = ("cycles+merge_non_adjacent", "mxnet", "hetero")


def _child(kind: str, n: int, alone: str) -> dict:
    """auto on ``kind`` at ``n`` nodes; ``alone``: which left-out members then run alone
    (``all``, ``none``, or ``fast``: all but :data:`SLOW_ALONE`)."""
    sys.path.insert(0, str(HERE))
    from bench_strategies import _problem, graph_traversal_seconds, traversal_seconds

    import clusterkit as ck
    from clusterkit.engines.auto import MEMBERS

    # the modules auto imports on first use, imported (and compiled) before the clock starts
    ck.run_strategy(_problem(kind, 500, 1), "auto", validate=False)
    problem = _problem(kind, n, 0)
    base, objects = traversal_seconds(problem.graph), graph_traversal_seconds(problem.graph)
    start = time.process_time()
    part = ck.run_strategy(problem, "auto", validate=False)
    cpu = time.process_time() - start
    record = part.info["auto"]
    order = (lambda k: k) if record["ranking"] == "cut" else (lambda k: (k[0], k[2], k[1]))
    out = {"kind": kind, "n": n, "auto_cpu_s": round(cpu, 2), "traversal_s": round(base, 4),
           "vs_traversal": round(cpu / base, 1), "graph_traversal_s": round(objects, 3),
           "vs_graph_traversal": round(cpu / objects, 1), "auto": part.figures(),
           "winner": record["winner"],
           "members": [(m["name"], m["seconds"]) for m in record["members"]],
           "skipped_for_size": record.get("skipped_for_size", []), "skipped": []}
    for name in out["skipped_for_size"]:
        if alone == "none" or (alone == "fast" and name in SLOW_ALONE):
            continue
        strategy, options = MEMBERS[name]
        start = time.process_time()
        own = ck.run_strategy(problem, strategy, coalesce_after=True, validate=False,
                              **options)
        seconds = time.process_time() - start
        verdict = "ok" if order(part.figures()) <= order(own.figures()) else "WORSE"
        out["skipped"].append({"member": name, "figures": own.figures(),
                               "cpu_s": round(seconds, 2), "auto": verdict})
    return out


def _measure(kind: str, n: int, alone: str) -> dict:
    done = subprocess.run([sys.executable, __file__, "--child", kind, str(n), alone],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


COLUMNS = ["graph", "n", "auto cpu s", "traversal s", "vs traversal", "object traversal s",
           "vs object traversal", "auto figures", "winner", "left out for size",
           "each alone: figures, cpu s, auto"]


def run(quick: bool = False) -> dict:
    """The ``make bench`` section: the long-edge and random DAGs at 1e5 with every left-out
    member run alone, and (not quick) the long-edge DAG at 1e6 with the faster ones."""
    rows = []
    cases = [("long", 100_000, "all"), ("random", 100_000, "all")]
    for kind, n, alone in cases + ([] if quick else [("long", 1_000_000, "fast")]):
        r = _measure(kind, n, alone)
        ran = "; ".join(f"{s['member']}: {s['figures']}, {s['cpu_s']} s, {s['auto']}"
                        for s in r["skipped"]) or "-"
        left = [m for m in r["skipped_for_size"] if m not in {s["member"] for s in r["skipped"]}]
        alone_text = ran + (f" (not run alone: {', '.join(left)})" if left else "")
        rows.append([kind, n, r["auto_cpu_s"], r["traversal_s"], r["vs_traversal"],
                     r["graph_traversal_s"], r["vs_graph_traversal"], r["auto"], r["winner"],
                     ", ".join(r["skipped_for_size"]) or "-", alone_text])
    return {"title": "auto at scale: its engine against one traversal, and the members it "
                     "leaves out for size run alone", "columns": COLUMNS, "rows": rows,
            "notes": [
                "long: long_edge_dag(n, seed=0), one device taking the sixteen supported ops; "
                "random: random_dag(n, seed=0) with two devices (bench_strategies.DEVICES); "
                "auto's engine CPU seconds (problem compiled, modules imported), one fresh "
                "interpreter per row",
                "traversal: Kahn's sort over plain successor lists; object traversal: the same "
                "over the graph's node and tensor objects (the issue's reference); target: at "
                "most 10x",
                "figures: (fallback nodes, cut_bytes, partitions); auto: ok when auto is at "
                "least as good as the member alone by its own ranking, WORSE otherwise"]}


def main(argv: list[str]) -> None:
    if argv and argv[0] == "--child":
        print(json.dumps(_child(argv[1], int(argv[2]), argv[3])))
        return
    alone = "none" if "--auto-only" in argv else "fast" if "--fast" in argv else "all"
    kind = "random" if "--random" in argv else "long"
    sizes = [int(float(a)) for a in argv if not a.startswith("--")] or [100_000]
    for n in sizes:
        print(json.dumps(_measure(kind, n, alone)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
