"""Partition validation, metrics (cut_bytes against an independent count) and JSON/DOT."""

from __future__ import annotations

import json

import networkx as nx
import numpy as np
import pytest

from clusterkit import (
    ConstraintError,
    Constraints,
    OpsProperty,
    Partition,
    PartitionError,
    from_networkx,
    make_problem,
)
from clusterkit.result.dot import partition_dot
from support.models import BUNDLED_MODELS


def _graph(edges, ops):
    g = nx.DiGraph()
    for name, op in ops.items():
        g.add_node(name, op=op)
    for u, v in edges:
        g.add_edge(u, v, bytes=8)
    return from_networkx(g)


# a -> x -> c and a -> c : x is unsupported
DIAMOND = _graph([("a", "x"), ("x", "c"), ("a", "c")], {"a": "Conv", "x": "Cpu", "c": "Conv"})


def _problem(graph, **cons):
    return Constraints(**cons).compile(graph, [OpsProperty(["Conv", "Relu", "Reshape"])])


def _ids(graph, *names):
    return [graph.name_to_index[n] for n in names]


def test_path_leaving_and_reentering_a_cluster_is_rejected():
    p = _problem(DIAMOND)
    g = DIAMOND
    bad = Partition.from_clusters(p, [("acc", _ids(g, "a", "c")), ("cpu", _ids(g, "x"))])
    with pytest.raises(PartitionError, match="leaves cluster 0 at node 'a' and re-enters it at "
                                             "node 'c' through outside node 'x'"):
        bad.validate()
    ok = Partition.from_clusters(p, [("acc", _ids(g, "a")), ("cpu", _ids(g, "x")),
                                     ("acc", _ids(g, "c"))])
    ok.validate()


def test_two_clusters_depending_on_each_other_are_rejected():
    g = _graph([("a", "b"), ("b", "c"), ("c", "d")],
               {"a": "Conv", "b": "Relu", "c": "Conv", "d": "Relu"})
    p = _problem(g)
    bad = Partition.from_clusters(p, [("acc", _ids(g, "a", "c")), ("acc", _ids(g, "b", "d"))])
    with pytest.raises(PartitionError, match="clusters 0 and 1 depend on each other"):
        bad.validate()


def test_never_together_pair_in_one_cluster_is_rejected():
    g = _graph([("a", "b"), ("b", "c")], {"a": "Conv", "b": "Relu", "c": "Conv"})
    p = _problem(g, never_together=[("a", "c")])
    bad = Partition.from_clusters(p, [("acc", _ids(g, "a", "b", "c"))])
    with pytest.raises(PartitionError, match="never-together nodes 'a' and 'c'"):
        bad.validate()


def test_node_in_two_clusters_or_none_is_rejected():
    g = _graph([("a", "b")], {"a": "Conv", "b": "Relu"})
    p = _problem(g)
    with pytest.raises(PartitionError, match="'a' is in two clusters"):
        Partition.from_clusters(p, [("acc", _ids(g, "a", "b")), ("acc", _ids(g, "a"))]).validate()
    with pytest.raises(PartitionError, match="'b' is in no cluster"):
        Partition.from_clusters(p, [("acc", _ids(g, "a"))]).validate()


def test_value_input_produced_in_the_same_cluster_is_rejected():
    # shape -> reshape as input 1 (the value input); data -> reshape as input 0
    g = nx.DiGraph()
    g.add_node("data", op="Conv")
    g.add_node("shape", op="Relu")
    g.add_node("reshape", op="Reshape")
    g.add_edge("data", "reshape", bytes=64)
    g.add_edge("shape", "reshape", bytes=8)
    graph = from_networkx(g)
    assert graph.node("reshape").inputs[1].startswith("shape")
    p = _problem(graph, value_inputs={"Reshape": (1,)})
    bad = Partition.from_clusters(p, [("acc", _ids(graph, "shape", "reshape")),
                                      ("acc", _ids(graph, "data"))])
    with pytest.raises(PartitionError, match="'reshape' .*must know the value it reads from "
                                             "'shape'"):
        bad.validate()
    ok = Partition.from_clusters(p, [("acc", _ids(graph, "data", "reshape")),
                                     ("acc", _ids(graph, "shape"))])
    ok.validate()


def test_unsupported_node_on_device_and_size_limits_are_rejected():
    g = _graph([("a", "x")], {"a": "Conv", "x": "Cpu"})
    p = _problem(g)
    with pytest.raises(PartitionError, match="'x' \\(Cpu\\) is in cluster 0 on device 'acc'"):
        Partition.from_clusters(p, [("acc", _ids(g, "a", "x"))]).validate()
    g2 = _graph([("a", "b"), ("b", "c")], {"a": "Conv", "b": "Relu", "c": "Conv"})
    p2 = _problem(g2, max_size=2)
    with pytest.raises(PartitionError, match="above max_size 2"):
        Partition.from_clusters(p2, [("acc", [0, 1, 2])]).validate()
    p3 = _problem(g2, min_size=2)
    with pytest.raises(PartitionError, match="below min_size 2"):
        Partition.from_clusters(p3, [("acc", [0, 1]), ("acc", [2])]).validate()


