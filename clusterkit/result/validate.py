"""Checking a partition against its problem: every node once, every cluster on a device that
supports it within its limits, no cut edge or refused edge inside a cluster, never-together and
together constraints kept, and no cycle among the clusters; each fault named precisely."""

from __future__ import annotations

from collections import deque
from typing import Sequence

import numpy as np

from clusterkit.constraints.core import CUT_EXPLICIT, CUT_VALUE, Problem
from clusterkit.constraints.limits import cluster_const_bytes
from clusterkit.errors import PartitionError
from clusterkit.graph.algorithms import is_acyclic, quotient_edges
from clusterkit.graph.core import Graph
from clusterkit.result.cluster import Cluster


def assignment_of(graph: Graph, clusters: Sequence[Cluster]) -> np.ndarray:
    """Cluster position per node; raises :class:`PartitionError` naming the first node that is
    out of range, in two clusters or in none (in cluster order)."""
    n = graph.n
    sizes = [len(c.nodes) for c in clusters]
    flat = np.fromiter((v for c in clusters for v in c.nodes), dtype=np.int64,
                       count=sum(sizes))
    if len(flat) == n and (n == 0 or (flat.min() >= 0 and flat.max() < n)):
        out = np.full(n, -1, dtype=np.int64)
        out[flat] = np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)
        if (out >= 0).all():  # each node once: a valid assignment
            return out
    out = np.full(n, -1, dtype=np.int64)  # find the first fault, in cluster order
    names = graph.nodes
    for pos, c in enumerate(clusters):
        for v in c.nodes:
            if not 0 <= v < n:
                raise PartitionError(f"cluster {c.id} names node {v}, but the graph has {n}")
            if out[v] >= 0:
                raise PartitionError(f"node {names[v].name!r} is in two clusters: "
                                     f"{clusters[out[v]].id} and {c.id}")
            out[v] = pos
    missing = np.flatnonzero(out < 0)
    if len(missing):
        raise PartitionError(f"node {names[missing[0]].name!r} is in no cluster"
                             f" ({len(missing)} nodes are in none)")
    return out


def check_partition(problem: Problem, clusters: Sequence[Cluster], a: np.ndarray) -> None:
    """Raise :class:`PartitionError` with the precise reason when ``clusters`` (with ``a``, their
    :func:`assignment_of`) break a constraint of ``problem``."""
    dev_idx = np.asarray([_check_cluster(problem, c) for c in clusters], dtype=np.int64)
    _check_edges(problem, clusters, a, dev_idx)
    nodes = problem.graph.nodes  # names read for a message only
    for u, v in problem.never_pairs.tolist():
        if a[u] == a[v]:
            raise PartitionError(f"never-together nodes {nodes[u].name!r} and "
                                 f"{nodes[v].name!r} are both in cluster "
                                 f"{clusters[a[u]].id}")
    for gi, members in enumerate(problem.groups):
        if len(set(a[members].tolist())) > 1:
            raise PartitionError(f"together group {gi} is split: "
                                 f"{nodes[members[0]].name!r} is in cluster "
                                 f"{clusters[a[members[0]]].id}, but other "
                                 "members are elsewhere")
    _check_acyclic(problem.graph, clusters, a)


def _check_cluster(p: Problem, c: Cluster) -> int:
    """A cluster's device index (-1: fallback), checked: not empty, every node supported,
    within its device's limits."""
    if not c.nodes:
        raise PartitionError(f"cluster {c.id} is empty")
    d = p.device_index(c.device) if c.device != p.fallback else -1
    if d < 0:
        return d
    bad = [v for v in c.nodes if not p.supported[d, v]]
    if bad:
        nd = p.graph.nodes[bad[0]]
        raise PartitionError(f"node {nd.name!r} ({nd.op_type}) is in cluster {c.id} on"
                             f" device {c.device!r}, which does not support it")
    _check_limits(p, c, d)
    return d


def _check_limits(p: Problem, c: Cluster, d: int) -> None:
    """Cluster ``c`` on device ``d`` within its device's limits (the global ones and the
    device's own, the tighter of each: :class:`~clusterkit.constraints.limits.Limits`)."""
    lim, size = p.limits, len(c.nodes)
    lo, hi, cb = lim.min_nodes[d], lim.max_nodes[d], lim.max_const[d]
    if size < lo:
        raise PartitionError(f"cluster {c.id} on {c.device!r} has {size} nodes, below"
                             f" {lim.setting(d, 'min')} {lo}")
    if hi is not None and size > hi:
        raise PartitionError(f"cluster {c.id} on {c.device!r} has {size} nodes, above"
                             f" {lim.setting(d, 'max')} {hi}")
    if cb is not None:
        held = cluster_const_bytes(p.graph, c.nodes)
        if held > cb:
            raise PartitionError(f"cluster {c.id} on {c.device!r} holds {held} bytes of"
                                 f" constants, above {lim.setting(d, 'bytes')} {cb}")


