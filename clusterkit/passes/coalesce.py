"""Coalesce: merge clusters of one device while the partition stays valid.

Merging two offloaded clusters never raises ``cut_bytes``: a tensor that went from one to the
other is no longer moved, and a tensor that both read is now counted once for the merged unit
instead of once for each (``cut_bytes`` counts each tensor once per distinct consuming unit). The
number of partitions drops by one. So coalescing never makes any objective of the form
``w_cut * cut_bytes + w_partitions * partitions`` (non-negative weights) worse; it is how
``cpsat`` breaks ties between partitions of equal cut in favour of fewer partitions, and an
optional finishing pass for any strategy.

A merge is allowed when both clusters are on the same accelerator, the merged cluster breaks no
constraint (no must-cut or selector-refused edge, no never-together pair inside, within
``max_size`` and ``max_const_bytes``) and is acceptable to its device
(:mod:`clusterkit.constraints.acceptance`), and the graph of clusters stays acyclic — checked with
:class:`~clusterkit.graph.graphcycles.GraphCycles` on the cluster graph (``contract_edge`` for
adjacent clusters, ``merge`` for the others). Adjacent pairs go first, heaviest connection
first; then, per device in topological order, each cluster tries the ``window`` clusters before
it. Deterministic: every order is by cluster id or by bytes with id tie-breaks.

Merges alone cannot go below the level count of the cluster graph, which a cluster spanning
several node levels raises. So the last step, :func:`~clusterkit.passes.horizontal.fit_levels`,
refits the clusters to the levels of the node graph (splitting the clusters that span levels,
then merging by level), both the merged clusters and the input's, and keeps a refit only when
neither ``cut_bytes`` nor the number of partitions rises and one of them falls. On a
partition of more than ``pair_limit`` clusters whose level merging already reaches a proven
lower bound on the partitions (``floor``, which ``auto`` gives), the refits are left out.
"""

from __future__ import annotations

import numpy as np

from clusterkit.constraints.acceptance import acceptance
from clusterkit.constraints.limits import cluster_const_bytes
from clusterkit.graph.algorithms import UnionFind, roots
from clusterkit.graph.graphcycles import GraphCycles
from clusterkit.passes.horizontal import merge_levels, refits
from clusterkit.result.model import Partition

#: above this many clusters only the linear steps run (level merging and the refits)
PAIR_LIMIT = 20000
#: how a cluster joins an adjacent one: along the edge from it (after) or into it (before)
_AFTER, _BEFORE = 1, 2
#: up to this many offloaded clusters the reachability matrix of the independent merges
#: holds one bool per pair (at most this squared bytes), above it one bit
DENSE_REACH = 4096


def coalesce(partition: Partition, window: int = 64, levels: bool = True,
             pair_limit: int = PAIR_LIMIT, memo: dict | None = None,
             floor: int | None = None) -> Partition:
    """A partition with clusters merged as described in the module docstring (a new object;
    ``partition`` is unchanged). ``window`` bounds the non-adjacent candidates per cluster;
    ``levels``: when the level merging of :mod:`clusterkit.passes.horizontal` still merges
    clusters after the pair merges, it is also tried there and on ``partition`` itself (each
    followed by pair merges), the best of the three by (cut_bytes, partitions) is kept; the
    refits to the node levels of that and of ``partition`` replace it when better by the same
    key (module docstring). Above ``pair_limit`` clusters (and with ``levels``) the pair merges,
    whose cycle checks grow faster than the graph, are left out: the level merging of
    ``partition`` and the refits alone, each linear in the graph. ``memo``: a dict the caller
    keeps across calls on partitions of one graph (node levels read once per node devices).
    ``floor``: a proven lower bound on the partitions; above ``pair_limit`` clusters, when the
    level merging already reaches it, the refits are not tried (there they cost more than the
    rest of the coalescing, and could only trade cut at the same number of partitions)."""
    if len(partition.clusters) < 2:
        return partition
    if levels and len(partition.clusters) > pair_limit:
        merged = merge_levels(partition)
        best = merged.derive()  # new even when unmerged: its info is its own
        best.info.pop("level_merges", None)
        if floor is not None and best.figures()[2] <= floor:
            best.info["coalesced_merges"] = max(0, len(partition.clusters) - len(best.clusters))
            return best
    else:
        out = _pairs(partition, window)
        if not levels:
            return out
        best = _levels(partition, out, window)
    best_key = _key(best)
    # the input's refit only counts when its clusters differ (else it ties the first refit)
    second = best if _same_clusters(best, partition) else partition
    make = None
    for key, build in refits(best, second, memo):  # refits of the merges and the input
        if key < best_key:
            best_key, make = key, build
    if make is not None:  # only the best refit is built
        best = make()
    best.info["coalesced_merges"] = max(0, len(partition.clusters) - len(best.clusters))
    return best


