"""The partition package (issue 25, point 1): the old module paths still work for one release,
with a DeprecationWarning, and give the very objects of the new ones; ``Partition.units()``
is a deprecated alias of ``transfer_units()``."""

from __future__ import annotations

import importlib
import sys

import networkx as nx
import numpy as np
import pytest

from clusterkit import OpsProperty, Partition, from_networkx
from clusterkit.constraints.core import Constraints
from clusterkit.graph.core import HOST

#: old path → where each of its names lives now
MOVED = {
    "clusterkit.reasons": ["clusterkit.result.reasons", "clusterkit.result.report"],
    "clusterkit.io.partition_json": ["clusterkit.result.json_format"],
    "clusterkit.io.plan": ["clusterkit.result.plan"],
    "clusterkit.io.dot": ["clusterkit.result.dot"],
    "clusterkit.io.export": ["clusterkit.export.onnx_model"],
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_warns_and_gives_the_new_objects(old):
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=old.replace(".", r"\.")):
        module = importlib.import_module(old)
    homes = [importlib.import_module(new) for new in MOVED[old]]
    assert module.__all__
    for name in module.__all__:
        found = [getattr(home, name) for home in homes if hasattr(home, name)]
        assert found and getattr(module, name) is found[0], name


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
    with pytest.warns(DeprecationWarning, match="transfer_units"):
        old = part.units()
    assert np.array_equal(old, part.transfer_units())


def test_clusters_given_as_any_iterable_are_kept_as_a_tuple():
    made = _partition()
    part = Partition(made.problem, (c for c in made.clusters))
    assert isinstance(part.clusters, tuple) and part.clusters == made.clusters
    assert part.validate().metrics() == made.metrics()
