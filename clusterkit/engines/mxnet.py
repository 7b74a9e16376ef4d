"""Strategy ``mxnet``: MXNet's ``PartitionGraph`` pass, as its subgraph API proposal describes it.

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
   (a ``GrowthTracker``; MXNet excludes the offending nodes and retries the growth). Every
   drop is recorded in ``info["mxnet"]["cycle_drops"]`` with its reason.
3. ``filter`` prunes the candidates (a together group stays only if all of it is kept); if what
   is left is no longer convex, the part from the first re-entered node on (by rank) is dropped.
4. ``create_subgraph_node`` builds the fused node; ``None`` rejects the subgraph, which is then
   split into pieces the device accepts (:func:`~clusterkit.passes.acceptable.split_cluster`);
   the nodes in none go back: later seeds and later devices may take them.

As in MXNet, each candidate set's cycle check looks at the original graph; subgraphs that end up
depending on each other through other subgraphs are split afterwards, and clusters below
``min_size`` go to the fallback (:func:`~clusterkit.engines.common.close_growth`). Every
fallback node's reason is on ``Partition.fallback_reasons`` (selector, rejected subgraph, cycle,
``min_size``), which the placement report (``Partition.placement()``) quotes.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from clusterkit.constraints.acceptance import acceptance
from clusterkit.constraints.core import Problem
from clusterkit.engines.common import close_growth
from clusterkit.engines.growth import (
    GrowingCluster,
    GrowthState,
    GrowthTracker,
    apart,
    refused_neighbours,
)
from clusterkit.engines.super_nodes import SuperNodeGraph, first_reentry
from clusterkit.graph.algorithms import gc_paused
from clusterkit.graph.subgraph import Subgraph
from clusterkit.passes.acceptable import split_cluster
from clusterkit.result.model import Partition
from clusterkit.result.reasons import Category, Reason
from clusterkit.selection.protocol import (
    SubgraphProperty,
    SubgraphSelector,
    call_create_subgraph_node,
    call_filter,
    call_select,
    call_select_input,
    call_select_output,
)

MAX_RECORDED_DROPS = 1000
MAX_NAMES_PER_DROP = 20


def subgraphs(problem: Problem) -> list[tuple[str, list[int]]]:
    """The subgraphs the passes create, in order, as ``(device, node ids)`` — before subgraphs
    that depend on each other are split and before ``min_size``."""
    passes = _partition_graph(problem)
    return [(problem.devices[p.device], passes.contracted.nodes_of(p.super_nodes))
            for p in passes.pieces]


def run(problem: Problem) -> Partition:
    """MXNet ``PartitionGraph`` with the problem's properties applied in priority order (the
    strategy has no options)."""
    with gc_paused():   # many small lists and tuples; any cycles are collected afterwards
        return _run(problem)


def _run(problem: Problem) -> Partition:
    passes = _partition_graph(problem)
    contracted = passes.contracted
    reasons: dict[int, Reason] = {}
    for u, why in passes.reasons.items():
        if not passes.taken[u]:
            for v in contracted.members[u]:
                reasons[v] = why
    moved = dict.fromkeys(contracted.nodes_of(sorted(passes.cycle_super_nodes)),
                          "dropped from a subgraph to avoid a cycle")
    result, split = close_growth(problem, contracted, passes.pieces, reasons, moved)
    result.info["mxnet"] = {"seeds": passes.seeds, "rejected_subgraphs": passes.rejected,
                            "cycle_drops": passes.drops,
                            "cycle_drop_events": passes.drop_events,
                            "nodes_dropped_for_cycles": passes.dropped_total,
                            "clusters_split_for_cycles": split}
    return result


def _partition_graph(problem: Problem) -> "_MXNet":
    """Every property's ``PartitionGraph`` pass, in priority order."""
    passes = _MXNet(problem, SuperNodeGraph(problem))
    for d in range(len(problem.devices)):
        passes.apply(d)
    return passes


