"""Placement mode and cost estimates: the optimal placement equals brute force over every
assignment, FLOP estimates match hand counts, cost files load (and fail) cleanly, and the
``placement`` strategy returns valid partitions."""

from __future__ import annotations

import json
from itertools import product
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

from clusterkit import (
    ConstraintError,
    Constraints,
    OpsProperty,
    from_networkx,
    load_graph,
    load_onnx,
    make_problem,
    run_strategy,
)
from clusterkit.constraints.costs import CostModel, graph_flops, node_flops
from clusterkit.engines.placement import _options, estimate, place, priority_placement
from clusterkit.graph.core import Graph, Node, Tensor
from support.models import ALL_MODELS
from support.problems import onnxish_problems, problems

FAST = settings(deadline=None, database=None, suppress_health_check=list(HealthCheck))
TWO = ["npu=ops:Conv,Relu,Add,MaxPool",
       "gpu=ops:Conv,MatMul,Gemm,Add,Mul,Softmax,Relu,Concat,Transpose,Reshape,"
       "LayerNormalization,Erf,Div,Flatten,GlobalAveragePool"]


@st.composite
def cost_dicts(draw, devices: list[str]):
    """Random cost files: device speeds, per-op multipliers, links (some one-way)."""
    pos = st.floats(1e3, 1e7, allow_nan=False)
    out = {"devices": {}, "links": {"default": {"bandwidth": draw(pos),
                                                "latency": draw(st.floats(0, 1e-4))}}}
    for d in devices + ["cpu"]:
        spec = {"flops": draw(pos), "memory_bandwidth": draw(pos),
                "overhead": draw(st.floats(0, 1e-3))}
        if draw(st.booleans()):
            spec["ops"] = {draw(st.sampled_from(["Conv", "Relu", "Add", "MatMul"])):
                           draw(st.floats(0.1, 10))}
        out["devices"][d] = spec
    if draw(st.booleans()) and devices:
        out["links"][f"cpu->{devices[0]}"] = {"bandwidth": draw(pos)}
    if draw(st.booleans()) and len(devices) > 1:
        out["links"][f"{devices[0]}<->{devices[1]}"] = {"bandwidth": draw(pos),
                                                        "latency": 0.0}
    return out


def brute_force(problem, costs) -> float:
    """Least estimated time over every assignment (together groups share a device)."""
    cm = CostModel.load(costs)
    table = cm.compute_table(problem)
    opts = _options(problem, True)
    best = np.inf
    for choice in product(*opts):
        dev = np.asarray(choice, dtype=np.int64)
        if any(len(set(dev[m].tolist())) > 1 for m in problem.groups):
            continue
        best = min(best, estimate(problem, dev, cm, table)["total"])
    return best


@settings(FAST, max_examples=30)
@given(data=st.data(), problem=problems(1, 7, 2, constraints=False))
def test_placement_equals_brute_force(data, problem):
    costs = data.draw(cost_dicts(problem.devices))
    res = place(problem, costs, time_limit=20, workers=1)
    assert res.status == "OPTIMAL"
    exact = brute_force(problem, costs)
    tol = 1e-9 * (problem.n + 4 * len(problem.graph.tensors)) * 4  # ns rounding in the model
    assert res.objective == pytest.approx(exact, abs=tol)
    assert res.bound <= res.objective + 1e-12
    again = estimate(problem, res.devices, costs)
    assert again["total"] == pytest.approx(res.objective)
    assert again["compute"] + again["transfer"] == pytest.approx(again["total"])
    # never worse than HETERO's greedy priority affinity
    assert res.objective <= res.baselines["priority"] + tol


@settings(FAST, max_examples=25)
@given(data=st.data(), problem=onnxish_problems(6, 2))
def test_placement_equals_brute_force_with_inputs_and_constants(data, problem):
    """Graph inputs come from the host, graph outputs go back, constants move for free."""
    costs = data.draw(cost_dicts(problem.devices))
    res = place(problem, costs, time_limit=20, workers=1)
    assert res.status == "OPTIMAL"
    tol = 1e-9 * (problem.n + 4 * len(problem.graph.tensors)) * 4
    assert res.objective == pytest.approx(brute_force(problem, costs), abs=tol)


