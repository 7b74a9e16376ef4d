"""Strategy ``mxnet``: MXNet's ``PartitionGraph`` pass (``seeds/mxnet-subgraph-api-proposal.txt``).

For each property (device) in priority order, and each node in topological order that is not
taken yet and that a fresh selector ``select``\\ s (the seed):

1. candidates grow breadth first from the seed: for each candidate, its producers are offered to
   ``select_input`` and then its consumers to ``select_output``. Nodes already taken or not
   supported by the device can never join (they are *outside* from the start); a neighbour
   joined through an edge that must be cut or that the device refuses, that would break
   never-together, ``max_size`` or ``max_const_bytes``, or that the selector refuses, becomes
   outside for the rest of this growth (with a stateless selector it would be refused again
   through any other edge).
2. A candidate that would put an outside node on a path between two candidates (a cycle once
   the subgraph is fused) is dropped at once; when a node refused later turns out to lie
   between two candidates, the set shrinks — the most recently selected candidates are dropped
   (and become outside) until no outside node lies between two candidates
   (:class:`~clusterkit.engines.growth.GrowthTracker`; MXNet excludes the offending nodes and retries
   the growth). Every drop is recorded in ``info["mxnet"]["cycle_drops"]`` with its reason.
3. ``filter`` prunes the candidates (a together group stays only if all of it is kept); if what
   is left is no longer convex, the part from the first re-entered node on (by rank) is dropped.
4. ``create_subgraph_node`` builds the fused node; ``None`` rejects the subgraph and its nodes go
   back: later seeds and later devices may take them.

As in MXNet, each candidate set's cycle check looks at the original graph; subgraphs that end up
depending on each other through other subgraphs are split afterwards
(:func:`~clusterkit.engines.cycle_repair.break_cycles`), and clusters below ``min_size`` go to the fallback.
``info["placement"]`` holds the placement report.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from clusterkit.constraints.core import Problem
from clusterkit.result import Partition
from clusterkit.engines.cycle_repair import break_cycles
from clusterkit.engines.growth import GrowthState, GrowthTracker, Piece
from clusterkit.engines.units import UnitGraph, first_reentry
from clusterkit.analysis.report import (CONSTRAINT, CYCLE, SELECTOR_CONDITION, SUBGRAPH_REJECTED, Reason,
                      placement)
from clusterkit.selection.protocol import (call_create_subgraph_node, call_filter, call_select, call_select_input,
                        call_select_output)
from clusterkit.graph.subgraph import Subgraph
from clusterkit.engines.common import enforce_min_size

MAX_RECORDED_DROPS = 1000
MAX_NAMES_PER_DROP = 20


def subgraphs(problem: Problem) -> list[tuple[str, list[int]]]:
    """The subgraphs the passes create, in order, as ``(device, node ids)`` — before subgraphs
    that depend on each other are split and before ``min_size``."""
    ug = UnitGraph(problem)
    part = _MXNet(problem, ug)
    for d in range(len(problem.devices)):
        part.apply(d)
    return [(problem.devices[p.device], ug.nodes_of(p.units)) for p in part.pieces]


def run(problem: Problem) -> Partition:
    """MXNet ``PartitionGraph`` with the problem's properties applied in priority order."""
    ug = UnitGraph(problem)
    part = _MXNet(problem, ug)
    for d in range(len(problem.devices)):
        part.apply(d)
    pieces, split = break_cycles(ug, part.pieces)
    labels, devices = ug.node_labels(pieces)
    placed = devices.copy()
    devices = enforce_min_size(problem, labels, devices)
    reasons: dict[int, Reason] = {}
    for u, why in part.reasons.items():
        if not part.taken[u]:
            for v in ug.members[u]:
                reasons[v] = why
    split_nodes = set(ug.nodes_of([u for p in pieces if p.tag.get("split") for u in p.units]))
    sizes = np.bincount(labels)
    for v in np.flatnonzero((placed >= 0) & (devices < 0)).tolist():
        size = int(sizes[labels[v]])
        if v in split_nodes or int(ug.unit_of[v]) in part.cycle_units:
            reasons[v] = (CYCLE, f"dropped from a subgraph to avoid a cycle; the {size}-node "
                          f"cluster it ended in is below min_size {problem.min_size}")
        else:
            reasons[v] = (CONSTRAINT, f"its {size}-node cluster on "
                          f"{problem.devices[int(placed[v])]} is below min_size "
                          f"{problem.min_size}")
    result = Partition.from_assignment(problem, labels, devices, strategy="mxnet")
    result.info["placement"] = placement(result, reasons)
    result.info["mxnet"] = {"seeds": part.seeds, "rejected_subgraphs": part.rejected,
                            "cycle_drops": part.drops, "cycle_drop_events": part.drop_events,
                            "nodes_dropped_for_cycles": part.dropped_total,
                            "clusters_split_for_cycles": split}
    return result


