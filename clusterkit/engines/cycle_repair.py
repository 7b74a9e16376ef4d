"""Cycle repair: split clusters that depend on each other through other clusters.

Clusters grown one at a time are each convex, but two of them may still depend on each other
(a path leaves one, enters the other and comes back). :func:`break_cycles` finds the clusters on
a cycle of the cluster graph and rebuilds only those, super-node by super-node, on a dynamic
topological order (:class:`~clusterkit.graph.graphcycles.OneSidedGraphCycles`), refusing every step
that would close a cycle.
"""

from __future__ import annotations

from itertools import chain

import numpy as np

from clusterkit.engines.growth import GrowingCluster
from clusterkit.engines.super_nodes import SuperNodeGraph
from clusterkit.graph.algorithms import gc_paused, strong_components
from clusterkit.graph.graphcycles import OneSidedGraphCycles


def break_cycles(contracted: SuperNodeGraph, pieces: list[GrowingCluster]
                 ) -> tuple[list[GrowingCluster], int]:
    """Make the graph of clusters acyclic. ``pieces`` are offloaded clusters in the order they
    were formed (each convex on its own); super-nodes in no piece are single-super-node clusters.

    Clusters in no cycle of the cluster graph (strongly connected components, computed once) are
    kept. The others (*suspects*) are rebuilt in formation order on a dynamic topological order
    of the super-node graph (:class:`~clusterkit.graph.graphcycles.OneSidedGraphCycles`: XLA's
    GraphCycles, repairing the order after a contraction by moving only the smaller side):
    each super-node, taken breadth first over the cluster's own edges, joins the first adjacent
    piece of its cluster whose edge to it can be contracted without closing a cycle, else starts a
    new piece. Every contraction keeps the contracted graph acyclic, so each piece is convex (and
    connected) and the pieces never depend on each other in a cycle. A path between two super-nodes
    of one strongly connected component stays inside it, so the super-nodes of the other components
    (left uncontracted) change no answer. Returns the new list and how many clusters were
    split."""
    k = len(pieces)
    if k == 0:
        return pieces, 0
    sizes = [len(p.super_nodes) for p in pieces]
    cl = np.full(contracted.n, -1, dtype=np.int64)
    cl[np.fromiter(chain.from_iterable(p.super_nodes for p in pieces), dtype=np.int64,
                   count=sum(sizes))] = np.repeat(np.arange(k, dtype=np.int64), sizes)
    item = np.where(cl >= 0, cl, k + np.arange(contracted.n))
    iu, iv = item[contracted.esrc], item[contracted.edst]
    keep = iu != iv
    size = k + contracted.n
    comp = strong_components(size, iu[keep], iv[keep])
    csize = np.bincount(comp)
    suspect = csize[comp[:k]] > 1
    if not suspect.any():
        return pieces, 0
    with gc_paused():   # the graph is one set per super-node and edge direction
        gc = OneSidedGraphCycles.from_adjacency(contracted.succ, contracted.pred, contracted.rank)
        replacement = {i: _rebuild(contracted, gc, pieces[i])
                       for i in np.flatnonzero(suspect).tolist() if len(pieces[i].super_nodes) > 1}
    replacement = {i: parts for i, parts in replacement.items() if len(parts) > 1}
    out: list[GrowingCluster] = []
    for i, p in enumerate(pieces):
        out.extend(replacement.get(i, [p]))
    return out, len(replacement)


def _rebuild(contracted: SuperNodeGraph, gc: OneSidedGraphCycles, piece: GrowingCluster
             ) -> list[GrowingCluster]:
    """Rebuild one suspect on the contracted graph ``gc``: each super-node, breadth first, joins the
    first part whose edge to it contracts without closing a cycle, else starts a new part."""
    super_nodes = _adjacent_first(contracted, piece.super_nodes)
    group = gc.contract_groups(super_nodes)
    k = max(group) + 1
    if k == 1:
        return [piece]
    parts: list[list[int]] = [[] for _ in range(k)]
    for u, j in zip(super_nodes, group):
        parts[j].append(u)
    rank = contracted.rank
    return [GrowingCluster(piece.device, sorted(part, key=rank.__getitem__),
                           dict(piece.tag, split=True))
            for part in parts]


def _adjacent_first(contracted: SuperNodeGraph, super_nodes: list[int]) -> list[int]:
    """The super-nodes breadth first over the cluster's own edges, from its first super-node by
    rank (then from the next unvisited one), so that each super-node usually joins a neighbour."""
    rank, succ, pred = contracted.rank, contracted.succ, contracted.pred
    todo = set(super_nodes)                # super-nodes not reached yet
    out: list[int] = []
    _reach(min(super_nodes, key=rank.__getitem__), todo, out, succ, pred)
    if todo:                         # more than one component
        for s in sorted(todo, key=rank.__getitem__):
            if s in todo:
                _reach(s, todo, out, succ, pred)
    return out


def _reach(s: int, todo: set[int], out: list[int], succ: list[list[int]],
           pred: list[list[int]]) -> None:
    """Append ``s`` and the super-nodes of ``todo`` it reaches over edges either way to ``out``,
    breadth first (each super-node's successors, then its predecessors), taking them from
    ``todo``."""
    todo.discard(s)
    queue = [s]
    append, discard = queue.append, todo.discard
    for x in queue:                  # the loop also visits the super-nodes appended meanwhile
        for w in succ[x]:
            if w in todo:
                discard(w)
                append(w)
        for w in pred[x]:
            if w in todo:
                discard(w)
                append(w)
    out.extend(queue)
