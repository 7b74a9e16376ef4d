"""Shipped selectors reviewed against their execution provider's source: NNAPI feature levels
given as Android API levels, and each per-op / domain fix on a small ONNX graph built here.
Expectations are the upstream rules as stated in each test, not the selector's own answers."""

from __future__ import annotations

import json
from importlib import resources

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import clusterkit as ck
from clusterkit.errors import SelectorError
from clusterkit.selection.specs import parse_selector
from clusterkit.selectors import dnnl, nnapi, qnn, tensorrt, xnnpack

FLOAT = TensorProto.FLOAT


def build(nodes, inputs, outputs, inits=(), opset: int = 17,
          extra_opsets: tuple = ()) -> ck.Graph:
    """A checked, shape-inferred graph from ``(name, shape[, dtype])`` inputs/outputs."""
    def info(spec):
        name, shape, *dtype = spec
        return helper.make_tensor_value_info(name, dtype[0] if dtype else FLOAT, shape)
    graph = helper.make_graph(nodes, "g", [info(s) for s in inputs], [info(s) for s in outputs],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits])
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v)
                                                 for d, v in extra_opsets]
    m = helper.make_model(graph, opset_imports=opsets)
    if not extra_opsets:
        onnx.checker.check_model(m, full_check=True)
    return ck.load_onnx(onnx.shape_inference.infer_shapes(m))


def node_named(graph: ck.Graph, name: str):
    return next(n for n in graph.nodes if n.name == name)


def bound(prop, graph: ck.Graph):
    """``prop`` after querying ``graph`` (so accepts/explain read that graph)."""
    prop.query(graph)
    return prop


def table(file: str) -> dict:
    return json.loads(resources.files("clusterkit.selectors").joinpath("data", file).read_text())


# ---------------------------------------------------------------------- NNAPI API levels
#: ANEURALNETWORKS_FEATURE_LEVEL_1..8 as onnxruntime's nnapi_lib/NeuralNetworksTypes.h defines
UPSTREAM_LEVELS = {27: 1, 28: 2, 29: 3, 30: 4, 31: 5, 1000006: 6, 1000007: 7, 1000008: 8}


def sub_graph() -> ck.Graph:
    """x - y: NNAPI takes Sub from feature level 2 (Android API 28) on."""
    return build([helper.make_node("Sub", ["x", "y"], ["z"], name="sub")],
                 [("x", [1, 4]), ("y", [1, 4])], [("z", [1, 4])])


@pytest.mark.parametrize("api,level", sorted(UPSTREAM_LEVELS.items()))
def test_nnapi_android_api_levels_map_to_feature_levels(api, level):
    assert nnapi.nnapi_feature_level(api) == level
    assert nnapi.make_property(feature_level=api).settings["feature_level"] == level


@pytest.mark.parametrize("level", range(1, 9))
def test_nnapi_feature_levels_stay_as_they_are(level):
    assert nnapi.nnapi_feature_level(level) == level


@pytest.mark.parametrize("bad", [0, 9, 26, 32, 33, 1000005, 1000009, -1, True, "29"])
def test_nnapi_other_levels_are_refused_with_the_value_named(bad):
    with pytest.raises(SelectorError, match=f"feature_level .* got {bad!r}"):
        nnapi.make_property(feature_level=bad)


def test_nnapi_api_level_27_refuses_sub_and_28_takes_it():
    g = sub_graph()
    sub = node_named(g, "sub")
    at_27 = bound(nnapi.make_property(feature_level=27), g)
    at_28 = bound(nnapi.make_property(feature_level=28), g)
    assert not at_27.accepts(sub)
    assert "feature level 2" in at_27.explain(sub)
    assert at_28.accepts(sub)


def test_nnapi_spec_with_an_android_api_level():
    prop = parse_selector("nnapi[feature_level=29]")
    assert prop.settings["feature_level"] == 3
    with pytest.raises(SelectorError, match="feature_level"):
        parse_selector("nnapi[feature_level=33]")


# ---------------------------------------------------------------------- XNNPACK
UINT8 = TensorProto.UINT8


