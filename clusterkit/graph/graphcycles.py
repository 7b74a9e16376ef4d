"""Dynamic topological order over integer node ids (Pearce–Kelly).

:class:`GraphCycles` mirrors TensorFlow/XLA's ``GraphCycles``
(``tensorflow/compiler/jit/graphcycles``): it keeps a DAG together with a
rank per node such that every edge goes from a lower to a higher rank, and it
refuses any edge insertion, edge contraction or node merge that would close a
cycle.  After an insertion that contradicts the current order only the nodes
whose ranks lie between the two endpoints are visited and re-ranked.

Contraction and merging remove one of the two nodes: its edges move to the
survivor and it is marked dead.  Ids are never reused, and a dead node keeps
its rank, so the ranks of all nodes (alive or dead) stay a permutation of
``0 .. num_nodes - 1``.

:class:`OneSidedGraphCycles` answers the same but keeps spaced order keys instead of ranks and,
after a contraction, gives new keys only to the nodes on one side that must move (for long runs
of contractions across wide windows).
"""

from __future__ import annotations

import operator
from typing import Sequence, TypeVar

import numpy as np

from clusterkit.errors import GraphError
from clusterkit.graph.algorithms import (
    edge_arrays,
    gc_paused,
    int_lists,
    positions,
    topological_order,
)

__all__ = ["GraphCycles", "OneSidedGraphCycles"]
_GC = TypeVar("_GC", bound="GraphCycles")  # the builders make a graph of their own class


