"""Selector rules checked against the execution providers' source: the whole-partition rules
(applied after every strategy by ``reject_subgraphs``) and the per-op fixes, each on a small ONNX
graph built here. Expectations are the upstream rules as stated in each test, not the selector's
own answers."""

from __future__ import annotations

import json
from importlib import resources

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import clusterkit as ck
from clusterkit.graph.subgraph import Subgraph
from clusterkit.passes.reject import reject_subgraphs
from clusterkit.result.reasons import Category
from clusterkit.result.report import placement_report
from clusterkit.selectors import coreml, nnapi

FLOAT = TensorProto.FLOAT


def model(nodes, inputs, outputs, inits=(), opset: int = 17) -> onnx.ModelProto:
    """A checked, shape-inferred model from ``(name, shape)`` inputs/outputs."""
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, FLOAT, s) for n, s in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(m, full_check=True)
    return onnx.shape_inference.infer_shapes(m)


def lone_reshape_model() -> onnx.ModelProto:
    """x -> Relu -> Erf (not in NNAPI's table) -> Reshape -> y: the Reshape can only be a
    cluster of its own on nnapi."""
    shape = np.asarray([1, 48], dtype=np.int64)
    return model([helper.make_node("Relu", ["x"], ["r"], name="relu"),
                  helper.make_node("Erf", ["r"], ["e"], name="erf"),
                  helper.make_node("Reshape", ["e", "shape"], ["y"], name="reshape")],
                 [("x", [1, 3, 4, 4])], [("y", [1, 48])], [("shape", shape)])


def fallback_reasons(part: ck.Partition) -> dict[str, tuple[str, str]]:
    """Node name -> (category, detail) of every fallback node, from the placement report."""
    report = placement_report(part)
    return {e["node"]: (e["reason"], e["detail"]) for e in report["fallen_back"]}


def device_of(part: ck.Partition) -> dict[str, str]:
    g = part.graph
    return {g.nodes[v].name: c.device for c in part.clusters for v in c.nodes}


# ---------------------------------------------------------------------- whole-partition rules
#: options that make a cost-driven strategy want the Reshape on nnapi
OPTIONS = {"placement": {"costs": {
    "nodes": {"reshape": {"nnapi": 1e-9, "cpu": 1.0}, "relu": {"nnapi": 1e-9, "cpu": 1.0}},
    "links": {"default": {"bandwidth": 1e15, "latency": 0.0}}}}}


@pytest.mark.parametrize("strategy", ck.strategy_names())
def test_a_lone_reshape_on_nnapi_falls_back_for_every_strategy(strategy):
    problem = ck.make_problem(lone_reshape_model(), ["nnapi"])
    opts = OPTIONS.get(strategy, {})
    by_name = {nd.name: nd.index for nd in problem.graph.nodes}
    # premise: without the post-pass the Reshape is an nnapi cluster (auto ranks its members
    # after the post-pass, mxnet's growth never forms the lone cluster, and cpsat splits within
    # its own time unless accept=False)
    if strategy not in ("mxnet", "auto"):
        raw = ck.get_strategy(strategy)(problem, **opts, **(
            {"accept": False} if strategy == "cpsat" else {}))
        assert ("nnapi", (by_name["reshape"],)) in [(c.device, c.nodes) for c in raw.clusters]
    part = ck.run_strategy(problem, strategy, **opts)
    dev = device_of(part)
    assert dev["reshape"] == "cpu" and dev["erf"] == "cpu"
    cat, detail = fallback_reasons(part)["reshape"]
    assert cat == Category.SUBGRAPH_REJECTED.value
    if strategy != "mxnet":  # mxnet rejects while growing and records its own sentence
        assert "single Reshape" in detail


@pytest.mark.parametrize("op", ["Flatten", "Identity"])
def test_lone_flatten_and_identity_are_dropped_but_not_in_company(op):
    nodes = [helper.make_node("Erf", ["x"], ["e"], name="erf"),
             helper.make_node(op, ["e"], ["f"], name="copy"),
             helper.make_node("Erf", ["f"], ["y"], name="erf2")]
    shape = [1, 48] if op == "Flatten" else [1, 3, 4, 4]
    m = model(nodes, [("x", [1, 3, 4, 4])], [("y", shape)])
    assert device_of(ck.partition(m, "nnapi", strategy="cycles"))["copy"] == "cpu"
    # the same op next to a Relu forms a two-node partition, which the EP keeps
    nodes[2] = helper.make_node("Relu", ["f"], ["y"], name="relu")
    m = model(nodes, [("x", [1, 3, 4, 4])], [("y", shape)])
    dev = device_of(ck.partition(m, "nnapi", strategy="cycles"))
    assert dev["copy"] == dev["relu"] == "nnapi"