def _levels(partition: Partition, out: Partition, window: int) -> Partition:
    """The best by (cut_bytes, partitions) of ``out`` (the pair merges of ``partition``), its
    level merging and that of ``partition``, each followed by pair merges."""
    merged = merge_levels(out)
    if merged is out:  # the pair merges left no level to merge
        return out
    best, best_key = out, _key(out)
    for cand in (merged, merge_levels(partition)):  # the strategy's own levels, too
        cand = _pairs(cand, window)
        key = _key(cand)
        if key < best_key:
            best, best_key = cand, key
    best.info.pop("level_merges", None)
    best.info["coalesced_merges"] = len(partition.clusters) - len(best.clusters)
    return best


def _same_clusters(one: Partition, other: Partition) -> bool:
    """Whether two partitions of one problem have the same clusters in the same order."""
    return (one is other or len(one.clusters) == len(other.clusters)
            and np.array_equal(one.assignment(), other.assignment())
            and np.array_equal(one.device_indices(), other.device_indices()))


def _key(part: Partition) -> tuple[int, int]:
    return part.figures()[1:]


def _pairs(partition: Partition, window: int) -> Partition:
    """Adjacent pairs, then independent pairs (see the module docstring)."""
    if len(partition.clusters) < 2:
        return partition
    merger = _Merger(partition)
    merger.merge_adjacent()
    merger.merge_independent(window)
    return merger.result()


