"""The views a Partition keeps (assignment, device per cluster, metrics, cluster edges and
order) against counts made from the clusters themselves."""

from __future__ import annotations

import dataclasses

import networkx as nx
import pytest

import clusterkit as ck
from clusterkit import Partition
from support.models import BUNDLED_MODELS


def _problems():
    for model, selector in (("resnet18.onnx", "ops:Conv,Relu"), ("squeezenet1_1.onnx", "coreml"),
                            ("shufflenet_v2_x1_0.onnx", "tensorrt")):
        yield ck.make_problem(BUNDLED_MODELS / model, selector)


PROBLEMS = list(_problems())


def _by_hand(part: Partition) -> tuple[list[int], list[int], set[tuple[int, int]]]:
    """Cluster position per node, device index per cluster and the cluster edges, from the
    clusters' node lists."""
    p, g = part.problem, part.problem.graph
    where = [-1] * g.n
    for pos, c in enumerate(part.clusters):
        for v in c.nodes:
            where[v] = pos
    devices = [-1 if c.device == p.fallback else p.devices.index(c.device)
               for c in part.clusters]
    edges = {(where[u], where[v]) for u, v in zip(g.edge_src.tolist(), g.edge_dst.tolist())
             if where[u] != where[v]}
    return where, devices, edges


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p.graph.name)
@pytest.mark.parametrize("strategy", ["cycles", "longest-path", "singleton"])
def test_views_match_the_clusters(problem, strategy):
    part = ck.run_strategy(problem, strategy, validate=False)
    where, devices, edges = _by_hand(part)
    assert part.assignment().tolist() == where
    assert part.device_indices().tolist() == devices
    src, dst = part.cluster_edges()
    assert set(zip(src.tolist(), dst.tolist())) == edges and len(src) == len(edges)
    order = part.cluster_order()
    assert sorted(order) == list(range(len(part.clusters)))
    pos = {c: i for i, c in enumerate(order)}
    assert all(pos[x] < pos[y] for x, y in edges)
    # the same clusters in a partition built by hand (no views made at construction)
    fresh = Partition.from_clusters(problem, [(c.device, c.nodes) for c in part.clusters])
    assert fresh.metrics() == part.metrics()
    assert fresh.assignment().tolist() == where and fresh.device_indices().tolist() == devices


def test_views_are_copies_and_a_changed_partition_is_a_new_one():
    problem = PROBLEMS[0]
    part = ck.run_strategy(problem, "cycles", validate=False)
    a = part.assignment()
    a[:] = -5
    part.cluster_order().clear()
    assert (part.assignment() >= 0).all() and len(part.cluster_order()) == len(part.clusters)
    before = part.metrics()
    before["cut_bytes"] = -1
    assert part.metrics()["cut_bytes"] >= 0
    # the clusters cannot be edited in place, so the views made above cannot go stale
    assert isinstance(part.clusters, tuple)
    assert all(isinstance(c.nodes, tuple) for c in part.clusters)
    with pytest.raises(AttributeError, match="cannot be changed"):
        part.clusters = part.clusters[::-1]
    with pytest.raises(dataclasses.FrozenInstanceError):
        part.clusters[0].nodes = ()
    # another list of clusters (reversed, and then one fewer by a merge): a new partition
    flipped = dataclasses.replace(part, clusters=part.clusters[::-1])
    where, devices, _ = _by_hand(flipped)
    assert flipped.assignment().tolist() == where and flipped.device_indices().tolist() == devices
    assert part.assignment().tolist() != where or len(part.clusters) == 1
    acc = [i for i, c in enumerate(flipped.clusters) if c.device != problem.fallback]
    if len(acc) >= 2:
        i, j = acc[:2]
        pairs = [(c.device, c.nodes + flipped.clusters[j].nodes if k == i else c.nodes)
                 for k, c in enumerate(flipped.clusters) if k != j]
        merged = ck.Partition.from_clusters(problem, iter(pairs))  # any iterable
        where, devices, _ = _by_hand(merged)
        assert merged.assignment().tolist() == where
        assert merged.metrics()["partitions"] == len(acc) - 1


def test_cluster_order_names_a_cycle():
    g = nx.DiGraph()
    for name in "abcd":
        g.add_node(name, op="Conv")
    g.add_edges_from([("a", "b"), ("b", "c"), ("c", "d")])
    problem = ck.make_problem(ck.from_networkx(g), "ops:Conv")
    idx = problem.graph.name_to_index
    part = Partition.from_clusters(problem, [("ops", [idx["a"], idx["c"]]),
                                             ("ops", [idx["b"]]), ("ops", [idx["d"]])])
    with pytest.raises(ck.CycleError):
        part.cluster_order()


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p.graph.name)
def test_record_order_keeps_only_a_topological_order(problem):
    part = ck.run_strategy(problem, "singleton", validate=False)
    _, _, edges = _by_hand(part)
    k = len(part.clusters)
    fresh = Partition.from_clusters(problem, [(c.device, c.nodes) for c in part.clusters])
    kahn = nx.lexicographical_topological_sort(nx.DiGraph(list(edges)), key=lambda c: -c)
    order = list(kahn) + [c for c in range(k) if not any(c in e for e in edges)]
    assert fresh.record_order(order) and fresh.cluster_order() == order
    if edges:  # an order with an edge backwards, one cluster twice, or one missing: refused
        x, y = next(iter(edges))
        swapped = list(order)
        i, j = swapped.index(x), swapped.index(y)
        swapped[i], swapped[j] = y, x
        other = Partition.from_clusters(problem, [(c.device, c.nodes) for c in part.clusters])
        assert not other.record_order(swapped)
        assert not other.record_order(order[:-1] + order[:1])
        assert not other.record_order(order[:-1])
        got = other.cluster_order()  # its own order, then
        pos = {c: i for i, c in enumerate(got)}
        assert sorted(got) == list(range(k)) and all(pos[a] < pos[b] for a, b in edges)
