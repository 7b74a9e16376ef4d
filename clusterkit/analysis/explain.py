"""Why two adjacent supported nodes ended in different clusters.

:func:`explain` gives one line per edge whose two ends some device supports but which the
partition cuts; :func:`explain_edge` gives the reason for one edge. Reasons, first match wins:

1. the edge itself is constrained (a required cut, a value input, a never-together pair);
2. the two nodes are on different devices (or one sits on the fallback, with the detail of the
   reason the engine recorded in ``Partition.fallback_reasons`` when there is one: a together
   group no device takes, the selector's ``filter``, ``min_size``, a manual affinity...);
3. the device's selector refuses to follow the edge;
4. merging the two clusters would break a constraint: a never-together pair across them, another
   edge between them that must be cut, a size or constant limit (global or the device's own,
   :class:`~clusterkit.constraints.limits.Limits`);
5. merging them would close a cycle: the path through an outside node is printed;
6. the merged cluster would not be acceptable to its device
   (:mod:`clusterkit.constraints.acceptance`);
7. otherwise nothing forbids the merge: the engine's order left them apart.
"""

from __future__ import annotations

import re
from collections import deque
from typing import Sequence

import numpy as np

from clusterkit.constraints.acceptance import acceptance
from clusterkit.constraints.core import CUT_EXPLICIT, CUT_VALUE, DEFAULT_VALUE_INPUTS
from clusterkit.graph.algorithms import quotient_edges, topological_order
from clusterkit.result.model import Partition

__all__ = ["explain", "explain_by_reason", "explain_edge", "reason_kind"]

#: the kind of each reason text :func:`explain` writes (first match wins), to group its lines
REASON_KINDS = [
    ("a required cut", re.compile(r"^the edge is a required cut")),
    ("a value input", re.compile(r"must know the value of")),
    ("a constraint cuts the edge", re.compile(r"^a constraint cuts the edge")),
    ("a never-together pair", re.compile(r"are a never-together pair$")),
    ("a node on the fallback", re.compile(r"is on the fallback")),
    ("different devices", re.compile(r"^they are on different devices")),
    ("the selector refuses the edge", re.compile(r"refuses to follow this edge")),
    ("merging: a never-together pair", re.compile(r"would put the never-together nodes")),
    ("merging: a value input inside", re.compile(r"would put the edge .* inside \(a value")),
    ("merging: a required cut inside", re.compile(r"would put the edge .* inside \(a requir")),
    ("merging: an edge the selector refuses", re.compile(r"would put the edge .* refuses it")),
    ("merging: a never-together edge inside", re.compile(r"would put the edge .* inside")),
    ("merging: max_size", re.compile(r"(would exceed|is above) max_size")),
    ("merging: a device's max_nodes", re.compile(r"is above \S+'s max_nodes")),
    ("merging: max_const_bytes", re.compile(r"above (\S+'s )?max_const_bytes")),
    ("merging: the device does not accept the merged cluster",
     re.compile(r"is not acceptable to its device")),
    ("merging: a cycle", re.compile(r"would close a cycle")),
    ("nothing forbids the merge", re.compile(r"^nothing forbids merging")),
]


def explain(partition: Partition, limit: int | None = None) -> list[str]:
    """One line per edge between two supported nodes (some device takes each) that lie in
    different clusters, in edge order: ``"A (Op) -> B (Op): reason"``. ``limit`` caps the
    number of lines."""
    ctx = _Context(partition)
    g = partition.graph
    sup = partition.problem.any_supported
    a = ctx.assign
    src, dst = g.edge_src, g.edge_dst
    split = np.flatnonzero((a[src] != a[dst]) & sup[src] & sup[dst])
    if limit is not None:
        split = split[:max(0, limit)]
    return [ctx.line(int(e)) for e in split.tolist()]


def reason_kind(line: str) -> str:
    """The kind (a key of :data:`REASON_KINDS`) of one line of :func:`explain`."""
    reason = line.split("): ", 1)[-1]
    return next((kind for kind, pattern in REASON_KINDS if pattern.search(reason)), "other")


def explain_by_reason(partition: Partition) -> dict[str, list[str]]:
    """Every line of :func:`explain`, grouped by :func:`reason_kind`, the most frequent kind
    first."""
    groups: dict[str, list[str]] = {}
    for line in explain(partition):
        groups.setdefault(reason_kind(line), []).append(line)
    return dict(sorted(groups.items(), key=lambda item: -len(item[1])))


