"""Level bookkeeping for contraction that keeps the fewest partitions reachable.

On a :class:`~clusterkit.graph.graphcycles.GraphCycles` whose nodes carry a class (a device
index; the fallback and barriers after all devices), an edge weighs 1 when it enters an
accelerator node from a later class, else 0 (the weights of
:mod:`clusterkit.passes.horizontal`). ``asap[x]`` is the heaviest path ending at ``x`` and
``alap[x]`` the bound ``L`` minus the heaviest path starting at ``x``, where ``L`` is the heaviest
path of the graph when the bookkeeping starts. Merging two nodes of one class keeps every path at
most ``L`` exactly when ``max(asap) <= min(alap)`` over the two (a path through the merged node
is a head of one and a tail of the other), so refusing the other merges keeps the number of
levels, and with it the partitions that level merging leaves, at its starting value.

:func:`figures_lower_bound` bounds from below what any valid partition of a one-device problem
can reach; :mod:`clusterkit.engines.auto` stops its portfolio once a member reaches it.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from clusterkit.constraints.core import Problem
from clusterkit.graph.algorithms import distinct
from clusterkit.graph.core import Graph
from clusterkit.graph.graphcycles import GraphCycles


def figures_lower_bound(problem: Problem) -> tuple[int, int, int] | None:
    """A lower bound, in the order (fallback nodes, ``cut_bytes``, partitions), on the figures
    of every valid partition of a one-device problem (None with several devices).

    Fallback: the nodes the device does not support. The other two hold for the partitions with
    exactly those nodes on the fallback (the only ones that tie on the first figure): a tensor
    that goes between the fallback and the device is moved at least once, and a path crossing
    ``r`` runs of device nodes, separated by fallback nodes or edges that must be cut, meets
    ``r`` distinct partitions (one partition holding two runs would form a cycle with the node
    or the cut edge between them); an edge that must be cut moves its tensors. Graphs of at most
    :data:`CHAIN_LIMIT` nodes also count the consumers of a tensor that can never share a
    partition (:func:`_chain_cut`)."""
    if len(problem.devices) != 1:
        return None
    g = problem.graph
    acc = np.asarray(problem.supported, dtype=bool)[0]
    src, dst = g.edge_src, g.edge_dst
    if len(src) and not bool(np.all(src < dst)):  # pragma: no cover - graphs are sorted
        return None
    cut = np.asarray(problem.must_cut, dtype=bool) | ~np.asarray(problem.edge_ok)[0]
    tt = g.tensor_table
    host_prod = np.ones(len(tt.nbytes), dtype=bool)
    made = tt.producer >= 0
    host_prod[made] = ~acc[tt.producer[made]]
    live = ~tt.free[tt.inc_tensor]
    ct, cn = tt.inc_tensor[live], tt.inc_node[live]
    moved = np.zeros(len(tt.nbytes), dtype=bool)
    moved[ct[host_prod[ct] == acc[cn]]] = True
    moved |= tt.is_output & ~tt.free & ~host_prod
    if cut.any():  # an edge that must be cut between device nodes moves its tensors
        prod = tt.producer[ct]
        keys = src * g.n + dst  # sorted: edges are ordered by (src, dst)
        want = np.where(prod >= 0, prod * g.n + cn, -1)
        e = np.minimum(np.searchsorted(keys, want), len(keys) - 1)
        hit = (want >= 0) & (keys[e] == want) & cut[e] & acc[cn] & ~host_prod[ct]
        moved[ct[hit]] = True
    runs = acc.astype(np.int64).tolist()
    order = g.pred_edge  # the edges by target (in any order per target: a maximum)
    step = acc[dst] & (cut | ~acc[src])  # the edge starts a new run
    for u, v, r in zip(src[order].tolist(), dst[order].tolist(), step[order].tolist()):
        r += runs[u]
        if r > runs[v]:
            runs[v] = r
    moved_bytes = int(tt.nbytes[moved].sum())
    if g.n <= CHAIN_LIMIT:
        moved_bytes = max(moved_bytes, _chain_cut(g, acc, cut))
    return int((~acc).sum()), moved_bytes, max(runs, default=0)


#: graphs up to this many nodes also get :func:`_chain_cut` (two reachability bit sets per node)
CHAIN_LIMIT = 20000


def _break_reach(g: Graph, acc: np.ndarray, cut: np.ndarray, bit: list[int]) -> list[int]:
    """Per node ``x`` a bit set of the nodes ``y`` that a path from ``x`` with a break (a cut
    edge, or an edge into or out of a fallback node) reaches: ``x`` and ``y`` never share a
    partition (it would form a cycle with the break). Only the nodes with ``bit[y] >= 0`` are
    kept, at that bit."""
    src, dst = g.edge_src, g.edge_dst
    brk = (cut | ~acc[dst] | ~acc[src]).tolist()
    below = [0] * g.n  # x and its descendants
    past = [0] * g.n
    ptr, d = g.succ_ptr.tolist(), dst.tolist()
    for x in range(g.n - 1, -1, -1):  # edges go from lower to higher ids
        lo, hi = ptr[x], ptr[x + 1]
        if hi - lo == 1:  # one successor: its sets as they are (no copy)
            y = d[lo]
            a, past[x] = below[y], below[y] if brk[lo] else past[y]
        else:
            a = b = 0
            for e in range(lo, hi):
                y = d[e]
                a |= below[y]
                b |= below[y] if brk[e] else past[y]
            past[x] = b
        below[x] = a | (1 << bit[x]) if bit[x] >= 0 else a
    return past


def _chain_cut(g: Graph, acc: np.ndarray, cut: np.ndarray) -> int:
    """A lower bound of ``cut_bytes`` with exactly the unsupported nodes on the fallback: a
    tensor reaches as many distinct units as the longest chain of its device consumers that
    pairwise never share a partition (one of them may share the producer's), plus the fallback
    when a fallback node reads it, plus one when it is a graph output made on the device."""
    tt = g.tensor_table
    nt = len(tt.nbytes)
    pair = distinct(tt.inc_tensor * g.n + tt.inc_node)  # distinct (tensor, reader)
    ten, node = pair // g.n, pair % g.n
    n_cons = np.bincount(ten, minlength=nt)
    n_dev = np.bincount(ten[acc[node]], minlength=nt)
    mine = np.zeros(nt, dtype=bool)
    made = tt.producer >= 0
    mine[made] = acc[tt.producer[made]]
    live = ~tt.free & (tt.nbytes > 0)
    # a lone device consumer, or none: one unit at most, and no chain to search
    units = np.minimum(n_dev, 1)
    units = np.where(mine, units + (n_dev < n_cons) + tt.is_output, units)
    easy = live & ((n_dev == 0) | ((n_dev == 1) & ~mine))
    total = int((units[easy] * tt.nbytes[easy]).sum())
    rest_mask = live & ~easy
    asked = distinct(node[rest_mask[ten] & acc[node]])  # the only bits ever read
    bit = np.full(g.n, -1, dtype=np.int64)
    bit[asked] = np.arange(len(asked), dtype=np.int64)
    past = _break_reach(g, acc, cut, bit.tolist())
    rest = np.flatnonzero(rest_mask).tolist()
    bounds = np.searchsorted(ten, np.arange(nt + 1)).tolist()
    readers = node.tolist()
    on = acc.tolist()
    bit_l = bit.tolist()
    prod, nbytes, out = tt.producer.tolist(), tt.nbytes.tolist(), tt.is_output.tolist()
    for t in rest:
        u = prod[t]
        cons = readers[bounds[t]:bounds[t + 1]]  # distinct, ascending
        dev_cons = [c for c in cons if on[c]]
        at = [bit_l[c] for c in dev_cons]
        chain = [1] * len(dev_cons)
        for j in range(len(dev_cons)):
            for i in range(j):
                if past[dev_cons[i]] >> at[j] & 1 and chain[i] + 1 > chain[j]:
                    chain[j] = chain[i] + 1
        units_t = max(chain, default=0)
        is_mine = u >= 0 and on[u]
        if is_mine and units_t:  # one consumer may share the producer's partition
            units_t = max(units_t - 1, int(any(past[u] >> b & 1 for b in at)))
        if is_mine:
            units_t += int(len(dev_cons) < len(cons)) + int(out[t])
        total += units_t * nbytes[t]
    return total


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
        cls = self.cls
        # graph.algorithms.heaviest_paths with weight() computed in the loop: building its
        # per-node successor and weight lists costs three times the passes themselves
        out = gc.successor_sets()  # any order of the successors: the same path lengths
        asap = [0] * n  # the heaviest path ending at each node, weight() inlined
        for x in order:
            hx, cx = asap[x], cls[x]
            for y in out[x]:
                cy = cls[y]
                v = hx + (cy < barrier and cx > cy)
                if v > asap[y]:
                    asap[y] = v
        tail = [0] * n  # the heaviest path starting at each node
        for x in reversed(order):
            best, cx = 0, cls[x]
            for y in out[x]:
                cy = cls[y]
                v = tail[y] + (cy < barrier and cx > cy)
                if v > best:
                    best = v
            tail[x] = best
        del order  # its million ints are not held with the ones made below
        self.bound = bound = max(asap, default=0)
        for x, t in enumerate(tail):  # in place: the path lengths become the latest levels
            tail[x] = bound - t
        self.asap = asap
        self.alap = tail

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
        asap, alap, cls, barrier = self.asap, self.alap, self.cls, self.barrier
        ax, ay, lx, ly = asap[x], asap[y], alap[x], alap[y]
        same = cls[x] == cls[y]  # then an equal level on both sides pushes nothing further:
        push = not same or ax != ay  # every successor already sits at or after it
        pull = not same or lx != ly
        asap[survivor] = ax if ax > ay else ay
        alap[survivor] = lx if lx < ly else ly
        if not (push or pull):
            return
        out_set, in_set = self.gc.out_set, self.gc.in_set  # the fixed point is order-free
        stack = [survivor] if push else []
        while stack:  # weight() inlined: this is the hot loop of cycles+levels
            u = stack.pop()
            cu = cls[u]
            for s in out_set(u):
                cs = cls[s]
                v = asap[u] + (cs < barrier and cu > cs)
                if v > asap[s]:
                    asap[s] = v
                    stack.append(s)
        stack = [survivor] if pull else []
        while stack:
            u = stack.pop()
            cu = cls[u]
            for p in in_set(u):
                v = alap[u] - (cu < barrier and cls[p] > cu)
                if v < alap[p]:
                    alap[p] = v
                    stack.append(p)
