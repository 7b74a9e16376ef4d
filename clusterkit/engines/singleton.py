"""Strategy ``singleton``: every supported node is its own cluster on the first device (priority
order) that takes it; a together group shares one cluster on a device that takes all of it."""

from __future__ import annotations

import numpy as np

from clusterkit.constraints.core import Problem
from clusterkit.engines.common import enforce_min_size
from clusterkit.result import Partition


def run(problem: Problem) -> Partition:
    """Singleton clusters (the pipeline's baseline); the strategy has no options."""
    n = problem.n
    devices = problem.first_device.copy()
    labels = np.arange(n, dtype=np.int64)
    for members in problem.groups:
        common = np.flatnonzero(problem.supported[:, members].all(axis=1))
        devices[members] = common[0] if len(common) else -1
        labels[members] = members[0]
    devices = enforce_min_size(problem, labels, devices)
    return Partition.from_assignment(problem, labels, devices, strategy="singleton")