def explain_edge(partition: Partition, u: int | str, v: int | str) -> str:
    """The reason for one edge ``u -> v`` (node indices or names)."""
    g = partition.graph
    ui, vi = g.node(u).index, g.node(v).index
    ctx = _Context(partition)
    e = g.edge_index(ui, vi)
    if ctx.assign[ui] == ctx.assign[vi]:
        return f"{ctx.label(ui)} -> {ctx.label(vi)}: both are in cluster " \
               f"{partition.clusters[ctx.assign[ui]].id}"
    return ctx.line(e)


class _Context:
    """Per-partition tables shared by the explanations of many edges."""

    def __init__(self, partition: Partition):
        self.part = partition
        self.p = partition.problem
        self.g = partition.graph
        self.assign = partition.assignment()
        self.names = [nd.name for nd in self.g.nodes]
        self.fallback = partition.fallback
        self.cdev = [c.device for c in partition.clusters]
        self.recorded = partition.fallback_reasons
        self.never = self.p.never_sets if len(self.p.never_pairs) else None
        self._cluster_succ: list[set[int]] | None = None
        self._corder: list[int] | None = None
        self._pair_cache: dict[tuple[int, int], str] = {}

    # ------------------------------------------------------------------ formatting
    def label(self, v: int) -> str:
        nd = self.g.nodes[v]
        return f"{nd.name} ({nd.op_type})"

    def cid(self, pos: int) -> int:
        return self.part.clusters[pos].id

    def line(self, e: int) -> str:
        u, v = int(self.g.edge_src[e]), int(self.g.edge_dst[e])
        return f"{self.label(u)} -> {self.label(v)}: {self.reason(e, u, v)}"

    # ------------------------------------------------------------------ reasons
    def reason(self, e: int, u: int, v: int) -> str:
        p, g = self.p, self.g
        if p.must_cut[e]:
            if p.cut_reason[e] == CUT_EXPLICIT:
                return "the edge is a required cut (a cut_edges constraint)"
            if p.cut_reason[e] == CUT_VALUE:
                op = g.nodes[v].op_type
                rule = p.constraints.value_inputs.get(op, DEFAULT_VALUE_INPUTS.get(op, ()))
                pos = [i for i, t in enumerate(g.nodes[v].inputs)
                       if t and g.tensors[t].producer == u]
                which = f"input {pos[0]}" if pos else "an input"
                return (f"{self.names[v]!r} ({op}) must know the value of {which} "
                        f"(value inputs {list(rule)}), which {self.names[u]!r} computes: the "
                        "producer must sit in another cluster")
            return "a constraint cuts the edge"
        if self.never is not None and v in self.never[u]:
            return f"{self.names[u]!r} and {self.names[v]!r} are a never-together pair"
        cu, cv = int(self.assign[u]), int(self.assign[v])
        du, dv = self.cdev[cu], self.cdev[cv]
        if du != dv or du == self.fallback:
            return self._device_reason(u, v, du, dv)
        d = p.device_index(du)
        if not p.edge_ok[d, e]:
            return f"the selector of {du!r} refuses to follow this edge"
        key = (cu, cv)
        if key not in self._pair_cache:
            self._pair_cache[key] = self._merge_reason(cu, cv, d)
        return self._pair_cache[key]

    def _device_reason(self, u: int, v: int, du: str, dv: str) -> str:
        parts = []
        for x, dx in ((u, du), (v, dv)):
            if dx != self.fallback:
                continue
            takers = [self.p.devices[d] for d in range(len(self.p.devices))
                      if self.p.supported[d, x]]
            why = self.recorded.get(x)
            parts.append(f"{self.names[x]!r} is on the fallback {self.fallback!r} although "
                         f"{', '.join(map(repr, takers))} takes it"
                         + (f" ({why.detail})" if why else ""))
        if parts:
            return "; ".join(parts)
        return (f"they are on different devices: {self.names[u]!r} on {du!r}, "
                f"{self.names[v]!r} on {dv!r} (each node goes to the first device in priority "
                "order that takes it)")

    def _merge_reason(self, cu: int, cv: int, d: int) -> str:
        p = self.p
        A = self.part.clusters[cu].nodes
        B = self.part.clusters[cv].nodes
        if self.never is not None:
            inB = set(B)
            for x in A:
                hit = sorted(self.never[x] & inB)
                if hit:
                    return (f"merging clusters {self.cid(cu)} and {self.cid(cv)} would put the "
                            f"never-together nodes {self.names[x]!r} and {self.names[hit[0]]!r} "
                            "in one cluster")
        bad = self._forbidden_between(A, B, d)
        if bad is not None:
            x, y, why = bad
            return (f"merging clusters {self.cid(cu)} and {self.cid(cv)} would put the edge "
                    f"{self.names[x]!r} -> {self.names[y]!r} inside ({why})")
        broken = p.limits.violation(list(A) + list(B), d, minimum=False)
        if broken is not None:  # the global limit or the device's own, named
            return (f"merging clusters {self.cid(cu)} ({len(A)} nodes) and {self.cid(cv)} "
                    f"({len(B)} nodes) would break a limit: {broken.replace('its ', '', 1)}")
        path = self._cycle_path(cu, cv)
        if path is not None:
            hops = " -> ".join(f"{self.names[x]!r}" for x in path)
            outside = path[1]
            return (f"merging clusters {self.cid(cu)} and {self.cid(cv)} would close a cycle: "
                    f"the path {hops} leaves the merged cluster at {self.names[path[0]]!r} and "
                    f"re-enters it through outside node {self.names[outside]!r} "
                    f"(cluster {self.cid(int(self.assign[outside]))})")
        acc = acceptance(p)
        why = None if acc.plain(d) else acc.verdict(sorted(list(A) + list(B)), d)
        if why is not None:
            return (f"the merged cluster of {self.cid(cu)} and {self.cid(cv)} is not acceptable "
                    f"to its device: {why}")
        return (f"nothing forbids merging clusters {self.cid(cu)} and {self.cid(cv)}; the "
                f"strategy {self.part.strategy!r} left them apart")

    def _forbidden_between(self, A: Sequence[int], B: Sequence[int], d: int):
        p, g = self.p, self.g
        inA, inB = set(A), set(B)
        succ = g.succ_lists
        for x, ys in ((x, succ[x]) for x in sorted(inA | inB)):
            for y in ys:
                if not ((x in inA and y in inB) or (x in inB and y in inA)):
                    continue
                e = g.edge_index(x, y)
                if p.must_cut[e]:
                    return x, y, ("a required cut" if p.cut_reason[e] == CUT_EXPLICIT
                                  else "a value input")
                if not p.edge_ok[d, e]:
                    return x, y, f"the selector of {self.cdev[int(self.assign[x])]!r} refuses it"
                if self.never is not None and y in self.never[x]:
                    return x, y, "a never-together pair"
        return None

    # ------------------------------------------------------------------ cycles
    def _cluster_graph(self) -> None:
        """Successor sets of the cluster graph and each cluster's rank in a topological order."""
        k = len(self.part.clusters)
        csrc, cdst = quotient_edges(self.assign, self.g.edge_src, self.g.edge_dst)
        succ: list[set[int]] = [set() for _ in range(k)]
        for x, y in zip(csrc.tolist(), cdst.tolist()):
            succ[x].add(y)
        order = [0] * k
        for r, c in enumerate(topological_order(k, csrc, cdst)):
            order[c] = r
        self._cluster_succ, self._corder = succ, order

    def _cycle_path(self, cu: int, cv: int) -> list[int] | None:
        """A node path from cluster ``cu`` to cluster ``cv`` through another cluster."""
        if self._cluster_succ is None:
            self._cluster_graph()
        succ, order = self._cluster_succ, self._corder
        assert succ is not None and order is not None  # built by _cluster_graph
        bound = order[cv]
        stack = [c for c in succ[cu] if c != cv and order[c] < bound]
        seen = set(stack)
        found = False
        while stack and not found:
            c = stack.pop()
            for y in succ[c]:
                if y == cv:
                    found = True
                    break
                if y not in seen and order[y] < bound and y != cu:
                    seen.add(y)
                    stack.append(y)
        if not found:
            return None
        return self._node_path(cu, cv)

    def _node_path(self, cu: int, cv: int) -> list[int] | None:
        a = self.assign
        succ = self.g.succ_lists
        hi = max(self.part.clusters[cv].nodes)
        parent: dict[int, int] = {}
        queue: deque[int] = deque()
        for x in self.part.clusters[cu].nodes:
            for y in succ[x]:
                if a[y] != cu and a[y] != cv and y not in parent and y <= hi:
                    parent[y] = x
                    queue.append(y)
        while queue:
            x = queue.popleft()
            for y in succ[x]:
                if a[y] == cv:
                    path = [y, x]
                    while path[-1] in parent:
                        path.append(parent[path[-1]])
                    return path[::-1]
                if a[y] != cu and y not in parent and y <= hi:
                    parent[y] = x
                    queue.append(y)
        return None