def qlinear_average_pool_graph() -> ck.Graph:
    """A com.microsoft QLinearAveragePool already in the model, next to an ONNX AveragePool."""
    scale, zero = np.asarray(0.1, dtype=np.float32), np.asarray(128, dtype=np.uint8)
    qpool = helper.make_node("QLinearAveragePool", ["xq", "s", "z", "s", "z"], ["yq"],
                             name="qpool", domain="com.microsoft", kernel_shape=[2, 2])
    pool = helper.make_node("AveragePool", ["x"], ["y"], name="pool", kernel_shape=[2, 2])
    return build([qpool, pool], [("xq", [1, 3, 8, 8], UINT8), ("x", [1, 3, 8, 8])],
                 [("yq", [1, 3, 4, 4], UINT8), ("y", [1, 3, 4, 4])],
                 [("s", scale), ("z", zero)], extra_opsets=(("com.microsoft", 1),))


def test_xnnpack_checks_only_onnx_domain_nodes():
    """Upstream node_support_checker.cc, NodeSupportChecker::IsNodeSupported: a node unit is
    looked up only when ``nodeunit.Domain() == kOnnxDomain``; the com.microsoft QLinear ops are
    what the EP makes of a QDQ group, never a node it takes from the model."""
    g = qlinear_average_pool_graph()
    prop = bound(xnnpack.make_property(), g)
    qpool, pool = node_named(g, "qpool"), node_named(g, "pool")
    assert pool.domain == "" and prop.accepts(pool)
    assert qpool.domain == "com.microsoft" and not prop.accepts(qpool)
    assert "ONNX-domain" in prop.explain(qpool)


def test_xnnpack_table_cites_the_checker_for_every_op():
    data = table("xnnpack_ep.json")
    assert all(e["source"].startswith("onnxruntime/core/providers/xnnpack/")
               for e in data["ops"].values())
    assert "kOnnxDomain" in data["global_conditions"][0]["source"]


# ---------------------------------------------------------------------- QNN
def dequantize_then(op: str) -> ck.Graph:
    """xq (uint8) -> DequantizeLinear -> ``op`` -> y."""
    scale, zero = np.asarray(0.1, dtype=np.float32), np.asarray(128, dtype=np.uint8)
    nodes = [helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["x"], name="dq"),
             helper.make_node(op, ["x"], ["y"], name="after")]
    return build(nodes, [("xq", [1, 8], UINT8)], [("y", [1, 8])], [("s", scale), ("z", zero)])


def device_of(part: ck.Partition) -> dict[str, str]:
    g = part.graph
    return {g.nodes[v].name: c.device for c in part.clusters for v in c.nodes}


@pytest.mark.parametrize("strategy", ["singleton", "cycles", "longest-path"])
def test_qnn_drops_a_partition_of_a_lone_dequantize(strategy):
    """Upstream qnn_execution_provider.cc, QNNExecutionProvider::GetCapability: a partition of
    one node whose op is QuantizeLinear or DequantizeLinear is not kept."""
    g = dequantize_then("Celu")  # Celu: not in QNN's op table, so the DQ is alone
    prop = bound(qnn.make_property(), g)
    assert prop.accepts(node_named(g, "dq")) and not prop.accepts(node_named(g, "after"))
    assert device_of(ck.partition(g, "qnn", strategy=strategy))["dq"] == "cpu"
    if strategy == "singleton":  # every partition is one node there
        return
    # next to a node QNN takes, the DQ is part of a larger partition, which the EP keeps
    dev = device_of(ck.partition(dequantize_then("Relu"), "qnn", strategy=strategy))
    assert dev["dq"] == dev["after"] == "qnn"


def test_qnn_data_cites_its_partition_rule():
    rules = table("qnn_ep.json")["partition_rules"]
    assert len(rules) == len(qnn.make_property().subgraph_rules) == 1
    assert rules[0]["source"].startswith("onnxruntime/core/providers/qnn/")


# ---------------------------------------------------------------------- DNNL
def gelu_graph(divisor: float, addend: float = 1.0) -> ck.Graph:
    """x -> Div(divisor) -> Erf -> Add(addend) -> Mul(x) -> Mul(0.5): DNNL's Gelu pattern 1."""
    f32 = np.float32
    nodes = [helper.make_node("Div", ["x", "d"], ["q"], name="div"),
             helper.make_node("Erf", ["q"], ["e"], name="erf"),
             helper.make_node("Add", ["e", "one"], ["a"], name="add"),
             helper.make_node("Mul", ["x", "a"], ["m"], name="mul"),
             helper.make_node("Mul", ["m", "half"], ["y"], name="half_mul")]
    inits = [("d", f32(divisor)), ("one", f32(addend)), ("half", f32(0.5))]
    return build(nodes, [("x", [2, 8])], [("y", [2, 8])], inits)


