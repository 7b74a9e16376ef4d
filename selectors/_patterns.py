"""Fusion patterns on a graph: chain matches, and merging matches into convex groups.

A documented pattern (``Conv -> Relu``) is matched as a chain: each step's node consumes an
output of the previous step's node. Overlapping matches are merged into one group, and a group
that some outside node lies between (not convex) is dropped: it could not be one cluster.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterable

from clusterkit.graph.algorithms import UnionFind
from clusterkit.selectors._optable import Pattern, Step

if TYPE_CHECKING:
    from clusterkit.graph.core import Graph


def match_chains(graph: "Graph", pattern: Pattern) -> list[tuple[int, ...]]:
    """Every chain of nodes matching ``pattern`` (sorted, without duplicates)."""
    steps = pattern.steps
    ops = graph.op_types
    succ = graph.succ_lists
    found: set[tuple[int, ...]] = set()

    def fits(step: Step, v: int) -> bool:
        return step.ops is None or ops[v] in step.ops

    def extend(i: int, v: int, path: list[int]) -> None:
        if i == len(steps):
            found.add(tuple(path))
            return
        step = steps[i]
        if step.optional:
            extend(i + 1, v, path)
        for w in succ[v]:
            if fits(step, w) and w not in path:
                path.append(w)
                if step.repeat:
                    extend(i, w, path)
                extend(i + 1, w, path)
                path.pop()

    for k, step in enumerate(steps):  # a chain may start at any of the leading optional steps
        for v in range(graph.n):
            if fits(step, v):
                if step.repeat:
                    extend(k, v, [v])
                extend(k + 1, v, [v])
        if not step.optional:
            break
    return sorted(found)


def is_convex(graph: "Graph", group: list[int]) -> bool:
    """No node outside ``group`` lies on a path between two members."""
    if len(group) < 2:
        return True
    inside = set(group)
    lo, hi = min(group), max(group)

    def reach(adj: list[list[int]], keep: Callable[[int], bool]) -> set[int]:
        seen: set[int] = set()
        stack = [w for s in group for w in adj[s] if keep(w)]
        while stack:
            v = stack.pop()
            if v not in seen:
                seen.add(v)
                stack.extend(w for w in adj[v] if keep(w) and w not in seen)
        return seen

    down = reach(graph.succ_lists, lambda v: v <= hi)
    up = reach(graph.pred_lists, lambda v: v >= lo)
    return not ((down & up) - inside)


def convex_groups(graph: "Graph", matches: Iterable[tuple[int, ...]]) -> list[list[int]]:
    """Merge overlapping matches into groups (sorted members, groups ordered by their smallest
    member) and keep the convex ones."""
    sets = UnionFind(graph.n)
    members: set[int] = set()
    for m in sorted(matches):
        members.update(m)
        for u in m[1:]:
            sets.union(m[0], u)
    groups: dict[int, list[int]] = {}
    for v in sorted(members):
        groups.setdefault(sets.find(v), []).append(v)
    return [g for g in sorted(groups.values()) if is_convex(graph, g)]
