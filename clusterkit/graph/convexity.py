"""Convexity of a node set: does some path leave the set and come back?

A set is convex when every path between two of its members stays inside it (a cluster must be,
or the graph of clusters has a cycle). One best-first search answers it: leave the set along the
edges, visit outside nodes in topological order, and stop at the first member met again. Nodes
past the members' window in a topological order (after the last member, forward) lie on no path
back, so every order given prunes the search.
"""

from __future__ import annotations

import heapq
from typing import Iterable, Sequence


def first_reentry(adj: Sequence[Sequence[int]], members: Iterable[int],
                  rank: Sequence[int] | None = None, orders: Sequence[Sequence[int]] = (),
                  forward: bool = True) -> tuple[int, int] | None:
    """The first member a path leaving ``members`` comes back to, or ``None`` when the set is
    convex.

    ``adj`` holds successors (``forward``) or predecessors (the search runs backward); ``rank``
    is a topological position per node (the node number by default) and ``orders`` more of
    them, each pruning the search to the members' window. Returns ``(member, outside)``: the
    lowest-ranked member re-entered (the highest-ranked one backward) and the outside node the
    path reaches it from (a node that lies on a path between two members)."""
    inset = set(members)
    if len(inset) < 2:
        return None
    rank_of = rank.__getitem__ if rank is not None else int
    windows = [rank_of] + [o.__getitem__ for o in orders]
    if forward:
        bounds = [max(f(u) for u in inset) for f in windows]
        sign = 1
    else:
        bounds = [-min(f(u) for u in inset) for f in windows]
        sign = -1

    def keep(x: int) -> bool:
        return all(sign * f(x) <= b for f, b in zip(windows, bounds))

    heap: list[tuple[int, int, int]] = []
    seen: set[int] = set()
    for u in sorted(inset, key=rank_of):
        for w in adj[u]:
            if w not in inset and w not in seen and keep(w):
                seen.add(w)
                heap.append((sign * rank_of(w), w, w))
    heapq.heapify(heap)
    while heap:
        _, x, via = heapq.heappop(heap)
        if x in inset:
            return x, via
        for w in adj[x]:
            if w not in seen and keep(w):
                seen.add(w)
                heapq.heappush(heap, (sign * rank_of(w), w, x))
    return None


def nodes_between(succ: Sequence[Sequence[int]], pred: Sequence[Sequence[int]],
                  members: Sequence[int]) -> list[int]:
    """The nodes outside ``members`` on a path between two of them (what would make the set
    convex), in topological order: the members' descendants that are also their ancestors.

    ``succ``/``pred`` are the adjacency lists of a graph numbered in topological order, so
    such a node lies in the members' window ``(lo, hi)``; the searches stay inside it."""
    if len(members) < 2:
        return []
    inside = set(members)
    lo, hi = min(inside), max(inside)
    after = _reach(succ, inside, lambda w: w < hi)
    before = _reach(pred, inside, lambda w: w > lo)
    return sorted((after & before) - inside)


def _reach(adj: Sequence[Sequence[int]], starts: set[int], keep) -> set[int]:
    """Nodes reached from ``starts`` along ``adj`` through nodes ``keep`` accepts."""
    seen: set[int] = set()
    stack = list(starts)
    while stack:
        for w in adj[stack.pop()]:
            if w not in seen and w not in starts and keep(w):
                seen.add(w)
                stack.append(w)
    return seen
