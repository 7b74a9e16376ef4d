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

Folded nodes (:attr:`clusterkit.graph.core.Graph.folded`: constants and static shape values,
which onnxruntime computes before any execution provider sees the graph) are never fallbacks:
the report counts them apart. Every other fallback node gets the most specific reason known:
the engine's, else the selectors' own ``explain(node)`` text inside the category below.

Categories:

- ``"op not supported"`` — the op is in no device's op table (a table-driven property's
  ``ops`` / ``key_of``, an ``ops:`` selector's ``op_types``), or no device takes any node of it
  and no device says it lists the op;
- ``"selector condition"`` — a device lists the op but refused the node: it takes other nodes of
  the op, or every node of the op failed a condition (which one: the selector's explanation);
  also attributes, shapes, a ``filter``, a refusal while a cluster was grown;
- ``"constraint"`` — a device supports the node but a constraint kept it off (``min_size``,
  ``max_const_bytes``, a together group no device can take...);
- ``"cycle"`` — the strategy took it out of a cluster to avoid a path leaving the cluster and
  coming back, and it ended on the fallback;
- ``"manual affinity"`` — a manual affinity put it there (to the fallback, to a device that does
  not support it, or none given while manual affinities are in use without fill-in);
- ``"subgraph rejected"`` — the device's ``create_subgraph_node`` refused its subgraph.
"""

from __future__ import annotations

import inspect
from collections import Counter
from dataclasses import dataclass
from enum import Enum
from itertools import chain
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

if TYPE_CHECKING:  # annotations only: the partition sits one layer above the vocabulary
    from clusterkit.constraints.core import Problem
    from clusterkit.constraints.limits import Limits
    from clusterkit.partition.model import Partition

__all__ = ["BELOW_MIN_SIZE", "Category", "FILTER_DROPPED", "GROUP_FITS_NO_DEVICE", "Reason",
           "SELECT_REFUSED", "current_placement", "devices_taking_op", "infer_reason",
           "op_in_table", "placement_report", "refusal_reason", "selector_explanation"]


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
    held, lim = int(p.graph.const_bytes[v]), p.limits
    if lim.max_const_bytes is not None and held > lim.max_const_bytes:
        return Reason(Category.CONSTRAINT, f"it reads {held} bytes of constants, "
                      f"above max_const_bytes {lim.max_const_bytes}")
    sup: np.ndarray | list = p.supported[:, v] if p.devices else []
    takers = [d for d in range(len(p.devices)) if sup[d]]
    if not takers:
        over = _budgets_below(p, v, held)
        if over:
            return Reason(Category.CONSTRAINT, f"it reads {held} bytes of constants, above "
                          + ", ".join(over))
        return refusal_reason(p, v, ops_taken)
    limits = _size_limits(lim, takers)
    if int(p.group_of[v]) >= 0:
        limits.append(f"together group {int(p.group_of[v])}")
    why = ", ".join(limits) if limits else "the strategy's constraints"
    return Reason(Category.CONSTRAINT, f"supported by {', '.join(p.devices[d] for d in takers)}"
                  f" but kept on the fallback ({why})")


def _budgets_below(p: Problem, v: int, held: int) -> list[str]:
    """The devices' own ``max_const_bytes`` below the ``held`` bytes node ``v`` reads alone
    (which took it off those devices), on devices whose op table does not rule it out."""
    lim, node = p.limits, p.graph.nodes[v]
    return [f"{lim.setting(d, 'bytes')} {lim.max_const[d]}" for d in range(len(p.devices))
            if (cap := lim.max_const[d]) is not None and held > cap
            and op_in_table(p.properties[d], node) is not False]


def _size_limits(lim: Limits, takers: list[int]) -> list[str]:
    """The node limits of the devices in ``takers``, each once: ``min_size 2``, ``max_size
    64`` (global) or ``npu's max_nodes 24`` (a device's own), minimums first."""
    out = [f"{lim.setting(d, 'min')} {lim.min_nodes[d]}" for d in takers if lim.min_nodes[d] > 1]
    out += [f"{lim.setting(d, 'max')} {lim.max_nodes[d]}" for d in takers
            if lim.max_nodes[d] is not None]
    return list(dict.fromkeys(out))


def refusal_reason(problem: Problem, v: int,
                   ops_taken: Mapping[str, list[str]] | None = None) -> Reason:
    """Why no device takes node ``v``: ``"op not supported"`` when its op is in no device's op
    table, else ``"selector condition"`` (other nodes of the op taken, or every node of it
    refused), each with the selectors' own explanations when they have an ``explain``."""
    p = problem
    node = p.graph.nodes[v]
    if not p.devices:
        return Reason(Category.OP_NOT_SUPPORTED, "no accelerator device is configured")
    if ops_taken is None:
        ops_taken = devices_taking_op(p)
    texts = [t for t in (selector_explanation(prop, node, p.graph) for prop in p.properties)
             if t]
    why = f": {'; '.join(texts)}" if texts else ""
    same_op = ops_taken.get(node.op_type, [])
    if same_op:
        verb = "takes" if len(same_op) == 1 else "take"
        return Reason(Category.SELECTOR_CONDITION, f"{', '.join(same_op)} {verb} other "
                      f"{node.op_type} nodes but refused this one{_unnamed(why, same_op)}")
    listed = [op_in_table(prop, node) for prop in p.properties]
    if any(listed):
        devs = [prop.device for prop, ok in zip(p.properties, listed) if ok]
        return Reason(Category.SELECTOR_CONDITION, f"every {node.op_type} node failed a "
                      f"condition of {', '.join(devs)}{_unnamed(why, devs)}")
    if texts:
        why = f" ({'; '.join(texts)})"
    return Reason(Category.OP_NOT_SUPPORTED, f"no device supports {node.op_type}{why}")


