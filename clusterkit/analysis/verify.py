"""Compare a shipped selector with the real execution provider it models, node by node.

The EP is asked (:func:`~clusterkit.io.ep_query.query_ep`) which nodes it takes of the graph
onnxruntime's basic optimizations make of the model — the graph it is offered at run time — and
clusterkit partitions that same graph with the selector. They agree when both offload the same
nodes and the EP's groups are those nodes grouped as onnxruntime's partitioner groups them
(:func:`onnxruntime_groups`; where clusterkit's own strategy groups them otherwise, the report
says so). Every node one side takes and the other does not is listed with
its op type and the reason: the selector's (why it refuses the node) or the EP's (it does not
take it). An EP that answers and then fails, and onnxruntime refusing an EP's answer, are
reported as such; a selector's data lists the models where the disagreement is the EP's own
fault (``verified.ep_faults``).
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any

import onnx

from clusterkit.analysis.explain import explain_by_reason
from clusterkit.analysis.report import get_placement
from clusterkit.api import partition
from clusterkit.constraints.core import Constraints
from clusterkit.graph.core import Graph
from clusterkit.io.ep_query import EpAnswer, graph_node_name, query_ep
from clusterkit.io.onnx import load_onnx
from clusterkit.io.optimize import optimize_model
from clusterkit.result.model import Partition
from clusterkit.selection.ep_property import ep_of_selector
from clusterkit.selection.specs import parse_selector


@dataclass
class NodeDiff:
    """A node one side takes and the other does not (``index``: its position in the model's
    ``graph.node``)."""

    index: int
    name: str
    op: str
    reason: str


@dataclass
class Verification:
    """The comparison of a selector with its EP on one model (see the module docstring); node
    indices are positions in the model's ``graph.node`` list, each partition sorted."""

    model: str
    selector: str
    ep: str
    ep_version: str
    nodes: int
    ep_partitions: list[list[int]]
    partitions: list[list[int]]
    ort_grouped: list[list[int]] = field(default_factory=list)
    only_ep: list[NodeDiff] = field(default_factory=list)
    only_selector: list[NodeDiff] = field(default_factory=list)
    ep_error: str | None = None
    refused: list[str] = field(default_factory=list)
    known_fault: str | None = None
    known_grouping: str | None = None
    notes: list[str] = field(default_factory=list)
    #: why clusterkit's strategy forms more partitions than the EP (the kinds of its splits
    #: between clusters, most frequent first), when it does
    grouping_reason: str | None = None

    @property
    def same_nodes(self) -> bool:
        return not self.only_ep and not self.only_selector

    @property
    def same_partitions(self) -> bool:
        """The EP's groups are clusterkit's offloaded nodes grouped as onnxruntime groups."""
        return _as_sets(self.ep_partitions) == _as_sets(self.ort_grouped)

    @property
    def same_as_strategy(self) -> bool:
        """The EP's groups are the clusters of clusterkit's strategy."""
        return _as_sets(self.ep_partitions) == _as_sets(self.partitions)

    @property
    def more_partitions(self) -> bool:
        """clusterkit's strategy forms more partitions than the EP (a difference: the device
        splits less than clusterkit's constraints, e.g. it computes value inputs inside)."""
        return len(self.partitions) > len(self.ep_partitions)

    @property
    def agree(self) -> bool:
        return self.same_nodes and self.same_partitions and not self.more_partitions

    def to_json(self) -> dict[str, Any]:
        """The JSON ``clusterkit verify --json`` writes."""
        data = asdict(self)
        data.update(agree=self.agree, same_nodes=self.same_nodes,
                    same_partitions=self.same_partitions, same_as_strategy=self.same_as_strategy,
                    more_partitions=self.more_partitions,
                    ep_offloaded=sum(map(len, self.ep_partitions)),
                    offloaded=sum(map(len, self.partitions)))
        return data


def _as_sets(groups: list[list[int]]) -> set[frozenset[int]]:
    return {frozenset(g) for g in groups if g}


def name_nodes(proto: onnx.ModelProto) -> None:
    """Give every unnamed or twice-named node a unique name, in place: the EP's answer names
    nodes, so each must have its own name."""
    seen = {n.name for n in proto.graph.node if n.name}
    counts: dict[str, int] = {}
    for i, node in enumerate(proto.graph.node):
        counts[node.name] = counts.get(node.name, 0) + 1
        if node.name and counts[node.name] == 1:
            continue
        name = f"{node.op_type}_{i}"
        while name in seen:
            name += "_"
        node.name = name
        seen.add(name)


def optimized_graph(model: str | os.PathLike, dims: dict[str, int] | None = None
                    ) -> tuple[onnx.ModelProto, Graph]:
    """The graph the EP is offered (basic optimizations, nodes named) as a proto and a Graph."""
    proto = optimize_model(model, "basic", dims=dims)
    name_nodes(proto)
    graph = load_onnx(proto)
    graph.name = os.path.splitext(os.path.basename(os.fspath(model)))[0]
    return proto, graph


