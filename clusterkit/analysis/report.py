"""Placement report: per device, how many nodes and which op types it took; which nodes fell back
to the fallback device and why, in the categories of :mod:`clusterkit.result.reasons`.

The report itself is :func:`clusterkit.result.report.placement_report`, a view of the partition
(:meth:`Partition.placement`): the reasons engines record (``Partition.fallback_reasons``,
carried by every pass), else the reasons inferred from the compiled
:class:`~clusterkit.constraints.core.Problem`. :func:`get_placement` returns it;
:func:`format_placement` prints it; :func:`device_rows`, :func:`fallback_rows` and
:func:`reasons_line` give the same report as table rows (the command line's tables, the HTML
report).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from clusterkit.result.model import Partition
from clusterkit.result.report import plural


def get_placement(partition: Partition) -> dict[str, Any]:
    """The placement report of a partition (:meth:`Partition.placement`)."""
    return partition.placement()


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
    folded_text = folded_line(rep)
    if folded_text:
        lines.append("  " + folded_text)
    lines.append("  " + reasons_line(rep))
    if rep["fallen_back"]:
        shown = shown_fallbacks(rep, max_nodes)
        for cat, entries in shown.items():
            ops = rep["reasons_by_op"].get(cat)
            total = sum(1 for e in rep["fallen_back"] if e["reason"] == cat)
            lines.append(f"    {cat}: {_ops(ops) if ops else total}")
            for e in entries:
                lines.append(f"      node {e['node']!r} ({e['op']}, #{e['index']}): "
                             f"{e['detail']}")
        more = len(rep["fallen_back"]) - sum(len(v) for v in shown.values())
        if more > 0:
            lines.append(f"    ... {more} more nodes in the JSON's placement.fallen_back")
    return "\n".join(lines)


def reasons_line(rep: Mapping[str, Any]) -> str:
    """``fell back: 5 nodes — op not supported 1, constraint 4`` (or ``fell back: none``) for a
    placement report (:func:`get_placement`)."""
    if not rep["fallen_back"]:
        return "fell back: none"
    parts = [f"{k} {n}" for k, n in rep["reasons"].items()]
    return f"fell back: {plural(len(rep['fallen_back']), 'node')} — " + ", ".join(parts)


def folded_line(rep: Mapping[str, Any]) -> str | None:
    """The line on folded nodes of a placement report, or None when none is folded."""
    if not rep.get("folded"):
        return None
    return (f"folded: {rep['folded']} nodes (constants and static shape values onnxruntime "
            "computes before placement; never fallbacks)")


def shown_fallbacks(rep: Mapping[str, Any], max_nodes: int | None = 10
                    ) -> dict[str, list[dict[str, Any]]]:
    """The fallen-back entries to show, per reason category in the report's order: an equal
    share of ``max_nodes`` for every category (at least one each; None: all of them)."""
    by_reason: dict[str, list[dict[str, Any]]] = {}
    for e in rep["fallen_back"]:
        by_reason.setdefault(e["reason"], []).append(e)
    if max_nodes is None:
        return by_reason
    per = max(1, max_nodes // max(1, len(by_reason)))
    return {cat: entries[:per] for cat, entries in by_reason.items()}


#: the columns of :func:`device_rows` and :func:`fallback_rows` (True: a number)
DEVICE_COLUMNS = [("device", False), ("nodes", True), ("folded", True), ("clusters", True),
                  ("op types", False)]
FALLBACK_COLUMNS = [("node", False), ("op", False), ("#", True), ("reason", False),
                    ("detail", False)]


def device_rows(rep: Mapping[str, Any], max_ops: int | None = 8) -> list[list[str]]:
    """One row per device of a placement report: name (``cpu (fallback)``), nodes, folded
    nodes, clusters, op types with counts (the first ``max_ops``; None: all)."""
    rows = []
    for dev, e in rep["devices"].items():
        tag = " (fallback)" if e.get("fallback") else ""
        ops = _ops(e["op_types"], max_ops) if e["op_types"] else ""
        rows.append([f"{dev}{tag}", str(e["nodes"]), str(e.get("folded", 0)),
                     str(e["clusters"]), ops])
    return rows


#: the columns of :func:`reason_rows`
REASON_COLUMNS = [("reason", False), ("nodes", True), ("op types", False)]


def reason_rows(rep: Mapping[str, Any]) -> list[list[str]]:
    """One row per fallback reason of a placement report: the reason, its node count and its
    op types with counts (the command line's and the HTML page's reason table)."""
    return [[cat, str(n), _ops(rep["reasons_by_op"][cat], None)
             if rep["reasons_by_op"].get(cat) else ""] for cat, n in rep["reasons"].items()]


def fallback_rows(entries: Iterable[Mapping[str, Any]]) -> list[list[str]]:
    """One row per fallen-back entry (of a report's ``fallen_back``): node, op, index, reason,
    detail."""
    return [[str(e["node"]), str(e["op"]), str(e["index"]), str(e["reason"]), str(e["detail"])]
            for e in entries]


def _ops(counts: Mapping[str, int], limit: int | None = 8) -> str:
    items = list(counts.items())
    limit = len(items) if limit is None else limit
    text = ", ".join(f"{op} {k}" for op, k in items[:limit])
    if len(items) > limit:
        text += f", +{len(items) - limit} more op types"
    return text