def _unnamed(why: str, devices: list[str]) -> str:
    """``why`` (``": nnapi: input 0 ..."``) without the selector's name when it is the one
    device the sentence just named (no ``nnapi: nnapi:``)."""
    if len(devices) == 1 and why.startswith(f": {devices[0]}: "):
        return why[len(devices[0]) + 2:]
    return why


def selector_explanation(prop: Any, node: Any, graph: Any) -> str | None:
    """The property's own ``explain(node[, graph])`` text for a refused node, or ``None`` when
    it has no ``explain`` or says nothing."""
    explain = getattr(prop, "explain", None)
    if not callable(explain):
        return None
    try:
        takes_graph = "graph" in inspect.signature(explain).parameters
    except (TypeError, ValueError):
        takes_graph = False
    text = explain(node, graph) if takes_graph else explain(node)
    return str(text) if text else None


def op_in_table(prop: Any, node: Any) -> bool | None:
    """Whether ``node``'s op is in the op table of the property (``ops`` with ``key_of``, or a
    stock selector's ``op_types``); ``None`` when the property does not say."""
    ops = getattr(prop, "ops", None)
    key_of = getattr(prop, "key_of", None)
    if isinstance(ops, (set, frozenset)) and callable(key_of):
        key = key_of(node)
        return key is not None and key in ops
    op_types = getattr(prop, "op_types", None)
    if isinstance(op_types, (set, frozenset)):
        return node.op_type in op_types
    return None


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
    """The placement report as a JSON-ready dict: per device its node, folded-node and cluster
    counts and op types; every fallback node that is not folded (:attr:`Graph.folded`: onnxruntime
    computes it before placement) with its reason, the most specific known (the engine's
    ``partition.fallback_reasons``, else :func:`infer_reason`, which quotes the selectors'
    ``explain``); counts per category and per category and op type; ``folded`` (count) and
    ``assignment``: per device, in onnxruntime's graph-assignment form, its non-folded nodes.
    Node ``index`` values are source indices (ONNX ``graph.node`` / node-link ``nodes``)."""
    g = partition.graph
    ops, nodes = g.op_types, g.nodes
    src = g.index_to_source
    order = _device_order(partition)
    index = {d: k for k, d in enumerate(order)}
    flat, dev = _cluster_nodes(partition, index)
    compute = flat[(dev == index[partition.fallback]) & ~g.folded[flat]].tolist()
    reasons = fallback_reasons_of(partition, compute)
    fallen = []
    by_reason: Counter = Counter()
    by_op: dict[str, Counter] = {}
    ids = np.asarray(compute, dtype=np.int64)
    ids = ids[np.argsort(src[ids], kind="stable")]     # by source index
    for v, i in zip(ids.tolist(), src[ids].tolist()):
        why = reasons[v]
        cat = why.category.value
        by_reason[cat] += 1
        if cat not in by_op:
            by_op[cat] = Counter()
        by_op[cat][ops[v]] += 1
        fallen.append({"node": nodes[v].name, "index": i, "op": ops[v],
                       "reason": cat, "detail": why.detail})
    cats = [c.value for c in Category]
    return {
        "fallback": partition.fallback,
        "devices": _device_counts(partition, order, index, flat, dev),
        "reasons": {k: by_reason[k] for k in cats if by_reason[k]},
        "reasons_by_op": {k: dict(sorted(by_op[k].items(), key=lambda kv: (-kv[1], kv[0])))
                          for k in cats if k in by_op},
        "fallen_back": fallen,
        "folded": int(g.folded.sum()),
        "assignment": _assignment(partition, index, flat, dev),
    }


