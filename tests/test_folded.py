"""Folded nodes: constants and static shape values that onnxruntime computes before any execution
provider sees the graph. Checked against an independent walk of the ONNX graph (onnx shape
inference with data propagation, numpy-free rules written here), never as fallbacks, never in
the offload share's denominator, free in cut_bytes."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, shape_inference

import clusterkit as ck
from clusterkit.cli import main as cli_main
from clusterkit.io.loader import load_graph
from support.models import BUNDLED_MODELS

RANDOM = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
          "Multinomial", "Bernoulli"}


def _static_shapes(model: onnx.ModelProto) -> dict[str, tuple]:
    """Tensor name → shape, for the tensors shape inference knows fully."""
    inferred = shape_inference.infer_shapes(model, data_prop=True)
    g = inferred.graph
    out = {}
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        tt = vi.type.tensor_type
        if vi.type.HasField("tensor_type") and tt.HasField("shape") and all(
                d.HasField("dim_value") for d in tt.shape.dim):
            out[vi.name] = tuple(d.dim_value for d in tt.shape.dim)
    return out


def independent_folded(model: onnx.ModelProto) -> tuple[set[int], set[str]]:
    """Positions in ``graph.node`` of the folded nodes, and the folded tensor names: an
    initializer or ``Constant`` output; a ``Shape``/``Size`` of a fully static tensor; a
    deterministic node's outputs when all its inputs are folded. Walked to a fixpoint, so the
    node order of the file does not matter."""
    g = model.graph
    shapes = _static_shapes(model)
    folded_t = {t.name for t in g.initializer}
    folded_n: set[int] = set()
    changed = True
    while changed:
        changed = False
        for pos, nd in enumerate(g.node):
            if pos in folded_n:
                continue
            ins = [t for t in nd.input if t]
            onnx_op = nd.domain in ("", "ai.onnx")
            if nd.op_type == "Constant" and onnx_op:
                ok = True
            elif nd.op_type in ("Shape", "Size") and onnx_op and ins and ins[0] in shapes:
                ok = True
            else:
                ok = bool(ins) and nd.op_type not in RANDOM and all(t in folded_t for t in ins)
            if ok:
                folded_n.add(pos)
                folded_t.update(t for t in nd.output if t)
                changed = True
    return folded_n, folded_t


def _graph_folded(graph) -> set[int]:
    return set(graph.index_to_source[graph.folded].tolist())


@pytest.mark.parametrize("name", ["resnet50", "bert_base", "swin_t", "gpt2"])
def test_folded_set_equals_an_independent_walk(name):
    path = BUNDLED_MODELS / f"{name}.onnx"
    model = onnx.load(path)
    assert not any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
                   for nd in model.graph.node for a in nd.attribute)  # no subgraphs here
    expect, _ = independent_folded(model)
    graph = load_graph(path)
    assert _graph_folded(graph) == expect
    assert expect  # every one of these models has folded nodes


def test_shape_of_a_static_tensor_is_folded_and_of_a_dynamic_one_is_not():
    def model(dim):
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [dim, 3, 4, 4])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
        nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
                 helper.make_node("Constant", [], ["k"], name="k",
                                  value=helper.make_tensor("kv", TensorProto.INT64, [1], [-1])),
                 helper.make_node("Slice", ["s", "zero", "one"], ["b"], name="batch"),
                 helper.make_node("Concat", ["b", "k"], ["target"], name="concat", axis=0),
                 helper.make_node("Reshape", ["x", "target"], ["r"], name="reshape"),
                 helper.make_node("Relu", ["r"], ["y"], name="relu")]
        inits = [helper.make_tensor("zero", TensorProto.INT64, [1], [0]),
                 helper.make_tensor("one", TensorProto.INT64, [1], [1])]
        g = helper.make_graph(nodes, "g", [x], [y], initializer=inits)
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])

    static = load_graph(model(2))
    names = {static.nodes[v].name for v in np.flatnonzero(static.folded)}
    assert names == {"shape", "k", "batch", "concat"}
    assert static.tensors["target"].is_folded and not static.tensors["target"].is_constant
    dynamic = load_graph(model("N"))
    assert {dynamic.nodes[v].name for v in np.flatnonzero(dynamic.folded)} == {"k"}
    for m in (model(2), model("N")):
        assert _graph_folded(load_graph(m)) == independent_folded(m)[0]


def _reference_cut(model: onnx.ModelProto, unit_of_pos: dict[int, str]) -> int:
    """cut_bytes walked over the ONNX graph: folded tensors (independent set) are free."""
    _, folded_t = independent_folded(model)
    g = shape_inference.infer_shapes(model, data_prop=True).graph
    size = {}
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        tt = vi.type.tensor_type
        if all(d.HasField("dim_value") for d in tt.shape.dim):
            item = np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type)).itemsize
            size[vi.name] = int(np.prod([d.dim_value for d in tt.shape.dim])) * item
    producer = {t: pos for pos, nd in enumerate(g.node) for t in nd.output if t}
    consumers: dict[str, set[str]] = {}
    for pos, nd in enumerate(g.node):
        for t in nd.input:
            if t:
                consumers.setdefault(t, set()).add(unit_of_pos[pos])
    for out in g.output:
        consumers.setdefault(out.name, set()).add("host")
    total = 0
    for t, units in consumers.items():
        if t in folded_t:
            continue
        src = unit_of_pos[producer[t]] if t in producer else "host"
        total += sum(size.get(t, 0) for u in units if u != src)
    return total


def test_resnet50_coreml_reports_folded_nodes_never_as_fallbacks(tmp_path, capsys):
    path = BUNDLED_MODELS / "resnet50.onnx"
    model = onnx.load(path)
    expect, _ = independent_folded(model)
    part = ck.partition(path, "coreml", strategy="cycles")
    doc = part.to_json()
    assert set(doc["folded"]) == expect and len(expect) == 93
    fallen = {e["index"] for e in doc["placement"]["fallen_back"]}
    assert fallen and not fallen & expect
    on_cpu = {v for c in doc["clusters"] if c["device"] == "cpu" for v in c["nodes"]}
    assert fallen == on_cpu - expect        # folded nodes stay in the fallback clusters
    m = doc["metrics"]
    n = len(model.graph.node)
    assert (m["folded_nodes"], m["compute_nodes"]) == (93, n - 93)
    offloaded = n - len(on_cpu)
    assert m["compute_offloaded"] == offloaded - len(expect - on_cpu) == 121
    assert m["offloaded_share"] == pytest.approx(121 / 122)
    unit = {v: ("host" if c["device"] == "cpu" else f"c{c['id']}")
            for c in doc["clusters"] for v in c["nodes"]}
    assert m["cut_bytes"] == _reference_cut(model, unit)
    out = tmp_path / "p.json"
    assert cli_main(["partition", str(path), "--selector", "coreml", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "121/122 compute nodes offloaded, 93 folded" in text
    assert "fell back: 1 node " in text and "folded: 93 nodes" in text
    assert json.loads(out.read_text())["folded"] == sorted(expect)