def test_placement_beats_priority_affinity():
    """npu comes first but runs MatMul 100x slower: HETERO's affinity keeps the MatMuls there,
    the optimal placement moves them."""
    import networkx as nx

    g = nx.DiGraph()
    ops = ["Conv", "MatMul", "MatMul", "Relu"]
    for v, op in enumerate(ops):
        g.add_node(v, op=op)
    g.add_edges_from([(0, 1), (1, 2), (2, 3)], bytes=1024)
    props = [OpsProperty(["Conv", "MatMul", "Relu"], device="npu"),
             OpsProperty(["MatMul", "Relu"], device="gpu")]
    problem = Constraints().compile(from_networkx(g), props)
    costs = {"devices": {"npu": {"flops": 1e9, "overhead": 0, "ops": {"MatMul": 100}},
                         "gpu": {"flops": 1e9, "overhead": 0}},
             "nodes": {"1": {"npu": 1.0, "gpu": 0.01, "cpu": 5.0},
                       "2": {"npu": 1.0, "gpu": 0.01, "cpu": 5.0}}}
    res = place(problem, costs, time_limit=10)
    names = res.device_names(problem)
    assert names[1] == names[2] == "gpu"
    assert res.objective < res.baselines["priority"]
    assert priority_placement(problem).tolist()[1] == 0


def test_together_groups_share_a_device():
    import networkx as nx

    g = nx.DiGraph()
    g.add_nodes_from([(0, {"op": "Conv"}), (1, {"op": "MatMul"}), (2, {"op": "Relu"})])
    g.add_edges_from([(0, 1), (1, 2)], bytes=64)
    props = [OpsProperty(["Conv", "Relu"], device="npu"),
             OpsProperty(["Conv", "MatMul", "Relu"], device="gpu")]
    problem = Constraints(together=[[0, 1]]).compile(from_networkx(g), props)
    costs = {"nodes": {"0": {"npu": 0.0, "gpu": 5.0}}}
    res = place(problem, costs, time_limit=10)
    assert res.devices[0] == res.devices[1]
    assert res.objective == pytest.approx(brute_force(problem, costs), abs=1e-7)


def test_allow_fallback_false_keeps_supported_nodes_offloaded():
    problem = make_problem(load_graph(str(_model("resnet18"))), TWO)
    costs = {"devices": {"cpu": {"flops": 1e15, "memory_bandwidth": 1e15, "overhead": 0}}}
    free = place(problem, costs, time_limit=20)
    forced = place(problem, costs, time_limit=20, allow_fallback=False)
    assert (free.devices < 0).sum() > (forced.devices < 0).sum()
    assert np.all(forced.devices[problem.any_supported] >= 0)
    assert forced.objective >= free.objective


# ----------------------------------------------------------------------------- the strategy
def _model(stem: str) -> Path:
    return next(p for p in ALL_MODELS if p.stem == stem)


def test_placement_strategy_on_a_real_model(tmp_path):
    problem = make_problem(load_graph(str(_model("resnet18"))), TWO)
    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps({"devices": {"npu": {"flops": 4e12, "op_seconds": {"Add": 0.01}},
                                             "gpu": {"flops": 1e12}},
                                 "links": {"default": {"bandwidth": 1e10, "latency": 1e-5}}}))
    part = run_strategy(problem, "placement", costs=str(costs), time_limit=30)  # validates
    info = part.info
    assert info["status"] == "OPTIMAL" and info["clustering"]["status"] == "OPTIMAL"
    assert info["objective"] <= info["baselines"]["priority"] + 1e-9
    dev = np.full(problem.n, -1)
    for c in part.clusters:
        dev[list(c.nodes)] = problem.device_index(c.device)
    assert info["partition_seconds"] == pytest.approx(estimate(problem, dev, str(costs))["total"])
    assert info["partition_seconds"] == pytest.approx(info["objective"])  # min_size 1: kept
    adds = [v for v in range(problem.n) if problem.graph.op_types[v] == "Add"]
    assert adds and all(dev[v] != problem.device_index("npu") for v in adds)  # 10 ms there


