"""Partitions as comparable values, and running a strategy where together groups may clash."""

from __future__ import annotations

from clusterkit import ConstraintError, Partition, run_strategy
from support.problems import groups_depend


def run_checked(problem, strategy: str, **opts) -> Partition | None:
    """Run and validate; None when the together groups truly depend on each other."""
    try:
        return run_strategy(problem, strategy, **opts)
    except ConstraintError as exc:
        assert "together group" in str(exc), exc
        assert groups_depend(problem), f"{strategy} refused satisfiable groups: {exc}"
        return None


def clusters_of(part: Partition) -> list[tuple[str, tuple[int, ...]]]:
    """Clusters as (device, node indices), in cluster order."""
    return [(c.device, c.nodes) for c in part.clusters]


def names_of(part: Partition) -> set[frozenset[str]]:
    """Clusters as sets of node names."""
    g = part.graph
    return {frozenset(g.nodes[v].name for v in c.nodes) for c in part.clusters}


def named_clusters(part: Partition) -> set[tuple[str, frozenset[str]]]:
    """Clusters as (device, node names)."""
    g = part.graph
    return {(c.device, frozenset(g.nodes[v].name for v in c.nodes)) for c in part.clusters}


def timeless(doc):
    """A partition JSON (or any part of one) without its ``seconds`` fields, at every depth: what
    two runs of a deterministic strategy must agree on."""
    if isinstance(doc, dict):
        return {k: timeless(v) for k, v in doc.items() if k != "seconds"}
    if isinstance(doc, list):
        return [timeless(v) for v in doc]
    return doc
