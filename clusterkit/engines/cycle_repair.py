"""Cycle repair: split clusters that depend on each other through other clusters.

Clusters grown one at a time are each convex, but two of them may still depend on each other
(a path leaves one, enters the other and comes back). :func:`break_cycles` finds the clusters on
a cycle of the cluster graph and rebuilds only those, unit by unit, on a dynamic topological
order (:class:`~clusterkit.graph.graphcycles.OneSidedGraphCycles`), refusing every step that
would close a cycle.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from clusterkit.engines.growth import Piece
from clusterkit.engines.units import UnitGraph
from clusterkit.graph.algorithms import positions, topological_order
from clusterkit.graph.graphcycles import OneSidedGraphCycles


def break_cycles(ug: UnitGraph, pieces: list[Piece]) -> tuple[list[Piece], int]:
    """Make the graph of clusters acyclic. ``pieces`` are accelerator clusters in the order they
    were formed (each convex on its own); units in no piece are single-unit clusters.

    Clusters in no cycle of the cluster graph (strongly connected components, computed once) are
    kept and contracted. The others (*suspects*) are rebuilt in formation order on a dynamic
    topological order (:class:`~clusterkit.graph.graphcycles.OneSidedGraphCycles`: XLA's
    GraphCycles, repairing the order after a contraction by moving only the smaller side):
    each unit, taken breadth first over the cluster's own edges, joins the first adjacent piece
    of its cluster whose edge to it can be contracted without closing a cycle, else starts a new
    piece. Every contraction keeps the contracted graph acyclic, so each piece is convex (and
    connected) and the pieces never depend on each other in a cycle. Returns the new list and
    how many clusters were split."""
    k = len(pieces)
    if k == 0:
        return pieces, 0
    nu = ug.n
    cl = np.full(nu, -1, dtype=np.int64)
    for i, p in enumerate(pieces):
        cl[p.units] = i
    item = np.where(cl >= 0, cl, k + np.arange(nu))
    src, dst = ug.esrc, ug.edst
    iu, iv = item[src], item[dst]
    keep = iu != iv
    size = k + nu
    mat = coo_matrix((np.ones(int(keep.sum())), (iu[keep], iv[keep])), shape=(size, size)).tocsr()
    _, comp = connected_components(mat, directed=True, connection="strong")
    csize = np.bincount(comp)
    suspect = csize[comp[:k]] > 1
    if not suspect.any():
        return pieces, 0
    # Contracted graph: the units in a cycle of the cluster graph (every other unit lies on no
    # path between two of them), each its own node, numbered in a topological order that keeps
    # each suspect's units together where it can (then contracting them moves few nodes).
    inside = csize[comp[item]] > 1
    node = np.full(nu, -1, dtype=np.int64)
    node[inside] = np.arange(int(inside.sum()))
    nsrc, ndst = node[src], node[dst]
    keep = (nsrc >= 0) & (ndst >= 0)
    nsrc, ndst = nsrc[keep], ndst[keep]
    count = int(inside.sum())
    urank = np.asarray(ug.rank, dtype=np.int64)
    own = urank[inside]
    group = own.copy()                  # a suspect's units share the key of its first unit
    sus_units = np.flatnonzero((cl >= 0) & suspect[np.maximum(cl, 0)])
    first = np.full(k, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, cl[sus_units], urank[sus_units])
    group[node[sus_units]] = first[cl[sus_units]]
    # ready node of smallest (group key, own rank) first
    pos = np.asarray(positions(topological_order(count, nsrc, ndst,
                                                 key=list(zip(group.tolist(), own.tolist())))),
                     dtype=np.int64)
    node[inside] = pos[node[inside]]
    gc = OneSidedGraphCycles.from_edges(count, pos[nsrc], pos[ndst])
    node_of = node.tolist()
    rank = ug.rank
    replacement: dict[int, list[Piece]] = {}
    split = 0
    for i in np.flatnonzero(suspect).tolist():
        if len(pieces[i].units) < 2:
            continue
        heads: list[int] = []            # current graph node of each piece
        parts: list[list[int]] = []
        for u in _adjacent_first(ug, pieces[i].units):
            x = node_of[u]
            for j, h in enumerate(heads):
                if gc.has_edge(h, x):
                    merged = gc.contract_edge(h, x)
                elif gc.has_edge(x, h):
                    merged = gc.contract_edge(x, h)
                else:
                    continue
                if merged is not None:
                    heads[j] = merged
                    parts[j].append(u)
                    break
            else:
                heads.append(x)
                parts.append([u])
        if len(parts) > 1:
            split += 1
            replacement[i] = [Piece(pieces[i].device, sorted(part, key=rank.__getitem__),
                                    dict(pieces[i].tag, split=True)) for part in parts]
    out: list[Piece] = []
    for i, p in enumerate(pieces):
        out.extend(replacement.get(i, [p]))
    return out, split


def _adjacent_first(ug: UnitGraph, units: list[int]) -> list[int]:
    """The units breadth first over the cluster's own edges, from its first unit by rank (then
    from the next unvisited one), so that each unit usually joins a neighbour."""
    rank = ug.rank
    inside = set(units)
    seen: set[int] = set()
    out: list[int] = []
    for s in sorted(units, key=rank.__getitem__):
        if s in seen:
            continue
        seen.add(s)
        k = len(out)
        out.append(s)
        while k < len(out):
            x = out[k]
            k += 1
            for w in ug.succ[x] + ug.pred[x]:
                if w in inside and w not in seen:
                    seen.add(w)
                    out.append(w)
    return out
