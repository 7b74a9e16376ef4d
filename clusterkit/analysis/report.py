"""Placement report: per device, how many nodes and which op types it took; which nodes fell back
to the fallback device and why, in the categories of :mod:`clusterkit.reasons`.

The report itself is :func:`clusterkit.reasons.placement_report`: engines that record their
fallback reasons (``Partition.fallback_reasons``) store it in ``info["placement"]``, and for any
other partition it infers the reasons from the compiled
:class:`~clusterkit.constraints.core.Problem`. :func:`get_placement` returns the stored report,
refreshed if the clusters changed since (coalescing), or the generic one;
:func:`format_placement` prints it.
"""

from __future__ import annotations

from typing import Any, Mapping

from clusterkit.reasons import current_placement
from clusterkit.result import Partition


def get_placement(partition: Partition) -> dict[str, Any]:
    """The placement report of a partition: the strategy's ``info["placement"]`` when it set
    one, recomputed (keeping the strategy's reasons) if the clusters changed since (a pass such
    as coalescing ran after the strategy) and stored back; else the generic report
    (:func:`~clusterkit.reasons.current_placement`)."""
    return current_placement(partition)


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
        folded = f" ({e['folded']} folded)" if e.get("folded") else ""
        lines.append(f"  {dev}{tag}: {e['nodes']} nodes{folded} in {e['clusters']} clusters"
                     + (f" — {_ops(e['op_types'])}" if e["op_types"] else ""))
    if rep.get("folded"):
        lines.append(f"  folded: {rep['folded']} nodes (constants and static shape values "
                     "onnxruntime computes before placement; never fallbacks)")
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
