"""The problem's graph with every together group contracted to one *super-node*.

A together group is convex and no two groups depend on each other (both checked when the
constraints are compiled), so the contracted graph is again a DAG and a partition of the
super-nodes is a partition of the nodes that keeps every group whole. The contraction itself is
:func:`~clusterkit.graph.algorithms.group_labels` and :func:`~clusterkit.graph.algorithms.quotient`
on integer arrays; :class:`SuperNodeGraph` adds what the engines ask of a super-node (devices, size,
constants, never-together partners, topological orders), each part computed on first use.
"""

from __future__ import annotations

from functools import cached_property
from typing import Iterable, Protocol, Sequence

import numpy as np

from clusterkit._deprecated import renamed_attribute
from clusterkit.constraints.core import Problem
from clusterkit.graph import convexity
from clusterkit.graph.algorithms import (
    group_labels,
    heaviest_paths,
    pair_order,
    positions,
    quotient,
    topological_order,
)

#: how many landmark super-nodes :attr:`SuperNodeGraph.landmarks` labels reachability with
LANDMARKS = 256


class _Cluster(Protocol):
    device: int
    super_nodes: list[int]


class SuperNodeGraph:
    """Super-nodes ``0..n-1``, numbered in order of their smallest node (a topological
    numbering of the super-nodes whenever the nodes are one).

    Arrays: ``super_node_of`` node → super-node; ``esrc``/``edst`` the distinct super-node edges
    (the graph's own edges when there are no groups); ``edge_of`` per graph edge its super-node
    edge (-1 inside a super-node). Plain lists (for loops): ``members[u]`` sorted node ids,
    ``size[u]``, ``succ[u]``/``pred[u]`` neighbour super-nodes with ``succ_e[u]``/``pred_e[u]``
    the super-node-edge ids parallel to them, ``order`` a topological order and ``rank`` each
    super-node's position in it, ``ok[d][e]`` whether super-node edge ``e`` may lie inside a
    cluster of device ``d`` (every graph edge it stands for is contractible), ``feasible[d][u]``
    whether super-node ``u`` alone may be a cluster of device ``d``, ``never[u]`` super-nodes
    ``u`` may never share a cluster with, ``edge_nodes[e]`` one graph edge (producer, consumer)
    behind super-node edge ``e``. (``unit_of`` and ``unit_const_bytes`` are the deprecated old
    names of ``super_node_of`` and ``super_node_const_bytes``.)
    """

    unit_of = renamed_attribute("super_node_of")
    unit_const_bytes = renamed_attribute("super_node_const_bytes")

    def __init__(self, problem: Problem):
        self.problem = problem
        g = problem.graph
        self.has_groups = bool(problem.groups)
        if self.has_groups:
            self.super_node_of = group_labels(problem.group_of)
            self.n = int(self.super_node_of.max()) + 1
            self.esrc, self.edst, self.edge_of = quotient(self.super_node_of, g.edge_src,
                                                          g.edge_dst)
            self.order = topological_order(self.n, self.esrc, self.edst)
            self.rank = positions(self.order)
        else:
            self.n = g.n
            self.super_node_of = np.arange(g.n, dtype=np.int64)
            self.esrc, self.edst = g.edge_src, g.edge_dst
            self.edge_of = np.arange(g.num_edges, dtype=np.int64)
            self.order = list(range(g.n))
            self.rank = self.order

    # ------------------------------------------------------------------ structure
    @cached_property
    def members(self) -> list[list[int]]:
        if not self.has_groups:
            return [[v] for v in range(self.n)]
        members: list[list[int]] = [[] for _ in range(self.n)]
        for v, u in enumerate(self.super_node_of.tolist()):
            members[u].append(v)
        return members

    @cached_property
    def size(self) -> list[int]:
        return np.bincount(self.super_node_of, minlength=self.n).tolist()

    @cached_property
    def first(self) -> np.ndarray:
        """Smallest node of each super-node."""
        first = np.full(self.n, self.problem.n, dtype=np.int64)
        np.minimum.at(first, self.super_node_of, np.arange(self.problem.n))
        return first

    @cached_property
    def succ(self) -> list[list[int]]:
        if not self.has_groups:
            return self.problem.graph.succ_lists
        return _split(self.edst, _ptr(self.esrc, self.n))

    @cached_property
    def pred(self) -> list[list[int]]:
        if not self.has_groups:
            return self.problem.graph.pred_lists
        by_dst = self._by_dst
        return _split(self.esrc[by_dst], _ptr(self.edst, self.n))

    @cached_property
    def succ_e(self) -> list[list[int]]:
        return _split(np.arange(len(self.esrc), dtype=np.int64), _ptr(self.esrc, self.n))

    @cached_property
    def pred_e(self) -> list[list[int]]:
        return _split(self._by_dst, _ptr(self.edst, self.n))

    @cached_property
    def _by_dst(self) -> np.ndarray:
        """Super-node edges by (target, source)."""
        return pair_order(self.edst, self.esrc)

    @cached_property
    def edge_nodes(self) -> list[tuple[int, int]]:
        g = self.problem.graph
        if not self.has_groups:
            return list(zip(g.edge_src.tolist(), g.edge_dst.tolist()))
        outer = np.flatnonzero(self.edge_of >= 0)
        _, first = np.unique(self.edge_of[outer], return_index=True)
        orig = outer[first]
        return list(zip(g.edge_src[orig].tolist(), g.edge_dst[orig].tolist()))

    # ------------------------------------------------------------------ devices
    @cached_property
    def ok(self) -> list[list[bool]]:
        p = self.problem
        out = []
        outer = np.flatnonzero(self.edge_of >= 0)
        for d in range(len(p.devices)):
            contract = p.contractible(d)
            if not self.has_groups:
                out.append(contract.tolist())
                continue
            agg = np.ones(len(self.esrc), dtype=bool)
            np.logical_and.at(agg, self.edge_of[outer], contract[outer])
            out.append(agg.tolist())
        return out

    @cached_property
    def feasible(self) -> list[list[bool]]:
        p = self.problem
        g = p.graph
        inner = np.flatnonzero(self.edge_of < 0)
        out = []
        for d in range(len(p.devices)):
            feas = np.ones(self.n, dtype=bool)
            np.logical_and.at(feas, self.super_node_of, p.supported[d])
            bad = inner[~p.contractible(d)[inner]]
            feas[self.super_node_of[g.edge_src[bad]]] = False
            hi, cb = p.limits.max_nodes[d], p.limits.max_const[d]  # the device's own too
            if hi is not None:
                feas &= np.asarray(self.size) <= hi
            if cb is not None:
                feas &= np.asarray([self.super_node_const_bytes(u) for u in range(self.n)]) <= cb
            out.append(feas.tolist())
        return out

    @cached_property
    def never(self) -> dict[int, list[int]]:
        never: dict[int, list[int]] = {}
        uo = self.super_node_of
        for a, b in self.problem.never_pairs.tolist():
            ua, ub = int(uo[a]), int(uo[b])
            never.setdefault(ua, []).append(ub)
            never.setdefault(ub, []).append(ua)
        return never

    # ------------------------------------------------------------------ constants
    @cached_property
    def _constants(self) -> tuple[list[list[int]], list[int]]:
        """Per super-node the ids of the distinct constant tensors it reads, and bytes per id."""
        g = self.problem.graph
        ids: dict[str, int] = {}
        nbytes: list[int] = []
        const: list[list[int]] = [[] for _ in range(self.n)]
        for u, nodes in enumerate(self.members):
            seen = set()
            for v in nodes:
                for t in g.nodes[v].all_inputs():
                    ten = g.tensors[t]
                    if ten.is_constant and t not in seen:
                        seen.add(t)
                        if t not in ids:
                            ids[t] = len(nbytes)
                            nbytes.append(int(ten.nbytes or 0))
                        const[u].append(ids[t])
        return const, nbytes

    @property
    def const(self) -> list[list[int]] | None:
        """Constant-tensor ids per super-node (only when some device has a ``max_const_bytes``)."""
        return self._constants[0] if self.problem.limits.any_bytes else None

    @property
    def tensor_bytes(self) -> list[int]:
        return self._constants[1] if self.problem.limits.any_bytes else []

    def super_node_const_bytes(self, u: int) -> int:
        """Bytes of the distinct constants super-node ``u`` reads."""
        if self.const is None:
            return 0
        tb = self.tensor_bytes
        return sum(tb[t] for t in self.const[u])

    # ------------------------------------------------------------------ orders
    @cached_property
    def orders(self) -> list[list[int]]:
        """Three topological numberings (``u ~> v`` implies a smaller number at ``u`` in
        each): the rank, the depth (longest path from a source) and the longest path to a sink
        counted down from the longest one. A path ``u ~> v`` only passes super-nodes between ``u``
        and ``v`` in every one; depths keep super-nodes close that lie close along paths, however
        far apart the rank puts them."""
        depth, height = heaviest_paths(self.order, self.succ)  # in edges
        top = max(height, default=0)
        return [self.rank, depth, [top - h for h in height]]

    @cached_property
    def intervals(self) -> list[tuple[list[int], list[int]]]:
        """GRAIL reachability intervals ``(low, post)`` of three seeded random depth-first
        traversals: ``u ~> v`` implies ``low[u] <= low[v]`` and ``post[v] <= post[u]`` in each."""
        posts = [_grail_post(self, seed) for seed in (1, 2, 3)]
        return list(zip(_lowest(self.order, self.succ, posts), posts))

    @cached_property
    def landmarks(self) -> tuple[list[int], list[int], list[int]]:
        """Positive reachability labels ``(own, lin, lout)`` as integer bitsets over up to
        :data:`LANDMARKS` super-nodes spread evenly over the topological order: ``own[u]`` is the
        bit of landmark ``u`` (0 for other super-nodes), bit ``k`` of ``lout[u]`` says ``u`` reaches
        landmark ``k``, of ``lin[u]`` that landmark ``k`` reaches ``u`` (paths of length
        >= 0). ``lout[a] & lin[b]`` proves ``a ~> b``."""
        n, order = self.n, self.order
        k = min(n, LANDMARKS)
        own = [0] * n
        for i in range(k):
            own[order[(2 * i + 1) * n // (2 * k)]] = 1 << i
        return own, _closure(order, self.pred, own), _closure(order[::-1], self.succ, own)

    # ------------------------------------------------------------------ helpers
    def nodes_of(self, super_nodes: Iterable[int]) -> list[int]:
        """Sorted node ids of some super-nodes."""
        if not self.has_groups:
            return sorted(int(u) for u in super_nodes)
        out = []
        for u in super_nodes:
            out.extend(self.members[u])
        return sorted(out)

    def node_labels(self, clusters: Sequence[_Cluster]) -> tuple[np.ndarray, np.ndarray]:
        """Cluster label and device index per node (-1: fallback) for growing clusters
        (objects with ``device`` and ``super_nodes``; a super-node in several gets the last)."""
        n, k = self.problem.n, len(clusters)
        piece = np.full(self.n, -1, dtype=np.int64)
        if k:
            super_nodes = np.fromiter((u for c in clusters for u in c.super_nodes), dtype=np.int64)
            lens = np.fromiter((len(c.super_nodes) for c in clusters), dtype=np.int64, count=k)
            # the last piece holding a super-node wins, as with one assignment per piece
            last = np.unique(super_nodes[::-1], return_index=True)[1]
            ids = np.repeat(np.arange(k, dtype=np.int64), lens)[::-1]
            piece[super_nodes[::-1][last]] = ids[last]
        of_node = piece[self.super_node_of]
        placed = of_node >= 0
        labels = np.where(placed, of_node, np.arange(n, dtype=np.int64) + k)
        dev = np.fromiter((c.device for c in clusters), dtype=np.int64, count=k)
        devices = np.full(n, -1, dtype=np.int64)
        devices[placed] = dev[of_node[placed]]
        return labels, devices


def first_reentry(contracted: SuperNodeGraph, members: list[int], forward: bool = True
                  ) -> int | None:
    """The lowest-ranked member a path leaving the super-nodes ``members`` re-enters (``forward``),
    or the highest-ranked member such a path starts from; ``None`` when the set is convex
    (:func:`clusterkit.graph.convexity.first_reentry` pruned by the three orders)."""
    hit = convexity.first_reentry(contracted.succ if forward else contracted.pred, members,
                                  contracted.rank, contracted.orders[1:], forward)
    return None if hit is None else hit[0]


def _closure(order: list[int], adj: list[list[int]], own: list[int]) -> list[int]:
    """Per super-node, the OR of ``own`` over the super-nodes reaching it along ``adj`` (itself
    included), visiting super-nodes in ``order`` (every ``adj`` neighbour first)."""
    out = list(own)
    for v in order:
        acc = out[v]
        for w in adj[v]:
            acc |= out[w]
        out[v] = acc
    return out


def _ptr(keys: np.ndarray, n: int) -> np.ndarray:
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n), out=ptr[1:])
    return ptr


