"""Where ``hetero``'s time goes on a long-edge DAG: its steps, and what they cost without checks.

    python benchmarks/hetero_steps.py [N]        # long_edge_dag(N, seed=0), default 100000

A diagnostic, not a section of ``make bench``: it wraps two internals of the engine for one run
(``_Selector._grow`` to count the steps each growth checks and keep the logs of first growths,
``GrowthTracker.replay`` to time the steps a regrowth repeats from its log without any check) and
prints the growths, the checked and replayed steps, the CPU seconds per replayed step and the
CPU seconds the checked steps would take at that rate, each against one traversal of the graph's
objects (as in ``bench_strategies``). Then it walks every first growth again depth first, as
the engine does, with each step's outcome read from the log instead of checked
(:func:`walk_from_log`): the CPU seconds per step of that walk, times the checked steps, are
what any step-by-step simulation of the same growths costs in CPython before its first check.
"""

from __future__ import annotations

import sys
import time

from bench_strategies import _problem, graph_traversal_seconds


def measure(n: int) -> dict:
    from clusterkit.engines import growth, hetero
    from clusterkit.engines.super_nodes import SuperNodeGraph

    problem = _problem("long", n, 0)
    base = graph_traversal_seconds(problem.graph)
    counts = {"first_growths": 0, "regrowths": 0, "checked_steps": 0, "replayed_steps": 0,
              "replay_cpu_s": 0.0}
    firsts = []     # (root, outcome per step, rollbacks after a step) of every first growth
    grow, replay = hetero._Selector._grow, growth.GrowthTracker.replay

    def counted_grow(self, d, root, old=None):
        done = self._replayable(old) if old is not None else 0
        g = grow(self, d, root, old)
        counts["regrowths" if old is not None else "first_growths"] += 1
        counts["checked_steps"] += len(g.log.seen) - done
        if old is None:
            firsts.append((root, list(g.log.seen), dict(g.log.removed)))
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
    ug = SuperNodeGraph(problem)
    adj = [s + p for s, p in zip(ug.succ, ug.pred)]
    walk_from_log(adj, firsts, verify=True)
    start = time.process_time()
    walked = walk_from_log(adj, firsts)
    per_walked = (time.process_time() - start) / max(walked, 1)
    return {**counts, "hetero_cpu_s": total, "graph_traversal_s": base,
            "vs_graph_traversal": total / base, "us_per_replayed_step": per_step * 1e6,
            "checked_steps_without_checks_s": floor, "that_vs_graph_traversal": floor / base,
            "us_per_checked_step": (total - counts["replay_cpu_s"]) /
            max(counts["checked_steps"], 1) * 1e6,
            "walked_first_growth_steps": walked, "us_per_walked_step": per_walked * 1e6,
            "checked_steps_walked_s": per_walked * counts["checked_steps"],
            "walk_vs_graph_traversal": per_walked * counts["checked_steps"] / base}


def walk_from_log(adj: list[list[int]], firsts: list[tuple[int, list[int], dict[int, int]]],
                  verify: bool = False) -> int:
    """The depth-first walk of each growth ``(root, seen, removed)`` as ``_Selector._grow`` makes
    it (successors then predecessors, an entry skipped when its unit is a member or rejected, a
    rolled-back pusher's entries taken only next to a member, membership stamped per growth),
    with the outcome of step ``i`` read from ``seen[i]`` (``~unit``: rejected) and ``removed[i]``
    members rolled back after it, last in first out, instead of checked. Returns the steps
    walked; each growth must walk exactly the steps of its log (``verify``: and meet the unit
    of each step at that step)."""
    n = len(adj)
    mem, rej = [0] * n, [0] * n
    total = 0
    for gid, (root, seen, removed) in enumerate(firsts, 1):
        members = [root]
        mem[root] = gid
        frames = [(root, iter(adj[root]))]
        i = 0
        while frames:
            by, it = frames[-1]
            for v in it:
                if mem[v] == gid or rej[v] == gid:
                    continue
                if mem[by] != gid:
                    for w in adj[v]:
                        if mem[w] == gid:
                            break
                    else:
                        continue
                added = seen[i] >= 0
                if verify and (seen[i] if added else ~seen[i]) != v:
                    raise AssertionError(f"step {i} from unit {root} met unit {v}, its log "
                                         f"{seen[i]}")
                if added:
                    mem[v] = gid
                    members.append(v)
                else:
                    rej[v] = gid
                for _ in range(removed.get(i, 0)):
                    x = members.pop()
                    mem[x], rej[x] = 0, gid
                i += 1
                if added:
                    frames.append((v, iter(adj[v])))
                    break
            else:
                frames.pop()
        if i != len(seen):
            raise AssertionError(f"the walk from unit {root} took {i} steps, its log {len(seen)}")
        total += i
    return total


if __name__ == "__main__":
    for key, value in measure(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000).items():
        print(f"{key}: {value:.4g}" if isinstance(value, float) else f"{key}: {value}")