def test_a_partition_fed_by_constants_only_is_dropped():
    c = np.ones((1, 4), dtype=np.float32)
    nodes = [helper.make_node("Add", ["c", "c"], ["a"], name="const_add"),
             helper.make_node("Erf", ["x"], ["e"], name="erf"),
             helper.make_node("Erf", ["a"], ["ea"], name="erf_c"),
             helper.make_node("Mul", ["e", "ea"], ["y"], name="mul")]
    m = model(nodes, [("x", [1, 4])], [("y", [1, 4])], [("c", c)])
    part = ck.partition(m, "nnapi", strategy="singleton")
    dev = device_of(part)
    assert dev["const_add"] == "cpu" and dev["mul"] == "nnapi"
    # its outputs are constant: onnxruntime folds it, so it is reported folded, not a fallback
    g = part.graph
    assert g.folded[g.name_to_index["const_add"]]
    assert "const_add" not in fallback_reasons(part)
    sub = Subgraph.from_nodes(g, [g.name_to_index["const_add"]], "nnapi", 0)
    assert "constant" in part.problem.properties[0].explain_subgraph(sub)


def test_the_rules_are_the_property_hook():
    g = ck.load_graph(lone_reshape_model())
    prop = nnapi.make_property()
    prop.query(g)
    by_name = {nd.name: nd.index for nd in g.nodes}
    lone = Subgraph.from_nodes(g, [by_name["reshape"]], "nnapi", 0)
    assert prop.create_subgraph_node(lone) is None
    assert "single Reshape" in prop.explain_subgraph(lone)
    relu = Subgraph.from_nodes(g, [by_name["relu"]], "nnapi", 1)
    assert prop.create_subgraph_node(relu) is not None
    assert prop.explain_subgraph(relu) is None


def test_nothing_rejected_leaves_the_partition_untouched():
    problem = ck.make_problem(lone_reshape_model(), ["ops:Relu,Reshape"])
    part = ck.run_strategy(problem, "cycles")
    assert reject_subgraphs(part) is part
    assert device_of(part)["reshape"] == "acc"


# ---------------------------------------------------------------------- NNAPI Gemm bias
def gemm_model(c_shape) -> onnx.ModelProto:
    """y = x @ w' + c with x [2, 3], w [4, 3] (transB), c of ``c_shape`` (None: no C)."""
    w = np.ones((4, 3), dtype=np.float32)
    inits = [("w", w)]
    ins = ["x", "w"]
    if c_shape is not None:
        inits.append(("c", np.ones(c_shape, dtype=np.float32)))
        ins.append("c")
    node = helper.make_node("Gemm", ins, ["y"], name="gemm", transB=1)
    return model([node], [("x", [2, 3])], [("y", [2, 4])], inits)


@pytest.mark.parametrize("c_shape, level, taken", [
    (None, 1, True), ((4,), 1, True), ((4,), 4, True),
    ((1, 4), 4, True), ((1, 4), 2, True), ((1, 4), 1, False),  # {1,...,1,N} needs level 2
    ((2, 4), 4, False),  # leading dims must be 1
    ((), 4, False),      # scalar C
    ((1,), 4, False),    # size 1, not N
])
def test_nnapi_gemm_bias_follows_get_gemm_bias_size(c_shape, level, taken):
    g = ck.load_graph(gemm_model(c_shape))
    prop = nnapi.make_property(feature_level=level)
    assert bool(prop.query(g)[0]) is taken, prop.explain(g.nodes[0], g)


# ---------------------------------------------------------------------- CoreML And / Where
def typed_model(op: str, dtypes: list[int], out: int) -> onnx.ModelProto:
    """One ``op`` node over inputs ``i0, i1, ...`` of ``dtypes``, all shaped [2, 3]."""
    ins = [helper.make_tensor_value_info(f"i{k}", t, [2, 3]) for k, t in enumerate(dtypes)]
    graph = helper.make_graph([helper.make_node(op, [v.name for v in ins], ["y"], name="n")],
                              "g", ins, [helper.make_tensor_value_info("y", out, [2, 3])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m, full_check=True)
    return m


BOOL, INT64 = TensorProto.BOOL, TensorProto.INT64


@pytest.mark.parametrize("op, dtypes, out, fmt, taken", [
    ("And", [BOOL, BOOL], BOOL, "MLProgram", True),
    ("And", [BOOL, BOOL], BOOL, "NeuralNetwork", False),   # logical_and is MLProgram only
    ("Where", [BOOL, FLOAT, FLOAT], FLOAT, "MLProgram", True),
    ("Where", [BOOL, INT64, INT64], INT64, "MLProgram", False),  # X/Y must be float
    ("Where", [BOOL, FLOAT, FLOAT], FLOAT, "NeuralNetwork", False),
])
def test_coreml_and_where_follow_their_builders(op, dtypes, out, fmt, taken):
    g = ck.load_graph(typed_model(op, dtypes, out))
    prop = coreml.make_property(model_format=fmt)
    assert bool(prop.query(g)[0]) is taken, prop.explain(g.nodes[0], g)


@pytest.mark.parametrize("name, file", [("nnapi", "nnapi_ep.json"), ("coreml", "coreml_ep.json")])
def test_the_data_cites_each_partition_rule_the_selector_applies(name, file):
    raw = json.loads(resources.files("clusterkit.selectors").joinpath("data", file).read_text())
    rules = raw["partition_rules"]
    assert len(rules) == len(ck.get_selector(name).subgraph_rules)
    for rule in rules:
        assert rule["text"] and rule["source"].startswith("onnxruntime/core/providers/")
