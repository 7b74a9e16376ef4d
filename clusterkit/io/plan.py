"""Re-apply a saved partition JSON (DESIGN.md format) to the same model, without partitioning.

The JSON's ``nodes`` are indices into the model's ``graph.node``. :func:`apply_plan` checks that
the plan fits the model (every index in range and used exactly once, every device known) before
validating the partition against the problem's constraints, and says what does not match.
"""

from __future__ import annotations

import os
import shlex
from typing import Any

from clusterkit.constraints.core import Problem
from clusterkit.errors import PartitionError
from clusterkit.io.partition_json import cluster_nodes, read_partition_json
from clusterkit.result import Partition


def load_plan(source: str | os.PathLike | dict) -> dict[str, Any]:
    """Read a partition JSON file (or take a dict) and check its shape."""
    label = "plan" if isinstance(source, dict) else f"plan {os.fspath(source)!r}"
    return read_partition_json(source, label)


def plan_selectors(plan: dict[str, Any]) -> list[str]:
    """The ``--selector`` specs recorded in a plan (its ``selector`` field, split like a shell
    command line); empty when none were recorded."""
    text = str(plan.get("selector") or "").strip()
    return shlex.split(text) if text else []


def apply_plan(problem: Problem, source: str | os.PathLike | dict,
               model_name: str | None = None, label: str | None = None) -> Partition:
    """The partition a plan (a file or its loaded JSON) describes, checked against ``problem``
    (its graph must be the model the plan was made for) and validated. Raises
    :class:`PartitionError` saying what does not match; ``label`` names the plan in messages."""
    data = load_plan(source)
    if label is None:
        label = "plan" if isinstance(source, dict) else f"plan {os.fspath(source)!r}"
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
