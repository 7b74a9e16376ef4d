"""The OpenVINO NPU selector reviewed against the OpenVINO EP's source (data_ops.cc and
capability.cc): each fix on a small ONNX graph built here. Expectations are the upstream rules
as stated in each test, not the selector's own answers."""

from __future__ import annotations

import json
from importlib import resources

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import clusterkit as ck
from clusterkit.graph.subgraph import Subgraph
from clusterkit.selectors import openvino_npu

FLOAT, INT64 = TensorProto.FLOAT, TensorProto.INT64


def build(nodes, inputs, outputs, inits=(), opset: int = 17) -> ck.Graph:
    """A checked, shape-inferred graph from ``(name, shape[, dtype])`` inputs/outputs."""
    def info(spec):
        name, shape, *dtype = spec
        return helper.make_tensor_value_info(name, dtype[0] if dtype else FLOAT, shape)
    graph = helper.make_graph(nodes, "g", [info(s) for s in inputs], [info(s) for s in outputs],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(m, full_check=True)
    return ck.load_onnx(onnx.shape_inference.infer_shapes(m))


def node_named(graph: ck.Graph, name: str):
    return next(n for n in graph.nodes if n.name == name)


def table() -> dict:
    text = resources.files("clusterkit.selectors").joinpath("data", "openvino_ep_npu.json")
    return json.loads(text.read_text())


def device_of(part: ck.Partition) -> dict[str, str]:
    g = part.graph
    return {g.nodes[v].name: c.device for c in part.clusters for v in c.nodes}


def subgraph_of(graph: ck.Graph, *names: str) -> Subgraph:
    nodes = [node_named(graph, n).index for n in names]
    return Subgraph.from_nodes(graph, nodes, "openvino_npu", 0)


# ---------------------------------------------------------------------- zero-sized dims
def resize_graph() -> ck.Graph:
    """Resize(x, roi=[] (an empty initializer), scales) -> y."""
    node = helper.make_node("Resize", ["x", "roi", "scales"], ["y"], name="resize")
    inits = [("roi", np.zeros((0,), np.float32)),
             ("scales", np.array([1, 1, 2, 2], np.float32))]
    return build([node], [("x", [1, 1, 4, 4])], [("y", [1, 1, 8, 8])], inits)


def test_an_empty_constant_initializer_input_is_not_a_zero_sized_dim():
    """Upstream data_ops.cc, DataOps::node_is_supported (dimension check): a constant
    initializer input is skipped before the rank-0 and zero-dim checks, so the empty ``roi``
    of a Resize does not make it unsupported (Resize is on the CPU list)."""
    g = resize_graph()
    prop = openvino_npu.make_property()
    prop.query(g)
    assert prop.accepts(node_named(g, "resize")), prop.explain(node_named(g, "resize"))


def test_a_zero_sized_non_constant_input_is_still_refused():
    """The same check on a graph input: a zero-sized dim is refused for ops other than
    Expand, Equal, Slice, Concat and Shape."""
    g = build([helper.make_node("Relu", ["x"], ["y"], name="relu")],
              [("x", [0, 3])], [("y", [0, 3])])
    prop = openvino_npu.make_property()
    prop.query(g)
    assert not prop.accepts(node_named(g, "relu"))
    assert "zero-sized" in prop.explain(node_named(g, "relu"))


# ---------------------------------------------------------------------- partition rules
def chain(*ops: str) -> ck.Graph:
    """x [1, 1, 5, 5] through ``ops`` in a chain; "Det" (not imported by the OpenVINO ONNX
    frontend, so refused) stands between parts; "Conv" is a 3x3 convolution to [1, 1, 3, 3]."""
    nodes, inits, cur, shape = [], [], "x", [1, 1, 5, 5]
    for i, op in enumerate(ops):
        out = f"t{i}"
        if op == "Conv":
            inits.append((f"w{i}", np.ones((1, 1, 3, 3), np.float32)))
            nodes.append(helper.make_node("Conv", [cur, f"w{i}"], [out], name=f"n{i}"))
            shape = [1, 1, 3, 3]
        elif op == "Det":
            nodes.append(helper.make_node("Det", [cur], [out], name=f"n{i}"))
            shape = shape[:-2]
        else:
            nodes.append(helper.make_node(op, [cur], [out], name=f"n{i}"))
        cur = out
    return build(nodes, [("x", [1, 1, 5, 5])], [(cur, shape)], inits)


@pytest.mark.parametrize("strategy", ["singleton", "cycles", "longest-path"])
def test_a_lone_node_partition_is_dropped_when_the_model_is_split(strategy):
    """Upstream capability.cc, GetCapability::Execute: with unsupported nodes in the model, a
    cluster of one node (not EPContext) is omitted."""
    g = chain("Relu", "Conv", "Det", "Sigmoid")
    prop = openvino_npu.make_property(partition_rules=True)
    prop.query(g)
    assert prop.accepts(node_named(g, "n3")) and not prop.accepts(node_named(g, "n2"))
    part = ck.partition(g, "openvino_npu[partition_rules=true]", strategy=strategy)
    assert device_of(part)["n3"] == "cpu"


@pytest.mark.parametrize("ops, taken", [
    (("Conv", "Relu", "Det"), True),    # Conv's output stays inside the partition
    (("Relu", "Conv", "Det"), False),   # Conv's output leaves it for the Det
])
def test_a_partition_whose_conv_output_leaves_it_is_dropped(ops, taken):
    """Upstream capability.cc, GetCapability::Execute ("Omitting zero dim subgraphs"): with
    unsupported nodes in the model, a cluster is omitted when the first output of a Conv or
    Identity in it is a cluster output and the node has output edges."""
    g = chain(*ops)
    dev = device_of(ck.partition(g, "openvino_npu[partition_rules=true]", strategy="cycles"))
    assert (dev["n0"] == dev["n1"] == "openvino_npu") is taken
    if not taken:
        assert dev["n0"] == dev["n1"] == "cpu"


def test_a_partition_of_constants_only_is_dropped():
    """Upstream capability.cc, GetCapability::Execute: a cluster without inputs other than
    initializers is not appended (onnxruntime folds it)."""
    node = helper.make_node("Add", ["a", "b"], ["y"], name="add")
    g = build([node], [], [("y", [2])], [("a", np.ones(2, np.float32)),
                                         ("b", np.ones(2, np.float32))])
    why = openvino_npu.make_property(partition_rules=True).explain_subgraph(subgraph_of(g, "add"))
    assert why and "constant" in why


@pytest.mark.parametrize("op, inputs, dropped", [
    ("Reshape", "shape_input", True),    # SpecialConditionForClusterSizeOne: shape not an init
    ("Reshape", "shape_init", False),
    ("Exp", None, True),                 # Exp is in ops_supported_only_in_model
    ("Relu", None, False),
])
def test_whole_model_rules_for_tiny_models(op, inputs, dropped):
    """Upstream capability.cc, GetCapability::Execute (every node supported): a model of at
    most 3 nodes whose first node is in ops_supported_only_in_model is not taken, nor a
    one-node model that is a Reshape whose shape is not an initializer."""
    if op == "Reshape":
        node = helper.make_node("Reshape", ["x", "s"], ["y"], name="n")
        ins, inits = [("x", [2, 3])], [("s", np.array([3, 2], np.int64))]
        if inputs == "shape_input":
            ins, inits = [("x", [2, 3]), ("s", [2], INT64)], []
        g = build([node], ins, [("y", [3, 2])], inits)
    else:
        g = build([helper.make_node(op, ["x"], ["y"], name="n")], [("x", [2, 3])],
                  [("y", [2, 3])])
    why = openvino_npu.make_property(partition_rules=True).explain_subgraph(subgraph_of(g, "n"))
    assert (why is not None) is dropped, why


def test_the_data_cites_each_partition_rule_and_the_source_version():
    raw = table()
    rules = raw["partition_rules"]
    assert len(rules) == len(openvino_npu.make_property(partition_rules=True).subgraph_rules) == 4
    for rule in rules:
        assert rule["source"].startswith("onnxruntime/core/providers/openvino/ov_versions/")
    assert "2025.2" in raw["version_note"] or "2025.0-2025.2" in raw["version_note"]
    shipped = resources.files("clusterkit.selectors").joinpath("data", "openvino_ep_npu.json")
    assert shipped.read_bytes().endswith(b"}\n")


def test_partition_rules_are_opt_in():
    """By default the selector judges nodes only; the EP's whole-partition rules come with the
    setting ``partition_rules=true``."""
    assert openvino_npu.make_property().subgraph_rules == ()
    g = chain("Relu", "Conv", "Det", "Sigmoid")
    assert device_of(ck.partition(g, "openvino_npu", strategy="cycles"))["n3"] == "openvino_npu"