def test_placement_from_the_cli(tmp_path):
    from clusterkit.cli import main

    costs = tmp_path / "c.json"
    costs.write_text(json.dumps({"devices": {"gpu": {"flops": 1e13}}}))
    out = tmp_path / "p.json"
    rc = main(["partition", str(_model("squeezenet1_1")), "--strategy", "placement",
               "--selector", TWO[0], "--selector", TWO[1], "--option", f"costs={costs}",
               "--time-limit", "20", "--json", str(out)])
    assert rc == 0
    data = json.loads(out.read_text())
    assert data["strategy"] == "placement" and data["status"] == "OPTIMAL"
    rc = main(["partition", str(_model("squeezenet1_1")), "--strategy", "placement",
               "--selector", TWO[0], "--option", f"costs={tmp_path / 'missing.json'}"])
    assert rc == 2


# ----------------------------------------------------------------------------- FLOPs
def _onnx_graph(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    return load_onnx(model)


def _vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def test_flops_of_common_ops():
    w = helper.make_tensor("W", TensorProto.FLOAT, [4, 3, 3, 3], [0.0] * 108)
    b = helper.make_tensor("B", TensorProto.FLOAT, [4], [0.0] * 4)
    mb = helper.make_tensor("MB", TensorProto.FLOAT, [7, 3], [0.0] * 21)
    gb = helper.make_tensor("GB", TensorProto.FLOAT, [6, 5], [0.0] * 30)
    gc = helper.make_tensor("GC", TensorProto.FLOAT, [5], [0.0] * 5)
    nodes = [
        helper.make_node("Conv", ["X", "W", "B"], ["Y"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("MatMul", ["A", "MB"], ["M"], name="matmul"),
        helper.make_node("Gemm", ["G", "GB", "GC"], ["GO"], name="gemm"),
        helper.make_node("Relu", ["A"], ["R"], name="relu"),
        helper.make_node("Sigmoid", ["A"], ["S"], name="sigmoid"),
        helper.make_node("Softmax", ["A"], ["SM"], name="softmax"),
        helper.make_node("MaxPool", ["Y"], ["P"], kernel_shape=[2, 2], strides=[2, 2],
                         name="pool"),
        helper.make_node("GlobalAveragePool", ["Y"], ["GAP"], name="gap"),
        helper.make_node("ReduceMean", ["A"], ["RM"], keepdims=1, name="reduce"),
        helper.make_node("Flatten", ["Y"], ["F"], name="flatten"),
        helper.make_node("Transpose", ["A"], ["T"], perm=[0, 2, 1], name="transpose"),
    ]
    graph = _onnx_graph(nodes, [_vi("X", [1, 3, 8, 8]), _vi("A", [2, 5, 7]), _vi("G", [4, 6])],
                        [_vi(o, None) for o in ("M", "GO", "R", "S", "SM", "P", "GAP", "RM",
                                                "F", "T")],
                        [w, b, mb, gb, gc])
    f = {nd.name: node_flops(graph, nd) for nd in graph.nodes}
    assert f["conv"] == 2 * 4 * 8 * 8 * 3 * 3 * 3 + 4 * 8 * 8
    assert f["matmul"] == 2 * (2 * 5 * 3) * 7
    assert f["gemm"] == 2 * 4 * 5 * 6 + 4 * 5
    assert f["relu"] == 70 and f["sigmoid"] == 8 * 70 and f["softmax"] == 5 * 70
    assert f["pool"] == (4 * 4 * 4) * 4
    assert f["gap"] == 4 * 8 * 8 and f["reduce"] == 70
    assert f["flatten"] == 0 and f["transpose"] == 70
    assert graph_flops(graph).sum() == pytest.approx(sum(f.values()))


def test_flops_of_attention_ops():
    tensors = {"q": Tensor("q", shape=(1, 4, 8)), "w": Tensor("w", shape=(8, 24)),
               "k": Tensor("k", shape=(1, 6, 8)), "v": Tensor("v", shape=(1, 6, 8)),
               "o1": Tensor("o1", shape=(1, 4, 8)), "o2": Tensor("o2", shape=(1, 4, 8))}
    nodes = [Node(0, "att", "Attention", "com.microsoft", {"num_heads": 2}, ["q", "w"], ["o1"]),
             Node(1, "mha", "MultiHeadAttention", "com.microsoft", {"num_heads": 2},
                  ["q", "k", "v"], ["o2"])]
    graph = Graph.build(nodes, tensors, ["q", "w", "k", "v"], ["o1", "o2"])
    att = node_flops(graph, graph.node("att"))
    mha = node_flops(graph, graph.node("mha"))
    assert att == 2 * 4 * 8 * 24 + 4 * 4 * 4 * 8 + 5 * 2 * 4 * 4  # projections + scores
    assert mha == 4 * 4 * 6 * 8 + 5 * 2 * 4 * 6


def test_flops_of_a_real_model():
    graph = load_graph(str(_model("resnet18")))
    total = graph_flops(graph).sum()
    assert 3.4e9 < total < 3.9e9  # ResNet-18 at 224x224: ~1.8 GMACs


# ----------------------------------------------------------------------------- cost files
def test_cost_file_round_trip(tmp_path):
    graph = _onnx_graph([helper.make_node("Relu", ["A"], ["R"], name="relu")],
                        [_vi("A", [1000])], [_vi("R", [1000])])
    data = {"host": "cpu",
            "devices": {"npu": {"flops": 1e6, "memory_bandwidth": 1e12, "overhead": 0.001,
                                "ops": {"Relu": 2.0}},
                        "cpu": {"flops": 1e3}},
            "links": {"default": {"bandwidth": 1e6, "latency": 0.5},
                      "cpu->npu": {"bandwidth": 1e3, "latency": 0.0},
                      "npu<->gpu": {"bandwidth": 1e9, "latency": 0.0}},
            "nodes": {"relu": {"gpu": 0.25}}}
    path = tmp_path / "costs.json"
    path.write_text(json.dumps(data))
    cm = CostModel.from_json(path)
    assert cm.compute_time(graph, 0, "npu", "cpu") == pytest.approx(0.001 + 2.0 * 1000 / 1e6)
    cpu = cm.compute_time(graph, 0, "cpu", "cpu")  # host defaults under the file's flops
    assert cpu == pytest.approx(1e-6 + max(1000 / 1e3, 8000 / 2e10))
    assert cm.compute_time(graph, 0, "gpu", "cpu") == 0.25
    assert cm.transfer_time("cpu", "npu", 1000) == pytest.approx(1.0)
    assert cm.transfer_time("npu", "cpu", 1000) == pytest.approx(0.5 + 1e-3)
    assert cm.transfer_time("gpu", "npu", 1e9) == pytest.approx(1.0)
    assert cm.transfer_time("npu", "npu", 1e9) == 0.0
    again = CostModel.from_dict(json.loads(json.dumps(cm.to_dict())))
    assert again.compute_time(graph, 0, "npu", "cpu") == cm.compute_time(graph, 0, "npu", "cpu")
    assert again.transfer_time("cpu", "npu", 7) == cm.transfer_time("cpu", "npu", 7)


@pytest.mark.parametrize("bad,match", [
    ({"device": {}}, "unknown key 'device'"),
    ({"devices": {"npu": {"flops": -1}}}, "flops must be a positive number"),
    ({"devices": {"npu": {"speed": 1}}}, "unknown key 'speed'"),
    ({"links": {"npu": {"bandwidth": 1}}}, "link key 'npu'"),
    ({"links": {"default": {"bandwidth": 0}}}, "bandwidth must be a positive number"),
    ({"nodes": {"a": {"npu": "fast"}}}, "non-negative number"),
])
def test_cost_file_errors(bad, match):
    with pytest.raises(ConstraintError, match=match):
        CostModel.from_dict(bad)


def test_cost_file_unreadable(tmp_path):
    with pytest.raises(ConstraintError, match="does not exist"):
        CostModel.from_json(tmp_path / "nope.json")
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(ConstraintError, match="not valid JSON"):
        CostModel.from_json(broken)
