"""Strategy ``hetero``: OpenVINO HETERO's affinity and subgraph selection.

1. Affinity (:mod:`clusterkit.affinity`): the fallback policy puts each node on the first device,
   in priority order, whose query takes it; manual affinities (node attributes, rules) replace
   the policy unless ``fill_affinity`` asks it to place the remaining nodes.
2. Subgraph selection, device by device in priority order, exactly as the HETERO design notes
   describe (``seeds/openvino-hetero-subgraph-selection.txt``):

   - a *round* picks roots in topological order among the device's nodes not yet taken and not
     in a subgraph built earlier in the round; from each root a subgraph grows through adjacent
     nodes (depth first, successors before predecessors, smaller index first) keeping a rejected
     list: a node of another affinity, already taken, or breaking a constraint is rejected;
   - after every step the global condition is checked — no rejected node on a path between two
     members (:class:`~clusterkit.reach.GrowthTracker`, no transitive closure); while it fails
     the last added node is rolled back onto the rejected list;
   - the largest subgraph of the round is kept (the first built among equals), its nodes are
     taken, and rounds repeat until the device has no nodes left.

   Growth never leaves a weakly connected component of the device's remaining nodes and reads
   nothing outside the members and the rejected list, so components are processed independently
   and a subgraph grown in one round is reused in the next unless the kept subgraph touched its
   members or rejected list: the result is the same as re-running every round.
3. Constraints act during growth: must-cut edges and edges a selector refuses are never taken
   inside, never-together nodes, ``max_size`` and ``max_const_bytes`` reject the node; together
   groups are grown as one unit. Clusters that depend on each other through other clusters (the
   design notes only check one subgraph at a time) are split by :func:`~clusterkit.reach.
   break_cycles`; clusters below ``min_size`` go back to the fallback.

``info["placement"]`` is the placement report, ``info["hetero"]`` counts rounds, growths and
rollbacks, ``info["affinity"]`` the affinity mode and the nodes whose device differs from their
affinity; ``trace=True`` adds ``info["trace"]``, the seed's step list (root, merge, reject,
rollback, subgraph, select).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from ..affinity import Affinity, compute_affinity, resolve_device
from ..constraints import Problem
from ..partition import Partition
from ..reach import GrowthState, GrowthTracker, Piece, UnitGraph, break_cycles
from ..report import CONSTRAINT, CYCLE, Reason, placement
from .common import enforce_min_size


def run(problem: Problem, affinity: Iterable[str] | None = None, fill_affinity: bool = False,
        trace: bool = False) -> Partition:
    """OpenVINO HETERO partitioning. ``affinity``: manual rules (``NAME=DEVICE``,
    ``re:REGEX=DEVICE``, ``I-J=DEVICE``); ``fill_affinity``: with manual affinities, place the
    other nodes by the fallback policy instead of sending them to the fallback; ``trace``:
    record the selection steps in ``info["trace"]``."""
    aff, ug, sel, reasons = _select(problem, affinity, fill_affinity, trace)
    pieces, split = break_cycles(ug, sel.pieces)
    labels, devices = ug.node_labels(pieces)
    placed = devices.copy()
    devices = enforce_min_size(problem, labels, devices)
    rolled_nodes = set(ug.nodes_of(sel.rolled_back))
    split_nodes = set(ug.nodes_of([u for p in pieces if p.tag.get("split") for u in p.units]))
    sizes = np.bincount(labels)
    for v in np.flatnonzero((placed >= 0) & (devices < 0)).tolist():
        size = int(sizes[labels[v]])
        if v in rolled_nodes or v in split_nodes:
            why = ("rolled back for a self-reference" if v in rolled_nodes else
                   "its cluster was split to break a cycle between clusters")
            reasons[v] = (CYCLE, f"{why}; the {size}-node cluster it ended in is below "
                          f"min_size {problem.min_size}")
        else:
            reasons[v] = (CONSTRAINT, f"its {size}-node cluster on "
                          f"{problem.devices[int(placed[v])]} is below min_size "
                          f"{problem.min_size}")
    part = Partition.from_assignment(problem, labels, devices, strategy="hetero")
    part.info["placement"] = placement(part, reasons)
    part.info["hetero"] = {"rounds": sel.rounds, "growths": sel.growths,
                           "reused_growths": sel.reused, "rollbacks": sel.rollbacks,
                           "clusters_split_for_cycles": split}
    part.info["affinity"] = _affinity_info(problem, aff, devices)
    if trace:
        part.info["trace"] = sel.trace
    return part


def subgraphs(problem: Problem, affinity: Iterable[str] | None = None,
              fill_affinity: bool = False) -> list[tuple[str, list[int]]]:
    """The subgraphs HETERO selects, in selection order, as ``(device, node ids)`` — before
    clusters that depend on each other are split and before ``min_size``."""
    _, ug, sel, _ = _select(problem, affinity, fill_affinity, False)
    return [(problem.devices[p.device], ug.nodes_of(p.units)) for p in sel.pieces]


def _select(problem: Problem, affinity: Iterable[str] | None, fill_affinity: bool,
            trace: bool) -> tuple[Affinity, UnitGraph, "_Selector", dict[int, Reason]]:
    aff = compute_affinity(problem, list(affinity or ()), fill=fill_affinity)
    ug = UnitGraph(problem)
    unit_aff, reasons = _unit_affinity(problem, ug, aff)
    sel = _Selector(problem, ug, unit_aff, trace)
    for d in range(len(problem.devices)):
        sel.run_device(d)
    return aff, ug, sel, reasons


def _affinity_info(problem: Problem, aff: Affinity, devices: np.ndarray) -> dict:
    """Mode, manual count, and ``{source index: affinity}`` for the nodes not placed on their
    affinity (the device a manual affinity asked for, else the policy's choice)."""
    names = list(problem.devices) + [problem.fallback]
    src = problem.graph.index_to_source.tolist()
    wanted = aff.device.copy()
    for v, req in enumerate(aff.requested):
        if req is not None:
            wanted[v] = resolve_device(problem, req, "affinity")
    diff = {str(src[v]): names[int(wanted[v])]
            for v in np.flatnonzero(wanted != devices).tolist()}
    return {"mode": aff.mode, "manual_nodes": aff.manual_count, "differs_from_placement": diff}


def _unit_affinity(problem: Problem, ug: UnitGraph, aff: Affinity
                   ) -> tuple[list[int], dict[int, Reason]]:
    """Device per unit. A together group whose members ask for different devices (or for one
    that cannot take the whole group) goes to the first device a member asked for that can,
    else (without manual-only mode) the first device in priority order that can, else the
    fallback."""
    reasons: dict[int, Reason] = dict(aff.reasons)
    ndev = len(problem.devices)
    dev = aff.device.tolist()
    out = [-1] * ug.n
    for u in range(ug.n):
        mem = ug.members[u]
        if len(mem) == 1:
            d = dev[mem[0]]
            if d >= 0 and not ug.feasible[d][u]:
                reasons[mem[0]] = (CONSTRAINT, f"{problem.devices[d]} cannot take it alone")
                d = -1
            out[u] = d
            continue
        wanted = {dev[v] for v in mem}
        if len(wanted) == 1:
            d = next(iter(wanted))
            if d < 0 or ug.feasible[d][u]:
                out[u] = d
                continue
        cands = []
        for v in mem:
            req = aff.requested[v]
            if req is not None:
                name = problem.graph.nodes[v].name
                d = resolve_device(problem, req, f"affinity of node {name!r}")
                if d >= 0 and ug.feasible[d][u] and d not in cands:
                    cands.append(d)
        if not cands and aff.mode != "manual":
            cands = [d for d in range(ndev) if ug.feasible[d][u]]
        pick = cands[0] if cands else -1
        out[u] = pick
        gi = int(problem.group_of[mem[0]])
        if pick < 0:
            for v in mem:
                reasons[v] = (CONSTRAINT, f"together group {gi}: no device its members ask for "
                              "can take the whole group")
    return out, reasons


@dataclass
class _Growth:
    root: int
    members: list[int]
    size: int
    rolled: list[int]


class _Selector:
    """Rounds of growth per device (see the module docstring)."""

    def __init__(self, problem: Problem, ug: UnitGraph, unit_aff: list[int], trace: bool):
        self.problem = problem
        self.ug = ug
        self.aff = unit_aff
        self.tracker = GrowthTracker(ug)
        self.taken = [False] * ug.n
        self.pieces: list[Piece] = []
        self.rolled_back: list[int] = []
        self.trace: list | None = [] if trace else None
        self.rounds = self.growths = self.reused = self.rollbacks = 0
        self._stamp = [0] * ug.n
        self._tick = 0
        names = [nd.name for nd in problem.graph.nodes]
        self._label = (lambda u: names[ug.members[u][0]] if len(ug.members[u]) == 1 else
                       "+".join(names[v] for v in ug.members[u]))

    # ------------------------------------------------------------------ rounds
    def run_device(self, d: int) -> None:
        """Select every subgraph of device ``d``."""
        avail = [u for u in self.ug.order if self.aff[u] == d and not self.taken[u]]
        for comp in self._components(avail):
            self._process(d, comp)

    def _components(self, units: list[int]) -> list[list[int]]:
        """Weakly connected components of ``units`` (rank-sorted), each rank-sorted, in order of
        their first unit."""
        self._tick += 1
        tick = self._tick
        stamp = self._stamp
        for u in units:
            stamp[u] = tick
        self._tick += 1
        seen = self._tick
        succ, pred, rank = self.ug.succ, self.ug.pred, self.ug.rank
        out = []
        for u in units:
            if stamp[u] != tick:
                continue
            stamp[u] = seen
            comp = [u]
            stack = [u]
            while stack:
                x = stack.pop()
                for w in succ[x]:
                    if stamp[w] == tick:
                        stamp[w] = seen
                        comp.append(w)
                        stack.append(w)
                for w in pred[x]:
                    if stamp[w] == tick:
                        stamp[w] = seen
                        comp.append(w)
                        stack.append(w)
            comp.sort(key=rank.__getitem__)
            out.append(comp)
        return out

    def _process(self, d: int, comp: list[int]) -> None:
        rank = self.ug.rank
        work = [(rank[comp[0]], comp)]
        cache: dict[int, _Growth] = {}
        watch: dict[int, list[int]] = {}
        while work:
            _, K = heapq.heappop(work)
            if len(K) == 1:
                g = (self._grow(d, K[0]) if self.trace is not None else
                     _Growth(K[0], K, self.ug.size[K[0]], []))
                self._finalize(d, g)
                continue
            self.rounds += 1
            self._tick += 1
            tick = self._tick
            stamp = self._stamp
            best: _Growth | None = None
            for r in K:
                if stamp[r] == tick:
                    continue
                g = cache.get(r)
                if g is None:
                    g = self._grow(d, r)
                    cache[r] = g
                    for u in self._watched(d, g):
                        watch.setdefault(u, []).append(r)
                else:
                    self.reused += 1
                    if self.trace is not None:
                        self.trace.append(("reuse", self._names(g.members)))
                for u in g.members:
                    stamp[u] = tick
                if best is None or g.size > best.size:
                    best = g
            assert best is not None
            self._finalize(d, best)
            for u in best.members:
                for r in watch.pop(u, ()):
                    cache.pop(r, None)
            rest = [u for u in K if not self.taken[u]]
            for sub in self._components(rest):
                heapq.heappush(work, (rank[sub[0]], sub))

    def _watched(self, d: int, g: _Growth) -> list[int]:
        """Units whose state the growth read and that a later selection may take: members and
        rejected units of the device that were still free."""
        aff, taken = self.aff, self.taken
        out = list(g.members)
        out.extend(u for u in self.tracker.rejected if aff[u] == d and not taken[u])
        return out

    def _finalize(self, d: int, g: _Growth) -> None:
        ug = self.ug
        for u in g.members:
            self.taken[u] = True
        members = sorted(g.members, key=ug.rank.__getitem__)
        self.pieces.append(Piece(d, members))
        self.rolled_back.extend(g.rolled)
        if self.trace is not None:
            self.trace.append(("select", self.problem.devices[d], self._names(members)))

    def _names(self, units: list[int]) -> list[str]:
        return [self._label(u) for u in sorted(units, key=self.ug.rank.__getitem__)]

    # ------------------------------------------------------------------ one growth
    def _grow(self, d: int, root: int) -> _Growth:
        self.growths += 1
        ug, T = self.ug, self.tracker
        T.begin()
        gid = T.gid
        mem, rej = T.mem, T.rej
        succ, pred = ug.succ, ug.pred
        usize = ug.size
        tr = self.trace
        st = GrowthState(ug, d, self.problem.max_size, self.problem.max_const_bytes)
        if tr is not None:
            tr.append(("root", self.problem.devices[d], self._label(root)))
        st.add(root)
        T.add(root)
        stack: list[int] = []
        self._push(root, stack)
        while stack:
            v = stack.pop()
            if mem[v] == gid or rej[v] == gid:
                continue
            if not (any(mem[w] == gid for w in pred[v]) or any(mem[w] == gid for w in succ[v])):
                continue
            if self._acceptable(d, v, st, T):
                st.add(v)
                T.add(v)
                if tr is not None:
                    tr.append(("merge", self._label(v)))
                self._push(v, stack)
            else:
                T.reject(v)
                if tr is not None:
                    tr.append(("reject", self._label(v)))
            for x in T.settle():
                st.remove(x)
                self.rollbacks += 1
                if tr is not None:
                    tr.append(("rollback", self._label(x)))
        members = list(T.members)
        if tr is not None:
            tr.append(("subgraph", self._names(members)))
        return _Growth(root, members, sum(usize[u] for u in members), list(T.rolled))

    def _push(self, x: int, stack: list[int]) -> None:
        T = self.tracker
        gid, mem, rej = T.gid, T.mem, T.rej
        for w in reversed(self.ug.pred[x]):
            if mem[w] != gid and rej[w] != gid:
                stack.append(w)
        for w in reversed(self.ug.succ[x]):
            if mem[w] != gid and rej[w] != gid:
                stack.append(w)

    def _acceptable(self, d: int, v: int, st: GrowthState, T: GrowthTracker) -> bool:
        if self.aff[v] != d or self.taken[v]:
            return False
        return st.fits(v, T)
