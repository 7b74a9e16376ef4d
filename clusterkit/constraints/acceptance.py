"""When is a cluster acceptable to its device? One definition, used by every engine and pass.

A cluster (a convex set of nodes) on device D is *acceptable* when

1. every node passes D's ``select`` (the problem's ``supported`` mask);
2. when D's selector is *stateful* (:attr:`~clusterkit.selection.protocol.SubgraphSelector.
   stateful`: edge-sensitive, or overriding ``reset`` because it keeps state while a cluster
   grows), a fresh selector started at the cluster's first node (topological order) and grown
   over the cluster's inner edges in MXNet's order (:func:`grow`: breadth first, each taken
   node's producers offered to ``select_input``, then its consumers to ``select_output``; a
   refused node stays out) takes every node, and its ``filter`` keeps them all; for a stateless
   selector that overrides ``filter``, a fresh selector's ``filter`` keeps them all;
3. D's limits hold (:class:`~clusterkit.constraints.limits.Limits`: the global ones and D's own
   ``max_nodes`` / ``min_nodes`` / ``max_const_bytes``);
4. D's ``create_subgraph_node`` does not return ``None``.

:class:`Acceptance` answers it per problem and caches verdicts by (device, node set). For a
device with a stateless selector, the stock ``filter`` and ``create_subgraph_node`` and no limit
of its own, items 2-4 hold for every cluster an engine builds, and :meth:`Acceptance.plain`
says so without looking at a cluster: the common case costs nothing.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Callable, Sequence

from clusterkit.graph.subgraph import Subgraph
from clusterkit.selection.protocol import (
    SubgraphProperty,
    SubgraphSelector,
    call_create_subgraph_node,
    call_create_subgraph_selector,
    call_filter,
    call_select,
    call_select_input,
    call_select_output,
    is_stateful,
)

if TYPE_CHECKING:
    from clusterkit.constraints.core import Problem


def overrides(obj: object, method: str, base: type) -> bool:
    """Whether ``obj.<method>`` is not ``base``'s own (overridden or replaced)."""
    return getattr(getattr(obj, method, None), "__func__", None) is not getattr(base, method)


def grow(problem: "Problem", d: int, allowed: set[int], seed: int,
         room: Callable[[list[int], int], bool] | None = None
         ) -> tuple[list[int], SubgraphSelector | None]:
    """Grow a cluster of device ``d`` from ``seed`` over edges inside ``allowed`` in MXNet's
    order with a fresh selector: returns the nodes taken (in the order taken; empty when the
    selector does not ``select`` the seed) and the selector. ``room(taken, w)``, when given, may
    refuse a node before the selector is asked (a limit)."""
    prop = problem.properties[d]
    nodes = problem.graph.nodes
    sel = call_create_subgraph_selector(prop)
    if not call_select(sel, nodes[seed]):
        return [], sel
    pred, succ = problem.graph.pred_lists, problem.graph.succ_lists
    taken, out = [seed], {seed}
    refused: set[int] = set()
    queue = deque([seed])
    while queue:
        u = queue.popleft()
        for nbrs, call in ((pred[u], call_select_input), (succ[u], call_select_output)):
            for w in nbrs:
                if w not in allowed or w in out or w in refused:
                    continue
                if (room is None or room(taken, w)) and call(sel, nodes[u], nodes[w]):
                    out.add(w)
                    taken.append(w)
                    queue.append(w)
                else:
                    refused.add(w)
    return taken, sel