def _split(idx: np.ndarray, ptr: np.ndarray) -> list[list[int]]:
    flat = np.asarray(idx).tolist()
    bounds = ptr.tolist()
    return [flat[bounds[i]:bounds[i + 1]] for i in range(len(bounds) - 1)]


def _grail_post(contracted: SuperNodeGraph, seed: int) -> list[int]:
    """The post-order ranks of one GRAIL labelling (Yildirim et al.): a random depth-first
    search. The random orders of the roots and of every super-node's successors are drawn at once
    with numpy (seeded); the search runs in scipy (:func:`_preorder`): the post-order is the
    reversed preorder of the search tree with every super-node's children (and the roots) in
    reverse order."""
    rng = np.random.default_rng(seed)
    n = contracted.n
    src = np.asarray(contracted.esrc, dtype=np.int64)
    dst = np.asarray(contracted.edst, dtype=np.int64)
    # by source, then by a random key (two integer-keyed sorts: lexsort on floats is slow)
    shuffled = np.argsort(rng.random(len(src)))
    shuffled = shuffled[np.argsort(src[shuffled], kind="stable")]
    roots = np.flatnonzero(np.bincount(dst, minlength=n) == 0)
    pre, parent = _preorder(n, src[shuffled], dst[shuffled], roots[rng.permutation(len(roots))])
    pos = np.empty(n, dtype=np.int64)
    pos[pre] = np.arange(n)
    top = parent < 0
    kids = np.flatnonzero(~top)
    kids = kids[np.argsort(parent[kids] * n + (n - 1 - pos[kids]))]     # keys are distinct
    mirrored, _ = _preorder(n, parent[kids], kids, pre[top[pre]][::-1])
    post_arr = np.empty(n, dtype=np.int64)
    post_arr[mirrored[::-1]] = np.arange(n)
    return post_arr.tolist()


