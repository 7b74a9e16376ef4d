"""Re-apply a saved partition JSON (DESIGN.md format) to the same model, without partitioning.

The JSON's ``nodes`` are indices into the model's ``graph.node``. :func:`apply_plan` checks that
the plan fits the model (every index in range and used exactly once, every device known) before
validating the partition against the problem's constraints, and says what does not match.
"""

from __future__ import annotations

import os
import re
import shlex
from typing import Any

from clusterkit.constraints.core import Problem
from clusterkit.errors import PartitionError, SelectorError
from clusterkit.io.partition_json import cluster_nodes, read_partition_json
from clusterkit.result import Partition

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
               model_name: str | None = None, label: str | None = None) -> Partition:
    """The partition a plan (a file or its loaded JSON) describes, checked against ``problem``
    (its graph must be the model the plan was made for) and validated. Raises
    :class:`PartitionError` saying what does not match; ``label`` names the plan in messages."""
    label = label or plan_label(source)
    data = load_plan(source, label)
    g = problem.graph
    name = model_name or g.name
    made_for = data.get("model")
    hint = (f" (the plan was made for model {made_for!r})" if made_for and made_for != name
            else "")
    where = f"{label} does not match model {name!r} ({g.n} nodes){hint}"
    metrics = data.get("metrics") or {}
    if isinstance(metrics, dict) and "nodes_offloaded" in metrics and "fallback_nodes" in metrics:
        total = metrics["nodes_offloaded"] + metrics["fallback_nodes"]
        if total != g.n:
            raise PartitionError(f"{where}: the plan covers a model with {total} nodes")
    count = [0] * g.n
    for _, nodes in cluster_nodes(data, g.n, where):
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
    part = Partition.from_json(problem, data)
    part.strategy = f"plan:{data.get('strategy', 'unknown')}"
    try:
        part.validate()
    except PartitionError as exc:
        raise PartitionError(f"{where}: {exc}") from exc
    return part
