"""The graph algorithms every stage shares, each written once, on plain integer edge lists.

Nodes are ``0..n-1``; edges are parallel ``src``/``dst`` sequences (lists or numpy arrays). Every
function here is deterministic: ties are broken by a key, never by hash or insertion order.

- :func:`topological_order` — Kahn's algorithm with a priority key; a cycle raises
  :class:`~clusterkit.errors.CycleError` naming its nodes (:func:`find_cycle`).
- :func:`fifo_order` — any topological order, first in first out (no key, no heap).
- :func:`positions` — the position of every node in an order (its inverse permutation).
- :func:`adjacency` — successor / predecessor lists.
- :class:`UnionFind` — disjoint sets with path halving and union by size, on plain lists;
  :func:`roots` — the root of every element of such a forest, in numpy.
- :func:`group_labels` / :func:`quotient` — contract groups of nodes to super-nodes: the
  super-node of each node, the distinct edges between super-nodes and the super-node edge each
  original edge stands in
  (:func:`quotient_edges` keeps only the edges).
- :func:`weak_components` — connected components of the undirected view, numbered as
  scipy's ``connected_components`` numbers them; :func:`is_acyclic` — whether edges form a DAG.
- :func:`pair_order` — the order of ``np.lexsort`` by two integer keys, in one stable argsort.
- :func:`int_lists` — integer arrays as plain lists sharing one int object per value.
- :func:`gc_paused` — pause the cyclic garbage collector while many small containers are made.
"""

from __future__ import annotations

import gc
import heapq
import operator
from contextlib import contextmanager
from typing import Callable, Iterator, Sequence

import numpy as np

from clusterkit.errors import CycleError, GraphError


def adjacency(n: int, src: Sequence[int], dst: Sequence[int]) -> tuple[list[list[int]],
                                                                        list[list[int]]]:
    """``(succ, pred)``: per node, its successors and predecessors in edge order."""
    succ: list[list[int]] = [[] for _ in range(n)]
    pred: list[list[int]] = [[] for _ in range(n)]
    for s, d in zip(_as_list(src), _as_list(dst)):
        succ[s].append(d)
        pred[d].append(s)
    return succ, pred


def edge_arrays(n: int, src: Sequence[int] | np.ndarray, dst: Sequence[int] | np.ndarray,
                who: str) -> tuple[int, np.ndarray, np.ndarray]:
    """``n`` and the edges ``src[k] -> dst[k]`` as flat int64 arrays, checked: a one-line
    :class:`~clusterkit.errors.GraphError` (``who`` names the caller) for a negative ``n``,
    arrays of different lengths or an end that is no node, a
    :class:`~clusterkit.errors.CycleError` for a self-loop."""
    n = operator.index(n)
    if n < 0:
        raise GraphError(f"{who}: the number of nodes must be >= 0, got {n}")
    src = np.asarray(src, dtype=np.int64).ravel()
    dst = np.asarray(dst, dtype=np.int64).ravel()
    if src.shape != dst.shape:
        raise GraphError(f"{who}: {src.size} edge sources but {dst.size} edge targets")
    for arr, what in ((src, "source"), (dst, "target")):
        bad = np.flatnonzero((arr < 0) | (arr >= n))
        if bad.size:
            raise GraphError(f"{who}: edge {int(bad[0])}: {what} {int(arr[bad[0]])} is not a "
                             f"node (the graph has {n} nodes, 0..{n - 1})")
    loops = np.flatnonzero(src == dst)
    if loops.size:
        v = int(src[loops[0]])
        raise CycleError(f"{who}: edge {int(loops[0])} is a self-loop on node {v} ({v} -> {v})",
                         [str(v)])
    return n, src, dst