@pytest.mark.parametrize("divisor, addend, taken", [
    (np.sqrt(2), 1.0, True), (1.4142099618911743, 1.0, True),  # the two values the EP accepts
    (2.0, 1.0, False),           # not sqrt(2): IsInitilizedWithExpectedValue fails
    (np.sqrt(2), 2.0, False),    # Add must add 1.0
])
def test_dnnl_erf_needs_the_gelu_constants(divisor, addend, taken):
    """Upstream dnnl_node_capability.cc, DnnlErfNodeCapability::IsErfPartOfGelu: the Div's
    divisor must be a constant scalar equal to sqrt(2) (or 1.4142099618911743) and the Add's
    other input a constant scalar equal to 1.0 (atol 1e-8, rtol 1e-5)."""
    g = gelu_graph(divisor, addend)
    prop = bound(dnnl.make_property(), g)
    assert prop.accepts(node_named(g, "erf")) is taken, prop.explain(node_named(g, "erf"))


INT8, INT32 = TensorProto.INT8, TensorProto.INT32


def matmul_integer_graph(a_zp_shape, b_zp_shape, b_zp_value: int = 0,
                         b_zp_const: bool = True) -> ck.Graph:
    """A (uint8, [2, 4]) x B (int8 constant, [4, 3]) with the given zero-point shapes."""
    ins, inits = [("a", [2, 4], UINT8)], [("b", np.ones((4, 3), dtype=np.int8))]
    inits.append(("azp", np.zeros(a_zp_shape, dtype=np.uint8)))
    bzp = np.full(b_zp_shape, b_zp_value, dtype=np.int8)
    if b_zp_const:
        inits.append(("bzp", bzp))
    else:
        ins.append(("bzp", list(b_zp_shape), INT8))
    node = helper.make_node("MatMulInteger", ["a", "b", "azp", "bzp"], ["y"], name="mmi")
    return build([node], ins, [("y", [2, 3], INT32)], inits)


@pytest.mark.parametrize("a_zp, b_zp, value, const, taken", [
    ((), (), 0, True, True),
    ((1,), (), 0, True, False),    # a_zero_point of rank 1, even of one element
    ((), (1,), 0, True, True),     # b_zero_point of rank 1: a constant of zeros is fine
    ((), (1,), 3, True, False),    # ... but not a constant holding a non-zero
    ((), (1,), 0, False, False),   # ... nor a graph input
    ((), (), 3, False, True),      # a rank-0 b_zero_point is not checked further
])
def test_dnnl_matmul_integer_zero_points_by_rank(a_zp, b_zp, value, const, taken):
    """Upstream dnnl_node_capability.cc, DnnlMatMulIntegerNodeCapability::IsDimensionSupported:
    a known a_zero_point shape of rank >= 1 is refused; a b_zero_point of rank >= 1 must pass
    IsWeightZeroPointConstantZero (a constant initializer of zeros)."""
    g = matmul_integer_graph(a_zp, b_zp, value, const)
    prop = bound(dnnl.make_property(), g)
    assert prop.accepts(node_named(g, "mmi")) is taken, prop.explain(node_named(g, "mmi"))


def test_dnnl_rows_cite_their_capability_check():
    ops = table("dnnl_ep.json")["ops"]
    for op in ("Erf", "MatMulInteger"):
        assert ops[op]["source"].startswith("onnxruntime/core/providers/dnnl/dnnl_node_capability")


# ---------------------------------------------------------------------- TensorRT
@pytest.mark.parametrize("bounds_const", [True, False])
def test_tensorrt_clip_takes_tensor_bounds(bounds_const):
    """onnx-tensorrt onnxOpImporters.cpp, the Clip importer: when a bound is a tensor (not an
    initializer) the node is imported as elementwise Max/Min, so it is supported either way."""
    lo, hi = np.asarray(0.0, dtype=np.float32), np.asarray(6.0, dtype=np.float32)
    node = helper.make_node("Clip", ["x", "lo", "hi"], ["y"], name="clip")
    if bounds_const:
        g = build([node], [("x", [1, 8])], [("y", [1, 8])], [("lo", lo), ("hi", hi)])
    else:
        g = build([node], [("x", [1, 8]), ("lo", []), ("hi", [])], [("y", [1, 8])])
    prop = bound(tensorrt.make_property(), g)
    assert prop.accepts(node_named(g, "clip")), prop.explain(node_named(g, "clip"))
    assert table("tensorrt_onnx_parser.json")["ops"]["Clip"]["source"].startswith(
        "onnx/onnx-tensorrt onnxOpImporters.cpp")