def _lowest(order: list[int], succ: list[list[int]], posts: list[list[int]]
            ) -> list[list[int]]:
    """Per labelling (three post-orders), per super-node the lowest post-order rank among its
    descendants (itself included): one pass in reverse topological ``order``."""
    p0, p1, p2 = posts
    a0, a1, a2 = list(p0), list(p1), list(p2)
    for v in reversed(order):
        ws = succ[v]
        if ws:
            m0, m1, m2 = a0[v], a1[v], a2[v]
            for w in ws:
                x = a0[w]
                if x < m0:
                    m0 = x
                x = a1[w]
                if x < m1:
                    m1 = x
                x = a2[w]
                if x < m2:
                    m2 = x
            a0[v], a1[v], a2[v] = m0, m1, m2
    return [a0, a1, a2]


def _preorder(n: int, owner: np.ndarray, kids: np.ndarray, starts: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """Depth-first preorder of the nodes ``0..n-1`` reachable from ``starts`` (taken in order),
    each node's children taken in the order of ``kids`` (the flat child lists, grouped by their
    sorted ``owner``); and each node's parent in the search tree (-1: a start or unreached).

    scipy's search takes children by id, so every list is threaded through extra chain nodes:
    node ``v`` points to its first child and to the chain node of its second; chain node
    ``n + j`` stands for the child at flat position ``j`` and points to it and to the next
    chain node of the list; the starts hang off a chain of their own. A real child's id is
    below every chain node's, so each node's next unseen child comes first, exactly as in a
    recursive search."""
    m, r = len(kids), len(starts)
    if n == 0 or r == 0:
        return np.zeros(0, dtype=np.int64), np.full(n, -1, dtype=np.int64)
    j = np.arange(m, dtype=np.int64)
    head = np.ones(m, dtype=bool)
    head[1:] = owner[1:] != owner[:-1]
    more = np.zeros(m, dtype=bool)          # another child follows in the same list
    more[:-1] = ~head[1:]
    holder = np.where(head, owner, n + j)    # the node pointing at the child at position j
    chain = n + m + np.arange(r, dtype=np.int64)
    src = np.concatenate([holder, holder[more], chain, chain[:-1]])
    dst = np.concatenate([kids, n + 1 + j[more], starts, chain[1:]])
    size = n + m + r
    from scipy.sparse import csr_matrix  # heavy imports, paid on use
    from scipy.sparse.csgraph import depth_first_order

    mat = csr_matrix((np.ones(len(src), dtype=np.int8), (src, dst)), shape=(size, size))
    order, pred = depth_first_order(mat, n + m, directed=True, return_predecessors=True)
    order = order[order < n].astype(np.int64)
    parent = pred[:n].astype(np.int64)
    inner = (parent >= n) & (parent < n + m)
    parent[inner] = owner[parent[inner] - n]
    parent[(parent >= n + m) | (parent < 0)] = -1
    return order, parent