class _MXNet:
    def __init__(self, problem: Problem, contracted: SuperNodeGraph):
        self.problem = problem
        self.contracted = contracted
        self.graph = problem.graph
        self.tracker = GrowthTracker(contracted)
        self.taken = [False] * contracted.n
        self.pieces: list[GrowingCluster] = []
        self.reasons: dict[int, Reason] = {}
        self.cycle_super_nodes: set[int] = set()
        self.drops: list[dict] = []
        self.drop_events = self.dropped_total = 0
        self.seeds = self.rejected = 0
        self.blocked: list[bool] = []
        self.blocked_marks = 0   # landmark bits of the blocked super-nodes (GrowthTracker.marks_of)
        self.max_nodes: int | None = None   # the limits of the device being applied
        self.max_const: int | None = None

    def _name(self, u: int) -> str:
        nodes = self.graph.nodes
        return "+".join(nodes[v].name for v in self.contracted.members[u])

    def apply(self, d: int) -> None:
        """One PartitionGraph pass with property ``d``."""
        p = self.problem
        prop = p.properties[d]
        dev = p.devices[d]
        contracted, nodes = self.contracted, self.graph.nodes
        feas = contracted.feasible[d]
        # super-nodes that can never join a subgraph of this device: checked eagerly
        self.blocked = blocked = [not f or t for f, t in zip(feas, self.taken)]
        self.blocked_marks = self.tracker.marks_of(blocked)
        self._device_setup(d)
        stock_node = _is_stock(prop, "create_subgraph_node", SubgraphProperty)
        taken, members = self.taken, contracted.members
        succ, pred = contracted.succ, contracted.pred
        for seed in contracted.order:
            if taken[seed] or not feas[seed]:
                continue
            sel = prop.create_subgraph_selector()
            if not call_select(sel, nodes[members[seed][0]]):
                self.reasons.setdefault(seed, Reason(Category.SELECTOR_CONDITION,
                                                     f"{dev}'s selector does not select it"))
                continue
            self.seeds += 1
            if _all_blocked(succ[seed], blocked) and _all_blocked(pred[seed], blocked):
                cand = [seed]       # nothing to offer: the growth is the seed alone
            else:
                cand = self._grow(d, sel, seed)
            kept = self._filter(sel, cand, dev)
            if not kept:
                continue
            for piece in ([kept] if stock_node else self._accepted(d, kept, seed)):
                self._take(d, piece)

    def _device_setup(self, d: int) -> None:
        """Per-device shortcut of ``GrowthState.fits``: whether the state is trivial (no size,
        never-together or constant limit) and each super-node's neighbours across an edge the device
        may not contract, among the super-nodes it may take (members are such super-nodes)."""
        p, contracted = self.problem, self.contracted
        lim = p.limits  # the device's own limits when tighter than the global ones
        self.max_nodes, self.max_const = lim.max_nodes[d], lim.max_const[d]
        self.trivial = self.max_nodes is None and self.max_const is None and not contracted.never
        feasible = np.asarray(contracted.feasible[d], dtype=bool)
        self.near = refused_neighbours(contracted, d, feasible)

    def _accepted(self, d: int, kept: list[int], seed: int) -> list[list[int]]:
        """The super-nodes of ``kept`` as subgraphs ``create_subgraph_node`` accepts: ``kept``
        itself, or when rejected its acceptable pieces (:func:`~clusterkit.passes.acceptable.
        split_cluster`); a super-node in none keeps the device's reason and may join a later
        seed."""
        p, contracted = self.problem, self.contracted
        prop, dev = p.properties[d], p.devices[d]
        node_ids = contracted.nodes_of(kept)
        sub = Subgraph.from_nodes(self.graph, node_ids, dev, len(self.pieces))
        fused = call_create_subgraph_node(
            prop, sub, f"the subgraph seeded at node {self._name(seed)!r}")
        if fused is not None:
            return [kept]
        self.rejected += 1
        pieces, fallen = split_cluster(p, acceptance(p), d, sorted(node_ids))
        super_node_of = contracted.super_node_of
        for v, why in fallen.items():
            self.reasons[int(super_node_of[v])] = Reason(Category.SUBGRAPH_REJECTED, why)
        return [sorted({int(super_node_of[v]) for v in piece}, key=contracted.rank.__getitem__)
                for piece in pieces]

    def _take(self, d: int, kept: list[int]) -> None:
        own, taken, blocked = self.tracker.landmark_bit, self.taken, self.blocked
        marks = self.blocked_marks
        for u in kept:
            taken[u] = True
            blocked[u] = True
            marks |= own[u]
        self.blocked_marks = marks
        if len(kept) > 1:
            kept = sorted(kept, key=self.contracted.rank.__getitem__)
        self.pieces.append(GrowingCluster(d, kept))

    # ------------------------------------------------------------------ steps
    def _grow(self, d: int, sel, seed: int) -> list[int]:
        """Breadth-first candidate selection from ``seed`` with cycle shrinking."""
        contracted, nodes, T = self.contracted, self.graph.nodes, self.tracker
        blocked, trivial, near = self.blocked, self.trivial, self.near
        T.begin(blocked, self.blocked_marks)
        # bound to locals for speed: the loop below reads them often
        gid, mem, rej = T.growth_id, T.member_stamp, T.rejected_stamp
        add, reject = T.add, T.reject
        add(seed)
        st = GrowthState(contracted, d, self.max_nodes, self.max_const)  # left empty when trivial
        if not trivial:
            st.add(seed)
        dropped: list[int] = []
        queue = deque([seed])
        edge_nodes = contracted.edge_nodes
        # inputs first (select_input(consumer, producer)), then outputs
        # (select_output(producer, consumer)); u may be dropped while its neighbours are offered
        sides = ((contracted.pred, contracted.pred_e, call_select_input, 1),
                 (contracted.succ, contracted.succ_e, call_select_output, 0))
        while queue:
            u = queue.popleft()
            for nbrs, edges, call, inner in sides:
                if mem[u] != gid:
                    break
                for w, e in zip(nbrs[u], edges[u]):
                    if mem[w] == gid or rej[w] == gid or blocked[w]:
                        continue
                    pair = edge_nodes[e]
                    if ((not near[w] or apart(near[w], mem, gid)) if trivial
                            else st.fits(w, T)) \
                            and call(sel, nodes[pair[inner]], nodes[pair[1 - inner]]):
                        add(w)
                        if not trivial:
                            st.add(w)
                        queue.append(w)
                    else:
                        reject(w)
                    if T.total:
                        gone = T.settle()
                        if not trivial:
                            for x in gone:
                                st.remove(x)
                        dropped.extend(gone)
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
        reason = Reason(Category.CYCLE, f"dropped from {dev}'s subgraph seeded at "
                        f"{self._name(seed)!r}: {why}")
        self.cycle_super_nodes.update(dropped)
        reasons = self.reasons
        for u in dropped:
            reasons[u] = reason
        if len(self.drops) < MAX_RECORDED_DROPS:
            names = [self._name(u) for u in dropped[:MAX_NAMES_PER_DROP]]
            self.drops.append({"device": dev, "seed": self._name(seed), "count": len(dropped),
                               "dropped": names, "why": why})

    def _filter(self, sel, cand: list[int], dev: str) -> list[int]:
        """``filter`` at node level, then whole super-nodes only, then convex again."""
        if _is_stock(sel, "filter", SubgraphSelector):
            return cand              # the stock filter keeps every candidate
        contracted, nodes = self.contracted, self.graph.nodes
        cand_nodes = [nodes[v] for v in contracted.nodes_of(cand)]
        kept_nodes = call_filter(sel, cand_nodes)
        if len(kept_nodes) == len(cand_nodes):
            return cand
        kept_ids = {nd.index for nd in kept_nodes}
        kept = [u for u in cand if all(v in kept_ids for v in contracted.members[u])]
        keep_set = set(kept)
        for u in cand:
            if u not in keep_set:
                self.reasons[u] = Reason(Category.SELECTOR_CONDITION,
                                         f"{dev}'s selector filter dropped it")
        if len(kept) > 1:
            y = first_reentry(contracted, kept)
            if y is not None:        # everything from the first re-entered node on is convex
                rank = contracted.rank
                gone = [u for u in kept if rank[u] >= rank[y]]
                for u in gone:
                    self.cycle_super_nodes.add(u)
                    self.reasons[u] = Reason(Category.CYCLE, f"{dev}'s filter removed nodes it "
                                             "depended on; keeping it would close a cycle")
                kept = [u for u in kept if rank[u] < rank[y]]
        return kept


def _is_stock(obj, method: str, base: type) -> bool:
    """Whether ``obj.<method>`` is ``base``'s own (neither overridden nor replaced on the
    instance): the stock ``filter`` keeps every candidate, the stock ``create_subgraph_node``
    accepts every subgraph, so neither needs calling."""
    return getattr(getattr(obj, method, None), "__func__", None) is getattr(base, method)


def _all_blocked(super_nodes: list[int], blocked: list[bool]) -> bool:
    for w in super_nodes:
        if not blocked[w]:
            return False
    return True