class _Merger:
    """Union-find over the clusters on top of a GraphCycles of the cluster graph; members and
    blocked partners live at each set's representative (its smallest cluster)."""

    def __init__(self, partition: Partition):
        self.partition = partition
        self.p = p = partition.problem
        self.g = g = p.graph
        clusters = partition.clusters
        self.k = k = len(clusters)
        self.a = a = partition.assignment()
        self.dev = partition.device_indices().tolist()
        self.ca, self.cb = a[g.edge_src], a[g.edge_dst]
        self.between = self.ca != self.cb
        self.uf = UnionFind(k)
        # node lists only for the const-bytes limit and devices whose acceptance needs a look
        # (thousands of fallback singletons otherwise)
        self.acc = acceptance(p)
        self.members = ([list(c.nodes) for c in clusters]
                        if p.limits.any_bytes or not self.acc.all_plain else None)
        self.sizes = np.bincount(a, minlength=k).tolist()  # each node in one cluster
        self.blocks: dict[int, set[int]] = {}  # only the clusters with a blocked partner
        for x, y in self._blocked():
            self.blocks.setdefault(x, set()).add(y)
            self.blocks.setdefault(y, set()).add(x)
        self.gc = GraphCycles.from_edges(k, *partition.cluster_edges(),
                                         order=partition.cluster_order())
        self.node_of = list(range(k))  # representative cluster -> GraphCycles node

    def _blocked(self) -> set[tuple[int, int]]:
        """Cluster pairs that may never merge: a cut or refused edge, or a never-together pair."""
        p, a, ca, cb, between = self.p, self.a, self.ca, self.cb, self.between
        blocked: set[tuple[int, int]] = set()
        bad_edge = between & p.must_cut
        if len(p.devices):
            d_src = np.asarray(self.dev)[ca]
            ok = np.ones(len(ca), dtype=bool)
            idx = np.flatnonzero(between & (d_src >= 0))
            ok[idx] = p.edge_ok[d_src[idx], idx]
            bad_edge |= between & ~ok
        for x, y in zip(ca[bad_edge].tolist(), cb[bad_edge].tolist()):
            blocked.add((min(x, y), max(x, y)))
        for u, v in p.never_pairs.tolist():
            x, y = int(a[u]), int(a[v])
            if x != y:
                blocked.add((min(x, y), max(x, y)))
        return blocked

    def fits(self, x: int, y: int) -> bool:
        dev = self.dev
        d = dev[x]
        if d < 0 or d != dev[y] or y in self.blocks.get(x, ()):
            return False
        lim = self.p.limits  # the device's limits (the global ones, or its own when tighter)
        if lim.max_nodes[d] is not None and self.sizes[x] + self.sizes[y] > lim.max_nodes[d]:
            return False
        if self.members is None:
            return True
        if lim.max_const[d] is not None and cluster_const_bytes(
                self.g, self.members[x] + self.members[y]) > lim.max_const[d]:
            return False
        acc = self.acc
        return acc.plain(d) or acc.ok(sorted(self.members[x] + self.members[y]), d)

    def join(self, x: int, y: int, survivor_node: int) -> None:
        keep, drop = (x, y) if x < y else (y, x)
        self.uf.link(keep, drop)
        if self.members is not None:
            self.members[keep] += self.members[drop]
        self.sizes[keep] += self.sizes[drop]
        blocks = self.blocks
        gone = blocks.pop(drop, None)
        if gone:
            for z in gone:
                blocks[z].discard(drop)
                blocks[z].add(keep)
            mine = blocks.setdefault(keep, set())
            mine |= gone
            mine.discard(keep)
        self.node_of[keep] = survivor_node

    def merge_adjacent(self) -> None:
        """Adjacent pairs, heaviest connection first."""
        find, gc_ = self.uf.find, self.gc
        between = self.between
        pair = self.ca[between] * self.k + self.cb[between]  # (x, y) in lexicographic order
        pairs, inv = np.unique(pair, return_inverse=True)
        weight = np.zeros(len(pairs), dtype=np.int64)
        np.add.at(weight, inv, self.g.edge_bytes[between])
        order = np.lexsort((pairs, -weight))  # heaviest first, then by (x, y)
        xs, ys = pairs[order] // self.k, pairs[order] % self.k
        dev = np.asarray(self.dev, dtype=np.int64)
        one = (dev[xs] >= 0) & (dev[xs] == dev[ys])  # the others never fit (merges keep devices)
        xs, ys = xs[one].tolist(), ys[one].tolist()
        contract, fits, node_of, join = gc_.contract_live_edge, self.fits, self.node_of, self.join
        out_set = gc_.out_set
        free = not self.p.limits.any_maximum and self.members is None  # only blocks refuse
        blocks = self.blocks
        for x0, y0 in zip(xs, ys):
            x, y = find(x0), find(y0)
            if x == y:
                continue
            if free and x not in blocks and y not in blocks:
                pass  # fits(x, y): one device, checked above
            elif not fits(x, y):
                continue
            nx_, ny_ = node_of[x], node_of[y]  # live nodes of the two roots
            survivor = contract(nx_, ny_) if ny_ in out_set(nx_) else None
            if survivor is not None:
                join(x, y, survivor)

    def merge_independent(self, window: int) -> None:
        """Non-adjacent pairs of one device, in topological order of the clusters."""
        find, dev = self.uf.find, self.dev
        acc = [c for c in range(self.k) if dev[c] >= 0 and find(c) == c]
        self.reach = reach = _Reach(self.gc, [self.node_of[c] for c in acc])
        self.row_of = np.zeros(self.k, dtype=np.int64)  # root cluster -> its Reach row
        self.row_of[acc] = [reach.row[self.node_of[c]] for c in acc]
        for d in sorted({dev[c] for c in acc}):
            # earlier clusters of device d, kept as roots (rewritten when one merges); a later
            # cluster is still a root at its turn (a merge keeps the earlier of the two)
            seen = np.empty(self.k, dtype=np.int64)
            count = 0
            for c in acc:
                if dev[c] != d:
                    continue
                seen[count] = self._merge_into(c, seen, count, window)
                count += 1

    def _merge_into(self, x: int, seen: np.ndarray, count: int, window: int) -> int:
        """Merge cluster ``x`` with each of the last ``window`` clusters of ``seen[:count]``
        (latest first) that it may join; returns what ``x`` became. A cluster related to ``x``
        (by a path, either way) and not adjacent to it (by an edge) is passed over; what ``x``
        is related and adjacent to is read once per GraphCycles node of ``x``, made again after
        a merge that ``x``'s node did not survive (GraphCycles checks every merge itself)."""
        lo = max(0, count - window)
        if lo == count:
            return x
        find, gc_, reach, node_of = self.uf.find, self.gc, self.reach, self.node_of
        row, fits = reach.row, self.fits
        cand = seen[lo:count][::-1]
        rows = self.row_of[cand]
        at = -1
        near: tuple[np.ndarray, dict[int, int]]  # both set at the first step (at != any node)
        todo: list[int]
        tried: set[int] = set()
        i = 0
        while True:
            nx_ = node_of[x]
            if at != nx_:  # x's node is new: what it is related and adjacent to, again
                at, fresh = nx_, True  # fresh: no merge since (the Reach rows are exact)
                near = self._near(nx_)
                todo = (np.flatnonzero(self._worth(near, rows[i:])) + i).tolist()[::-1]
            if not todo:
                return x
            i = todo.pop()
            y = find(int(cand[i]))
            i += 1
            if y == x or y in tried or not fits(x, y):
                continue
            tried.add(y)
            related, adjacent = near
            ny_ = node_of[y]
            how = adjacent.get(ny_)
            if not related[row[ny_]]:  # no path, so no edge either
                survivor = gc_.merge_unrelated(nx_, ny_) if fresh else gc_.merge(nx_, ny_)
            elif how == _AFTER:
                survivor = gc_.contract_edge(nx_, ny_)
            elif how == _BEFORE:
                survivor = gc_.contract_edge(ny_, nx_)
            else:  # pragma: no cover - _worth passes over these
                survivor = None
            if survivor is not None:
                fresh = False
                reach.merged(survivor, nx_, ny_)
                self.join(x, y, survivor)
                x_new = find(x)
                live = seen[:count]
                live[live == y] = x_new  # the merged cluster's entries name its root
                live[live == x] = x_new
                self.row_of[x_new] = row[survivor]
                x = x_new

    def _near(self, node: int) -> tuple[np.ndarray, dict[int, int]]:
        """What GraphCycles node ``node`` is related to (per Reach row), and its accelerator
        neighbours (nodes with a Reach row), each :data:`_AFTER` (a successor) or
        :data:`_BEFORE` (a predecessor): a copy, as they are now."""
        gc_, row = self.gc, self.reach.row
        adjacent = {w: _AFTER for w in gc_.out_set(node) if w in row}
        adjacent.update((w, _BEFORE) for w in gc_.in_set(node) if w in row)
        return self.reach.related_to(node), adjacent

    def _worth(self, near: tuple[np.ndarray, dict[int, int]], rows: np.ndarray) -> np.ndarray:
        """Per Reach row in ``rows``: whether its cluster may merge with the one ``near``
        describes (no path between them, or an edge)."""
        related, adjacent = near
        row = self.reach.row
        worth = ~related
        if adjacent:
            worth[[row[w] for w in adjacent]] = True
        return worth[rows]

    def result(self) -> Partition:
        """The merged clusters as a partition, with the GraphCycles' order of them recorded
        (:meth:`Partition.record_order`: no new topological sort)."""
        part = self.partition
        top = roots(self.uf.parent)  # per cluster, the root of its set
        labels = top[self.a]
        devices = np.asarray(self.dev, dtype=np.int64)[self.a]
        out = part.derive(labels, devices)
        k = self.k
        out.info["coalesced_merges"] = k - len(out.clusters) if k > len(out.clusters) else 0
        pos = np.empty(k, dtype=np.int64)  # root cluster -> its position in ``out``
        pos[labels] = out.assignment()
        root_of = np.empty(self.gc.num_nodes, dtype=np.int64)  # GraphCycles node -> root
        live = np.flatnonzero(top == np.arange(k))
        root_of[np.asarray(self.node_of, dtype=np.int64)[live]] = live
        out.record_order(pos[root_of[self.gc.order_array()]])
        return out


