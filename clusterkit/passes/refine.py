"""Refine: move closed node sets between adjacent clusters of one device while the cut drops.

For two clusters ``P`` and ``C`` of one accelerator, the *down set* of ``P`` towards ``C`` is
the set of nodes of ``P`` whose every successor lies in ``C`` or in the set itself; the *up set*
of ``C`` towards ``P`` is the set of nodes of ``C`` whose every predecessor lies in ``P`` or in
the set. Moving a down set from ``P`` into ``C`` (or an up set from ``C`` into ``P``) keeps the
cluster graph acyclic: a new cycle would need a path from ``C`` back to ``P``, which together with
the edge ``P -> C`` is a cycle of the partition before the move. The same holds for each weakly
connected piece of such a set, which is closed in the same way.

A move is made when it breaks no constraint (selector-refused or must-cut edge inside the
receiving cluster, never-together pair, together group, size and constant-byte limits), leaves
both clusters acceptable to their device (:mod:`clusterkit.constraints.acceptance`) and it
lowers ``cut_bytes`` (or keeps it and empties a cluster); its effect on the cut is counted on the
tensors the moved nodes produce or read only. Passes repeat while a move is made, at most
:data:`PASSES` times; every order is by node or cluster id, so the result is deterministic. A
candidate refused in an earlier pass is tried again only once a move has changed one of its two
clusters or the cluster of a node that makes or reads a tensor of its nodes (all that its limits,
acceptance and cut read), so a pass tries only where the cut can now drop. The partition's
fallback nodes never change and its partitions never grow.
"""

from __future__ import annotations

import numpy as np

from clusterkit.constraints.acceptance import acceptance
from clusterkit.constraints.core import Problem
from clusterkit.constraints.limits import cluster_const_bytes
from clusterkit.graph.algorithms import int_lists
from clusterkit.result.model import Partition

#: passes over all candidate moves at most
PASSES = 8
NONE = -2  # no single cluster (down or up set)


def refine(partition: Partition) -> Partition:
    """``partition`` with down and up sets moved while the cut drops (see the module docstring);
    ``partition`` itself when no move is made, else a new partition with its metadata."""
    fb = partition.problem.fallback
    if sum(c.device != fb for c in partition.clusters) < 2:  # no pair to move between
        return partition
    mover = _Mover(partition)
    moved = 0
    for _ in range(PASSES):
        made = mover.run_pass()
        moved += made
        if not made:
            break
    if not moved:
        return partition
    devices = np.asarray(mover.cluster_device, dtype=np.int64)[mover.cluster_of]
    return partition.derive(mover.cluster_of, devices, info={"refine_moves": moved})


