"""Why a node ends on the fallback device: one vocabulary shared by every engine and report.

A :class:`Reason` is a :class:`Category` — one of six, the strings the placement report and the
partition JSON carry — and a sentence of detail. Engines record the reasons they know on
``Partition.fallback_reasons`` (topological node index → :class:`Reason`); any other fallback
node is explained from the compiled problem alone by :func:`infer_reason`, so
:func:`placement_report` works for every strategy's partition. The vocabulary sits beside the
constraints, below the partition that carries it (so the affinity step records its reasons in
the same form), and the report is built here, below the engines, because the engines that
record reasons store it in ``info["placement"]`` and so in the partition JSON; it reads the
partition through its public attributes only.

Categories:

- ``"op not supported"`` — no device's query takes the node and no device takes any node of its
  op type in this graph;
- ``"selector condition"`` — a selector refused the node although its device takes other nodes
  of the same op type (attributes, shapes, a ``filter``, a refusal while a cluster was grown);
- ``"constraint"`` — a device supports the node but a constraint kept it off (``min_size``,
  ``max_const_bytes``, a together group no device can take...);
- ``"cycle"`` — the strategy took it out of a cluster to avoid a path leaving the cluster and
  coming back, and it ended on the fallback;
- ``"manual affinity"`` — a manual affinity put it there (to the fallback, to a device that does
  not support it, or none given while manual affinities are in use without fill-in);
- ``"subgraph rejected"`` — the device's ``create_subgraph_node`` refused its subgraph.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:  # annotations only: the partition sits one layer above the vocabulary
    from clusterkit.constraints.core import Problem
    from clusterkit.result import Partition

__all__ = ["BELOW_MIN_SIZE", "Category", "FILTER_DROPPED", "GROUP_FITS_NO_DEVICE", "Reason",
           "SELECT_REFUSED", "devices_taking_op", "infer_reason", "placement_report"]


class Category(str, Enum):
    """The kind of a fallback reason; ``value`` is the string the reports and the JSON carry."""

    OP_NOT_SUPPORTED = "op not supported"
    SELECTOR_CONDITION = "selector condition"
    CONSTRAINT = "constraint"
    CYCLE = "cycle"
    MANUAL_AFFINITY = "manual affinity"
    SUBGRAPH_REJECTED = "subgraph rejected"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Reason:
    """Why one node is on the fallback: its ``category`` and a sentence of ``detail``."""

    category: Category
    detail: str


# the reasons the level-based engines (longest-path, cycles) record, one per cause
GROUP_FITS_NO_DEVICE = Reason(Category.CONSTRAINT,
                              "its together group fits on no device as one cluster")
FILTER_DROPPED = Reason(Category.SELECTOR_CONDITION,
                        "the selector's filter dropped it from its cluster")
SELECT_REFUSED = Reason(Category.SELECTOR_CONDITION,
                        "the selector refused it when its cluster was grown")
BELOW_MIN_SIZE = Reason(Category.CONSTRAINT, "its cluster was below min_size")


def infer_reason(problem: Problem, v: int,
                 ops_taken: Mapping[str, list[str]] | None = None) -> Reason:
    """Why node ``v`` (topological index) is on the fallback, from the problem alone.
    ``ops_taken`` (op type → devices taking some node of it) is computed when not given."""
    p = problem
    g = p.graph
    node = g.nodes[v]
    if p.max_const_bytes is not None and int(g.const_bytes[v]) > p.max_const_bytes:
        return Reason(Category.CONSTRAINT, f"it reads {int(g.const_bytes[v])} bytes of constants, "
                      f"above max_const_bytes {p.max_const_bytes}")
    sup = p.supported[:, v] if p.devices else []
    takers = [p.devices[d] for d in range(len(p.devices)) if sup[d]]
    if not takers:
        if ops_taken is None:
            ops_taken = devices_taking_op(p)
        same_op = ops_taken.get(node.op_type, [])
        if same_op:
            verb = "takes" if len(same_op) == 1 else "take"
            return Reason(Category.SELECTOR_CONDITION, f"{', '.join(same_op)} {verb} other "
                          f"{node.op_type} nodes but refused this one")
        if not p.devices:
            return Reason(Category.OP_NOT_SUPPORTED, "no accelerator device is configured")
        return Reason(Category.OP_NOT_SUPPORTED, f"no device supports {node.op_type}")
    limits = []
    if p.min_size > 1:
        limits.append(f"min_size {p.min_size}")
    if p.max_size is not None:
        limits.append(f"max_size {p.max_size}")
    if int(p.group_of[v]) >= 0:
        limits.append(f"together group {int(p.group_of[v])}")
    why = ", ".join(limits) if limits else "the strategy's constraints"
    return Reason(Category.CONSTRAINT,
                  f"supported by {', '.join(takers)} but kept on the fallback ({why})")


def devices_taking_op(problem: Problem) -> dict[str, list[str]]:
    """op type → devices that take at least one node of that op type."""
    ops = problem.graph.op_types
    out: dict[str, list[str]] = {}
    for d, dev in enumerate(problem.devices):
        taken = {ops[v] for v in problem.supported[d].nonzero()[0].tolist()}
        for op in sorted(taken):
            out.setdefault(op, []).append(dev)
    return out


def placement_report(partition: Partition) -> dict[str, Any]:
    """The placement report as a JSON-ready dict: per device its node and cluster counts and op
    types; every fallback node with its reason (``partition.fallback_reasons``, else
    :func:`infer_reason`); counts per category and per category and op type. Node ``index``
    values are source indices (ONNX ``graph.node`` / node-link ``nodes`` positions)."""
    g = partition.graph
    fb = partition.fallback
    ops = g.op_types
    src = g.index_to_source.tolist()
    recorded = partition.fallback_reasons
    ops_taken = devices_taking_op(partition.problem)
    fallen = []
    by_reason: Counter = Counter()
    by_op: dict[str, Counter] = {}
    for c in partition.clusters:
        if c.device != fb:
            continue
        for v in c.nodes:
            why = recorded.get(v) or infer_reason(partition.problem, v, ops_taken)
            cat = why.category.value
            by_reason[cat] += 1
            by_op.setdefault(cat, Counter())[ops[v]] += 1
            fallen.append({"node": g.nodes[v].name, "index": src[v], "op": ops[v],
                           "reason": cat, "detail": why.detail})
    fallen.sort(key=lambda e: e["index"])
    cats = [c.value for c in Category]
    return {
        "fallback": fb,
        "devices": _device_counts(partition),
        "reasons": {k: by_reason[k] for k in cats if by_reason[k]},
        "reasons_by_op": {k: dict(sorted(by_op[k].items(), key=lambda kv: (-kv[1], kv[0])))
                          for k in cats if k in by_op},
        "fallen_back": fallen,
    }


def _device_counts(partition: Partition) -> dict[str, dict[str, Any]]:
    """Per device (priority order, then the fallback, then any other): nodes, clusters and the
    op types it took, most frequent first."""
    fb = partition.fallback
    ops = partition.graph.op_types
    order = list(partition.problem.devices) + [fb]
    for c in partition.clusters:
        if c.device not in order:
            order.append(c.device)
    counts: dict[str, Counter] = {d: Counter() for d in order}
    clusters: Counter = Counter()
    for c in partition.clusters:
        clusters[c.device] += 1
        counts[c.device].update(ops[v] for v in c.nodes)
    devs: dict[str, dict[str, Any]] = {}
    for d in order:
        cnt = counts[d]
        entry = {"nodes": sum(cnt.values()), "clusters": clusters[d],
                 "op_types": dict(sorted(cnt.items(), key=lambda kv: (-kv[1], kv[0])))}
        if d == fb:
            entry["fallback"] = True
        devs[d] = entry
    return devs