def topological_order(n: int, src: Sequence[int] | np.ndarray,
                      dst: Sequence[int] | np.ndarray, key: Sequence | None = None,
                      names: Callable[[int], str] | Sequence[str] | None = None) -> list[int]:
    """A topological order of ``0..n-1``: Kahn's algorithm taking the ready node with the smallest
    ``(key[v], v)`` first (``key`` defaults to the node number, so an order that is already
    topological comes back unchanged). A cycle raises :class:`CycleError` with the nodes of one
    cycle, named by ``names`` (a sequence or a function; the numbers by default)."""
    if key is None:
        s_arr, d_arr = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
        if not s_arr.size or bool(np.all(s_arr < d_arr)):
            return list(range(n))
        order, succ, indeg = _kahn_by_number(n, s_arr, d_arr)
    else:
        succ = [[] for _ in range(n)]
        indeg = [0] * n
        for s, d in zip(_as_list(src), _as_list(dst)):
            succ[s].append(d)
            indeg[d] += 1
        order = _kahn(n, succ, indeg, _as_list(key))
    if len(order) < n:
        cycle = find_cycle([i for i in range(n) if indeg[i] > 0], succ)
        label = names if callable(names) else (
            (lambda i: str(i)) if names is None else (lambda i: str(names[i])))
        on = [label(i) for i in cycle]
        raise CycleError("the graph has a cycle: " + " -> ".join(on + on[:1]), on)
    return order


def fifo_order(n: int, src: np.ndarray, dst: np.ndarray) -> list[int]:
    """A topological order of ``0..n-1`` with edges ``src -> dst`` (numpy arrays) for callers
    that take any order: Kahn's algorithm first in, first out (no heap, so faster than
    :func:`topological_order`); a cycle raises as :func:`topological_order` does."""
    by = _by_source(src)
    ptr = np.searchsorted(src[by], np.arange(n + 1)).tolist()
    nbr = dst[by].tolist()
    indeg = np.bincount(dst, minlength=n).tolist()
    order = [v for v in range(n) if not indeg[v]]
    for u in order:  # the list grows while it is read: first in, first out
        for v in nbr[ptr[u]:ptr[u + 1]]:
            indeg[v] -= 1
            if not indeg[v]:
                order.append(v)
    if len(order) < n:  # a cycle: let the shared sort name it
        return topological_order(n, src, dst)
    return order


def _by_source(src: np.ndarray) -> np.ndarray:
    """The edges by source, each source's in edge order (a stable sort; none needed when the
    sources are sorted already, as the graph's and a partition's cluster edges are)."""
    if len(src) < 2 or bool((src[1:] >= src[:-1]).all()):
        return np.arange(len(src))
    return np.argsort(src, kind="stable")


def _kahn_by_number(n: int, src: np.ndarray, dst: np.ndarray
                    ) -> tuple[list[int], list[list[int]], list[int]]:
    """:func:`_kahn` with the node numbers as keys, successors in CSR slices: the order, the
    successor lists (each in edge order) and the in-degrees left (non-zero on a cycle)."""
    by = _by_source(src)
    ptr = np.concatenate(([0], np.cumsum(np.bincount(src, minlength=n)))).tolist()
    nbr = dst[by].tolist()
    indeg = np.bincount(dst, minlength=n).tolist()
    heap = [v for v in range(n) if not indeg[v]]  # ascending: already a heap
    order: list[int] = []
    push, pop = heapq.heappush, heapq.heappop
    while heap:
        u = pop(heap)
        order.append(u)
        for v in nbr[ptr[u]:ptr[u + 1]]:
            indeg[v] -= 1
            if not indeg[v]:
                push(heap, v)
    succ = [nbr[ptr[i]:ptr[i + 1]] for i in range(n)] if len(order) < n else []
    return order, succ, indeg