class _Mover:
    """Cluster per node (``cluster_of``), device per cluster (``cluster_device``), the members
    of each cluster, and the tensor lists for the cut."""

    def __init__(self, partition: Partition):
        p: Problem = partition.problem
        g = p.graph
        self.problem = p
        self.cluster_of: list[int] = partition.assignment().tolist()
        self.cluster_device = partition.device_indices().tolist()
        self.size = [len(c.nodes) for c in partition.clusters]
        self.members = {k: list(c.nodes) for k, c in enumerate(partition.clusters)
                        if self.cluster_device[k] >= 0}
        self.down = [NONE] * g.n  # per node its down set's cluster (NONE: none)
        self.up = [NONE] * g.n
        self.sets: dict[int, dict[tuple[int, int], list[int]]] = {}  # per cluster
        self.dirty = set(self.members)  # clusters whose sets are out of date
        self.moves = 0  # moves made so far
        # per cluster the move that last changed what a move between it and another reads
        # (its members, or the cluster of a node sharing a tensor with them), and per
        # candidate (from, to) the move count when its set and pieces were all refused
        self.changed_at: dict[int, int] = {}
        self.refused_at: dict[tuple[int, int], int] = {}
        inner = ~np.asarray(p.must_cut, dtype=bool)
        ok = [np.asarray(p.edge_ok[d], dtype=bool) & inner for d in range(len(p.devices))]
        self.inner_ok = [o.tolist() for o in ok]  # per device, by edge
        self.inner_ok_pred = [o[g.pred_edge].tolist() for o in ok]  # by predecessor slot
        self.movable = (np.asarray(p.group_of) < 0).tolist()
        self.never: dict[int, list[int]] = {}
        for u, v in p.never_pairs.tolist():
            self.never.setdefault(u, []).append(v)
            self.never.setdefault(v, []).append(u)
        self._lists(g)

    def _lists(self, g) -> None:
        """The plain lists the passes walk: the graph's successors and predecessors (CSR);
        per tensor its readers, producer, bytes (0 when folded) and output flag; per node the
        tensors it makes or reads, as index ranges (read as needed)."""
        tt = g.tensor_table
        nt = len(tt.nbytes)
        weight = np.where(tt.free, 0, tt.nbytes)
        # readers and touched tensors in any order per tensor and node (read as sets): the
        # unstable sorts, several times faster than stable ones
        by_tensor = np.argsort(tt.inc_tensor)
        self.nbytes = weight.tolist()
        self.is_output = (tt.is_output & ~tt.free).tolist()
        node = np.concatenate((tt.producer, tt.inc_node))
        ten = np.concatenate((np.arange(nt), tt.inc_tensor))
        keep = (node >= 0) & (weight[ten] > 0)
        node, ten = node[keep], ten[keep]
        by_node = np.argsort(node)
        # the adjacency, readers and touched tensors as lists sharing their int objects
        (self.succ_ptr, self.succ, self.pred_ptr, self.pred, self.read_ptr, self.readers,
         self.producer, self.touch_ptr, self.touch) = int_lists(
            g.succ_ptr, g.succ_idx, g.pred_ptr, g.pred_idx,
            np.searchsorted(tt.inc_tensor[by_tensor], np.arange(nt + 1)),
            tt.inc_node[by_tensor], tt.producer,
            np.searchsorted(node[by_node], np.arange(g.n + 1)), ten[by_node])

    def costs(self, tensors, moved: set[int], dst: int) -> tuple[int, int]:
        """The cut bytes of ``tensors`` under the current assignment and after the nodes
        ``moved`` (of one offloaded cluster) went to the offloaded cluster ``dst``, in one
        pass over the tensors' readers."""
        # bound locally: the hot loop of the refinement
        a, dev = self.cluster_of, self.cluster_device
        producer, readers, read_ptr = self.producer, self.readers, self.read_ptr
        nbytes, is_output = self.nbytes, self.is_output
        before = after = 0
        for t in tensors:
            u = producer[t]
            if u >= 0:
                c = a[u]
                unit_now = c if dev[c] >= 0 else -1
            else:
                unit_now = -1
            unit_then = dst if u in moved else unit_now
            now: set[int] = set()
            then: set[int] = set()
            for v in readers[read_ptr[t]:read_ptr[t + 1]]:
                c = a[v]
                c = c if dev[c] >= 0 else -1
                now.add(c)
                then.add(dst if v in moved else c)
            now.discard(unit_now)
            then.discard(unit_then)
            size, out = nbytes[t], is_output[t]
            before += size * (len(now) + (out and unit_now != -1))
            after += size * (len(then) + (out and unit_then != -1))
        return before, after

    def run_pass(self) -> int:
        """One pass: every candidate set (whole, then by pieces) between clusters not changed
        yet in this pass; the number of moves made."""
        touched: set[int] = set()
        made = 0
        changed_at, refused_at = self.changed_at, self.refused_at
        for (src, dst), nodes in self._candidates():
            if src in touched or dst in touched:
                continue
            when = refused_at.get((src, dst))
            if when is not None and changed_at.get(src, -1) <= when \
                    and changed_at.get(dst, -1) <= when:
                continue  # refused, and nothing it reads has changed since: refused again
            if self._try(nodes, src, dst):
                touched.update((src, dst))
                made += 1
                continue
            before = made  # the whole set refused (nothing changed): each of its pieces
            for piece in self._pieces(nodes) if len(nodes) > 1 else []:
                if self._try(piece, src, dst):
                    touched.update((src, dst))
                    made += 1
            if made == before:
                refused_at[(src, dst)] = self.moves
        return made

    def _candidates(self) -> list[tuple[tuple[int, int], list[int]]]:
        """Down sets then up sets, as ((from cluster, to cluster), nodes), by cluster ids;
        made again for the clusters a move may have changed."""
        for x in sorted(self.dirty):
            if x in self.members:
                self.sets[x] = self._cluster_sets(x)
        self.dirty.clear()
        return sorted(item for sets in self.sets.values() for item in sets.items())

    def _cluster_sets(self, x: int) -> dict[tuple[int, int], list[int]]:
        """The down and up sets of cluster ``x``, by the cluster they would move to."""
        sets: dict[tuple[int, int], list[int]] = {}
        nodes = self.members[x]
        for v, t in self._marks(x, reversed(nodes), self.succ_ptr, self.succ, self.down,
                                self.inner_ok):
            sets.setdefault((x, t), []).append(v)
        for v, t in self._marks(x, nodes, self.pred_ptr, self.pred, self.up, self.inner_ok_pred):
            sets.setdefault((x, t), []).append(v)
        return {k: sorted(v) for k, v in sets.items()}

    def _marks(self, x: int, nodes, ptr: list[int], nbr: list[int], mark: list[int],
               ok_by_dev: list[list[bool]]) -> list[tuple[int, int]]:
        """For each of ``nodes`` of cluster ``x`` (neighbours along ``ptr``/``nbr`` first) the
        one other cluster of its device that every neighbour lies in or leads to through
        ``mark`` (NONE when there is none, then left out of the list), stored in ``mark``
        (``ok_by_dev``: per device, whether each ``nbr`` slot's edge may lie inside it)."""
        # bound locally for the loop below
        a, dev, movable = self.cluster_of, self.cluster_device, self.movable
        d = dev[x]
        ok = ok_by_dev[d]
        out = []
        for v in nodes:
            want = NONE
            lo, hi = ptr[v], ptr[v + 1]
            if movable[v] and lo < hi:
                for i in range(lo, hi):
                    w = nbr[i]
                    c = a[w]
                    if c == x:
                        got = mark[w]
                    elif ok[i] and dev[c] == d:
                        got = c
                    else:
                        want = NONE
                        break
                    if got == NONE or (want != NONE and got != want):
                        want = NONE
                        break
                    want = got
            mark[v] = want
            if want != NONE:
                out.append((v, want))
        return out

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
        p, d = self.problem, self.cluster_device[dst]
        lim = p.limits  # the device's limits (the global ones, or its own when tighter)
        left = self.size[src] - len(nodes)
        if 0 < left < lim.min_nodes[d]:
            return False
        if lim.max_nodes[d] is not None and self.size[dst] + len(nodes) > lim.max_nodes[d]:
            return False
        a = self.cluster_of
        if any(a[w] == dst for v in nodes for w in self.never.get(v, ())):
            return False
        if lim.max_const[d] is not None:
            members = [v for v in range(len(a)) if a[v] == dst] + nodes
            if cluster_const_bytes(p.graph, members) > lim.max_const[d]:
                return False
        return self._acceptable(nodes, src, dst)

    def _acceptable(self, nodes: list[int], src: int, dst: int) -> bool:
        """Whether both clusters stay acceptable to their device after the move (see
        :mod:`clusterkit.constraints.acceptance`; free for a device it vouches for)."""
        acc, d = acceptance(self.problem), self.cluster_device[dst]
        if acc.plain(d):
            return True
        moved = set(nodes)
        left = [v for v in self.members[src] if v not in moved]
        return (acc.ok(sorted(self.members[dst] + nodes), d)
                and (not left or acc.ok(left, d)))

    def _try(self, nodes: list[int], src: int, dst: int) -> bool:
        """Move ``nodes`` from ``src`` to ``dst`` when allowed and better; True when moved."""
        if not self._allowed(nodes, src, dst):
            return False
        ptr, touch = self.touch_ptr, self.touch
        tensors = {t for v in nodes for t in touch[ptr[v]:ptr[v + 1]]}
        before, after = self.costs(tensors, set(nodes), dst)
        emptied = self.size[src] == len(nodes)
        if after < before or (after == before and emptied):
            for v in nodes:
                self.cluster_of[v] = dst
            self._moved(nodes, src, dst)
            return True
        return False

    def _moved(self, nodes: list[int], src: int, dst: int) -> None:
        """Book-keeping after ``nodes`` went from ``src`` to ``dst``: sizes, members, and the
        clusters whose sets may have changed (both, and those of the nodes' neighbours)."""
        a = self.cluster_of
        self.size[src] -= len(nodes)
        self.size[dst] += len(nodes)
        self.members[dst] = sorted(self.members[dst] + nodes)
        self.members[src] = [v for v in self.members[src] if a[v] == src]
        if not self.members[src]:
            del self.members[src]
            self.sets.pop(src, None)
        near = {src, dst}  # this move's: both ends and the neighbours' clusters
        for v in nodes:
            for ptr, nbr in ((self.succ_ptr, self.succ), (self.pred_ptr, self.pred)):
                near.update(a[w] for w in nbr[ptr[v]:ptr[v + 1]])
        self.dirty |= near
        self._changed(nodes, near)

    def _changed(self, nodes: list[int], near: set[int]) -> None:
        """Stamp with this move the clusters whose candidate moves may now end otherwise: the
        ``near`` ones (both ends and the neighbours' clusters) and the clusters of every node
        making or reading a tensor the moved ``nodes`` make or read (a move's cut counts
        exactly those tensors, its limits and acceptance only its two clusters)."""
        self.moves += 1
        a, producer = self.cluster_of, self.producer  # bound locally for the loop below
        readers, read_ptr = self.readers, self.read_ptr
        ptr, touch = self.touch_ptr, self.touch
        hit = near
        for v in nodes:
            for t in touch[ptr[v]:ptr[v + 1]]:
                u = producer[t]
                if u >= 0:
                    hit.add(a[u])
                hit.update(a[r] for r in readers[read_ptr[t]:read_ptr[t + 1]])
        stamp, changed_at = self.moves, self.changed_at
        for c in hit:
            changed_at[c] = stamp
