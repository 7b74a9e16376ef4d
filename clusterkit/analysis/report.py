"""Placement report: per device, how many nodes and which op types it took; which nodes fell back
to the fallback device and why.

Reason categories (``reason`` of each fallen-back node):

- ``"op not supported"`` — no device's query takes the node and no device takes any node of its
  op type in this graph;
- ``"selector condition"`` — no device takes the node, but some device takes other nodes of the
  same op type (its selector refused this one: attributes, shapes, a ``filter``...);
- ``"constraint"`` — a device supports the node but a constraint kept it off (``min_size``,
  ``max_const_bytes``, a together group no device can take...);
- ``"cycle"`` — the strategy took it out of a cluster to avoid a path leaving the cluster and
  coming back, and it ended on the fallback;
- ``"manual affinity"`` — a manual affinity put it there (to the fallback, to a device that does
  not support it, or none given while manual affinities are in use without fill-in);
- ``"subgraph rejected"`` — the device's ``create_subgraph_node`` refused its subgraph.

Strategies may pass their own per-node reasons (they know about cycles and rejections); anything
they do not explain is inferred from the compiled :class:`~clusterkit.constraints.core.Problem`, so
:func:`placement` works for any strategy's partition.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Mapping

from clusterkit.result import Partition

OP_NOT_SUPPORTED = "op not supported"
SELECTOR_CONDITION = "selector condition"
CONSTRAINT = "constraint"
CYCLE = "cycle"
MANUAL_AFFINITY = "manual affinity"
SUBGRAPH_REJECTED = "subgraph rejected"
CATEGORIES = (OP_NOT_SUPPORTED, SELECTOR_CONDITION, CONSTRAINT, CYCLE, MANUAL_AFFINITY,
              SUBGRAPH_REJECTED)

Reason = tuple[str, str]


def infer_reason(partition: Partition, v: int,
                 ops_taken: Mapping[str, list[str]] | None = None) -> Reason:
    """Why node ``v`` (topological index) is on the fallback, from the problem alone.
    ``ops_taken`` (op type → devices taking some node of it) is computed when not given."""
    p = partition.problem
    g = p.graph
    node = g.nodes[v]
    if p.max_const_bytes is not None and int(g.const_bytes[v]) > p.max_const_bytes:
        return CONSTRAINT, (f"it reads {int(g.const_bytes[v])} bytes of constants, above "
                            f"max_const_bytes {p.max_const_bytes}")
    sup = p.supported[:, v] if p.devices else []
    takers = [p.devices[d] for d in range(len(p.devices)) if sup[d]]
    if not takers:
        if ops_taken is None:
            ops_taken = devices_taking_op(partition)
        same_op = ops_taken.get(node.op_type, [])
        if same_op:
            verb = "takes" if len(same_op) == 1 else "take"
            return SELECTOR_CONDITION, (f"{', '.join(same_op)} {verb} other {node.op_type} nodes"
                                        " but refused this one")
        if not p.devices:
            return OP_NOT_SUPPORTED, "no accelerator device is configured"
        return OP_NOT_SUPPORTED, f"no device supports {node.op_type}"
    limits = []
    if p.min_size > 1:
        limits.append(f"min_size {p.min_size}")
    if p.max_size is not None:
        limits.append(f"max_size {p.max_size}")
    if int(p.group_of[v]) >= 0:
        limits.append(f"together group {int(p.group_of[v])}")
    why = ", ".join(limits) if limits else "the strategy's constraints"
    return CONSTRAINT, f"supported by {', '.join(takers)} but kept on the fallback ({why})"


def devices_taking_op(partition: Partition) -> dict[str, list[str]]:
    """op type → devices that take at least one node of that op type."""
    p = partition.problem
    ops = p.graph.op_types
    out: dict[str, list[str]] = {}
    for d, dev in enumerate(p.devices):
        taken = {ops[v] for v in p.supported[d].nonzero()[0].tolist()}
        for op in sorted(taken):
            out.setdefault(op, []).append(dev)
    return out


def placement(partition: Partition, reasons: Mapping[int, Reason] | None = None
              ) -> dict[str, Any]:
    """The placement report as a JSON-ready dict.

    ``reasons`` maps topological node indices to ``(category, detail)`` for nodes the strategy
    can explain; the other fallback nodes get :func:`infer_reason`. Node ``index`` values in the
    result are source indices (ONNX ``graph.node`` / node-link ``nodes`` positions)."""
    g = partition.graph
    fb = partition.fallback
    ops = g.op_types
    src = g.index_to_source.tolist()
    order = list(partition.problem.devices) + [fb]
    devs: dict[str, dict[str, Any]] = {}
    for c in partition.clusters:
        if c.device not in order:
            order.append(c.device)
    counts: dict[str, Counter] = {d: Counter() for d in order}
    clusters: Counter = Counter()
    for c in partition.clusters:
        clusters[c.device] += 1
        counts[c.device].update(ops[v] for v in c.nodes)
    for d in order:
        cnt = counts[d]
        entry = {"nodes": sum(cnt.values()), "clusters": clusters[d],
                 "op_types": dict(sorted(cnt.items(), key=lambda kv: (-kv[1], kv[0])))}
        if d == fb:
            entry["fallback"] = True
        devs[d] = entry
    reasons = reasons or {}
    ops_taken = devices_taking_op(partition)
    fallen = []
    by_reason: Counter = Counter()
    by_op: dict[str, Counter] = {}
    for c in partition.clusters:
        if c.device != fb:
            continue
        for v in c.nodes:
            cat, detail = reasons.get(v) or infer_reason(partition, v, ops_taken)
            by_reason[cat] += 1
            by_op.setdefault(cat, Counter())[ops[v]] += 1
            fallen.append({"node": g.nodes[v].name, "index": src[v], "op": ops[v],
                           "reason": cat, "detail": detail})
    fallen.sort(key=lambda e: e["index"])
    return {
        "fallback": fb,
        "devices": devs,
        "reasons": {k: by_reason[k] for k in CATEGORIES if by_reason[k]}
        | {k: v for k, v in sorted(by_reason.items()) if k not in CATEGORIES},
        "reasons_by_op": {k: dict(sorted(by_op[k].items(), key=lambda kv: (-kv[1], kv[0])))
                          for k in CATEGORIES if k in by_op},
        "fallen_back": fallen,
    }


def get_placement(partition: Partition) -> dict[str, Any]:
    """The placement report of a partition: the strategy's ``info["placement"]`` when it set
    one, recomputed (keeping the strategy's reasons) if the clusters changed since (a pass such
    as coalescing ran after the strategy) and stored back; else the generic report."""
    info = partition.info.get("placement")
    if not (isinstance(info, dict) and "devices" in info and "fallen_back" in info):
        return placement(partition)
    counts: dict[str, int] = {}
    fb_nodes = 0
    for c in partition.clusters:
        counts[c.device] = counts.get(c.device, 0) + 1
        if c.device == partition.fallback:
            fb_nodes += len(c.nodes)
    stale = (fb_nodes != len(info["fallen_back"])
             or any(e.get("clusters") != counts.get(d, 0) for d, e in info["devices"].items()))
    if not stale:
        return info
    s2i = partition.graph.source_to_index
    kept = {int(s2i[e["index"]]): (e["reason"], e["detail"]) for e in info["fallen_back"]}
    fresh = placement(partition, kept)
    partition.info["placement"] = fresh
    return fresh


def format_placement(partition: Partition, max_nodes: int = 10) -> str:
    """A few lines for ``clusterkit partition``: per-device counts and op types, fallback
    reasons, and the first fallen-back nodes (see :func:`get_placement`)."""
    rep = get_placement(partition)
    lines = ["placement:"]
    for dev, e in rep["devices"].items():
        if not e["nodes"] and not e.get("fallback"):
            lines.append(f"  {dev}: 0 nodes")
            continue
        tag = " (fallback)" if e.get("fallback") else ""
        lines.append(f"  {dev}{tag}: {e['nodes']} nodes in {e['clusters']} clusters"
                     + (f" — {_ops(e['op_types'])}" if e["op_types"] else ""))
    if rep["fallen_back"]:
        parts = [f"{k} {n}" for k, n in rep["reasons"].items()]
        lines.append(f"  fell back: {len(rep['fallen_back'])} nodes — " + ", ".join(parts))
        by_reason: dict[str, list[dict]] = {}
        for e in rep["fallen_back"]:
            by_reason.setdefault(e["reason"], []).append(e)
        per = max(1, max_nodes // max(1, len(by_reason)))
        shown = 0
        for cat, entries in by_reason.items():
            ops = rep["reasons_by_op"].get(cat)
            lines.append(f"    {cat}: {_ops(ops) if ops else len(entries)}")
            for e in entries[:per]:
                lines.append(f"      node {e['node']!r} ({e['op']}, #{e['index']}): "
                             f"{e['detail']}")
                shown += 1
        more = len(rep["fallen_back"]) - shown
        if more > 0:
            lines.append(f"    ... {more} more nodes in the JSON's placement.fallen_back")
    else:
        lines.append("  fell back: none")
    return "\n".join(lines)


def _ops(counts: Mapping[str, int], limit: int = 8) -> str:
    items = list(counts.items())
    text = ", ".join(f"{op} {k}" for op, k in items[:limit])
    if len(items) > limit:
        text += f", +{len(items) - limit} more op types"
    return text
