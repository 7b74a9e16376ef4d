"""The graph model and its readers, on every real model and on malformed input."""

from __future__ import annotations

import json

import networkx as nx
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from clusterkit import (
    CycleError,
    GraphError,
    ModelLoadError,
    from_networkx,
    load_graph,
    load_onnx,
    to_networkx,
)
from clusterkit.io.networkx import graph_from_node_link, to_node_link
from clusterkit.result.dot import graph_dot
from support.models import ALL_MODELS, BUNDLED_MODELS, model_id


@pytest.mark.parametrize("path", ALL_MODELS, ids=model_id)
def test_real_model_loads_with_topological_numbering(path):
    proto = onnx.load(str(path))
    g = load_graph(path)
    assert g.n == len(proto.graph.node)
    # every ONNX node appears once, mapped back to its graph.node position
    assert sorted(g.index_to_source.tolist()) == list(range(g.n))
    for node in g.nodes:
        assert proto.graph.node[node.source_index].op_type == node.op_type
    # edges go forward in the numbering and match producer/consumer links from the proto
    assert np.all(g.edge_src < g.edge_dst)
    producer = {o: i for i, nd in enumerate(proto.graph.node) for o in nd.output}
    expected = set()
    for i, nd in enumerate(proto.graph.node):
        for t in nd.input:
            if t in producer:
                expected.add((producer[t], i))
    src = g.index_to_source
    got = {(int(src[u]), int(src[v])) for u, v in zip(g.edge_src, g.edge_dst)}
    # If/Loop bodies may add implicit edges on top of the explicit ones
    assert expected <= got
    # CSR twins agree
    for v in range(0, g.n, max(1, g.n // 50)):
        assert g.succ_lists[v] == g.successors(v).tolist()
        assert g.pred_lists[v] == sorted(g.predecessors(v).tolist())


def test_tensor_sizes_come_from_shape_inference():
    g = load_graph(BUNDLED_MODELS / "resnet18.onnx")
    image = g.tensors[g.inputs[0]]
    assert image.shape == (1, 3, 224, 224) and image.dtype == "float32"
    assert image.nbytes == 1 * 3 * 224 * 224 * 4
    first_conv = next(nd for nd in g.nodes if nd.op_type == "Conv")
    out = g.tensors[first_conv.outputs[0]]
    assert out.shape == (1, 64, 112, 112) and out.nbytes == 64 * 112 * 112 * 4


def test_weight_stubs_are_constants():
    g = load_graph(BUNDLED_MODELS / "resnet18.onnx")
    stubs = [nd for nd in g.nodes if nd.op_type == "ConstantOfShape"]
    assert stubs and all(nd.is_constant for nd in stubs)
    assert all(g.tensors[nd.outputs[0]].is_constant for nd in stubs)
    convs = [nd for nd in g.nodes if nd.op_type == "Conv"]
    assert not any(nd.is_constant for nd in convs)


def test_if_node_reads_outer_scope_tensors():
    path = BUNDLED_MODELS / "fasterrcnn_mobilenet_v3_large_320_fpn.onnx"
    proto = onnx.load(str(path))
    g = load_graph(path)
    ifs = [nd for nd in g.nodes if nd.op_type == "If"]
    assert len(ifs) == 2
    for nd in ifs:
        body = proto.graph.node[nd.source_index].attribute
        defined_inside = set()
        used = set()
        for a in body:
            for sub in ([a.g] if a.type == onnx.AttributeProto.GRAPH else []):
                for inner in sub.node:
                    used.update(i for i in inner.input if i)
                    defined_inside.update(inner.output)
                defined_inside.update(i.name for i in sub.initializer)
        outer = used - defined_inside
        assert outer and set(nd.implicit_inputs) >= outer
        for t in outer:
            prod = g.tensors[t].producer
            if prod is not None:
                assert nd.index in g.succ_lists[prod]


def _model(nodes, inputs=("x",), outputs=("y",), inits=()):
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in inputs]
    vo = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in outputs]
    graph = helper.make_graph(nodes, "g", vi, vo, initializer=list(inits))
    return helper.make_model(graph)


def test_cycle_is_refused_naming_nodes():
    nodes = [helper.make_node("Add", ["x", "c"], ["a"], name="first"),
             helper.make_node("Relu", ["a"], ["b"], name="second"),
             helper.make_node("Neg", ["b"], ["c"], name="third"),
             helper.make_node("Identity", ["b"], ["y"], name="out")]
    with pytest.raises(CycleError) as info:
        load_onnx(_model(nodes), infer_shapes=False)
    msg = str(info.value)
    assert "cycle" in msg and {"first", "second", "third"} <= set(info.value.cycle)
    for name in ("first", "second", "third"):
        assert name in msg


def test_tensor_never_produced_is_refused():
    nodes = [helper.make_node("Add", ["x", "ghost"], ["y"], name="adder")]
    with pytest.raises(GraphError, match="adder.*ghost"):
        load_onnx(_model(nodes), infer_shapes=False)


def test_missing_and_non_onnx_files(tmp_path):
    with pytest.raises(ModelLoadError, match="no such file"):
        load_graph(tmp_path / "missing.onnx")
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00\x01 this is not protobuf \xff\xfe" * 10)
    with pytest.raises(ModelLoadError, match="not an ONNX model"):
        load_graph(bad)
    txt = tmp_path / "notes.txt"
    txt.write_text("hello")
    with pytest.raises(ModelLoadError):
        load_graph(txt)
    badjson = tmp_path / "g.json"
    badjson.write_text("{not json")
    with pytest.raises(ModelLoadError, match="node-link"):
        load_graph(badjson)


def test_networkx_round_trip_and_node_link(tmp_path):
    g = nx.DiGraph()
    g.add_node("a", op="Conv")
    g.add_node("b", op="Relu", affinity="npu")
    g.add_node("c", op="Add")
    g.add_edge("a", "b", bytes=100)
    g.add_edge("a", "c", bytes=100)
    g.add_edge("b", "c", bytes=40)
    graph = from_networkx(g)
    assert [nd.name for nd in graph.nodes] == ["a", "b", "c"]
    assert graph.node("b").affinity == "npu"
    back = to_networkx(graph)
    assert {(graph.nodes[u].name, graph.nodes[v].name) for u, v in back.edges} == set(g.edges)
    assert back.edges[0, 1]["bytes"] == 100 and back.edges[1, 2]["bytes"] == 40
    data = to_node_link(graph)
    path = tmp_path / "g.json"
    path.write_text(json.dumps(data))
    again = load_graph(path)
    assert again.n == 3 and again.num_edges == 3
    assert "digraph" in graph_dot(graph) and graph_dot(graph).count("->") == 3


def test_networkx_errors():
    g = nx.DiGraph()
    g.add_node(0)
    with pytest.raises(GraphError, match="'0' has no 'op'"):
        from_networkx(g)
    g = nx.DiGraph()
    g.add_node(0, op="A")
    g.add_node(1, op="B")
    g.add_edge(0, 1)
    g.add_edge(1, 0)
    with pytest.raises(CycleError):
        from_networkx(g)
    with pytest.raises(ModelLoadError):
        graph_from_node_link({"edges": []})


def test_unsorted_node_order_is_sorted_stably():
    nodes = [helper.make_node("Relu", ["a"], ["y"], name="late"),
             helper.make_node("Neg", ["x"], ["a"], name="early")]
    g = load_onnx(_model(nodes), infer_shapes=False)
    assert [nd.name for nd in g.nodes] == ["early", "late"]
    assert g.node("late").source_index == 0
