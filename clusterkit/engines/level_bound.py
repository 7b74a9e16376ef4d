"""Level bookkeeping for contraction that keeps the fewest partitions reachable.

On a :class:`~clusterkit.graph.graphcycles.GraphCycles` whose nodes carry a class (a device
index; the fallback and barriers after all devices), an edge weighs 1 when it enters an
accelerator node from a later class, else 0 (the weights of
:mod:`clusterkit.engines.horizontal`). ``asap[x]`` is the heaviest path ending at ``x`` and
``alap[x]`` the bound ``L`` minus the heaviest path starting at ``x``, where ``L`` is the heaviest
path of the graph when the bookkeeping starts. Merging two nodes of one class keeps every path at
most ``L`` exactly when ``max(asap) <= min(alap)`` over the two (a path through the merged node
is a head of one and a tail of the other), so refusing the other merges keeps the number of
levels, and with it the partitions that level merging leaves, at its starting value.
"""

from __future__ import annotations

from typing import Sequence

from clusterkit.graph.graphcycles import GraphCycles


class LevelBound:
    """``asap``/``alap`` per GraphCycles node, kept up to date through merges."""

    def __init__(self, gc: GraphCycles, cls: Sequence[int], barrier: int):
        """``cls[x]``: class of GraphCycles node ``x``; classes ``>= barrier`` are not
        accelerator classes (an edge into them weighs 0)."""
        self.gc = gc
        self.cls = list(cls)
        self.barrier = barrier
        order = gc.topological_order()
        n = gc.num_nodes
        asap = [0] * n
        for x in order:
            for y in gc.successors(x):
                v = asap[x] + self.weight(x, y)
                if v > asap[y]:
                    asap[y] = v
        tail = [0] * n
        for x in reversed(order):
            for y in gc.successors(x):
                v = tail[y] + self.weight(x, y)
                if v > tail[x]:
                    tail[x] = v
        self.bound = max((asap[x] for x in order), default=0)
        self.asap = asap
        self.alap = [self.bound - t for t in tail]

    def weight(self, x: int, y: int) -> int:
        """1 for an edge into an accelerator node from a later class."""
        cy = self.cls[y]
        return int(cy < self.barrier and self.cls[x] > cy)

    def allows(self, x: int, y: int) -> bool:
        """Whether merging nodes ``x`` and ``y`` (one class) keeps every path within the bound."""
        return max(self.asap[x], self.asap[y]) <= min(self.alap[x], self.alap[y])

    def merged(self, survivor: int, x: int, y: int) -> None:
        """Book-keeping after ``x`` and ``y`` became ``survivor``: its levels, then the levels
        they push forward (``asap``) and backward (``alap``)."""
        asap, alap, weight = self.asap, self.alap, self.weight
        asap[survivor] = max(asap[x], asap[y])
        alap[survivor] = min(alap[x], alap[y])
        gc = self.gc
        stack = [survivor]
        while stack:
            u = stack.pop()
            for s in gc.successors(u):
                v = asap[u] + weight(u, s)
                if v > asap[s]:
                    asap[s] = v
                    stack.append(s)
        stack = [survivor]
        while stack:
            u = stack.pop()
            for p in gc.predecessors(u):
                v = alap[u] - weight(p, u)
                if v < alap[p]:
                    alap[p] = v
                    stack.append(p)