def fallback_reasons_of(partition: Partition, nodes: list[int]) -> dict[int, Reason]:
    """The most specific known reason for each of the fallback ``nodes``: the engine's recorded
    one, unless no device takes the node and the engine only said a selector refused it (then,
    as for unrecorded nodes, :func:`infer_reason`, which quotes the selectors' ``explain``).
    Inferred refusals depend on the op type alone when no selector explains and no
    ``max_const_bytes`` applies, and are then worked out once per op type."""
    problem = partition.problem
    recorded = partition.fallback_reasons
    ops = problem.graph.op_types
    any_sup = problem.any_supported.tolist()
    ops_taken = devices_taking_op(problem)
    per_op = not problem.limits.any_bytes and not any(
        callable(getattr(prop, "explain", None)) for prop in problem.properties)
    cache: dict[str, Reason] = {}
    out: dict[int, Reason] = {}
    for v in nodes:
        why = recorded.get(v)
        if why is not None and not (why.category is Category.SELECTOR_CONDITION
                                    and not any_sup[v]):
            out[v] = why
        elif per_op and not any_sup[v]:
            if ops[v] not in cache:
                cache[ops[v]] = infer_reason(problem, v, ops_taken)
            out[v] = cache[ops[v]]
        else:
            out[v] = infer_reason(problem, v, ops_taken)
    return out


def _assignment(partition: Partition, index: dict[str, int], flat: np.ndarray,
                dev: np.ndarray) -> list[dict[str, Any]]:
    """Per device (as :func:`_device_counts` orders them), its non-folded nodes as
    ``{"name", "op_type", "domain", "index"}`` (source index), sorted by index: the form of
    onnxruntime's graph-assignment info. ``index``, ``flat``, ``dev``: the devices' positions
    and :func:`_cluster_nodes`."""
    g = partition.graph
    keep = ~g.folded[flat]
    flat, dev = flat[keep], dev[keep]
    src = g.index_to_source[flat]
    by = np.lexsort((src, dev))           # per device by source index, ties in cluster order
    flat, dev, src = flat[by], dev[by], src[by]
    bounds = np.searchsorted(dev, np.arange(len(index) + 1)).tolist()
    ids, idx, nodes, ops = flat.tolist(), src.tolist(), g.nodes, g.op_types
    out = []
    for dev_name, k in index.items():
        a, b = bounds[k], bounds[k + 1]
        out.append({"device": dev_name, "nodes": [
            {"name": nodes[v].name, "op_type": ops[v], "domain": nodes[v].domain, "index": i}
            for v, i in zip(ids[a:b], idx[a:b])]})
    return out