class _Reach:
    """Which offloaded clusters each offloaded cluster reaches: one row of a bit matrix per
    cluster, computed once over the whole cluster graph (paths through fallback clusters
    included) and kept up to date through merges, so that testing a pair costs two bit tests
    instead of a search, and a merge updates the rows that reach it in one numpy operation.
    Up to :data:`DENSE_REACH` clusters the matrix holds one bool per pair (``dense``: fewer
    operations per test), above it one bit (packed)."""

    def __init__(self, gc: GraphCycles, acc: list[int], dense: bool | None = None):
        self.row = {x: i for i, x in enumerate(acc)}
        desc = gc.descendant_marks({x: 1 << i for i, x in enumerate(acc)})
        n = len(acc)
        width = max(1, (n + 7) // 8)
        m = np.zeros((n, width), dtype=np.uint8)
        for x, i in self.row.items():
            if desc[x]:
                m[i] = np.frombuffer(desc[x].to_bytes(width, "little"), dtype=np.uint8)
        self.dense = n <= DENSE_REACH if dense is None else dense
        if self.dense:
            m = np.unpackbits(m, axis=1, count=n, bitorder="little").view(bool)
        self.m = m

    def _has(self, i: int, j: int) -> bool:
        if self.dense:
            return bool(self.m[i, j])
        return bool(self.m[i, j >> 3] >> (j & 7) & 1)

    def related(self, x: int, y: int) -> bool:
        """Whether a path joins nodes ``x`` and ``y`` (either way)."""
        i, j = self.row[x], self.row[y]
        return self._has(i, j) or self._has(j, i)

    def related_to(self, x: int) -> np.ndarray:
        """Per row, whether a path joins node ``x`` and that row's node (either way)."""
        i = self.row[x]
        m = self.m
        if self.dense:
            return m[i] | m[:, i]
        out = np.unpackbits(m[i], bitorder="little")[:m.shape[0]].astype(bool)
        out |= ((m[:, i >> 3] >> (i & 7)) & 1).astype(bool)
        return out

    def merged(self, survivor: int, x: int, y: int) -> None:
        """``x`` and ``y`` became ``survivor``: it reaches what either reached, and whatever
        reached either now reaches it and all of that."""
        m, row = self.m, self.row
        i, j = row[x], row[y]
        gone = x if survivor == y else y
        s, g = row[survivor], row.pop(gone)
        if self.dense:
            mine = m[i] | m[j]
            mine[i] = mine[j] = False
            m[s] = mine
            m[g] = False
            hit = np.flatnonzero(m[:, i] | m[:, j])
            if len(hit):
                rows = m[hit] | mine
                rows[:, g] = False
                rows[:, s] = True
                m[hit] = rows
            return
        both = np.zeros(m.shape[1], dtype=np.uint8)
        both[i >> 3] |= 1 << (i & 7)
        both[j >> 3] |= 1 << (j & 7)
        mine = (m[i] | m[j]) & ~both
        m[s] = mine
        m[g] = 0
        hit = np.flatnonzero(((m[:, i >> 3] >> (i & 7)) | (m[:, j >> 3] >> (j & 7))) & 1)
        if len(hit):
            keep = np.zeros_like(both)
            keep[s >> 3] = 1 << (s & 7)
            m[hit] = (m[hit] & ~both) | keep | mine