def _kahn(n: int, succ: list[list[int]], indeg: list[int], keys: list) -> list[int]:
    """Kahn's algorithm taking the ready node of smallest ``(keys[v], v)`` first (``indeg`` is
    used up). Non-negative int keys go on the heap as the one int ``key * n + v``, which
    orders alike and compares faster than a tuple."""
    order: list[int] = []
    push, pop = heapq.heappush, heapq.heappop
    if all(type(k) is int and k >= 0 for k in keys):
        heap = [keys[i] * n + i for i in range(n) if indeg[i] == 0]
        heapq.heapify(heap)
        while heap:
            u = pop(heap) % n
            order.append(u)
            for v in succ[u]:
                indeg[v] -= 1
                if indeg[v] == 0:
                    push(heap, keys[v] * n + v)
        return order
    theap = [(keys[i], i) for i in range(n) if indeg[i] == 0]
    heapq.heapify(theap)
    while theap:
        _, u = pop(theap)
        order.append(u)
        for v in succ[u]:
            indeg[v] -= 1
            if indeg[v] == 0:
                push(theap, (keys[v], v))
    return order


def positions(order: Sequence[int] | np.ndarray) -> list[int]:
    """``pos[v]``: where node ``v`` stands in ``order`` (a permutation of ``0..n-1``)."""
    pos = [0] * len(order)
    for i, v in enumerate(_as_list(order)):
        pos[v] = i
    return pos


def heaviest_paths(order: Sequence[int], succ: Sequence[Sequence[int]],
                   weight: Sequence[Sequence[int]] | None = None) -> tuple[list[int], list[int]]:
    """Per node, the heaviest path ending at it and the heaviest path starting at it, in a DAG
    given by ``order`` (topological), ``succ[x]`` (the successors of ``x``) and ``weight[x]``
    (their edge weights, in the same order; None: every edge weighs 1, the longest paths in
    edges, without weight lists to build). One pass each way over plain lists."""
    if weight is None:
        return _longest_paths(order, succ)
    head = [0] * len(succ)
    for x in order:
        hx = head[x]
        for y, w in zip(succ[x], weight[x]):
            if hx + w > head[y]:
                head[y] = hx + w
    tail = [0] * len(succ)
    for x in reversed(order):
        best = tail[x]
        for y, w in zip(succ[x], weight[x]):
            if tail[y] + w > best:
                best = tail[y] + w
        tail[x] = best
    return head, tail


def _longest_paths(order: Sequence[int], succ: Sequence[Sequence[int]]
                   ) -> tuple[list[int], list[int]]:
    """:func:`heaviest_paths` with every edge weighing 1."""
    head = [0] * len(succ)
    for x in order:
        hx = head[x] + 1
        for y in succ[x]:
            if hx > head[y]:
                head[y] = hx
    tail = [0] * len(succ)
    for x in reversed(order):
        best = -1
        for y in succ[x]:
            if tail[y] > best:
                best = tail[y]
        tail[x] = best + 1
    return head, tail


def find_cycle(rest: Sequence[int], succ: Sequence[Sequence[int]]) -> list[int]:
    """One cycle among ``rest``, the nodes Kahn's algorithm could not order (each lies on a
    cycle or downstream of one): walk forward until a node repeats, dropping the dead ends
    (nodes downstream of a cycle with no successor left) and walking again."""
    alive = set(rest)
    while True:
        pos: dict[int, int] = {}
        path: list[int] = []
        u = min(alive)
        while u not in pos:
            pos[u] = len(path)
            path.append(u)
            nxt = next((v for v in succ[u] if v in alive), None)
            if nxt is None:
                alive.discard(u)
                break
            u = nxt
        else:
            return path[pos[u]:]


