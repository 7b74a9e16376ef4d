"""Helpers shared by the engines."""

from __future__ import annotations

import numpy as np

from clusterkit.constraints.core import Problem


def enforce_min_size(problem: Problem, labels: np.ndarray, devices: np.ndarray) -> np.ndarray:
    """Send accelerator clusters below ``problem.min_size`` back to the fallback (device -1).

    Splitting a convex cluster of an acyclic cluster graph into single nodes keeps the cluster
    graph acyclic: a cycle through the pieces would have been a cycle through the whole cluster.
    Returns the new device array."""
    devices = np.asarray(devices, dtype=np.int64).copy()
    if problem.min_size <= 1:
        return devices
    acc = devices >= 0
    if not acc.any():
        return devices
    _, inv, counts = np.unique(labels[acc], return_inverse=True, return_counts=True)
    small = counts[inv] < problem.min_size
    idx = np.flatnonzero(acc)
    devices[idx[small]] = -1
    return devices