class _MXNet:
    def __init__(self, problem: Problem, ug: UnitGraph):
        self.problem = problem
        self.ug = ug
        self.graph = problem.graph
        self.tracker = GrowthTracker(ug)
        self.taken = [False] * ug.n
        self.pieces: list[Piece] = []
        self.reasons: dict[int, Reason] = {}
        self.cycle_units: set[int] = set()
        self.drops: list[dict] = []
        self.drop_events = self.dropped_total = 0
        self.seeds = self.rejected = 0
        self.blocked: list[bool] = []

    def _name(self, u: int) -> str:
        nodes = self.graph.nodes
        return "+".join(nodes[v].name for v in self.ug.members[u])

    def apply(self, d: int) -> None:
        """One PartitionGraph pass with property ``d``."""
        p = self.problem
        prop = p.properties[d]
        dev = p.devices[d]
        ug, nodes = self.ug, self.graph.nodes
        feas = ug.feasible[d]
        # units that can never join a subgraph of this device: checked eagerly
        self.blocked = [not f or t for f, t in zip(feas, self.taken)]
        for seed in ug.order:
            if self.taken[seed] or not feas[seed]:
                continue
            sel = prop.create_subgraph_selector()
            if not call_select(sel, nodes[ug.members[seed][0]]):
                self.reasons.setdefault(seed, (SELECTOR_CONDITION,
                                               f"{dev}'s selector does not select it"))
                continue
            self.seeds += 1
            cand = self._grow(d, sel, seed)
            kept = self._filter(sel, cand, dev)
            if not kept:
                continue
            node_ids = ug.nodes_of(kept)
            sub = Subgraph.from_nodes(self.graph, node_ids, dev, len(self.pieces))
            fused = call_create_subgraph_node(
                prop, sub, f"the subgraph seeded at node {self._name(seed)!r}")
            if fused is None:
                self.rejected += 1
                for u in kept:
                    self.reasons[u] = (SUBGRAPH_REJECTED, f"{dev}'s create_subgraph_node "
                                       f"rejected its {len(node_ids)}-node subgraph")
                continue
            for u in kept:
                self.taken[u] = True
                self.blocked[u] = True
            self.pieces.append(Piece(d, sorted(kept, key=ug.rank.__getitem__)))

    # ------------------------------------------------------------------ steps
    def _grow(self, d: int, sel, seed: int) -> list[int]:
        """Breadth-first candidate selection from ``seed`` with cycle shrinking."""
        ug, nodes, T = self.ug, self.graph.nodes, self.tracker
        blocked = self.blocked
        p = self.problem
        st = GrowthState(ug, d, p.max_size, p.max_const_bytes)
        T.begin(blocked)
        gid, mem, rej = T.gid, T.mem, T.rej
        T.add(seed)
        st.add(seed)
        dropped: list[int] = []
        queue = deque([seed])

        def offer(w: int, ask) -> None:
            if st.fits(w, T) and ask():
                T.add(w)
                st.add(w)
                queue.append(w)
            else:
                T.reject(w)
            for x in T.settle():
                st.remove(x)
                dropped.append(x)

        while queue:
            u = queue.popleft()
            if mem[u] != gid:
                continue
            for w, e in zip(ug.pred[u], ug.pred_e[u]):
                if mem[w] == gid or rej[w] == gid or blocked[w]:
                    continue
                a, b = ug.edge_nodes[e]
                offer(w, lambda: call_select_input(sel, nodes[b], nodes[a]))
                if mem[u] != gid:
                    break
            if mem[u] != gid:
                continue
            for w, e in zip(ug.succ[u], ug.succ_e[u]):
                if mem[w] == gid or rej[w] == gid or blocked[w]:
                    continue
                a, b = ug.edge_nodes[e]
                offer(w, lambda: call_select_output(sel, nodes[a], nodes[b]))
                if mem[u] != gid:
                    break
        if dropped:
            self._record_drop(d, seed, dropped)
        return list(T.members)

    def _record_drop(self, d: int, seed: int, dropped: list[int]) -> None:
        dev = self.problem.devices[d]
        self.drop_events += 1
        self.dropped_total += len(dropped)
        why = ("an outside node would lie on a path between two nodes of the subgraph (a cycle "
               "once fused)")
        for u in dropped:
            self.cycle_units.add(u)
            self.reasons[u] = (CYCLE, f"dropped from {dev}'s subgraph seeded at "
                               f"{self._name(seed)!r}: {why}")
        if len(self.drops) < MAX_RECORDED_DROPS:
            names = [self._name(u) for u in dropped[:MAX_NAMES_PER_DROP]]
            self.drops.append({"device": dev, "seed": self._name(seed), "count": len(dropped),
                               "dropped": names, "why": why})

    def _filter(self, sel, cand: list[int], dev: str) -> list[int]:
        """``filter`` at node level, then whole units only, then convex again."""
        ug, nodes = self.ug, self.graph.nodes
        cand_nodes = [nodes[v] for v in ug.nodes_of(cand)]
        kept_nodes = call_filter(sel, cand_nodes)
        if len(kept_nodes) == len(cand_nodes):
            return cand
        kept_ids = {nd.index for nd in kept_nodes}
        kept = [u for u in cand if all(v in kept_ids for v in ug.members[u])]
        keep_set = set(kept)
        for u in cand:
            if u not in keep_set:
                self.reasons[u] = (SELECTOR_CONDITION, f"{dev}'s selector filter dropped it")
        if len(kept) > 1:
            y = first_reentry(ug, kept)
            if y is not None:        # everything from the first re-entered node on is convex
                rank = ug.rank
                gone = [u for u in kept if rank[u] >= rank[y]]
                for u in gone:
                    self.cycle_units.add(u)
                    self.reasons[u] = (CYCLE, f"{dev}'s filter removed nodes it depended on; "
                                       "keeping it would close a cycle")
                kept = [u for u in kept if rank[u] < rank[y]]
        return kept
