"""Coalesce: merge clusters of one device while the partition stays valid.

Merging two accelerator clusters never raises ``cut_bytes``: a tensor that went from one to the
other is no longer moved, and a tensor that both read is now counted once for the merged unit
instead of once for each (DESIGN.md counts each tensor once per distinct consuming unit). The
number of partitions drops by one. So coalescing never makes any objective of the form
``w_cut * cut_bytes + w_partitions * partitions`` (non-negative weights) worse; it is how
``cpsat`` breaks ties between partitions of equal cut in favour of fewer partitions, and an
optional finishing pass for any strategy.

A merge is allowed when both clusters are on the same accelerator, the merged cluster breaks no
constraint (no must-cut or selector-refused edge, no never-together pair inside, within
``max_size`` and ``max_const_bytes``), and the graph of clusters stays acyclic — checked with
:class:`~clusterkit.graph.graphcycles.GraphCycles` on the cluster graph (``contract_edge`` for
adjacent clusters, ``merge`` for the others). Adjacent pairs go first, heaviest connection
first; then, per device in topological order, each cluster tries the ``window`` clusters before
it. Deterministic: every order is by cluster id or by bytes with id tie-breaks.
"""

from __future__ import annotations

import numpy as np

from clusterkit.graph.algorithms import UnionFind
from clusterkit.graph.graphcycles import GraphCycles
from clusterkit.result import Partition, cluster_const_bytes


def coalesce(partition: Partition, window: int = 64) -> Partition:
    """A partition with clusters merged as described in the module docstring (a new object;
    ``partition`` is unchanged). ``window`` bounds the non-adjacent candidates per cluster."""
    p = partition.problem
    g = p.graph
    clusters = partition.clusters
    k = len(clusters)
    if k < 2:
        return partition
    a = partition.assignment()
    dev = [p.device_index(c.device) if c.device != p.fallback else -1 for c in clusters]
    src, dst = g.edge_src, g.edge_dst
    ca, cb = a[src], a[dst]
    between = ca != cb
    # cluster pairs that may never merge: a cut or refused edge, or a never-together pair
    blocked: set[tuple[int, int]] = set()
    bad_edge = between & p.must_cut
    if len(p.devices):
        d_src = np.asarray(dev)[ca]
        ok = np.ones(len(src), dtype=bool)
        on_acc = between & (d_src >= 0)
        idx = np.flatnonzero(on_acc)
        ok[idx] = p.edge_ok[d_src[idx], idx]
        bad_edge |= between & ~ok
    for x, y in zip(ca[bad_edge].tolist(), cb[bad_edge].tolist()):
        blocked.add((min(x, y), max(x, y)))
    for u, v in p.never_pairs.tolist():
        x, y = int(a[u]), int(a[v])
        if x != y:
            blocked.add((min(x, y), max(x, y)))
    # union-find over clusters; members and blocked sets live at the representative
    uf = UnionFind(k)
    find = uf.find
    members = [list(c.nodes) for c in clusters]
    sizes = [len(m) for m in members]
    blocks: list[set[int]] = [set() for _ in range(k)]
    for x, y in blocked:
        blocks[x].add(y)
        blocks[y].add(x)

    gc_ = GraphCycles.from_edges(k, ca[between], cb[between])
    node_of = list(range(k))  # representative cluster -> GraphCycles node
    cluster_at = {i: i for i in range(k)}  # GraphCycles node -> representative cluster

    def fits(x: int, y: int) -> bool:
        if dev[x] < 0 or dev[x] != dev[y] or y in blocks[x]:
            return False
        if p.max_size is not None and sizes[x] + sizes[y] > p.max_size:
            return False
        if p.max_const_bytes is not None and \
                cluster_const_bytes(g, members[x] + members[y]) > p.max_const_bytes:
            return False
        return True

    def join(x: int, y: int, survivor_node: int) -> None:
        keep, drop = (x, y) if x < y else (y, x)
        uf.link(keep, drop)
        members[keep] += members[drop]
        sizes[keep] += sizes[drop]
        for z in blocks[drop]:
            blocks[z].discard(drop)
            blocks[z].add(keep)
        blocks[keep] |= blocks[drop]
        blocks[keep].discard(keep)
        node_of[keep] = survivor_node
        cluster_at[survivor_node] = keep

    # 1) adjacent pairs, heaviest connection first
    weight: dict[tuple[int, int], int] = {}
    for x, y, b in zip(ca[between].tolist(), cb[between].tolist(),
                       g.edge_bytes[between].tolist()):
        weight[(x, y)] = weight.get((x, y), 0) + b
    for (x0, y0), _ in sorted(weight.items(), key=lambda kv: (-kv[1], kv[0])):
        x, y = find(x0), find(y0)
        if x == y or not fits(x, y):
            continue
        nx_, ny_ = node_of[x], node_of[y]
        if not gc_.has_edge(nx_, ny_):
            continue
        survivor = gc_.contract_edge(nx_, ny_)
        if survivor is not None:
            join(x, y, survivor)
    # 2) non-adjacent pairs of one device, in topological order of the clusters
    for d in sorted({v for v in dev if v >= 0}):
        seen: list[int] = []  # earlier clusters of device d (stale entries resolve via find)
        for c in range(k):
            if dev[c] != d or find(c) != c:
                continue
            x = c
            tried: set[int] = set()
            for y0 in reversed(seen[-window:]):
                y = find(y0)
                if y == x or y in tried or not fits(x, y):
                    continue
                tried.add(y)
                nx_, ny_ = node_of[x], node_of[y]
                if gc_.has_edge(nx_, ny_):
                    survivor = gc_.contract_edge(nx_, ny_)
                elif gc_.has_edge(ny_, nx_):
                    survivor = gc_.contract_edge(ny_, nx_)
                else:
                    survivor = gc_.merge(nx_, ny_)
                if survivor is not None:
                    join(x, y, survivor)
                    x = find(x)
            seen.append(x)
    labels = np.empty(g.n, dtype=np.int64)
    devices = np.empty(g.n, dtype=np.int64)
    for c in range(k):
        r = find(c)
        labels[clusters[c].nodes] = r
        devices[clusters[c].nodes] = dev[c]
    out = Partition.from_assignment(p, labels, devices, strategy=partition.strategy,
                                    selector=partition.selector, seconds=partition.seconds,
                                    info=dict(partition.info))
    out.info["coalesced_merges"] = k - len(out.clusters) if k > len(out.clusters) else 0
    return out
