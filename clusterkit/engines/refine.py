"""Refine: move closed node sets between adjacent clusters of one device while the cut drops.

For two clusters ``P`` and ``C`` of one accelerator, the *down set* of ``P`` towards ``C`` is
the set of nodes of ``P`` whose every successor lies in ``C`` or in the set itself; the *up set*
of ``C`` towards ``P`` is the set of nodes of ``C`` whose every predecessor lies in ``P`` or in
the set. Moving a down set from ``P`` into ``C`` (or an up set from ``C`` into ``P``) keeps the
cluster graph acyclic: a new cycle would need a path from ``C`` back to ``P``, which together with
the edge ``P -> C`` is a cycle of the partition before the move. The same holds for each weakly
connected piece of such a set, which is closed in the same way.

A move is made when it breaks no constraint (selector-refused or must-cut edge inside the
receiving cluster, never-together pair, together group, size and constant-byte limits) and it
lowers ``cut_bytes`` (or keeps it and empties a cluster); its effect on the cut is counted on the
tensors the moved nodes produce or read only. Passes repeat while a move is made, at most
:data:`PASSES` times; every order is by node or cluster id, so the result is deterministic. The
partition's fallback nodes never change and its partitions never grow.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from clusterkit.constraints.core import Problem
from clusterkit.result import Partition, cluster_const_bytes

#: passes over all candidate moves at most
PASSES = 8
NONE = -2  # no single cluster (down or up set)


def refine(partition: Partition) -> Partition:
    """``partition`` with down and up sets moved while the cut drops (see the module docstring);
    ``partition`` itself when no move is made, else a new partition with its metadata."""
    mover = _Mover(partition)
    moved = 0
    for _ in range(PASSES):
        made = mover.run_pass()
        moved += made
        if not made:
            break
    if not moved:
        return partition
    devices = [mover.dev[c] for c in mover.a]
    out = Partition.from_assignment(partition.problem, mover.a, devices)
    info = dict(partition.info, refine_moves=moved)
    return dataclasses.replace(partition, clusters=out.clusters, info=info)


class _Mover:
    """Cluster per node, the members of each cluster, and the tensor lists for the cut."""

    def __init__(self, partition: Partition):
        p: Problem = partition.problem
        g = p.graph
        self.p = p
        self.a: list[int] = partition.assignment().tolist()
        self.dev = [p.device_index(c.device) if c.device != p.fallback else -1
                    for c in partition.clusters]
        self.size = [len(c.nodes) for c in partition.clusters]
        self.succ_ptr, self.succ = g.succ_ptr.tolist(), g.succ_idx.tolist()
        self.pred_ptr, self.pred = g.pred_ptr.tolist(), g.pred_idx.tolist()
        self.pred_edge = g.pred_edge.tolist()
        inner = ~np.asarray(p.must_cut, dtype=bool)
        self.inner_ok = [(np.asarray(p.edge_ok[d], dtype=bool) & inner).tolist()
                         for d in range(len(p.devices))]
        self.movable = (np.asarray(p.group_of) < 0).tolist()
        self.never: dict[int, list[int]] = {}
        for u, v in p.never_pairs.tolist():
            self.never.setdefault(u, []).append(v)
            self.never.setdefault(v, []).append(u)
        self._tensors(g)

    def _tensors(self, g) -> None:
        """Per tensor its readers, producer, bytes (0 when folded) and output flag; per node
        the tensors it makes or reads, as index ranges (read as needed)."""
        tt = g.tensor_table
        nt = len(tt.nbytes)
        weight = np.where(tt.free, 0, tt.nbytes)
        order = np.argsort(tt.inc_tensor, kind="stable")
        self.read_ptr = np.searchsorted(tt.inc_tensor[order], np.arange(nt + 1)).tolist()
        self.readers = tt.inc_node[order].tolist()
        self.producer = tt.producer.tolist()
        self.nbytes = weight.tolist()
        self.is_output = (tt.is_output & ~tt.free).tolist()
        node = np.concatenate((tt.producer, tt.inc_node))
        ten = np.concatenate((np.arange(nt), tt.inc_tensor))
        keep = (node >= 0) & (weight[ten] > 0)
        node, ten = node[keep], ten[keep]
        order = np.lexsort((ten, node))
        self.touch_ptr = np.searchsorted(node[order], np.arange(g.n + 1)).tolist()
        self.touch = ten[order].tolist()

    def unit(self, v: int) -> int:
        c = self.a[v]
        return c if self.dev[c] >= 0 else -1

    def cost(self, tensors: list[int]) -> int:
        """The cut bytes of ``tensors`` under the current assignment."""
        total = 0
        for t in tensors:
            u = self.producer[t]
            pu = self.unit(u) if u >= 0 else -1
            units = {self.unit(v) for v in self.readers[self.read_ptr[t]:self.read_ptr[t + 1]]}
            units.discard(pu)
            total += self.nbytes[t] * (len(units) + (self.is_output[t] and pu != -1))
        return total

    def run_pass(self) -> int:
        """One pass: every candidate set (whole, then by pieces) between clusters not changed
        yet in this pass; the number of moves made."""
        touched: set[int] = set()
        made = 0
        for (src, dst), nodes in self._candidates():
            if src in touched or dst in touched:
                continue
            pieces = [nodes] + (self._pieces(nodes) if len(nodes) > 1 else [])
            for piece in pieces:
                if self._try(piece, src, dst):
                    touched.update((src, dst))
                    made += 1
                    if piece is nodes:
                        break
        return made

    def _candidates(self) -> list[tuple[tuple[int, int], list[int]]]:
        """Down sets then up sets, as ((from cluster, to cluster), nodes), by cluster ids."""
        n = len(self.a)
        dev, a = self.dev, self.a
        acc = [v for v in range(n) if dev[a[v]] >= 0]
        sets: dict[tuple[int, int], list[int]] = {}
        down = [NONE] * n
        for v in reversed(acc):
            down[v] = self._common(v, self.succ_ptr, self.succ, down, None)
            if down[v] != NONE:
                sets.setdefault((self.a[v], down[v]), []).append(v)
        up = [NONE] * n
        for v in acc:
            up[v] = self._common(v, self.pred_ptr, self.pred, up, self.pred_edge)
            if up[v] != NONE:
                sets.setdefault((self.a[v], up[v]), []).append(v)
        return [(k, sorted(sets[k])) for k in sorted(sets)]

    def _common(self, v: int, ptr: list[int], nbr: list[int], mark: list[int],
                edge_of: list[int] | None) -> int:
        """The one other cluster of the same device that every neighbour of ``v`` (along
        ``ptr``/``nbr``) lies in or leads to through ``mark``; NONE when there is none."""
        a, dev = self.a, self.dev
        c = a[v]
        d = dev[c]
        if not self.movable[v] or ptr[v] == ptr[v + 1]:
            return NONE
        ok = self.inner_ok[d]
        want = NONE
        for i in range(ptr[v], ptr[v + 1]):
            w = nbr[i]
            if a[w] == c:
                got = mark[w]
            else:
                e = edge_of[i] if edge_of is not None else i
                got = a[w] if dev[a[w]] == d and ok[e] else NONE
            if got == NONE or (want != NONE and got != want):
                return NONE
            want = got
        return want

    def _pieces(self, nodes: list[int]) -> list[list[int]]:
        """The weakly connected pieces of ``nodes`` (by their edges among themselves)."""
        inside = set(nodes)
        label: dict[int, int] = {}
        pieces: list[list[int]] = []
        for s in nodes:
            if s in label:
                continue
            label[s] = len(pieces)
            piece, stack = [], [s]
            while stack:
                v = stack.pop()
                piece.append(v)
                for ptr, nbr in ((self.succ_ptr, self.succ), (self.pred_ptr, self.pred)):
                    for w in nbr[ptr[v]:ptr[v + 1]]:
                        if w in inside and w not in label:
                            label[w] = label[s]
                            stack.append(w)
            pieces.append(sorted(piece))
        return pieces if len(pieces) > 1 else []

    def _allowed(self, nodes: list[int], src: int, dst: int) -> bool:
        """Whether moving ``nodes`` from cluster ``src`` to ``dst`` breaks no constraint."""
        p = self.p
        left = self.size[src] - len(nodes)
        if 0 < left < p.min_size:
            return False
        if p.max_size is not None and self.size[dst] + len(nodes) > p.max_size:
            return False
        a = self.a
        if any(a[w] == dst for v in nodes for w in self.never.get(v, ())):
            return False
        if p.max_const_bytes is not None:
            members = [v for v in range(len(a)) if a[v] == dst] + nodes
            if cluster_const_bytes(p.graph, members) > p.max_const_bytes:
                return False
        return True

    def _try(self, nodes: list[int], src: int, dst: int) -> bool:
        """Move ``nodes`` from ``src`` to ``dst`` when allowed and better; True when moved."""
        if not self._allowed(nodes, src, dst):
            return False
        ptr, touch = self.touch_ptr, self.touch
        tensors = sorted({t for v in nodes for t in touch[ptr[v]:ptr[v + 1]]})
        before = self.cost(tensors)
        for v in nodes:
            self.a[v] = dst
        after = self.cost(tensors)
        emptied = self.size[src] == len(nodes)
        if after < before or (after == before and emptied):
            self.size[src] -= len(nodes)
            self.size[dst] += len(nodes)
            return True
        for v in nodes:
            self.a[v] = src
        return False
