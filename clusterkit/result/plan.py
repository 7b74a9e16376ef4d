"""Re-apply a saved partition JSON (docs/design.md format) to the same model, without partitioning.

The JSON's ``nodes`` are indices into the model's ``graph.node``. A plan that records the
model's ``fingerprint`` (node names and op types hashed) is applied only to a model with the
same fingerprint, so a re-exported model with the same node count never silently gets another
model's mapping: the error names the first node that differs. ``force=True`` applies such a
plan by node name instead (the plan's ``names``); the model's nodes it does not place go to
the fallback. A plan without a fingerprint (an older file) is applied by index. :func:`apply_plan`
then checks that the plan fits the model (every index in range and used exactly once, every
device known) before validating the partition against the problem's constraints, and says what
does not match.
"""

from __future__ import annotations

import os
import re
import shlex
from collections import Counter
from typing import Any

from clusterkit.constraints.core import Problem
from clusterkit.errors import PartitionError, SelectorError
from clusterkit.graph.algorithms import UnionFind
from clusterkit.graph.core import Graph
from clusterkit.result.json_format import (
    cluster_nodes,
    model_fingerprint,
    read_partition_json,
    source_nodes,
)
from clusterkit.result.model import Partition

#: the selector specs a plan may record: ``[DEVICE=]ops:OP,...`` or ``[DEVICE=]NAME[...]``
_PLAN_SPEC = re.compile(r"(?:[A-Za-z_][A-Za-z0-9_.\-]*=)?"
                        r"(?:ops:.*|[A-Za-z_][A-Za-z0-9_\-]*(?:\[.*\])?)", re.S)


def plan_label(source: str | os.PathLike | dict) -> str:
    """How messages name a plan: ``plan 'PATH'``, or ``plan`` for a loaded dict."""
    return "plan" if isinstance(source, dict) else f"plan {os.fspath(source)!r}"


def load_plan(source: str | os.PathLike | dict, label: str | None = None) -> dict[str, Any]:
    """Read a partition JSON file (or take a dict) and check its shape."""
    return read_partition_json(source, label or plan_label(source))


def plan_selectors(plan: dict[str, Any], label: str = "plan") -> list[str]:
    """The ``--selector`` specs recorded in a plan (its ``selector`` field, split like a shell
    command line); empty when none were recorded.

    Only shipped or registered selector names and ``ops:`` specs are taken from a plan. A spec
    naming a Python file (or any path) raises :class:`SelectorError`: loading it would run code
    the plan's author chose, so only the user may ask for it, with ``--selector`` itself."""
    text = str(plan.get("selector") or "").strip()
    try:
        specs = shlex.split(text) if text else []
    except ValueError as exc:
        raise SelectorError(f"{label}: its 'selector' field {text!r} cannot be split ({exc})")\
            from exc
    for spec in specs:
        if not _PLAN_SPEC.fullmatch(spec):
            raise SelectorError(f"{label} records selector {spec!r}, which is not a shipped "
                                f"selector name or an ops: spec; a plan never loads code from a "
                                f"file, pass --selector {shlex.quote(spec)} to use it")
    return specs


def apply_plan(problem: Problem, source: str | os.PathLike | dict,
               model_name: str | None = None, label: str | None = None, *,
               force: bool = False, made_from: Graph | None = None) -> Partition:
    """The partition a plan (a file or its loaded JSON) describes, checked against ``problem``
    (its graph must be the model the plan was made for) and validated. Raises
    :class:`PartitionError` saying what does not match; ``label`` names the plan in messages.
    ``force``: a plan whose fingerprint differs from the model's is applied by node name; the
    partition's ``info["plan_by_name"]`` then reports what did not match. ``made_from``: the
    graph the problem's was made from, node for node (the model before
    :func:`clusterkit.io.weights.random_weights` replaced its weight stubs), whose nodes the
    fingerprint is checked against (default: the problem's graph)."""
    label = label or plan_label(source)
    data = load_plan(source, label)
    g = problem.graph
    name = model_name or g.name
    made_for = data.get("model")
    hint = (f" (the plan was made for model {made_for!r})" if made_for and made_for != name
            else "")
    where = f"{label} does not match model {name!r} ({g.n} nodes){hint}"
    report = mismatch = None
    if data.get("fingerprint") is not None:
        nodes = source_nodes(made_from if made_from is not None else g)
        if data["fingerprint"] != model_fingerprint(nodes):
            if force:
                data, report = plan_by_name(data, nodes, problem.fallback, label)
            else:
                mismatch = f"{first_mismatch(data, nodes, label)}; pass --force to apply it by name"
    part = _apply(problem, data, where, label, mismatch)
    if report is not None:
        part.info["plan_by_name"] = report
        part = _valid_by_name(part, f"{label} applied by node name to model {name!r}")
    return part