def test_contradictory_constraints_are_an_error():
    g = _graph([("a", "b")], {"a": "Conv", "b": "Relu"})
    with pytest.raises(ConstraintError, match="contradiction.*'a' and 'b'"):
        _problem(g, never_together=[("a", "b")], together=[["a", "b"]])
    with pytest.raises(ConstraintError, match="must be cut"):
        _problem(g, cut_edges=[("a", "b")], together=[["a", "b"]])
    with pytest.raises(ConstraintError, match="no node named 'zzz'"):
        _problem(g, never_together=[("a", "zzz")])
    with pytest.raises(ConstraintError, match="no such edge"):
        _problem(g, cut_edges=[("b", "a")])
    g3 = _graph([("a", "x"), ("x", "c")], {"a": "Conv", "x": "Softmax", "c": "Conv"})
    with pytest.raises(ConstraintError, match="not convex.*'x'"):
        _problem(g3, together=[["a", "c"]])


def _reference_cut_bytes(graph, device_of):
    """An independent count: walk every tensor; units are cluster ids on accelerators and one
    host unit for the fallback; constants and static shape values (folded tensors) are free."""
    total = 0
    for t in graph.tensors.values():
        if t.is_folded:
            continue
        src_unit = "host" if t.producer is None else device_of[t.producer]
        units = {device_of[c] for c in t.consumers}
        if t.is_output:
            units.add("host")
        total += sum((t.nbytes or 0) for u in units if u != src_unit)
    return total


@pytest.mark.parametrize("model", ["resnet18", "bert_base", "mobilenet_v3_large"])
def test_cut_bytes_matches_an_independent_count(model):
    path = BUNDLED_MODELS / f"{model}.onnx"
    problem = make_problem(path, ["ops:Conv,Relu,Add,MatMul,Gemm", "gpu=ops:Mul,Softmax,Tanh"])
    rng = np.random.default_rng(0)
    graph = problem.graph
    # random valid-or-not assignment is fine for the metric: clusters by random labels
    devices = np.where(problem.supported[0], 0, np.where(problem.supported[1], 1, -1))
    labels = rng.integers(0, 5, size=graph.n) * 3 + devices + 1  # one device per label
    part = Partition.from_assignment(problem, labels, devices)
    a = part.assignment()
    unit_of = ["host" if part.clusters[c].device == "cpu" else f"c{c}" for c in a.tolist()]
    assert part.metrics()["cut_bytes"] == _reference_cut_bytes(graph, unit_of)
    assert part.metrics()["partitions"] == len({c for c in a.tolist()
                                                 if part.clusters[c].device != "cpu"})


def test_everything_on_host_cuts_nothing():
    problem = make_problem(BUNDLED_MODELS / "resnet18.onnx", ["ops:Nothing"])
    part = Partition.from_assignment(problem, np.zeros(problem.n), np.full(problem.n, -1))
    part.validate()
    m = part.metrics()
    assert m["cut_bytes"] == 0 and m["partitions"] == 0 and m["nodes_offloaded"] == 0


def test_json_follows_design_and_round_trips(tmp_path):
    path = BUNDLED_MODELS / "squeezenet1_1.onnx"
    problem = make_problem(path, ["ops:Conv,Relu"])
    from clusterkit import run_strategy

    part = run_strategy(problem, "singleton")
    data = part.to_json(model="squeezenet1_1")
    assert set(data) >= {"model", "strategy", "selector", "fallback", "clusters", "metrics",
                         "seconds"}
    assert data["strategy"] == "singleton" and data["fallback"] == "cpu"
    seen = sorted(v for c in data["clusters"] for v in c["nodes"])
    assert seen == list(range(problem.n))
    assert {"partitions", "cut_bytes"} <= set(data["metrics"])
    text = json.dumps(data)
    again = Partition.from_json(problem, json.loads(text))
    again.validate()
    assert again.metrics() == part.metrics()
    dot = partition_dot(part)
    assert dot.count("subgraph cluster_") == data["metrics"]["partitions"]


def test_from_assignment_refuses_a_label_spanning_two_devices():
    g = _graph([("a", "b")], {"a": "Conv", "b": "Relu"})
    p = Constraints().compile(g, [OpsProperty(["Conv", "Relu"]), OpsProperty(["Relu"], "gpu")])
    with pytest.raises(PartitionError, match="'b' has label 0 but another device"):
        Partition.from_assignment(p, [0, 0], [0, 1])
    part = Partition.from_assignment(p, [5, 5], [0, 0])
    assert [(c.id, c.device, c.nodes) for c in part.clusters] == [(0, "acc", (0, 1))]
