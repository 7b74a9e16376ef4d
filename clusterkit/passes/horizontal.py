"""Horizontal merging by levels: the fewest partitions a set of clusters allows.

Every cluster gets a class, its device's index (the fallback, and any barrier, after all
devices), and every edge of the cluster graph a weight: 1 when it goes from a later class into an
offloaded cluster of an earlier one, or joins two clusters of one device that may never share a
cluster (a cut or refused edge between them), else 0. A cluster's level is the heaviest path
ending at it (``asap``) or, read backwards, the heaviest one starting at it (``alap``). All the
offloaded clusters of one device and one level form one partition: ordering the partitions and
the fallback clusters by (level, class, topological position) orders every edge forward, so the
result is acyclic. For one device and no size limits this is the fewest partitions the clusters
allow: along a path, accelerator runs separated by fallback clusters must lie in different
partitions.

Merging clusters never raises ``cut_bytes`` (see :mod:`clusterkit.passes.coalesce`). Limits
(``max_size``, ``max_const_bytes``, never-together pairs, a device that would not accept the
merged cluster: :mod:`clusterkit.constraints.acceptance`) split a level's clusters, taken in
topological order, into consecutive runs, which keeps the order argument. Both level readings are
built and the one with (lower cut_bytes, fewer partitions) kept; ties go to ``asap``.

:func:`fit_levels` reads the same levels on the node graph, which a cluster spanning several
node levels cannot reach by merges alone: it places the clusters level by level, splitting only
those whose nodes share no level, and keeps the result when it is better.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from clusterkit.constraints.acceptance import acceptance
from clusterkit.constraints.limits import cluster_const_bytes
from clusterkit.graph.algorithms import distinct, heaviest_paths, roots, topological_order
from clusterkit.graph.core import HOST
from clusterkit.result.metrics import cut_bytes
from clusterkit.result.model import Partition


def merge_levels(partition: Partition) -> Partition:
    """``partition`` with the clusters of each (device, level) merged (module docstring); a new
    object, or ``partition`` itself when no merge is possible."""
    if len(partition.clusters) < 2:
        return partition
    lv = _Levels(partition)
    best, best_key = None, partition.figures()[1:]  # (cut_bytes, partitions), kept with it
    for levels in lv.levels():
        labels = lv.bins(levels)
        if labels is None:
            continue
        key = lv.key(labels)
        if key < best_key:
            best, best_key = labels, key
    return partition if best is None else lv.build(best)


class _Levels:
    """The cluster graph of a partition with edge weights and the merge limits."""

    def __init__(self, partition: Partition):
        self.partition = part = partition
        self.p = p = part.problem
        self.k = k = len(part.clusters)
        self.a = a = part.assignment()
        ndev = len(p.devices)
        dev_a = part.device_indices()
        self.dev = dev_a.tolist()
        cls_a = np.where(dev_a >= 0, dev_a, ndev)
        src, dst = part.cluster_edges()
        if _limited(p):  # runs split by a limit follow the order: the smallest id first
            self.order = topological_order(k, src, dst)
        else:  # labels are per (device, level) whatever the order
            self.order = part.cluster_order()
        order_a = np.asarray(self.order, dtype=np.int64)
        self.acc_order = order_a[dev_a[order_a] >= 0].tolist()  # the order, fallback left out
        self.size = np.bincount(a, minlength=k).tolist()  # nodes per cluster
        weight = ((cls_a[src] > cls_a[dst]) & (dev_a[dst] >= 0)
                  | np.isin(src * k + dst, _blocked_keys(part, a, dev_a)))
        # a fallback cluster whose one successor is a fallback cluster, over a weight-0 edge,
        # lies on every path through it at the same levels: folded into that successor, the
        # offloaded clusters' levels stay (fewer nodes to walk)
        rep = _fold_fallback(k, src, dst, weight, dev_a < 0)
        self.walk = order_a[rep[order_a] == order_a].tolist()  # the order, folded left out
        self.succ, self.weight = _folded_adjacency(k, src, dst, weight, rep)
        self.never = _never_partners(part, a)
        lim = p.limits
        #: no limit can split a (device, level): :meth:`_fits` holds for every run
        self.free = (not lim.bounded and not self.never
                     and acceptance(p).all_plain)

    def levels(self) -> tuple[list[int], list[int]]:
        """Two levelings: the heaviest path ending at each cluster (``asap``) and minus the
        heaviest path starting at it (``alap``); read for the offloaded clusters only."""
        head, tail = heaviest_paths(self.walk, self.succ, self.weight)
        return head, [-t for t in tail]

    def bins(self, levels: list[int]) -> list[int] | None:
        """A label per cluster: one per (device, level), split into consecutive runs (in
        topological order) where a limit forbids a merge; fallback clusters keep their own.
        None when every cluster keeps its own label (no merge)."""
        dev, acc = self.dev, self.acc_order
        if len({(dev[c], levels[c]) for c in acc}) == len(acc):
            return None  # one cluster per (device, level)
        if self.free:  # every run is a whole (device, level): labelled at once
            return self._free_bins(levels)
        labels = list(range(self.k))
        open_: dict[tuple[int, int], list[int]] = {}  # (device, level) -> members of the run
        size = list(self.size)
        merged = False
        for c in acc:
            run = open_.get((dev[c], levels[c]))
            if run is not None and self._fits(run, c, size):
                labels[c] = labels[run[0]]
                run.append(c)
                size[run[0]] += size[c]
                merged = True
            else:
                open_[(dev[c], levels[c])] = [c]
        return labels if merged else None

    def _free_bins(self, levels: list[int]) -> list[int]:
        """:meth:`bins` without a limit (every cluster fits every run): each offloaded
        cluster takes the label of the first cluster of its (device, level) in
        ``acc_order``."""
        acc = np.asarray(self.acc_order, dtype=np.int64)
        lev = np.asarray(levels, dtype=np.int64)[acc]
        dev = np.asarray(self.dev, dtype=np.int64)[acc]
        key = dev * (int(lev.max()) - int(lev.min()) + 1) + (lev - lev.min())
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        labels = np.arange(self.k, dtype=np.int64)
        labels[acc] = acc[first[inverse]]
        return labels.tolist()

    def _fits(self, run: list[int], c: int, size: list[int]) -> bool:
        p, d = self.p, self.dev[c]
        hi, cb = p.limits.max_nodes[d], p.limits.max_const[d]  # the device's limits
        if hi is not None and size[run[0]] + size[c] > hi:
            return False
        never = self.never.get(c)
        if never and any(r in never for r in run):
            return False
        clusters = self.partition.clusters
        if cb is not None:
            nodes = [v for r in run + [c] for v in clusters[r].nodes]
            if cluster_const_bytes(p.graph, nodes) > cb:
                return False
        acc = acceptance(p)
        return acc.plain(d) or acc.ok(sorted(v for r in run + [c] for v in clusters[r].nodes), d)

    def key(self, labels: list[int]) -> tuple[int, int]:
        """(cut_bytes, partitions) of the clusters merged by ``labels`` (one per cluster)."""
        lab = np.asarray(labels, dtype=np.int64)
        on = np.asarray(self.dev, dtype=np.int64) >= 0
        units = np.where(on[self.a], lab[self.a], HOST)
        return cut_bytes(self.p.graph, units)[0], len(distinct(lab[on]))

    def build(self, labels: list[int]) -> Partition:
        part = self.partition
        lab = np.asarray(labels, dtype=np.int64)[self.a]
        devices = np.asarray(self.dev, dtype=np.int64)[self.a]
        out = part.derive(lab, devices)
        out.info["level_merges"] = len(part.clusters) - len(out.clusters)
        return out


def _fold_fallback(k: int, src: np.ndarray, dst: np.ndarray, weight: np.ndarray,
                   fallback: np.ndarray) -> np.ndarray:
    """Per cluster, the cluster it folds into: a fallback cluster whose only successor is a
    fallback cluster, over a weight-0 edge, folds into it (chains to their end); the others
    into themselves. Every path through a folded cluster goes on to its successor without
    weight, so the heaviest paths of the other clusters are those of the folded graph."""
    outdeg = np.bincount(src, minlength=k)
    fold = fallback[src] & fallback[dst] & (outdeg[src] == 1) & ~weight
    parent = np.arange(k, dtype=np.int64)
    parent[src[fold]] = dst[fold]
    return roots(parent)


def _limited(p) -> bool:  # (a device's acceptance is a limit too)
    """Whether a limit may split the clusters of one (device, level) into runs."""
    return p.limits.bounded or len(p.never_pairs) > 0 or not acceptance(p).all_plain


def _blocked_keys(part: Partition, a: np.ndarray, dev: np.ndarray) -> np.ndarray:
    """Cluster pairs ``x * k + y`` joined by an edge ``x -> y`` that may not lie inside one
    cluster (a cut edge, or one the device's selector refuses)."""
    p, g = part.problem, part.problem.graph
    ca, cb = a[g.edge_src], a[g.edge_dst]
    between = ca != cb
    bad = between & p.must_cut
    if len(p.devices):
        d_src = dev[ca]
        ok = np.ones(len(ca), dtype=bool)
        idx = np.flatnonzero(between & (d_src >= 0))
        ok[idx] = p.edge_ok[d_src[idx], idx]
        bad |= between & ~ok
    return ca[bad] * len(part.clusters) + cb[bad]


def _never_partners(part: Partition, a: np.ndarray) -> dict[int, set[int]]:
    out: dict[int, set[int]] = {}
    for u, v in part.problem.never_pairs.tolist():
        x, y = int(a[u]), int(a[v])
        if x != y:
            out.setdefault(x, set()).add(y)
            out.setdefault(y, set()).add(x)
    return out


def fit_levels(partition: Partition, slack: float = 0.0) -> Partition:
    """``partition`` refitted to the fewest levels its nodes' devices allow, or ``partition``
    itself when that saves no partition within the cut budget.

    The levels of :func:`merge_levels`, read on the node graph instead of the cluster graph
    (``L`` levels: every node between its ``asap`` and ``alap`` level), fewer than the cluster
    graph's when a cluster spans several node levels. The clusters are placed in topological
    order (or its reverse), each at the first level its placed neighbours allow (the last, in
    reverse): whole when its nodes' windows share that level, else split, each node at that
    level or as near as its window allows. Every edge keeps its level order, so all accelerator
    nodes of one (device, level) form one valid partition: at most ``L`` per device. Only a
    split can raise ``cut_bytes`` (a merge never does): a candidate replaces the partition when
    its ``cut_bytes`` is at most ``(1 + slack)`` times the partition's and it is better by
    (partitions, cut_bytes); with ``slack=0`` the result is never worse in either figure.
    Problems with limits that a split could break (together groups, size or constant limits,
    never-together pairs) are returned unchanged."""
    if _unfit(partition):
        return partition
    nl = _NodeLevels(partition)
    return _maker(nl, _fit_levels(nl, slack)[1])()


def refits(first: Partition, second: Partition, memo: dict | None = None
           ) -> list[tuple[tuple[int, int], Callable[[], Partition]]]:
    """:func:`fit_levels` of two partitions whose nodes have the same devices and whose clusters
    differ only by merges :mod:`clusterkit.passes.coalesce` allows (no cut or refused edge
    inside a merged cluster): their node levels are the same, so they are read once. Returns
    per partition ``((cut_bytes, partitions), make)``: the figures of its refit and a function
    that builds it, for a caller that keeps only the best. ``memo`` (a dict kept by the caller
    for partitions of one graph) keeps the node levels by node devices and edge weights for the
    next call, and the refit of each partition by its clusters (two members of ``auto`` often
    reach the same merged clusters)."""
    if _unfit(first) or _unfit(second):
        out = (fit_levels(first), fit_levels(second))
        return [(part.figures()[1:], lambda part=part: part)  # type: ignore[misc]
                for part in out]  # (mypy cannot type a lambda with a default)
    nl = _NodeLevels(first, memo=memo)
    fits = []
    for levels in (nl,) if first is second else (nl, _NodeLevels(second, like=nl)):
        key = (levels.a.tobytes(), levels.cdev.tobytes(), levels.w.tobytes())
        if memo is None or key not in memo:  # the same clusters give the same refit
            found = _fit_levels(levels, 0.0)
            if memo is None:
                fits.append((found[0], _maker(levels, found[1])))
                continue
            memo[key] = found
        fits.append((memo[key][0], _maker(levels, memo[key][1])))
    return fits * (3 - len(fits))  # the one refit twice when first is second


def _maker(nl: "_NodeLevels", lev: list[int] | None) -> Callable[[], Partition]:
    """A function building the refit with levels ``lev`` of ``nl``'s partition (the partition
    itself for None)."""
    part = nl.partition
    return (lambda: part) if lev is None else (lambda: nl.build(lev))


def _unfit(partition: Partition) -> bool:
    """Whether :func:`fit_levels` returns ``partition`` unchanged without looking (a device
    whose acceptance a free split and merge could break, too: the final pass would repair what
    the refit gained)."""
    p = partition.problem
    return (len(partition.clusters) < 2 or len(p.groups) > 0 or p.limits.any_minimum
            or p.limits.bounded or len(p.never_pairs) > 0 or acceptance(p).any_restrictive)


def _fit_levels(nl: "_NodeLevels", slack: float
                ) -> tuple[tuple[int, int], list[int] | None]:
    """The refit of ``nl``'s partition as ``((cut_bytes, partitions), levels)``: its node
    levels, or None when no refit is better (the figures are then the partition's)."""
    partition = nl.partition
    best, best_key = None, nl.key(None)  # (partitions, cut_bytes): the input's
    budget = best_key[1] * (1 + slack) if best_key[1] else 0  # no 0 * inf
    for forward in (True, False):
        lev = nl.place(forward)
        key = nl.key(lev)
        if key[1] <= budget and key < best_key:
            best, best_key = lev, key
    if best is None:
        return partition.figures()[1:], None
    return (best_key[1], best_key[0]), best


class _NodeLevels:
    """The node graph of a partition with the level weights of :class:`_Levels` per edge."""

    # shared with ``like`` (same node devices and weights) when it is given
    ndev: np.ndarray
    w: np.ndarray
    succ: tuple[list[int], list[int], list[int]]
    pred: tuple[list[int], list[int], list[int]]
    head: list[int]
    tail: list[int]
    top: int
    caps: tuple[tuple[list[int], np.ndarray], ...]

    def __init__(self, partition: Partition, like: "_NodeLevels | None" = None,
                 memo: dict | None = None):
        self.partition = part = partition
        self.p = p = part.problem
        g = p.graph
        self.a = a = part.assignment()
        self._fold: tuple[np.ndarray, dict[int, list[int]], list[int]] | None = None
        self._nodes: list[tuple[int, ...]] | None = None
        if like is not None:  # same node devices and weights: only the cluster order is new
            self.cdev = part.device_indices()
            self.ndev, self.succ, self.pred, self.w = like.ndev, like.succ, like.pred, like.w
            self.head, self.tail, self.top = like.head, like.tail, like.top
            self.caps = like.caps
            self.corder = part.cluster_order()
            return
        self.cdev = cdev = part.device_indices()
        self.ndev = dev = cdev[a]
        cls = np.where(dev >= 0, dev, len(p.devices))
        src, dst = g.edge_src, g.edge_dst
        w = (cls[src] > cls[dst]) & (dev[dst] >= 0)
        same = (dev[src] == dev[dst]) & (dev[src] >= 0) & (a[src] != a[dst])
        if len(p.devices):
            idx = np.flatnonzero(same)
            same[idx] = p.must_cut[idx] | ~p.edge_ok[dev[src[idx]], idx]
        self.w = w = (w | same).astype(np.int64)
        self.corder = part.cluster_order()  # any topological order: see :meth:`place`
        key = (dev.tobytes(), w.tobytes())  # the levels depend on nothing else of the graph
        if memo is not None and key in memo:
            self.succ, self.pred, self.head, self.tail, self.top, self.caps = memo[key]
            return
        self.succ = (g.succ_ptr.tolist(), dst.tolist(), w.tolist())
        pe = g.pred_edge
        self.pred = (g.pred_ptr.tolist(), src[pe].tolist(), w[pe].tolist())
        self.head, self.tail = _node_paths(g, w, dev < 0)
        self.top = top = max(self.head, default=0)
        # per direction, the last level each node may take (forward) or its mirror (backward)
        caps = (top - np.asarray(self.tail, dtype=np.int64),
                top - np.asarray(self.head, dtype=np.int64))
        self.caps = tuple((cap.tolist(), cap) for cap in caps)
        if memo is not None:
            memo[key] = (self.succ, self.pred, self.head, self.tail, self.top, self.caps)

    def place(self, forward: bool) -> list[int]:
        """A level per node: clusters in topological order (``forward``) or its reverse. The
        placement reads only the levels of a cluster's neighbours outside it, all placed before
        it in any topological order, so which order does not matter. A fallback cluster whose
        only successor is a fallback cluster is placed with it (:meth:`_folds`): forward, the
        levels of its nodes are read by that successor only (left unset: no accelerator node
        reads them, and the fallback's are not used); backward, they are those of the
        successor (written with them)."""
        rep, extra, walk = self._folds()
        order = walk if forward else walk[::-1]
        cap, cap_arr = self.caps[0 if forward else 1]
        lev = [-1] * len(cap)
        nodes_of = self._nodes_of()
        optr, onbr, owt = self._outer(forward, rep[self.a])
        k = len(nodes_of)
        capmin = np.full(k, len(cap), dtype=np.int64)
        np.minimum.at(capmin, self.a, cap_arr)
        # a lone node's own window always allows the target, and fallback clusters stay whole
        whole = (np.bincount(self.a, minlength=k) == 1) | (self.cdev < 0)
        room = np.where(whole, len(cap) + 1, capmin).tolist()  # above every target
        more = {} if forward else extra
        for c in order:
            lo, hi = optr[c], optr[c + 1]
            if hi - lo == 1:  # the first level its neighbours outside it (all placed) allow
                target = lev[onbr[lo]] + owt[lo]
            else:
                target = 0
                for j in range(lo, hi):
                    x = lev[onbr[j]] + owt[j]
                    if x > target:
                        target = x
            if target <= room[c]:
                for v in nodes_of[c]:  # whole
                    lev[v] = target
                folded = more.get(c)
                if folded:
                    for v in folded:
                        lev[v] = target
            else:
                self._split(nodes_of[c], target, forward, lev, cap)
        return lev if forward else [self.top - x for x in lev]

    def _nodes_of(self) -> list[tuple[int, ...]]:
        """The nodes of each cluster (made once: both directions read them)."""
        if self._nodes is None:
            self._nodes = [c.nodes for c in self.partition.clusters]
        return self._nodes

    def _folds(self) -> tuple[np.ndarray, dict[int, list[int]], list[int]]:
        """Per cluster the cluster it is placed with: a fallback cluster whose only successor
        (in the cluster graph) is a fallback cluster goes with it, chains to their end (every
        edge into a fallback node weighs 0); the nodes placed with each other cluster; and the
        topological order of the clusters left (made once per partition)."""
        if self._fold is None:
            src, dst = self.partition.cluster_edges()
            rep = _fold_fallback(len(self.partition.clusters), src, dst,
                                 np.zeros(len(src), dtype=bool), self.cdev < 0)
            moved = np.flatnonzero(rep[self.a] != self.a)  # nodes of the folded clusters
            extra: dict[int, list[int]] = {}
            for v, c in zip(moved.tolist(), rep[self.a[moved]].tolist()):
                extra.setdefault(c, []).append(v)
            order = np.asarray(self.corder, dtype=np.int64)
            self._fold = (rep, extra, order[rep[order] == order].tolist())
        return self._fold

    def _split(self, nodes: Sequence[int], target: int, forward: bool, lev: list[int],
               cap: list[int]) -> None:
        """Place a cluster's nodes each at ``target`` or as near as its window allows."""
        ins = self.pred if forward else self.succ
        ptr, nbr, _ = ins
        nodes = sorted(nodes, reverse=not forward)
        low = [_low(v, lev, ins) for v in nodes]
        for v, lo in zip(nodes, low):
            inner = max((lev[nbr[i]] for i in range(ptr[v], ptr[v + 1])
                         if lev[nbr[i]] >= 0), default=0)
            lev[v] = max(min(target, cap[v]), lo, inner)

    def _outer(self, forward: bool, a: np.ndarray) -> tuple[list[int], list[int], list[int]]:
        """Per cluster (CSR lists), the edges into it from outside (``forward``; out of it,
        else): the neighbour outside and the weight; ``a``: the cluster of each node."""
        g = self.p.graph
        src, dst = g.edge_src, g.edge_dst
        a_src, a_dst = a[src], a[dst]
        ext = np.flatnonzero(a_src != a_dst)
        into = (a_dst if forward else a_src)[ext]
        # any order within a cluster (:meth:`place` takes the maximum): the unstable sort,
        # several times faster than a stable one
        ext = ext[np.argsort(into)]
        ptr = np.zeros(len(self.partition.clusters) + 1, dtype=np.int64)
        np.cumsum(np.bincount(into, minlength=len(ptr) - 1), out=ptr[1:])
        return ptr.tolist(), (src if forward else dst)[ext].tolist(), self.w[ext].tolist()

    def key(self, lev: list[int] | None) -> tuple[int, int]:
        """(partitions, cut_bytes) of the accelerator nodes grouped by (device, level), or of
        the partition itself for ``lev=None``; the fallback nodes are the same in both."""
        if lev is None:  # the partition's own metrics (kept with it)
            _, cut, parts = self.partition.figures()
            return parts, cut
        on = self.ndev >= 0
        units = np.where(on, self.ndev * (self.top + 1) + np.asarray(lev, np.int64), HOST)
        used = units[on]  # small ids: counted without a sort when none is negative
        parts = (int(np.count_nonzero(np.bincount(used))) if len(used) and used.min() >= 0
                 else len(distinct(used)))
        return parts, cut_bytes(self.p.graph, units)[0]

    def build(self, lev: list[int]) -> Partition:
        """Accelerator nodes grouped by (device, level); fallback nodes as before."""
        part, a = self.partition, self.a
        dev = self.cdev[a]
        top = self.top + 1
        levels = np.asarray(lev, dtype=np.int64)
        labels = np.where(dev >= 0, dev * top + levels, 0)
        devices = dev
        return part.derive(labels, devices)


def _node_paths(g, w: np.ndarray, fallback: np.ndarray) -> tuple[list[int], list[int]]:
    """Per node, the heaviest path (weights ``w`` per edge) ending at it and starting at it,
    exact for every node but the fallback nodes whose one edge out goes to a fallback node
    (folded into it: every edge into a fallback node weighs 0, so the other nodes' paths are
    those of the folded graph; theirs are left at 0, and the heaviest path ends elsewhere)."""
    n = g.n
    src, dst = g.edge_src, g.edge_dst
    rep = _fold_fallback(n, src, dst, w > 0, fallback)
    walk = np.flatnonzero(rep == np.arange(n)).tolist()  # node ids are topological
    return heaviest_paths(walk, *_folded_adjacency(n, src, dst, w, rep))


def _folded_adjacency(n: int, src: np.ndarray, dst: np.ndarray, weight: np.ndarray,
                      rep: np.ndarray) -> tuple[list[list[int]], list[list[int]]]:
    """Successor lists and 0/1 edge weights of the graph whose node ``v`` is folded into
    ``rep[v]`` (:func:`_fold_fallback`): edges inside a fold are dropped, of parallel edges
    the heavier is kept."""
    src, dst = rep[src], rep[dst]
    out = src != dst
    key = distinct(src[out] * (2 * n) + dst[out] * 2 + weight[out])  # the heavier last
    pair = key >> 1
    last = np.ones(len(key), dtype=bool)
    last[:-1] = pair[1:] != pair[:-1]
    pair, heavy = pair[last], (key[last] & 1).tolist()
    ptr = np.searchsorted(pair // n, np.arange(n + 1)).tolist()
    spans = list(map(slice, ptr[:-1], ptr[1:]))
    return list(map((pair % n).tolist().__getitem__, spans)), list(map(heavy.__getitem__, spans))


def _low(v: int, lev: list[int], ins: tuple[list[int], list[int], list[int]]) -> int:
    """The first level node ``v`` may take after its placed neighbours over ``ins``."""
    ptr, nbr, wt = ins
    best = 0
    for i in range(ptr[v], ptr[v + 1]):
        x = lev[nbr[i]]
        if x >= 0 and x + wt[i] > best:
            best = x + wt[i]
    return best