def _cluster_nodes(partition: Partition, index: dict[str, int]
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Every cluster's nodes, in cluster order, and parallel to them ``index`` of the cluster's
    device."""
    clusters = partition.clusters
    sizes = [len(c.nodes) for c in clusters]
    flat = np.fromiter(chain.from_iterable(c.nodes for c in clusters), dtype=np.int64,
                       count=sum(sizes))
    dev = np.repeat(np.asarray([index[c.device] for c in clusters], dtype=np.int64), sizes)
    return flat, dev


def current_placement(partition: Partition) -> dict[str, Any]:
    """The placement report of a partition: the strategy's ``info["placement"]`` when it set
    one, recomputed (keeping the strategy's reasons) if the clusters changed since (a pass such
    as coalescing ran after the strategy) or it predates the folded count; else the generic
    report (:func:`placement_report`). The result is stored in ``info["placement"]``; what a
    strategy stored there that is not a placement report (the ``placement`` strategy's solver
    figures) moves to ``info["solver_placement"]``."""
    info = partition.info.get("placement")
    if info is not None and not (isinstance(info, dict) and "fallen_back" in info):
        partition.info.setdefault("solver_placement", info)
    elif isinstance(info, dict) and "devices" in info:
        if not _stale(partition, info):
            return info
        s2i = partition.graph.source_to_index
        known = {c.value: c for c in Category}
        kept = {int(s2i[e["index"]]): Reason(known[e["reason"]], e["detail"])
                for e in info["fallen_back"] if e["reason"] in known}
        partition.fallback_reasons = kept | partition.fallback_reasons
    fresh = placement_report(partition)
    partition.info["placement"] = fresh
    return fresh


def _stale(partition: Partition, info: dict[str, Any]) -> bool:
    """Whether a stored report no longer matches the partition's clusters."""
    if "folded" not in info or "assignment" not in info:
        return True
    counts: dict[str, int] = {}
    fb_nodes = 0
    folded = partition.graph.folded.tolist()
    for c in partition.clusters:
        counts[c.device] = counts.get(c.device, 0) + 1
        if c.device == partition.fallback:
            fb_nodes += sum(1 for v in c.nodes if not folded[v])
    return (fb_nodes != len(info["fallen_back"])
            or any(e.get("clusters") != counts.get(d, 0) for d, e in info["devices"].items()))


def _device_order(partition: Partition) -> list[str]:
    """Devices in priority order, then the fallback, then any other a cluster names."""
    order = list(partition.problem.devices) + [partition.fallback]
    for c in partition.clusters:
        if c.device not in order:
            order.append(c.device)
    return order


def _device_counts(partition: Partition, order: list[str], index: dict[str, int],
                   flat: np.ndarray, dev_k: np.ndarray) -> dict[str, dict[str, Any]]:
    """Per device (``order``, :func:`_device_order`): nodes, folded nodes among them, clusters
    and the op types it took, most frequent first (counted with numpy: one pass for a million
    nodes). ``index``, ``flat``, ``dev_k``: the devices' positions and :func:`_cluster_nodes`."""
    g = partition.graph
    clusters = Counter(c.device for c in partition.clusters)
    dev = np.zeros(g.n, dtype=np.int64)
    dev[flat] = dev_k
    names, op_code = np.unique(np.asarray(g.op_types, dtype=object).astype(str),
                               return_inverse=True)
    pairs = np.bincount(dev * len(names) + op_code.ravel(),
                        minlength=len(order) * len(names)).reshape(len(order), len(names))
    n_folded = np.bincount(dev, weights=g.folded, minlength=len(order))
    devs: dict[str, dict[str, Any]] = {}
    for k, d in enumerate(order):
        taken = {str(names[j]): int(pairs[k, j]) for j in np.flatnonzero(pairs[k]).tolist()}
        entry = {"nodes": int(pairs[k].sum()), "folded": int(n_folded[k]),
                 "clusters": clusters[d],
                 "op_types": dict(sorted(taken.items(), key=lambda kv: (-kv[1], kv[0])))}
        if d == partition.fallback:
            entry["fallback"] = True
        devs[d] = entry
    return devs
