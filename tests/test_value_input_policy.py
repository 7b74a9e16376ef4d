"""The device's value-input policy (``SubgraphProperty.computes_value_inputs``) and what
``verify`` says of a grouping into more partitions than the EP's, and of a node only the
selector takes."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import clusterkit as ck
from clusterkit.analysis.verify import compare, optimized_graph
from clusterkit.constraints.core import Constraints
from clusterkit.io.ep_query import EpAnswer
from clusterkit.io.onnx import load_onnx
from clusterkit.selection.protocol import OpsProperty
from clusterkit.selection.specs import parse_selector
from support.models import BUNDLED_MODEL_PATHS

LLAMA = BUNDLED_MODEL_PATHS[0].parent / "llama_48l_dynamic.onnx"


def reshape_by_own_shape() -> ck.Graph:
    """x[N, 4] -> Relu -> Reshape(to Shape(Relu's output)): the Reshape's shape is computed
    (N is dynamic, so it is not a constant)."""
    nodes = [h.make_node("Relu", ["x"], ["r"], name="relu"),
             h.make_node("Shape", ["r"], ["s"], name="shape"),
             h.make_node("Reshape", ["r", "s"], ["y"], name="reshape")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, ["N", 4])],
                         [h.make_tensor_value_info("y", T.FLOAT, ["N", 4])])
    return load_onnx(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]))


def ops(device: str = "acc", inside: bool = False, **kw) -> OpsProperty:
    prop = OpsProperty(["Relu", "Shape", "Reshape"], device, **kw)
    prop.computes_value_inputs = inside
    return prop


def test_by_default_a_computed_value_input_is_cut():
    part = ck.partition(reshape_by_own_shape(), [ops()], strategy="cycles",
                        constraints=Constraints.default())
    assert part.metrics()["partitions"] == 2


def test_a_device_that_computes_value_inputs_keeps_them_in_one_cluster():
    part = ck.partition(reshape_by_own_shape(), [ops(inside=True)], strategy="cycles",
                        constraints=Constraints.default())
    assert part.metrics()["partitions"] == 1


def test_the_devices_own_value_inputs_still_apply():
    prop = ops(inside=True, value_inputs={"Reshape": (1,)})
    part = ck.partition(reshape_by_own_shape(), [prop], strategy="cycles",
                        constraints=Constraints.default())
    assert part.metrics()["partitions"] == 2


def test_a_device_that_cuts_does_not_follow_the_edge_another_device_keeps_inside():
    g = reshape_by_own_shape()
    problem = Constraints.default().compile(g, [ops("a", inside=True), ops("b")])
    e = g.edge_index(g.node("shape").index, g.node("reshape").index)
    assert not problem.must_cut[e]
    assert problem.edge_ok[0, e] and not problem.edge_ok[1, e]


def test_shipped_policies():
    assert parse_selector("openvino_npu").computes_value_inputs is True
    assert parse_selector("qnn").computes_value_inputs is False
    assert parse_selector("openvino_npu[exclude=Relu]").computes_value_inputs is True


@pytest.fixture(scope="module")
def llama():
    return optimized_graph(LLAMA)


def test_openvino_npu_groups_llama_as_one_partition(llama):
    _, graph = llama
    part = ck.partition(graph, ["openvino_npu"], strategy="auto", constraints=Constraints.default())
    assert part.metrics()["partitions"] == 1
    prop = parse_selector("openvino_npu")
    prop.computes_value_inputs = False  # the policy before: value inputs cut
    assert ck.partition(graph, [prop], strategy="auto",
                        constraints=Constraints.default()).metrics()["partitions"] > 100


def test_verify_reports_more_partitions_than_the_ep_with_the_reason(llama):
    pytest.importorskip("onnxruntime_ep_openvino", reason="needs clusterkit[openvino]")
    from clusterkit.io.ep_query import query_ep

    proto, graph = llama
    answer = query_ep(proto, "OpenVINOExecutionProvider", compile=False)
    prop = parse_selector("openvino_npu")
    prop.computes_value_inputs = False
    r = compare(graph, answer, ck.partition(graph, [prop], strategy="auto",
                                            constraints=Constraints.default()))
    assert r.same_nodes and len(r.ep_partitions) == 1 and r.more_partitions and not r.agree
    assert "a value input" in r.grouping_reason
    assert any("more partitions" in n and "a value input" in n for n in r.notes)
    assert r.to_json()["more_partitions"] is True


def one_node_model(op: str, shape: list[int], inits=(), **attrs) -> ck.Graph:
    names = ["x"] + [t.name for t in inits]
    node = h.make_node(op, names, ["y"], name="n0", **attrs)
    out = h.make_empty_tensor_value_info("y")
    graph = h.make_graph([node], "g", [h.make_tensor_value_info("x", T.FLOAT, shape)], [out],
                         initializer=list(inits))
    model = onnx.shape_inference.infer_shapes(
        h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]))
    return load_onnx(model)


def only_selector_reason(graph: ck.Graph) -> str:
    """The reason verify gives for the node when the EP takes nothing."""
    r = compare(graph, EpAnswer("QNNExecutionProvider", "x"), ck.partition(graph, ["qnn"]))
    assert [d.name for d in r.only_selector] == ["n0"]
    return r.only_selector[0].reason


def test_a_node_only_the_selector_takes_names_the_rules_it_passed():
    pads = h.make_tensor("p", T.INT64, [8], [0, 0, 1, 1] * 2)
    reason = only_selector_reason(one_node_model("Pad", [1, 2, 4, 4], [pads]))
    assert reason.startswith("QNNExecutionProvider does not take it; qnn takes it")
    data = parse_selector("qnn").table.raw["ops"]["Pad"]["conditions"]  # type: ignore
    assert "input rank <= 5" in reason and any("pads (input 1)" in c for c in data)
    assert "'x' float32 rank 4" in reason


def test_a_node_no_rule_covers_says_so_with_its_tensors():
    reason = only_selector_reason(one_node_model("Transpose", [2] * 5, perm=[4, 3, 2, 1, 0]))
    assert "no modelled rule covers Transpose" in reason
    assert "'x' float32 rank 5" in reason and "'y' float32 rank 5" in reason