class GraphCycles:
    """A DAG over node ids ``0 .. n-1`` with an incrementally kept topological order."""

    __slots__ = ("_rank", "_out", "_in", "_alive")

    def __init__(self, n: int) -> None:
        """Create ``n`` isolated nodes; node ``i`` gets rank ``i``."""
        n = operator.index(n)
        if n < 0:
            raise GraphError(f"number of nodes must be >= 0, got {n}")
        self._rank: list[int] = list(range(n))
        self._out: list[set[int]] = [set() for _ in range(n)]
        self._in: list[set[int]] = [set() for _ in range(n)]
        self._alive: list[bool] = [True] * n

    # ------------------------------------------------------------------ build

    @classmethod
    def from_edges(cls: type[_GC], n: int, src: np.ndarray, dst: np.ndarray,
                   order: Sequence[int] | None = None) -> _GC:
        """Build a graph on ``n`` nodes from edge arrays ``src[i] -> dst[i]`` in bulk.

        Duplicate edges are ignored.  If node ids are not already a topological
        order, ``order`` (a topological order the caller has at hand) or else one
        computed by Kahn's algorithm gives the initial ranks; the answers of every
        query and mutation do not depend on which.
        Raises :class:`~clusterkit.errors.GraphError` (a ``ValueError``) for ids out of range,
        self-loops, a cycle (:class:`~clusterkit.errors.CycleError`, naming it), or an
        ``order`` that is no topological order.
        """
        n, src, dst = edge_arrays(n, src, dst, "GraphCycles.from_edges")

        keys = np.sort(src * n + dst)  # sorted by (src, dst)
        distinct = np.ones(keys.size, dtype=bool)
        distinct[1:] = keys[1:] != keys[:-1]
        keys = keys[distinct]
        s, d = np.divmod(keys, n) if n else (keys, keys)
        by_dst = np.argsort(d, kind="stable")
        graph = cls.__new__(cls)
        with gc_paused():  # millions of fresh sets
            graph._alive = [True] * n
            succ, pred = int_lists(d, s[by_dst])  # the sets share one int per node
            graph._out = _bucket(n, s, succ)
            del succ
            graph._in = _bucket(n, d[by_dst], pred)
        if bool(np.all(s < d)):
            graph._rank = list(range(n))
        elif order is not None:
            graph._rank = _order_ranks(n, order, s, d)
        else:
            graph._rank = positions(topological_order(n, s, d))
        return graph

    @classmethod
    def from_adjacency(cls: type[_GC], succ: Sequence[Sequence[int]],
                       pred: Sequence[Sequence[int]], rank: Sequence[int]) -> _GC:
        """Build from each node's distinct successors and predecessors (mirroring each other)
        and its position ``rank`` in a topological order, none of which is checked (for a
        caller that holds a DAG in this form already, as plain lists)."""
        graph = cls.__new__(cls)
        with gc_paused():  # one fresh set per node and direction
            graph._out = list(map(set, succ))
            graph._in = list(map(set, pred))
        graph._alive = [True] * len(graph._out)
        graph._rank = list(rank)
        return graph

    def copy(self) -> GraphCycles:
        """An independent copy (same nodes, edges, ranks and dead nodes)."""
        other = self.__class__.__new__(self.__class__)
        other._rank = list(self._rank)
        with gc_paused():  # thousands of fresh sets
            other._out = list(map(set.copy, self._out))
            other._in = list(map(set.copy, self._in))
        other._alive = list(self._alive)
        return other

    def add_node(self) -> int:
        """Append an isolated node (rank = its id) and return its id."""
        x = len(self._rank)
        self._rank.append(x)
        self._out.append(set())
        self._in.append(set())
        self._alive.append(True)
        return x

    # ---------------------------------------------------------------- queries

    @property
    def num_nodes(self) -> int:
        """Number of node ids ever created (alive or dead)."""
        return len(self._rank)

    def alive(self, x: int) -> bool:
        """Whether ``x`` is a live node (not removed by a contraction/merge)."""
        x = operator.index(x)
        if not 0 <= x < len(self._rank):
            raise GraphError(f"node {x} is out of range [0, {len(self._rank)})")
        return self._alive[x]

    def rank(self, x: int) -> int:
        """Current position of ``x`` in the topological order."""
        return self._rank[self._node(x)]

    def successors(self, x: int) -> list[int]:
        """Direct successors of ``x``, sorted by id."""
        return sorted(self._out[self._node(x)])

    def predecessors(self, x: int) -> list[int]:
        """Direct predecessors of ``x``, sorted by id."""
        return sorted(self._in[self._node(x)])

    def ranks(self) -> Sequence[int]:
        """The rank of every node, as the graph's own sequence: not to be changed, and read
        again after a mutation (for hot loops that read many ranks)."""
        return self._rank

    def successor_sets(self) -> list[set[int]]:
        """The successor set of every node (by id), as the graph's own list: not to be changed
        (for loops over all nodes, like :meth:`out_set` for one)."""
        return self._out

    def predecessor_sets(self) -> list[set[int]]:
        """The predecessor set of every node (by id), as :meth:`successor_sets` gives the
        successors."""
        return self._in

    def out_set(self, x: int) -> set[int]:
        """The successors of live node ``x`` as the graph's own set: unsorted, ``x`` not
        checked, not to be changed (for hot loops whose result does not depend on the order)."""
        return self._out[x]

    def in_set(self, x: int) -> set[int]:
        """The predecessors of live node ``x``, as :meth:`out_set` gives the successors."""
        return self._in[x]

    def has_edge(self, x: int, y: int) -> bool:
        """Whether the edge ``x -> y`` exists."""
        x, y = self._node(x), self._node(y)
        return y in self._out[x]

    def topological_order(self) -> list[int]:
        """Alive nodes sorted by rank."""
        return self.order_array().tolist()

    def order_array(self) -> np.ndarray:
        """Alive nodes sorted by rank, as a numpy array."""
        rank = np.asarray(self._rank, dtype=np.int64)
        by_rank = np.argsort(rank, kind="stable")
        return by_rank[np.asarray(self._alive, dtype=bool)[by_rank]]

    def is_reachable(self, x: int, y: int) -> bool:
        """Whether a path ``x ~> y`` exists (``True`` when ``x == y``)."""
        x, y = self._node(x), self._node(y)
        return x == y or self._reachable(x, y)

    def can_contract_edge(self, x: int, y: int) -> bool:
        """Whether edge ``x -> y`` exists and is the only path from ``x`` to ``y``."""
        x, y = self._node(x), self._node(y)
        if y not in self._out[x]:
            return False
        self._unlink(x, y)
        ok = not self._reachable(x, y)
        self._link(x, y)
        return ok

    def can_merge(self, x: int, y: int) -> bool:
        """Whether ``x != y`` and neither of ``x``, ``y`` reaches the other."""
        x, y = self._node(x), self._node(y)
        return x != y and not self._reachable(x, y) and not self._reachable(y, x)

    def related(self, x: int, lo: int, hi: int) -> set[int]:
        """The nodes ranked in ``[lo, hi]`` that reach ``x`` or that ``x`` reaches (``x``
        excluded): one search each way, for testing many merge partners of ``x`` at once."""
        x = self._node(x)
        rank, out, inn = self._rank, self._out, self._in
        found: set[int] = set()
        for nbrs, keep in ((inn, lambda r: r >= lo), (out, lambda r: r <= hi)):
            seen, stack = {x}, [x]
            while stack:
                for w in nbrs[stack.pop()]:
                    if w not in seen and keep(rank[w]):
                        seen.add(w)
                        stack.append(w)
            found |= seen
        return {w for w in found if lo <= rank[w] <= hi and w != x}

    # -------------------------------------------------------------- mutations

    def insert_edge(self, x: int, y: int) -> bool:
        """Add ``x -> y``; return ``False`` (graph unchanged) if it would close a cycle.

        Inserting an existing edge returns ``True``; a self-edge returns ``False``.
        """
        x, y = self._node(x), self._node(y)
        return self._insert(x, y)

    def remove_edge(self, x: int, y: int) -> None:
        """Remove ``x -> y`` if present (no-op otherwise); ranks stay valid."""
        x, y = self._node(x), self._node(y)
        self._unlink(x, y)

    def contract_edge(self, x: int, y: int) -> int | None:
        """Merge the endpoints of edge ``x -> y`` into one node.

        Returns ``None`` (graph unchanged) if another path ``x ~> y`` exists,
        since the merged node would then lie on a cycle.  Otherwise the node
        with fewer edges (``y`` on a tie) is marked dead, its edges move to the
        survivor, and the survivor's id is returned.  Raises ``GraphError`` if
        the edge does not exist.
        """
        x, y = self._pair(x, y)
        if y not in self._out[x]:
            raise GraphError(f"no edge from node {x} to node {y}")
        return self.contract_live_edge(x, y)

    def contract_if_edge(self, x: int, y: int) -> int | None:
        """:meth:`contract_edge` when the edge ``x -> y`` exists, else ``None`` (graph
        unchanged) instead of an error."""
        x, y = self._pair(x, y)
        if y not in self._out[x]:
            return None
        return self.contract_live_edge(x, y)

    def _pair(self, x: int, y: int) -> tuple[int, int]:
        """Two alive node ids, checked (plain ints pass with a few comparisons)."""
        alive = self._alive
        if not (type(x) is int and type(y) is int and 0 <= x < len(alive)
                and 0 <= y < len(alive) and alive[x] and alive[y]):
            return self._node(x), self._node(y)   # raises, or converts an integer-like id
        return x, y

    def contract_live_edge(self, x: int, y: int) -> int | None:
        """:meth:`contract_edge` for a caller that knows ``x`` and ``y`` are live node ids (plain
        ints) joined by the edge ``x -> y``: neither is checked (for hot loops)."""
        out_x, in_y = self._out[x], self._in[y]
        out_x.discard(y)
        in_y.discard(x)
        if out_x and in_y and self._reachable(x, y):  # no other edge out or in: no other path
            out_x.add(y)  # rank[x] < rank[y] still holds
            in_y.add(x)
            return None
        return self._absorb(x, y)

    def descendant_marks(self, mark: dict[int, int]) -> dict[int, int]:
        """Per alive node, the bitwise or of ``mark`` (0 where absent) over the nodes it
        reaches, itself excluded: one pass in reverse topological order."""
        out = self._out
        own = [0] * len(out)
        for v, bits in mark.items():
            own[v] = bits
        seen = [0] * len(out)  # per node placed so far: its mark or those of its descendants
        desc: dict[int, int] = {}
        for v in reversed(self.topological_order()):
            d = 0
            for w in out[v]:
                d |= seen[w]
            desc[v] = d
            seen[v] = d | own[v]
        return desc

    def contract_between(self, x: int, y: int) -> int | None:
        """:meth:`contract_edge` on the edge joining ``x`` and ``y``, whichever way it points
        (``x -> y`` first); ``None`` (graph unchanged) when no edge joins them or another path
        would close a cycle."""
        x, y = self._pair(x, y)
        out = self._out
        if y in out[x]:
            return self.contract_live_edge(x, y)
        if x in out[y]:
            return self.contract_live_edge(y, x)
        return None

    def contract_groups(self, nodes: list[int]) -> list[int]:
        """Contract each of the distinct live ``nodes`` in turn with the node of the first
        group (in the order they were started) it can be contracted with
        (:meth:`contract_between`), else start a new group with it; return each node's group.
        Nodes are not checked (for hot loops): an attempt on a group not adjacent to the node
        costs two set look-ups."""
        out, inn, contract = self._out, self._in, self.contract_live_edge
        heads: list[int] = []      # the current node of each group
        group: list[int] = []
        for x in nodes:
            out_x, in_x = out[x], inn[x]
            for j, h in enumerate(heads):
                if h in in_x:
                    merged = contract(h, x)
                elif h in out_x:
                    merged = contract(x, h)
                else:
                    continue
                if merged is not None:
                    heads[j] = merged
                    group.append(j)
                    break
            else:
                group.append(len(heads))
                heads.append(x)
        return group

    def merge(self, x: int, y: int) -> int | None:
        """Merge two nodes, neither of which reaches the other, into one.

        Returns ``None`` (graph unchanged) if ``x == y`` or a path joins them
        in either direction; otherwise kills the node with fewer edges (``y``
        on a tie), moves its edges to the survivor and returns the survivor.
        """
        if not self.can_merge(x, y):
            return None
        return self._absorb(operator.index(x), operator.index(y))

    def merge_unrelated(self, x: int, y: int) -> int:
        """:meth:`merge` for a caller that knows ``x`` and ``y`` are distinct live nodes that
        no path joins (not checked: for hot loops that track reachability themselves)."""
        return self._absorb(x, y)

    # --------------------------------------------------------------- checking

    def check_invariants(self) -> None:
        """Raise ``AssertionError`` unless the structure is consistent.

        Ranks are a permutation of ``0 .. num_nodes-1``, in/out sets mirror
        each other, dead nodes have no edges, no self-loops, and every edge
        goes from a lower to a higher rank.
        """
        n = len(self._rank)
        if sorted(self._rank) != list(range(n)):
            raise AssertionError("ranks are not a permutation of node ids")
        for v in range(n):
            outs, ins = self._out[v], self._in[v]
            if not self._alive[v]:
                if outs or ins:
                    raise AssertionError(f"dead node {v} still has edges")
                continue
            if v in outs:
                raise AssertionError(f"self-loop on node {v}")
            for w in outs:
                if not self._alive[w]:
                    raise AssertionError(f"edge {v}->{w} points to a dead node")
                if v not in self._in[w]:
                    raise AssertionError(f"edge {v}->{w} missing from in-set of {w}")
                if self._rank[v] >= self._rank[w]:
                    raise AssertionError(
                        f"edge {v}->{w} violates order: rank {self._rank[v]} >= {self._rank[w]}"
                    )
            for u in ins:
                if v not in self._out[u]:
                    raise AssertionError(f"edge {u}->{v} missing from out-set of {u}")

    # -------------------------------------------------------------- internals

    def _node(self, x: int) -> int:
        x = operator.index(x)
        if not 0 <= x < len(self._rank):
            raise GraphError(f"node {x} is out of range [0, {len(self._rank)})")
        if not self._alive[x]:
            raise GraphError(f"node {x} is dead (merged into another node)")
        return x

    def _link(self, x: int, y: int) -> None:
        self._out[x].add(y)
        self._in[y].add(x)

    def _unlink(self, x: int, y: int) -> None:
        self._out[x].discard(y)
        self._in[y].discard(x)

    def _insert(self, x: int, y: int) -> bool:
        if x == y:
            return False
        if y in self._out[x]:
            return True
        rx, ry = self._rank[x], self._rank[y]
        if rx > ry:
            # Pearce–Kelly: only nodes ranked in [ry, rx] can be affected.
            deltaf = self._forward([y], rx)
            if deltaf is None:
                return False
            self._reorder(self._backward([x], ry), deltaf)
        self._link(x, y)
        return True

    def _absorb(self, keep: int, drop: int) -> int:
        """Merge two nodes with no path between them (any direct edge already removed).

        The node with more edges survives (``keep`` on a tie) and receives the
        other one's edges.  The merged node takes the rank slot of either the
        earlier node ``e`` or the later node ``l``; the moved edges contradict
        the order only on one side: at ``e``'s slot, predecessors of ``l``
        ranked after ``e``; at ``l``'s slot, successors of ``e`` ranked before
        ``l``.  The slot with the narrower rank window to repair is chosen, and
        one Pearce–Kelly reorder, as if the virtual edges ``p -> e`` (resp.
        ``l -> s``) were inserted together, repairs it.  The dead node keeps
        the other slot.
        """
        rank, out, inn = self._rank, self._out, self._in
        if len(out[drop]) + len(inn[drop]) > len(out[keep]) + len(inn[keep]):
            keep, drop = drop, keep
        e, l = (keep, drop) if rank[keep] < rank[drop] else (drop, keep)
        re_, rl = rank[e], rank[l]
        # Scan the dying node's side first: it is the smaller one, and often free.
        late = early = None
        if e == keep:
            late = [p for p in inn[l] if rank[p] > re_]
            if late:
                early = [w for w in out[e] if rank[w] < rl]
        else:
            early = [w for w in out[e] if rank[w] < rl]
            if early:
                late = [p for p in inn[l] if rank[p] > re_]
        if late and early:
            late_hi = max(map(rank.__getitem__, late))
            early_lo = min(map(rank.__getitem__, early))
            if late_hi - re_ <= rl - early_lo:
                early = None
            else:
                late = None
        if late:  # merged node at e's slot
            deltaf = self._forward([e], max(map(rank.__getitem__, late)))
            self._reorder(self._backward(late, re_), _no_cycle(deltaf, e, l))
            slot_node = e
        elif early:  # merged node at l's slot
            deltaf = self._forward(early, rl)
            lo = min(map(rank.__getitem__, early))
            self._reorder(self._backward([l], lo), _no_cycle(deltaf, e, l))
            slot_node = l
        else:
            slot_node = keep
        if slot_node != keep:
            rank[keep], rank[drop] = rank[drop], rank[keep]
        return self._move_edges(keep, drop)

    def _move_edges(self, keep: int, drop: int) -> int:
        """Give ``drop``'s edges to ``keep`` (``drop``'s sets are emptied in place), mark
        ``drop`` dead and return ``keep``."""
        out, inn = self._out, self._in
        drop_out, drop_in = out[drop], inn[drop]
        for w in drop_out:
            w_in = inn[w]
            w_in.remove(drop)
            w_in.add(keep)
        for w in drop_in:
            w_out = out[w]
            w_out.remove(drop)
            w_out.add(keep)
        out[keep] |= drop_out
        inn[keep] |= drop_in
        drop_out.clear()
        drop_in.clear()
        self._alive[drop] = False
        return keep

    def _reorder(self, deltab: set[int], deltaf: set[int]) -> None:
        """Give ``deltab`` then ``deltaf`` (each in rank order) their pooled ranks, ascending."""
        rank = self._rank
        key = rank.__getitem__
        order = sorted(deltab, key=key) + sorted(deltaf, key=key)
        for v, r in zip(order, sorted(map(key, order))):
            rank[v] = r

    def _forward(self, starts: list[int], bound: int) -> set[int] | None:
        """Nodes reachable from ``starts`` through ranks < ``bound``.

        Returns ``None`` as soon as the node ranked ``bound`` is reached.
        """
        rank, out = self._rank, self._out
        seen = set(starts)
        stack = list(starts)
        while stack:
            for w in out[stack.pop()]:
                r = rank[w]
                if r == bound:
                    return None
                if r < bound and w not in seen:
                    seen.add(w)
                    stack.append(w)
        return seen

    def _backward(self, starts: list[int], bound: int) -> set[int]:
        """Nodes reaching ``starts`` through ranks > ``bound``."""
        rank, inn = self._rank, self._in
        seen = set(starts)
        stack = list(starts)
        while stack:
            for w in inn[stack.pop()]:
                if rank[w] > bound and w not in seen:
                    seen.add(w)
                    stack.append(w)
        return seen

    def _reachable(self, x: int, y: int) -> bool:
        """Path ``x ~> y`` for ``x != y``: bidirectional DFS inside the rank window.

        The forward search keeps to ranks < rank[y], the backward search to
        ranks > rank[x]; each step expands the side whose edges scanned so far,
        with those of its next node, are fewer (a node of many edges waits), so
        the cost is about twice the smaller of the two cones.  Either search
        running dry proves no path, and so does the first step alone when no edge
        on the side of fewer edges (``x``'s successors or ``y``'s predecessors)
        stays inside the window (its bounds included), tested before any set is
        made.
        """
        rank = self._rank
        lo, hi = rank[x], rank[y]
        if lo > hi:
            return False
        out, inn = self._out, self._in
        out_x, in_y = out[x], inn[y]
        if len(in_y) <= len(out_x):
            for p in in_y:
                if rank[p] >= lo:
                    break
            else:
                return False
        else:
            for w in out_x:
                if rank[w] <= hi:
                    break
            else:
                return False
        forward_seen, backward_seen = {x}, {y}
        fstack, bstack = [x], [y]
        fwork = bwork = 0
        while fstack and bstack:
            fnext, bnext = out[fstack[-1]], inn[bstack[-1]]
            if fwork + len(fnext) <= bwork + len(bnext):
                fstack.pop()
                fwork += len(fnext)
                for w in fnext:
                    if w in backward_seen:
                        return True
                    if rank[w] < hi and w not in forward_seen:
                        forward_seen.add(w)
                        fstack.append(w)
            else:
                bstack.pop()
                bwork += len(bnext)
                for w in bnext:
                    if w in forward_seen:
                        return True
                    if rank[w] > lo and w not in backward_seen:
                        backward_seen.add(w)
                        bstack.append(w)
        return False