def verify(model: str | os.PathLike, selector: str, *, strategy: str = "auto",
           compile: bool = True, dims: dict[str, int] | None = None) -> Verification:
    """Compare the shipped ``selector`` (a spec such as ``qnn`` or ``qnn[backend=htp]``) with
    the real EP it models on ``model`` (see the module docstring). ``compile=False`` stops the
    EP's session after partitioning (quicker; an EP failure in compilation is then not seen).
    Raises :class:`~clusterkit.errors.BackendError` when the EP is not installed."""
    proto, graph = optimized_graph(model, dims)
    return verify_graph(proto, graph, selector, strategy=strategy, compile=compile)


def verify_graph(proto: onnx.ModelProto, graph: Graph, selector: str, *,
                 strategy: str = "auto", compile: bool = True) -> Verification:
    """:func:`verify` on a graph :func:`optimized_graph` made (to check several selectors
    against one optimization of a model)."""
    prop = parse_selector(selector)
    ep, settings, verified = ep_of_selector(prop, selector)
    answer = query_ep(proto, ep, settings, compile=compile)
    # the constraints `clusterkit partition` uses by default: the value-input cuts apply as the
    # device's declared policy (computes_value_inputs) says, and the EP's answer is the judge
    result = partition(graph, [prop], strategy=strategy, constraints=Constraints.default())
    report = compare(graph, answer, result)
    report.selector = selector
    report.known_fault = verified.get("ep_faults", {}).get(graph.name)
    report.known_grouping = verified.get("grouping_differs", {}).get(graph.name)
    return report


def compare(graph: Graph, answer: EpAnswer, result: Partition) -> Verification:
    """The node-by-node comparison of the EP's ``answer`` and the partition ``result``."""
    index = graph.name_to_index
    named = {n: graph_node_name(n, index) for n in answer.nodes}
    unknown = [n for n, m in named.items() if m is None
               and answer.op_types.get(n) != "Transpose"]  # the layout transformation's own
    ep_groups = [sorted({index[m] for n in g if (m := named[n])}) for g in answer.groups]
    _absorb(graph, [index[n] for n in answer.absorbed if n in index], ep_groups)
    mine = [sorted(c.nodes) for c in result.offloaded_clusters()]
    report = Verification(graph.name, "", answer.ep, answer.version, graph.n,
                          [g for g in ep_groups if g], sorted(mine), ep_error=answer.error,
                          refused=answer.refused())
    taken_ep = {i for g in ep_groups for i in g}
    taken = {i for g in mine for i in g}
    report.ort_grouped = onnxruntime_groups(graph, taken)
    if report.more_partitions:
        report.grouping_reason = grouping_reason(result)
    why = _fallback_details(result)
    for i in sorted(taken_ep - taken):
        node = graph.nodes[i]
        report.only_ep.append(NodeDiff(i, node.name, node.op_type,
                                       why.get(i, "clusterkit leaves it on the fallback")))
    devices = result.device_of_nodes() if taken - taken_ep else []
    for i in sorted(taken - taken_ep):
        node = graph.nodes[i]
        report.only_selector.append(NodeDiff(i, node.name, node.op_type,
                                             f"{answer.ep} does not take it; "
                                             f"{selector_side(result, node, devices[i])}"))
    report.notes = _notes(report, unknown)
    return _as_source_indices(graph, report)


def selector_side(result: Partition, node: Any, device: str) -> str:
    """Why the selector of ``device`` took ``node``: the rules of its op it passed (a selector
    with ``rules_passed``), or that none covers it; with the node's tensors' dtypes and
    ranks."""
    prop = next(p for p in result.problem.properties if p.device == device)
    passed = getattr(prop, "rules_passed", None)
    rules = passed(node, result.graph) if callable(passed) else []
    name = getattr(prop, "name", device)
    tensors = ", ".join(_tensor_text(result.graph, t) for t in (*node.inputs, *node.outputs) if t)
    if rules:
        checks = "; ".join(repr(r) for r in rules)
        return f"{name} takes it: it passes the {node.op_type} rules {checks} (tensors: {tensors})"
    return f"{name} takes it: no modelled rule covers {node.op_type} beyond the global ones " \
           f"(tensors: {tensors})"


def _tensor_text(graph: Graph, name: str) -> str:
    """``'name' float32 rank 4`` (unknown parts as ``?``)."""
    t = graph.tensors.get(name)
    shape = None if t is None else t.shape
    dtype = None if t is None else t.dtype
    return f"{name!r} {dtype or '?'} rank {'?' if shape is None else len(shape)}"


def grouping_reason(result: Partition) -> str:
    """Why the strategy split the offloaded nodes into several partitions: the kinds of the
    splits between two clusters (:func:`~clusterkit.analysis.explain.explain_by_reason`)."""
    kinds = explain_by_reason(result)
    if not kinds:
        return "no edge between two offloaded nodes is split"
    total = sum(map(len, kinds.values()))
    parts = ", ".join(f"{len(lines):,} {kind}" for kind, lines in kinds.items())
    return f"{total:,} splits between clusters: {parts}"


