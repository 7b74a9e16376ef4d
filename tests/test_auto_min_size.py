"""``auto`` with a size limit is never worse than ``auto`` without it whose small clusters are
sent to the fallback afterwards (issue 27 item 2)."""

from __future__ import annotations

import numpy as np
import pytest

import clusterkit as ck
from clusterkit.graph.fast import graph_from_dag
from clusterkit.testing.synthetic import LONG_EDGE_SUPPORTED, long_edge_dag

SELECTOR = "npu=ops:" + ",".join(LONG_EDGE_SUPPORTED)


def _dropped_figures(graph: ck.Graph, min_size: int) -> tuple[int, int, int]:
    """Figures of auto without a limit once its clusters below ``min_size`` fall back."""
    free = ck.run_strategy(ck.Constraints().compile(graph, ck.parse_selectors([SELECTOR])),
                           "auto")
    labels = free.assignment()
    devices = free.device_indices()[labels]
    sizes = np.bincount(labels, minlength=len(free.clusters))
    devices = np.where((devices >= 0) & (sizes[labels] < min_size), -1, devices)
    limited = ck.Constraints(min_size=min_size).compile(graph, ck.parse_selectors([SELECTOR]))
    return ck.Partition.from_assignment(limited, labels, devices).validate().figures()


@pytest.mark.parametrize("n,seed,min_size", [(400, 0, 2), (600, 1, 2), (500, 2, 3)])
def test_a_size_limit_never_beats_dropping_small_clusters_afterwards(n, seed, min_size):
    graph = graph_from_dag(long_edge_dag(n, seed=seed))
    problem = ck.Constraints(min_size=min_size).compile(graph, ck.parse_selectors([SELECTOR]))
    part = ck.run_strategy(problem, "auto").validate()
    assert all(len(c.nodes) >= min_size for c in part.clusters if c.device != part.fallback)
    assert part.figures() <= _dropped_figures(graph, min_size)
