"""Where ``hetero``'s time goes on a long-edge DAG: its steps, and what they cost without checks.

    python benchmarks/hetero_steps.py [N]        # long_edge_dag(N, seed=0), default 100000

A diagnostic, not a section of ``make bench``: it wraps two internals of the engine for one run
(``_Selector._grow`` to count the steps each growth checks, ``GrowthTracker.replay`` to time
the steps a regrowth repeats from its log without any check) and prints the growths, the
checked and replayed steps, the CPU seconds per replayed step and the CPU seconds the checked
steps would take at that rate, each against one traversal of the graph's objects (as in
``bench_strategies``).
"""

from __future__ import annotations

import sys
import time

from bench_strategies import _problem, graph_traversal_seconds


def measure(n: int) -> dict:
    from clusterkit.engines import growth, hetero

    problem = _problem("long", n, 0)
    base = graph_traversal_seconds(problem.graph)
    counts = {"first_growths": 0, "regrowths": 0, "checked_steps": 0, "replayed_steps": 0,
              "replay_cpu_s": 0.0}
    grow, replay = hetero._Selector._grow, growth.GrowthTracker.replay

    def counted_grow(self, d, root, old=None):
        done = self._replayable(old) if old is not None else 0
        g = grow(self, d, root, old)
        counts["regrowths" if old is not None else "first_growths"] += 1
        counts["checked_steps"] += len(g.log.seen) - done
        return g

    def timed_replay(self, steps, removed, count):
        start = time.process_time()
        out = replay(self, steps, removed, count)
        counts["replay_cpu_s"] += time.process_time() - start
        counts["replayed_steps"] += count
        return out

    hetero._Selector._grow, growth.GrowthTracker.replay = counted_grow, timed_replay
    try:
        start = time.process_time()
        hetero.run(problem)
        total = time.process_time() - start
    finally:
        hetero._Selector._grow, growth.GrowthTracker.replay = grow, replay
    per_step = counts["replay_cpu_s"] / max(counts["replayed_steps"], 1)
    floor = per_step * counts["checked_steps"]
    return {**counts, "hetero_cpu_s": total, "graph_traversal_s": base,
            "vs_graph_traversal": total / base, "us_per_replayed_step": per_step * 1e6,
            "checked_steps_without_checks_s": floor, "that_vs_graph_traversal": floor / base,
            "us_per_checked_step": (total - counts["replay_cpu_s"]) /
            max(counts["checked_steps"], 1) * 1e6}


if __name__ == "__main__":
    for key, value in measure(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000).items():
        print(f"{key}: {value:.4g}" if isinstance(value, float) else f"{key}: {value}")