def _as_source_indices(graph: Graph, report: Verification) -> Verification:
    """The report with node indices into the model's ``graph.node`` list (as the partition
    JSON writes them) instead of clusterkit's topological numbering."""
    src = graph.index_to_source
    for name in ("ep_partitions", "partitions", "ort_grouped"):
        setattr(report, name, sorted(sorted(int(src[v]) for v in g)
                                     for g in getattr(report, name)))
    for d in report.only_ep + report.only_selector:
        d.index = int(src[d.index])
    return report


def onnxruntime_groups(graph: Graph, taken: set[int]) -> list[list[int]]:
    """``taken`` grouped as onnxruntime groups an EP's supported nodes (its partitioning
    utility): a topological walk that takes every ready supported node into the current group,
    and only when none is ready closes the group and walks the ready unsupported nodes."""
    succ, pred = graph.succ_lists, graph.pred_lists
    waiting = [len(set(pred[v])) for v in range(graph.n)]
    ready: tuple[deque[int], deque[int]] = (deque(), deque())  # (unsupported, supported)
    for v in range(graph.n):
        if not waiting[v]:
            ready[v in taken].append(v)
    groups = []
    while ready[0] or ready[1]:
        supported = bool(ready[1])
        queue, group = ready[supported], []
        while queue:
            v = queue.popleft()
            if supported:
                group.append(v)
            for w in dict.fromkeys(succ[v]):
                waiting[w] -= 1
                if not waiting[w]:
                    ready[w in taken].append(w)
        if group:
            groups.append(sorted(group))
    return groups


def _fallback_details(result: Partition) -> dict[int, str]:
    """Node index → why clusterkit left the node on the fallback (the placement report's
    reason: the selector's own explanation, a constraint, a cycle, ...)."""
    s2i = result.graph.source_to_index
    return {int(s2i[e["index"]]): f"{e['reason']}: {e['detail']}"
            for e in get_placement(result)["fallen_back"]}


def _absorb(graph: Graph, absorbed: list[int], groups: list[list[int]]) -> None:
    """Put each Transpose the layout transformation cancelled into the EP group of a graph
    neighbour (it ran there, merged into the EP's graph), else into a group of its own."""
    group_of = {v: gi for gi, g in enumerate(groups) for v in g}
    for v in absorbed:
        near = [group_of[u] for u in (*graph.predecessors(v), *graph.successors(v))
                if int(u) in group_of]
        if near:
            groups[near[0]].append(v)
            groups[near[0]].sort()
        else:
            groups.append([v])
        group_of[v] = near[0] if near else len(groups) - 1


def _notes(report: Verification, unknown: list[str]) -> list[str]:
    """What else the comparison shows: grouping differences, failures, refusals."""
    notes = []
    if unknown:
        notes.append(f"the EP named {len(unknown)} nodes the graph does not have "
                     f"(first: {unknown[0]!r})")
    if report.same_nodes and not report.same_partitions:
        notes.append(f"the same nodes, grouped differently: {report.ep} makes "
                     f"{len(report.ep_partitions)} partitions, onnxruntime's grouping of "
                     f"clusterkit's nodes {len(report.ort_grouped)}")
    if report.more_partitions:
        notes.append(f"clusterkit forms more partitions ({len(report.partitions)}) than "
                     f"{report.ep} ({len(report.ep_partitions)}): {report.grouping_reason}")
    elif report.same_nodes and not report.same_as_strategy:
        notes.append(f"clusterkit's strategy groups these nodes into {len(report.partitions)} "
                     f"partitions, {report.ep} (as onnxruntime groups) into "
                     f"{len(report.ep_partitions)}")
    if not report.ep_partitions and not report.ep_error:
        notes.append(f"{report.ep} took no node: the session ran on the CPU EP (an EP that "
                     "could not initialise, such as the QNN GPU backend without a GPU, looks "
                     "the same)")
    if report.ep_error:
        notes.append(f"{report.ep} answered, then failed: {report.ep_error}")
    if report.refused:
        notes.append(f"onnxruntime refused {len(report.refused)} nodes of {report.ep}'s "
                     "answer: they run on the CPU")
    return notes


def ep_grouping_notes(result: Partition) -> list[str]:
    """For each ``ep:`` device of ``result``: a line when clusterkit's clusters on it are not
    the EP's own groups (fewer partitions, a device limit held, ...)."""
    notes = []
    for prop in result.problem.properties:
        if not callable(getattr(prop, "ep_groups", None)):
            continue
        theirs = prop.ep_groups(result.graph)  # type: ignore[attr-defined]  # checked above
        mine = [sorted(c.nodes) for c in result.clusters if c.device == prop.device]
        if _as_sets(theirs) != _as_sets(mine):
            notes.append(f"note: clusterkit groups {prop.device}'s nodes into {len(mine)} "
                         f"partitions ({sum(map(len, mine))} nodes); {getattr(prop, 'ep', '')} "
                         "itself makes "
                         f"{len(theirs)} ({sum(map(len, theirs))} nodes)")
    return notes
