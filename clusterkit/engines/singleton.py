"""Strategy ``singleton``: every supported node is its own cluster on the first device (priority
order) that takes it; a together group shares one cluster on the first device that can hold all
of it (every member supported, every edge inside the group contractible, size and constant bytes
within the limits), else it stays on the fallback."""

from __future__ import annotations

import numpy as np

from clusterkit.constraints.core import Problem
from clusterkit.engines.common import enforce_min_size
from clusterkit.result.model import Partition


def run(problem: Problem) -> Partition:
    """Singleton clusters (the pipeline's baseline); the strategy has no options."""
    n = problem.n
    devices = problem.first_device.copy()
    labels = np.arange(n, dtype=np.int64)
    for members in problem.groups:
        devices[members] = group_device(problem, np.asarray(members, dtype=np.int64))
        labels[members] = members[0]
    devices = enforce_min_size(problem, labels, devices)
    return Partition.from_assignment(problem, labels, devices)


def group_device(problem: Problem, members: np.ndarray) -> int:
    """The first device (priority order) that may hold the whole group as one cluster; -1 (the
    fallback) when none may."""
    g = problem.graph
    ids = members.tolist()
    inside = np.zeros(problem.n, dtype=bool)
    inside[members] = True
    inner = inside[g.edge_src] & inside[g.edge_dst]
    for d in range(len(problem.devices)):
        if (problem.supported[d, members].all() and problem.contractible(d)[inner].all()
                and problem.limits.fits(ids, d, minimum=False)):
            return d
    return -1