_SPREAD = 64   # gap between the keys of moved nodes with no edge bounding them
_KEY_RANGE = 1 << 29   # keys spaced over this range stay small ints (fast to compare)


def _no_cycle(delta: set[int] | None, a: int, b: int) -> set[int]:
    if delta is None:  # callers check reachability first, so this cannot happen
        raise AssertionError(f"merging nodes {a} and {b} would close a cycle")
    return delta


def _order_ranks(n: int, order: Sequence[int], src: np.ndarray, dst: np.ndarray) -> list[int]:
    """The rank of each node in ``order``, checked to be a topological order of the edges."""
    arr = np.asarray(order, dtype=np.int64)
    rank = np.full(n, -1, dtype=np.int64)
    if arr.shape == (n,) and n and arr.min() >= 0 and arr.max() < n:
        rank[arr] = np.arange(n, dtype=np.int64)
    if (rank < 0).any() or not bool(np.all(rank[src] < rank[dst])):
        raise GraphError("the order given is no topological order of the graph's nodes")
    return rank.tolist()


def _bucket(n: int, keys: np.ndarray, vals: list[int]) -> list[set[int]]:
    """Per-node sets of ``vals`` grouped by ``keys`` (``keys`` sorted ascending)."""
    bounds = np.searchsorted(keys, np.arange(n + 1, dtype=np.int64)).tolist()
    return list(map(set, map(vals.__getitem__, map(slice, bounds[:-1], bounds[1:]))))