class Acceptance:
    """Verdicts of one problem's clusters (see the module docstring), cached by node set."""

    def __init__(self, problem: "Problem"):
        self.problem = problem
        self._cache: dict[tuple[int, tuple[int, ...]], str | None] = {}
        self._kind = [self._kind_of(prop) for prop in problem.properties]
        self._plain = [not (any(kind) or self.restrictive(d))
                       for d, kind in enumerate(self._kind)]

    @staticmethod
    def _kind_of(prop: SubgraphProperty) -> tuple[bool, bool, bool]:
        """(stateful selector, overridden filter, overridden create_subgraph_node)."""
        sel = call_create_subgraph_selector(prop)
        return (is_stateful(sel), overrides(sel, "filter", SubgraphSelector),
                overrides(prop, "create_subgraph_node", SubgraphProperty))

    def stateful(self, d: int) -> bool:
        """Whether device ``d``'s clusters are judged by growing them again."""
        return self._kind[d][0]

    def plain(self, d: int) -> bool:
        """True when every cluster an engine builds for device ``d`` (supported nodes, the
        problem's limits) is acceptable: nothing to check."""
        return self._plain[d]

    def restrictive(self, d: int) -> bool:
        """Whether device ``d``'s verdict depends on more than single nodes and whole-subgraph
        rules: a stateful selector or limits of its own, which a pass that splits and re-forms
        clusters freely (the level refit) could not keep."""
        return self._kind[d][0] or self.problem.limits.tighter(d)

    @property
    def any_restrictive(self) -> bool:
        """Whether :meth:`restrictive` holds for some device."""
        return any(self.restrictive(d) for d in range(len(self._kind)))

    @property
    def all_plain(self) -> bool:
        """Whether :meth:`plain` holds for every device."""
        return all(self._plain)

    def ok(self, nodes: Sequence[int], d: int) -> bool:
        """Is the cluster of ``nodes`` (sorted) acceptable to device ``d``?"""
        return self.plain(d) or self.verdict(nodes, d) is None

    def verdict(self, nodes: Sequence[int], d: int) -> str | None:
        """Why the cluster of ``nodes`` (sorted node ids) is not acceptable to device ``d``
        (one phrase naming the device), or ``None`` when it is. Cached."""
        key = (d, tuple(nodes))
        if key not in self._cache:
            self._cache[key] = self._judge(list(key[1]), d)
        return self._cache[key]

    def _judge(self, nodes: list[int], d: int) -> str | None:
        p = self.problem
        dev = p.devices[d]
        refused = [v for v in nodes if not p.supported[d, v]]
        if refused:
            return f"{dev} does not take node {p.graph.nodes[refused[0]].name!r}"
        broken = p.limits.violation(nodes, d)
        if broken:
            return f"{broken} on {dev}"
        stateful, own_filter, may_reject = self._kind[d]
        why = self._selector_verdict(nodes, d, stateful, own_filter)
        if why is None and may_reject:
            why = rejection(p.properties[d], Subgraph.from_nodes(p.graph, nodes, dev, 0))
        return why

    def _selector_verdict(self, nodes: list[int], d: int, stateful: bool,
                          own_filter: bool) -> str | None:
        """Item 2 of the definition."""
        p = self.problem
        dev, gnodes = p.devices[d], p.graph.nodes
        if stateful:
            taken, sel = grow(p, d, set(nodes), nodes[0])
            if len(taken) < len(nodes):
                left = sorted(set(nodes) - set(taken))[0]
                return (f"{dev}'s selector, grown from node {gnodes[nodes[0]].name!r}, does "
                        f"not take node {gnodes[left].name!r} ({len(taken)} of "
                        f"{len(nodes)} nodes taken)")
        elif own_filter:
            sel = call_create_subgraph_selector(p.properties[d])
        else:
            return None
        assert sel is not None  # grow returns the selector it grew with
        cand = [gnodes[v] for v in nodes]
        kept = call_filter(sel, cand)
        if len(kept) < len(cand):
            gone = sorted(set(nodes) - {nd.index for nd in kept})[0]
            return f"{dev}'s selector filter drops node {gnodes[gone].name!r}"
        return None


def rejection(prop: SubgraphProperty, sub: Subgraph) -> str | None:
    """Why ``prop`` rejects ``sub`` (its ``explain_subgraph`` when it has one), or ``None`` when
    ``create_subgraph_node`` makes a node for it."""
    where = (f"cluster {sub.cluster_id} (device {sub.device!r}, {len(sub)} nodes, first node "
             f"{sub.graph.nodes[sub.nodes[0]].name!r})")
    if call_create_subgraph_node(prop, sub, where) is not None:
        return None
    explain = getattr(prop, "explain_subgraph", None)
    why = explain(sub) if callable(explain) else None
    return why or (f"{sub.device}'s create_subgraph_node rejected its {len(sub)}-node "
                   "subgraph")


def acceptance(problem: "Problem") -> Acceptance:
    """The problem's :class:`Acceptance` (made once per problem object)."""
    got = problem.__dict__.get("_acceptance")
    if got is None or got.problem is not problem:
        got = problem.__dict__["_acceptance"] = Acceptance(problem)
    return got
