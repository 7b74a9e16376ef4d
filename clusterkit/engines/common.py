"""Helpers shared by the engines: ``min_size`` and the closing steps of the growth engines
(``reject_subgraphs``, the post-pass of the devices' verdicts on whole subgraphs, lives in
:mod:`clusterkit.passes.reject`; its old name here is deprecated)."""

from __future__ import annotations

from typing import Mapping

import numpy as np

from clusterkit._deprecated import moved_module
from clusterkit.constraints.core import Problem
from clusterkit.engines.cycle_repair import break_cycles
from clusterkit.engines.growth import GrowingCluster
from clusterkit.engines.super_nodes import SuperNodeGraph
from clusterkit.result.model import Partition
from clusterkit.result.reasons import Category, Reason

SPLIT_FOR_CYCLE = "its cluster was split to break a cycle between clusters"


def enforce_min_size(problem: Problem, labels: np.ndarray, devices: np.ndarray) -> np.ndarray:
    """Send offloaded clusters below their device's minimum (``problem.limits.min_nodes``:
    ``min_size`` or the device's own ``min_nodes``) back to the fallback (device -1).

    Splitting a convex cluster of an acyclic cluster graph into single nodes keeps the cluster
    graph acyclic: a cycle through the pieces would have been a cycle through the whole cluster.
    Returns the new device array."""
    devices = np.asarray(devices, dtype=np.int64).copy()
    if not problem.limits.any_minimum:
        return devices
    acc = devices >= 0
    if not acc.any():
        return devices
    _, inv, counts = np.unique(labels[acc], return_inverse=True, return_counts=True)
    small = counts[inv] < np.asarray(problem.limits.min_nodes, dtype=np.int64)[devices[acc]]
    idx = np.flatnonzero(acc)
    devices[idx[small]] = -1
    return devices


def close_growth(problem: Problem, contracted: SuperNodeGraph, pieces: list[GrowingCluster],
                 reasons: dict[int, Reason], cycle_why: Mapping[int, str]
                 ) -> tuple[Partition, int]:
    """The closing steps of an engine that grows pieces of super-nodes (``hetero``, ``mxnet``).

    Pieces that depend on each other through other pieces are split (``break_cycles``), clusters
    below ``min_size`` go to the fallback, and each node that falls back there gets its reason in
    ``reasons`` (updated in place): ``"cycle"`` when the engine moved it to avoid a cycle
    (``cycle_why[v]`` says how) or its cluster was split for one, else ``"constraint"``. Returns
    the partition (with ``fallback_reasons``) and the number of clusters split."""
    pieces, split = break_cycles(contracted, pieces)
    labels, devices = contracted.node_labels(pieces)
    placed = devices.copy()
    devices = enforce_min_size(problem, labels, devices)
    split_nodes = set(contracted.nodes_of([u for p in pieces if p.tag.get("split")
                                           for u in p.super_nodes]))
    sizes = np.bincount(labels)
    lim = problem.limits
    for v in np.flatnonzero((placed >= 0) & (devices < 0)).tolist():
        size, d = int(sizes[labels[v]]), int(placed[v])
        below = f"below {lim.setting(d, 'min')} {lim.min_nodes[d]}"  # the device's own or global
        why = cycle_why.get(v) or (SPLIT_FOR_CYCLE if v in split_nodes else None)
        if why is not None:
            reasons[v] = Reason(Category.CYCLE, f"{why}; the {size}-node cluster it ended in "
                                f"is {below}")
        else:
            reasons[v] = Reason(Category.CONSTRAINT, f"its {size}-node cluster on "
                                f"{problem.devices[d]} is {below}")
    return Partition.from_assignment(problem, labels, devices, fallback_reasons=reasons), split


__getattr__ = moved_module(__name__, "clusterkit.passes.reject")

__all__ = ["close_growth", "enforce_min_size"]
