"""The partition package: ``Partition.units()`` is a deprecated alias of ``transfer_units()``
(the old module paths are checked with every alias, in ``tests/test_layers.py``)."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from clusterkit import OpsProperty, Partition, from_networkx
from clusterkit.constraints.core import Constraints
from clusterkit.graph.core import HOST


def _partition() -> Partition:
    g = nx.DiGraph()
    for name, op in {"a": "Conv", "x": "Cpu", "b": "Conv", "c": "Conv"}.items():
        g.add_node(name, op=op)
    g.add_edges_from([("a", "x"), ("x", "b"), ("b", "c")])
    graph = from_networkx(g)
    problem = Constraints().compile(graph, [OpsProperty(["Conv"])])
    ids = graph.name_to_index
    return Partition.from_clusters(problem, [("acc", [ids["a"]]), ("cpu", [ids["x"]]),
                                             ("acc", [ids["b"], ids["c"]])])


def test_transfer_units_are_cluster_positions_and_host_for_the_fallback():
    part = _partition().validate()
    ids = part.graph.name_to_index
    units = part.transfer_units()
    assert units[ids["a"]] == 0 and units[ids["x"]] == HOST
    assert units[ids["b"]] == units[ids["c"]] == 2


def test_units_is_a_deprecated_alias_of_transfer_units():
    part = _partition()
    with pytest.warns(DeprecationWarning, match=r"Partition\.units is deprecated, use "
                      r"Partition\.transfer_units \(Partition\.units is removed in clusterkit"):
        old = part.units()
    assert np.array_equal(old, part.transfer_units())


def test_clusters_given_as_any_iterable_are_kept_as_a_tuple():
    made = _partition()
    part = Partition(made.problem, (c for c in made.clusters))
    assert isinstance(part.clusters, tuple) and part.clusters == made.clusters
    assert part.validate().metrics() == made.metrics()