class UnionFind:
    """Disjoint sets over ``0..n-1`` (path halving, union by size) on plain lists, for loops
    that merge one pair at a time; :meth:`labels` numbers the sets by their smallest member."""

    def __init__(self, n: int, identity: Sequence[int] | None = None):
        """``n`` singleton sets. ``identity``: a sequence equal to ``range(n)`` already at hand,
        whose int objects the parent list then shares (a million nodes: 28 MB less); a
        :class:`GraphError` when it is not (its ends and length checked)."""
        if identity is None:
            self.parent = list(range(n))
        else:
            self.parent = list(identity)
            if len(self.parent) != n or (n and (self.parent[0] != 0 or self.parent[-1] != n - 1)):
                raise GraphError(f"UnionFind: identity is not 0..{n - 1}")
        self.size = [1] * n

    def find(self, x: int) -> int:
        parent = self.parent
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(self, a: int, b: int) -> int:
        """Merge the sets of ``a`` and ``b``; returns the new root."""
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return ra
        if self.size[ra] < self.size[rb]:
            ra, rb = rb, ra
        self.parent[rb] = ra
        self.size[ra] += self.size[rb]
        return ra

    def link(self, keep: int, gone: int) -> None:
        """Merge the set rooted at ``gone`` into the one rooted at ``keep`` (both roots): for
        callers whose survivor is decided elsewhere (a contraction keeps one of two nodes)."""
        self.parent[gone] = keep
        self.size[keep] += self.size[gone]

    def connected(self, a: int, b: int) -> bool:
        return self.find(a) == self.find(b)

    def labels(self) -> np.ndarray:
        """Per element, its set's number; sets are numbered in the order of their smallest
        member (deterministic, independent of union order)."""
        _, first, inverse = np.unique(roots(self.parent), return_index=True, return_inverse=True)
        rank = np.argsort(np.argsort(first, kind="stable"), kind="stable")
        return rank[inverse]


def distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values of a one-dimensional array, ascending (what ``np.unique(values)``
    gives), by one sort: numpy 2's plain ``np.unique`` hashes, which is many times slower on
    hundreds of thousands of distinct wide keys."""
    out = np.sort(values)
    if len(out) > 1:
        out = out[np.concatenate(([True], out[1:] != out[:-1]))]
    return out


def roots(parent: Sequence[int] | np.ndarray) -> np.ndarray:
    """The root of every element of a union-find forest given by ``parent`` (roots are their
    own parent), by pointer jumping in numpy (a few passes, whatever the depth of the trees)."""
    p = np.asarray(parent, dtype=np.int64)
    while True:
        q = p[p]
        if np.array_equal(q, p):
            return p
        p = q


def group_labels(group_of: np.ndarray) -> np.ndarray:
    """Super-node per node for a contraction: one super-node per group (``group_of[v] >= 0``)
    and one per ungrouped node (``-1``), numbered in order of their smallest node (so on
    topologically numbered nodes the super-node numbers follow the nodes)."""
    group_of = np.asarray(group_of, dtype=np.int64)
    n = len(group_of)
    if not n or int(group_of.max()) < 0:
        return np.arange(n, dtype=np.int64)
    first = np.full(int(group_of.max()) + 1, n, dtype=np.int64)
    grouped = np.flatnonzero(group_of >= 0)
    np.minimum.at(first, group_of[grouped], grouped)
    key = np.where(group_of >= 0, first[np.maximum(group_of, 0)], np.arange(n))
    return np.unique(key, return_inverse=True)[1].astype(np.int64).reshape(n)


def quotient(labels: np.ndarray, src: np.ndarray, dst: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Contract every label to one node: ``(qsrc, qdst, edge_of)`` with the distinct edges
    between different labels sorted by ``(qsrc, qdst)``, and per original edge the index of
    the quotient edge it stands in (``-1`` for an edge inside one label)."""
    labels = np.asarray(labels, dtype=np.int64)
    a = labels[np.asarray(src, dtype=np.int64)]
    b = labels[np.asarray(dst, dtype=np.int64)]
    edge_of = np.full(len(a), -1, dtype=np.int64)
    outer = np.flatnonzero(a != b)
    if not len(outer):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), edge_of
    k = int(labels.max()) + 1
    keys, inverse = np.unique(a[outer] * k + b[outer], return_inverse=True)
    edge_of[outer] = inverse.reshape(-1)
    return keys // k, keys % k, edge_of


def quotient_edges(labels: np.ndarray, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray,
                                                                                   np.ndarray]:
    """The distinct edges ``(labels[s], labels[d])`` between different groups, sorted."""
    qsrc, qdst, _ = quotient(labels, src, dst)
    return qsrc, qdst