def _check_edges(p: Problem, clusters: Sequence[Cluster], a: np.ndarray,
                 dev_idx: np.ndarray) -> None:
    """No must-cut edge and no edge its device's selector refuses inside a cluster."""
    nodes = p.graph.nodes  # names read for a message only
    src, dst = p.graph.edge_src, p.graph.edge_dst
    same = a[src] == a[dst]
    for e in np.flatnonzero(same & p.must_cut).tolist():
        u, v = int(src[e]), int(dst[e])
        why = ("it is a required cut" if p.cut_reason[e] == CUT_EXPLICIT else
               f"node {nodes[v].name!r} ({nodes[v].op_type}) must know the value it reads"
               f" from {nodes[u].name!r}" if p.cut_reason[e] == CUT_VALUE
               else "a constraint cuts it")
        raise PartitionError(f"edge {nodes[u].name!r} -> {nodes[v].name!r} lies inside "
                             f"cluster {clusters[a[u]].id}, but {why}")
    if len(p.devices):
        d_e = dev_idx[a[src]]
        inside = np.flatnonzero(same & (d_e >= 0))
        refused = inside[~p.edge_ok[d_e[inside], inside]]
        if len(refused):
            e = int(refused[0])
            u, v = int(src[e]), int(dst[e])
            raise PartitionError(f"edge {nodes[u].name!r} -> {nodes[v].name!r} lies inside "
                                 f"cluster {clusters[a[u]].id}, but the selector of "
                                 f"{clusters[a[u]].device!r} refuses to follow it")


def _check_acyclic(g: Graph, clusters: Sequence[Cluster], a: np.ndarray) -> None:
    k = len(clusters)
    cu, cv = a[g.edge_src], a[g.edge_dst]
    keep = cu != cv
    if not keep.any() or is_acyclic(k, *quotient_edges(a, g.edge_src, g.edge_dst)):
        return
    from scipy.sparse import coo_matrix  # a cycle to describe: heavy imports, paid on use
    from scipy.sparse.csgraph import connected_components

    mat = coo_matrix((np.ones(int(keep.sum())), (cu[keep], cv[keep])), shape=(k, k)).tocsr()
    ncomp, comp = connected_components(mat, directed=True, connection="strong")
    if ncomp == k:
        return
    sizes = np.bincount(comp)
    bad = int(np.flatnonzero(sizes > 1)[0])
    raise PartitionError(_describe_cycle(g, clusters, a,
                                         set(np.flatnonzero(comp == bad).tolist())))


def _cycle_path(g: Graph, clusters: Sequence[Cluster], a: np.ndarray, scc: set[int],
                start: int) -> list[int] | None:
    """A node path that leaves cluster ``start`` and re-enters it through clusters of ``scc``
    (BFS over the nodes of the SCC's clusters), or ``None``."""
    succ = g.succ_lists
    parent: dict[int, int] = {}
    queue: deque[int] = deque()
    for u in clusters[start].nodes:
        for w in succ[u]:
            if a[w] != start and a[w] in scc and w not in parent:
                parent[w] = u
                queue.append(w)
    end = None
    while queue and end is None:
        u = queue.popleft()
        for w in succ[u]:
            if a[w] == start:
                end = (u, w)
                break
            if a[w] in scc and w not in parent:
                parent[w] = u
                queue.append(w)
    if end is None:  # pragma: no cover - an SCC always closes
        return None
    path = [end[1], end[0]]
    while path[-1] in parent:
        path.append(parent[path[-1]])
    path.reverse()
    return path


def _describe_cycle(g: Graph, clusters: Sequence[Cluster], a: np.ndarray,
                    scc: set[int]) -> str:
    """A concrete node path for a cycle among the clusters in ``scc``."""
    names = [nd.name for nd in g.nodes]
    start = min(scc)
    path = _cycle_path(g, clusters, a, scc, start)
    if path is None:  # pragma: no cover - an SCC always closes
        return f"the clusters {sorted(clusters[c].id for c in scc)} form a cycle"
    cid = clusters[start].id
    between = path[1:-1]
    outside_clusters = sorted({int(a[v]) for v in between})
    hops = " -> ".join(f"{names[v]!r} [cluster {clusters[a[v]].id}]" for v in path)
    if len(outside_clusters) == 1 and len(clusters[outside_clusters[0]].nodes) == 1:
        return (f"a path leaves cluster {cid} at node {names[path[0]]!r} and re-enters it at "
                f"node {names[path[-1]]!r} through outside node {names[between[0]]!r}: {hops}")
    if len(outside_clusters) == 1:
        other = clusters[outside_clusters[0]].id
        return (f"clusters {cid} and {other} depend on each other (a path leaves cluster "
                f"{cid} and re-enters it): {hops}")
    return f"the graph of clusters has a cycle through cluster {cid}: {hops}"