class OneSidedGraphCycles(GraphCycles):
    """A :class:`GraphCycles` for long runs of contractions across wide rank windows.

    Same graph, same answers; only the way the order is kept differs. Each node has an order
    key (:meth:`ranks`): every edge goes from a lower to a higher key, keys are spaced apart and
    unrelated nodes may share one. After a contraction, one search runs from each side in
    lockstep; the first to finish names the set to move (the merged node's descendants to just
    after it, or its ancestors to just before it), and only those nodes get new keys, spread in
    the gap next to it (all keys are spaced again, in their order, when the gap is too small):
    on DAGs with long edges a few nodes often move across a window of thousands.
    :meth:`rank` is still the position in the topological order, at O(n) per call.
    """

    __slots__ = ()

    @classmethod
    def from_edges(cls, n: int, src: np.ndarray, dst: np.ndarray,
                   order: Sequence[int] | None = None) -> OneSidedGraphCycles:
        """Build in bulk, as :meth:`GraphCycles.from_edges`."""
        graph = super().from_edges(n, src, dst, order)
        graph._space(np.asarray(graph._rank, dtype=np.int64))
        return graph

    @classmethod
    def from_adjacency(cls, succ: Sequence[Sequence[int]], pred: Sequence[Sequence[int]],
                       rank: Sequence[int]) -> OneSidedGraphCycles:
        """Build as :meth:`GraphCycles.from_adjacency`."""
        graph = super().from_adjacency(succ, pred, rank)
        graph._space(np.asarray(graph._rank, dtype=np.int64))
        return graph

    def __init__(self, n: int) -> None:
        """Create ``n`` isolated nodes; node ``i`` gets rank ``i``."""
        super().__init__(n)
        self._space(np.arange(len(self._rank), dtype=np.int64))

    def add_node(self) -> int:
        """Append an isolated node (rank = its id) and return its id."""
        key = max(self._rank, default=0) + 1
        x = super().add_node()
        self._rank[x] = key
        return x

    def rank(self, x: int) -> int:
        """Current position of ``x`` in the topological order (:meth:`topological_order`)."""
        x = self._node(x)
        keys = np.asarray(self._rank, dtype=np.int64)
        return int(np.count_nonzero(keys < keys[x]) + np.count_nonzero(keys[:x] == keys[x]))

    def ranks(self) -> Sequence[int]:
        """The order key of every node (not its position: keys are spaced apart and unrelated
        nodes may share one), as the graph's own sequence: not to be changed, and read again
        after a mutation."""
        return self._rank

    def check_invariants(self) -> None:
        """As :meth:`GraphCycles.check_invariants`, on the positions the keys give."""
        keys = self._rank
        self._rank = positions(np.argsort(np.asarray(keys, dtype=np.int64), kind="stable"))
        try:
            super().check_invariants()
        finally:
            self._rank = keys

    def _space(self, order_keys: np.ndarray, least: int = 1) -> None:
        """Give the nodes keys spaced apart (by at least ``least``), in the order of
        ``order_keys`` (ties by id), in place; the gap keeps keys small ints where it can."""
        n = order_keys.size
        gap = max(_KEY_RANGE // max(n, 1), least)
        keys = np.empty(n, dtype=np.int64)
        keys[np.argsort(order_keys, kind="stable")] = np.arange(n, dtype=np.int64) * gap
        self._rank[:] = keys.tolist()

    def _insert(self, x: int, y: int) -> bool:
        """:meth:`GraphCycles.insert_edge` on checked ids: when ``y`` is not after ``x``, the
        nodes ``y`` reaches up to ``x``'s key move to just after ``x``."""
        if x == y or self._reachable(y, x):
            return False
        if y not in self._out[x]:
            rank = self._rank
            if rank[x] >= rank[y]:
                moved = self._below([y], rank[x])
                if not self._spread(moved, rank[x], self._next_key(moved, rank[x])):
                    self._space(np.asarray(rank, dtype=np.int64), len(moved) + 1)
                    return self._insert(x, y)
            self._link(x, y)
        return True

    def _absorb(self, keep: int, drop: int) -> int:
        """Merge two nodes with no path between them (any direct edge already removed).

        The node with more edges survives (``keep`` on a tie) and takes the slot (key) of
        the earlier node ``e`` when no predecessor of the later node ``l`` has a key as high
        as ``e``'s, or the slot of ``l`` when no successor of ``e`` has a key as low as
        ``l``'s (the dying node's side, usually the smaller, is tested first; otherwise
        :meth:`_make_room`)."""
        rank, out, inn = self._rank, self._out, self._in
        if len(out[drop]) + len(inn[drop]) > len(out[keep]) + len(inn[keep]):
            keep, drop = drop, keep
        out_d, in_d = out[drop], inn[drop]
        rk = rank[keep]
        if rk < rank[drop]:     # keep is e: its slot is free unless drop has a late predecessor
            for p in in_d:
                if rank[p] >= rk:
                    self._make_room(keep, drop)
                    break
        else:                   # keep is l: its slot is free unless drop has an early successor
            for w in out_d:
                if rank[w] <= rk:
                    self._make_room(keep, drop)
                    break
        return self._move_edges(keep, drop)

    def _make_room(self, keep: int, drop: int) -> None:
        """Change keys so that ``keep`` can stand for the merged node: the slot of ``l`` if
        no successor of ``e`` has a key up to ``l``'s, else that of ``e`` if no predecessor of
        ``l`` has one down to ``e``'s, else the slot whose nodes to move (``e``'s descendants
        keyed up to ``l``, to just after it; or ``l``'s ancestors keyed down to ``e``, to just
        before it) the lockstep search finds first; ``keep`` takes the slot's key."""
        rank, out, inn = self._rank, self._out, self._in
        e, l = (keep, drop) if rank[keep] < rank[drop] else (drop, keep)
        re_, rl = rank[e], rank[l]
        early = [w for w in out[e] if rank[w] <= rl]
        late = [p for p in inn[l] if rank[p] >= re_] if early else []
        forward = not early
        if early and late:
            forward, moved = self._first_done(early, rl, late, re_)
            if forward:
                lo, hi = rl, self._next_key(moved, rl)
            else:
                lo, hi = self._prev_key(moved, re_), re_
            if not self._spread(moved, lo, hi):
                self._space(np.asarray(rank, dtype=np.int64), len(moved) + 1)
                return self._make_room(keep, drop)
        rank[keep] = rl if forward else re_

    def _first_done(self, fstarts: list[int], hi: int, bstarts: list[int],
                    lo: int) -> tuple[bool, set[int]]:
        """``(True, nodes reachable from fstarts through keys <= hi)`` or ``(False, nodes
        reaching bstarts through keys >= lo)``: the first search to run dry, stepping the one
        whose edges scanned so far are fewer."""
        rank, out, inn = self._rank, self._out, self._in
        forward_seen, backward_seen = set(fstarts), set(bstarts)
        fstack, bstack = list(fstarts), list(bstarts)
        fwork = bwork = 0
        while fstack and bstack:
            if fwork <= bwork:
                nbrs = out[fstack.pop()]
                fwork += len(nbrs) + 1
                for w in nbrs:
                    if w not in forward_seen and rank[w] <= hi:
                        forward_seen.add(w)
                        fstack.append(w)
            else:
                nbrs = inn[bstack.pop()]
                bwork += len(nbrs) + 1
                for w in nbrs:
                    if w not in backward_seen and rank[w] >= lo:
                        backward_seen.add(w)
                        bstack.append(w)
        return (True, forward_seen) if not fstack else (False, backward_seen)

    def _below(self, starts: list[int], hi: int) -> set[int]:
        """``starts`` and the nodes they reach through keys <= ``hi``."""
        rank, out = self._rank, self._out
        seen, stack = set(starts), list(starts)
        while stack:
            for w in out[stack.pop()]:
                if w not in seen and rank[w] <= hi:
                    seen.add(w)
                    stack.append(w)
        return seen

    def _next_key(self, nodes: set[int], lo: int) -> int:
        """The lowest key among the successors of ``nodes`` outside them (if none: far enough
        above ``lo`` to spread ``nodes`` there)."""
        rank, out = self._rank, self._out
        keys = [rank[w] for v in nodes for w in out[v] if w not in nodes]
        return min(keys) if keys else lo + _SPREAD * (len(nodes) + 1)

    def _prev_key(self, nodes: set[int], hi: int) -> int:
        """The highest key among the predecessors of ``nodes`` outside them (if none: far
        enough below ``hi`` to spread ``nodes`` there)."""
        rank, inn = self._rank, self._in
        keys = [rank[p] for v in nodes for p in inn[v] if p not in nodes]
        return max(keys) if keys else hi - _SPREAD * (len(nodes) + 1)

    def _spread(self, nodes: set[int], lo: int, hi: int) -> bool:
        """Give ``nodes`` keys strictly between ``lo`` and ``hi``, evenly spaced and in the
        order of their current keys; ``False`` (nothing changed) when the gap is too small."""
        k = len(nodes)
        if hi - lo <= k:
            return False
        rank = self._rank
        for i, v in enumerate(sorted(nodes, key=rank.__getitem__), 1):
            rank[v] = lo + i * (hi - lo) // (k + 1)
        return True