def strong_components(n: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Strongly connected component per node of ``0..n-1`` under the arcs ``a[e] -> b[e]``,
    components numbered by their smallest node (scipy's ``csgraph``)."""
    from scipy.sparse import coo_matrix  # heavy imports, paid on use
    from scipy.sparse.csgraph import connected_components

    if n == 0:
        return np.zeros(0, dtype=np.int64)
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    adj = coo_matrix((np.ones(len(a)), (a, b)), shape=(n, n))
    _, labels = connected_components(adj, directed=True, connection="strong")
    first = np.full(int(labels.max()) + 1, n, dtype=np.int64)
    np.minimum.at(first, labels, np.arange(n))
    order = np.empty_like(first)
    order[np.argsort(first)] = np.arange(len(first))
    return order[labels]


def weak_components(n: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Component label per node of ``0..n-1`` joined by the undirected edges ``a[e] - b[e]``,
    components numbered by their smallest node (as scipy's ``connected_components`` does).

    Vectorized union-find: every round hooks, along each edge between two trees, the larger
    root under the smaller, then compresses every path; a node's parent never exceeds it, so
    no cycle forms, and each round merges at least one pair of trees."""
    parent = np.arange(n, dtype=np.int64)
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    while a.size:
        ra, rb = parent[a], parent[b]
        apart = ra != rb
        if not apart.any():
            break
        a, b, ra, rb = a[apart], b[apart], ra[apart], rb[apart]
        np.minimum.at(parent, np.maximum(ra, rb), np.minimum(ra, rb))
        while True:
            up = parent[parent]
            if np.array_equal(up, parent):
                break
            parent = up
    return np.unique(parent, return_inverse=True)[1].astype(np.int64).reshape(n)


def is_acyclic(n: int, src: np.ndarray, dst: np.ndarray) -> bool:
    """True when the edges ``src[e] -> dst[e]`` on ``0..n-1`` have no directed cycle."""
    try:
        fifo_order(n, np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64))
    except CycleError:
        return False
    return True


def pair_order(major: np.ndarray, minor: np.ndarray) -> np.ndarray:
    """``np.lexsort((minor, major))``: the positions by ``major``, then ``minor``, ties in
    position order (integer arrays of one length). Non-negative values are sorted as one stable
    argsort of the int64 key ``major * (max(minor) + 1) + minor``, much faster than lexsort's
    two passes on millions of edges."""
    major = np.asarray(major, dtype=np.int64)
    minor = np.asarray(minor, dtype=np.int64)
    if not major.size:
        return np.zeros(0, dtype=np.int64)
    width = int(minor.max()) + 1
    if int(minor.min()) < 0 or int(major.min()) < 0 or \
            int(major.max()) >= (2 ** 63 - 1) // max(width, 1) - 1:  # the key would not fit
        return np.lexsort((minor, major))
    return np.argsort(major * width + minor, kind="stable")


def int_lists(*arrays: np.ndarray) -> list[list[int]]:
    """``[a.tolist() for a in arrays]`` for integer arrays, but the lists share one int object
    per distinct value: ``tolist`` makes one 32-byte int per element, so lists of node and edge
    numbers that a pass keeps while it walks them would hold millions of copies of a few
    million numbers. Arrays whose values span more than their length get plain ``tolist``."""
    flat = [np.asarray(a, dtype=np.int64) for a in arrays]
    full = [a for a in flat if a.size]
    if not full:
        return [[] for _ in flat]
    lo = min(int(a.min()) for a in full)
    hi = max(int(a.max()) for a in full)
    if hi - lo + 1 > sum(a.size for a in full):  # sparse values: nothing to share
        return [a.tolist() for a in flat]
    pool = np.empty(hi - lo + 1, dtype=object)
    pool[:] = range(lo, hi + 1)
    return [pool[a - lo].tolist() for a in flat]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while millions of small containers are made (its full
    passes over a large graph would dominate the run time); restores the previous state."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _as_list(seq: Sequence | np.ndarray) -> list:
    return seq.tolist() if isinstance(seq, np.ndarray) else list(seq)
