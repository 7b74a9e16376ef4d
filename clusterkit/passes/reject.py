"""The subgraph-rejection pass: the devices' verdicts on a finished partition.

Run after every strategy by the front door (and on every member by ``auto``): a cluster a device
does not accept is split into acceptable pieces (:mod:`clusterkit.passes.acceptable`).
"""

from __future__ import annotations

from clusterkit.passes.acceptable import make_acceptable
from clusterkit.result.model import Partition


def reject_subgraphs(partition: Partition,
                     cache: dict[tuple[int, tuple[int, ...]], str | None] | None = None
                     ) -> Partition:
    """The devices' verdicts on a finished partition, applied after any strategy: today
    :func:`~clusterkit.passes.acceptable.make_acceptable` (a cluster a device does not accept,
    for instance one its ``create_subgraph_node`` rejects, is split into acceptable pieces; only
    nodes in none fall back, each with the device's reason). Returns ``partition`` itself when
    every cluster is acceptable. ``cache`` is unused (verdicts are cached on the problem)."""
    return make_acceptable(partition, cache)