def _apply(problem: Problem, data: dict[str, Any], where: str, label: str,
           mismatch: str | None = None) -> Partition:
    """The partition of a plan over ``problem``'s node indices, checked and validated;
    ``mismatch`` (where the plan's fingerprinted node list differs from the model's) refuses
    it, after the node count and index range checks have had their say."""
    g = problem.graph
    metrics = data.get("metrics") or {}
    also = f"; {mismatch}" if mismatch else ""
    if isinstance(metrics, dict) and "nodes_offloaded" in metrics and "fallback_nodes" in metrics:
        total = metrics["nodes_offloaded"] + metrics["fallback_nodes"]
        if total != g.n:
            raise PartitionError(f"{where}: the plan covers a model with {total} nodes{also}")
    count = [0] * g.n
    try:
        clusters = cluster_nodes(data, g.n, where)
    except PartitionError as exc:
        raise PartitionError(f"{exc}{also}") from exc
    if mismatch:
        raise PartitionError(f"{where}: {mismatch}")
    for _, nodes in clusters:
        for v in nodes:
            count[v] += 1
    twice = [v for v, k in enumerate(count) if k > 1]
    if twice:
        raise PartitionError(f"{where}: node index {twice[0]} is in {count[twice[0]]} clusters")
    missing = [v for v, k in enumerate(count) if k == 0]
    if missing:
        raise PartitionError(f"{where}: {len(missing)} node indices are in no cluster (first: "
                             f"{missing[0]}, node {g.nodes[g.source_to_index[missing[0]]].name!r})")
    known = list(problem.devices) + [problem.fallback]
    for c in data["clusters"]:
        if str(c["device"]) not in known:
            raise PartitionError(f"{label}: cluster {c.get('id')} is on device {c['device']!r}, "
                                 f"but the selectors define {', '.join(problem.devices) or 'none'}"
                                 f" (fallback {problem.fallback!r})")
    part = Partition.from_json(problem, data, strategy=f"plan:{data.get('strategy', 'unknown')}")
    if data.get("by_name"):
        return part  # validated (and repaired) by the caller
    try:
        part.validate()
    except PartitionError as exc:
        raise PartitionError(f"{where}: {exc}") from exc
    return part


def plan_nodes(data: dict[str, Any], label: str = "plan") -> dict[int, tuple[str, str | None]]:
    """The plan's ``(name, op type)`` per node index, from its clusters' ``names`` (and
    ``op_types``, None where not recorded); empty when the plan records no names."""
    out: dict[int, tuple[str, str | None]] = {}
    for c in data["clusters"]:
        names, ops = c.get("names"), c.get("op_types")
        if names is None:
            return {}
        if len(names) != len(c["nodes"]) or (ops is not None and len(ops) != len(names)):
            raise PartitionError(f"{label}: cluster {c.get('id')} lists {len(c['nodes'])} nodes "
                                 f"but {len(names)} names")
        for k, v in enumerate(c["nodes"]):
            out[v] = (str(names[k]), None if ops is None else str(ops[k]))
    return out


def first_mismatch(data: dict[str, Any], nodes: list[tuple[str, str]], label: str) -> str:
    """Where a plan's node list and the model's ``nodes`` first differ, as a message."""
    recorded = plan_nodes(data, label)
    if not recorded:
        return "its fingerprint differs from the model's (the plan records no node names)"
    for v in range(max(len(nodes), max(recorded) + 1)):
        want = recorded.get(v)
        have = nodes[v] if v < len(nodes) else None
        if want is not None and have is not None and want[0] == have[0] and \
                want[1] in (None, have[1]):
            continue
        expect = "no node" if want is None else f"{want[0]!r} ({want[1] or 'op not recorded'})"
        found = "no node" if have is None else f"{have[0]!r} ({have[1]})"
        return (f"first mismatched node at graph.node index {v}: the plan expects {expect}, the "
                f"model has {found}")
    return "its fingerprint differs from the model's, though every recorded name and op matches"


def plan_by_name(data: dict[str, Any], nodes: list[tuple[str, str]], fallback: str,
                 label: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The plan re-keyed to the model's indices by node name (the k-th node of a name in the
    plan is the k-th of that name in the model; its op type must match too), and a report.
    Model nodes the plan does not place become fallback singletons."""
    recorded = plan_nodes(data, label)
    if not recorded:
        raise PartitionError(f"{label} records no node names, so it cannot be applied by name")
    index: dict[tuple[str, int], int] = {}
    seen: Counter = Counter()
    for v, (name, _) in enumerate(nodes):
        index[(name, seen[name])] = v
        seen[name] += 1
    cluster_of = {v: pos for pos, c in enumerate(data["clusters"]) for v in c["nodes"]}
    placed: list[list[int]] = [[] for _ in data["clusters"]]
    seen.clear()
    not_found, changed = [], []
    for v in sorted(recorded):
        name, op = recorded[v]
        u = index.get((name, seen[name]))
        seen[name] += 1
        if u is None:
            not_found.append(name)
        elif op is not None and nodes[u][1] != op:
            changed.append(name)
        else:
            placed[cluster_of[v]].append(u)
    taken = {u for members in placed for u in members}
    clusters = [(str(c["device"]), members) for c, members in zip(data["clusters"], placed)
                if members]
    unplaced = [v for v in range(len(nodes)) if v not in taken]
    clusters += [(fallback, [v]) for v in unplaced]
    out: dict[str, Any] = {k: data[k] for k in ("model", "strategy", "selector", "fallback")
                           if k in data}
    out["clusters"] = [{"id": k, "device": dev, "nodes": sorted(m)}
                       for k, (dev, m) in enumerate(clusters)]
    out["by_name"] = True
    report = {"matched": len(taken), "plan_nodes_not_found": not_found,
              "op_type_changed": changed, "to_fallback": [nodes[v][0] for v in unplaced]}
    return out, report


def by_name_summary(report: dict[str, Any]) -> str:
    """One line saying how a plan applied by node name matched the model."""
    parts = [f"{report['matched']} nodes matched by name"]
    for key, what in (("to_fallback", "model nodes the plan does not place go to the fallback"),
                      ("plan_nodes_not_found", "plan nodes are not in the model"),
                      ("op_type_changed", "nodes changed op type (on the fallback)")):
        names = report.get(key) or []
        if names:
            parts.append(f"{len(names)} {what} (first: {names[0]!r})")
    return "plan applied by node name (--force): " + "; ".join(parts)


def _valid_by_name(part: Partition, where: str) -> Partition:
    """``part`` validated; an invalid one has its offloaded clusters split into their
    connected pieces (a node moved to the fallback may have cut one in two) and is tried
    again. Raises :class:`PartitionError` when that is not enough."""
    try:
        return part.validate()
    except PartitionError:
        pass
    g: Graph = part.graph
    uf = UnionFind(g.n)
    a = part.assignment()
    for u, v in zip(g.edge_src.tolist(), g.edge_dst.tolist()):
        if a[u] == a[v]:
            uf.union(u, v)
    pieces: dict[tuple[int, int], list[int]] = {}
    for pos, c in enumerate(part.clusters):
        for v in c.nodes:
            key = (pos, -1 if c.device == part.fallback else uf.find(v))
            pieces.setdefault(key, []).append(v)
    devices = [c.device for c in part.clusters]
    split = part.derive(clusters=Partition.from_clusters(part.problem, [
        (devices[pos], m) for (pos, _), m in sorted(pieces.items(), key=lambda kv: kv[1][0])]
    ).clusters)
    try:
        return split.validate()
    except PartitionError as exc:
        raise PartitionError(f"{where} is not a valid partition: {exc}") from exc
