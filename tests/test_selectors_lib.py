"""The shipped selector library (``selectors/`` = ``clusterkit.selectors``).

Oracles are the op tables themselves (the shipped JSON files, read here straight, not through
the library's parser: the rules are checked against the data) and facts read off the real
models' tensors; expectations are never computed by the code under test. The tables themselves
are checked against something independent elsewhere: the real EPs (``test_verify_eps.py``),
the tables onnxruntime's wheel ships (``test_ort_op_tables.py``) and the upstream rules stated in
the tests (``test_ep_rules.py``, ``test_ep_review.py``).
"""

from __future__ import annotations

import importlib
import inspect
import json
from functools import lru_cache
from importlib import resources

import numpy as np
import onnx
import onnxruntime
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import clusterkit as ck
from clusterkit.constraints.core import Constraints
from clusterkit.errors import SelectorError
from clusterkit.graph.core import Graph, Node, Tensor
from clusterkit.graph.subgraph import Subgraph
from clusterkit.selection.registry import SELECTORS as REGISTRY
from clusterkit.selectors._registry import SHIPPED
from support.models import BUNDLED_MODEL_PATHS, BUNDLED_MODELS, LIGHT_DIR

SELECTORS = sorted(SHIPPED)
DATA = resources.files("clusterkit.selectors").joinpath("data")


@lru_cache(maxsize=None)
def table(name: str) -> dict:
    """Selector ``name``'s table (the oracle), read as JSON."""
    return json.loads(DATA.joinpath(REGISTRY.get(name).table).read_text(encoding="utf-8"))


@lru_cache(maxsize=None)
def graph(name: str) -> Graph:
    """A real model, loaded once per test module."""
    path = BUNDLED_MODELS / f"{name}.onnx"
    if not path.exists():
        path = LIGHT_DIR / f"{name}.onnx"
    return ck.load_graph(str(path))


def prop_for(name: str, graph_: Graph | None = None, **settings_):
    mod = importlib.import_module(f"clusterkit.selectors.{name}")
    prop = mod.make_property(**settings_)
    if graph_ is not None:
        prop.query(graph_)
    return prop


def nodes_of(g: Graph, op: str) -> list[Node]:
    return [n for n in g.nodes if n.op_type == op]


# ====================================================================== packaging / registry
@pytest.mark.parametrize("name", SELECTORS)
def test_a_shipped_selectors_traits_are_its_table_and_its_ep(name):
    """``table``: the file the property reads its rows from; ``ep``: a provider onnxruntime
    knows; ``verified``: exactly when the table has the ``verified`` block (naming that EP) that
    ``clusterkit verify`` and ``tests/test_verify_eps.py`` check against the real EP."""
    entry = REGISTRY.get(name)
    assert DATA.joinpath(entry.table).is_file()
    assert ck.get_selector(name).table.file == entry.table
    assert entry.ep in onnxruntime.get_all_providers()
    block = table(name).get("verified")
    assert entry.verified == bool(block)
    assert not block or block["ep"] == entry.ep


def test_a_registered_selector_has_no_traits():
    ck.register_selector("zz_traits_test", lambda device="zz": ck.OpsProperty(["Relu"],
                                                                           device=device))
    try:
        entry = REGISTRY.get("zz_traits_test")
        assert (entry.ep, entry.table, entry.verified) == (None, None, False)
    finally:
        REGISTRY.unregister("zz_traits_test")


def test_every_shipped_name_is_registered_with_its_docstring_line():
    registered = ck.registered_selectors()
    for name in SELECTORS:
        mod = importlib.import_module(f"clusterkit.selectors.{name}")
        assert registered[name] == mod.__doc__.strip().splitlines()[0]
        assert inspect.signature(mod.make_property).parameters["device"].default == name
        assert ck.get_selector(name).device == name
        assert ck.get_selector(name, device="npu0").device == "npu0"


def test_bare_selectors_name_is_still_the_standard_library():
    import selectors

    assert hasattr(selectors, "DefaultSelector")


# ====================================================================== tables <-> rules
@pytest.mark.parametrize("name", SELECTORS)
def test_every_table_condition_is_checked_or_listed_undecidable(name):
    data = table(name)
    expected = [("*", c["text"]) for c in data["global_conditions"]]
    expected += [(op, text) for op, e in data["ops"].items() for text in e["conditions"]]
    prop = prop_for(name)
    checked = [(c.op, c.text) for c in prop.checked]
    undecidable = [(c.op, c.text) for c, _ in prop.undecidable]
    assert sorted(checked + undecidable) == sorted(expected)
    assert not set(checked) & set(undecidable)
    assert all(why for _, why in prop.undecidable)


@pytest.mark.parametrize("name", SELECTORS)
def test_value_inputs_cover_the_table(name):
    prop = prop_for(name)
    for op, entry in table(name)["ops"].items():
        if not entry.get("supported", True) or not entry["value_inputs"]:
            continue
        if name == "coreml" and "MLProgram" not in entry["formats"]:
            continue  # default format MLProgram: NeuralNetwork-only ops are not offered
        assert set(entry["value_inputs"]) <= set(prop.value_inputs[op.split(":")[-1]]), op


def test_coreml_neuralnetwork_adds_weight_value_inputs():
    nn = prop_for("coreml", model_format="NeuralNetwork")
    entry = table("coreml")["ops"]
    assert set(entry["Conv"]["value_inputs_nn"]) <= set(nn.value_inputs["Conv"])
    assert set(entry["MatMul"]["value_inputs_nn"]) <= set(nn.value_inputs["MatMul"])
    assert "MatMul" not in prop_for("coreml").value_inputs


# ---------------------------------------------------------------------- synthetic one-node graphs
def one_node(op: str, domain: str, n_inputs: int, const_at: set[int], shapes: dict[int, tuple],
             opset: int | None = 17, attrs: dict | None = None, names: dict | None = None):
    """A graph with one node; inputs in ``const_at`` are initializers, the rest graph inputs."""
    tensors, inputs, node_inputs = {}, [], []
    for p in range(n_inputs):
        name = (names or {}).get(p, f"in{p}")
        shape = shapes.get(p, (1, 3, 8, 8))
        dtype = "int64" if p in shapes else "float32"
        t = Tensor(name, shape=shape, dtype=dtype, nbytes=8 * int(np.prod(shape)))
        if p in const_at:
            t.is_initializer = True
        else:
            inputs.append(name)
        tensors[name] = t
        node_inputs.append(name)
    tensors["out"] = Tensor("out", shape=(1, 3, 8, 8), dtype="float32", nbytes=768)
    model = None
    if opset is not None:
        model = helper.make_model(helper.make_graph([], "g", [], []),
                                  opset_imports=[helper.make_opsetid("", opset)])
    node = Node(0, "the_node", op, domain, attrs=dict(attrs or {}), inputs=node_inputs,
                outputs=["out"])
    return Graph.build([node], tensors, inputs, ["out"], model=model)


def value_input_cases():
    for name in SELECTORS:
        prop = prop_for(name)
        for key, entry in table(name)["ops"].items():
            if key not in prop.ops:
                continue
            for pos in entry["value_inputs"]:
                yield name, key, pos


@pytest.mark.parametrize("name,key,pos", list(value_input_cases()))
def test_a_nonconstant_value_input_adds_a_refusal(name, key, pos):
    """Table: value_inputs are 'input indices that must be constant initializers'. Making one
    non-constant (all else equal) must add a reason to refuse the node."""
    domain, _, op = key.rpartition(":")
    entry = table(name)["ops"][key]
    n_inputs = max(max(entry["value_inputs"]) + 1, 2)
    two_d = op in ("MatMul", "Gemm", "QLinearMatMul")  # NNAPI: B constant in the 2-D case
    shapes = {p: (4,) for p in entry["value_inputs"]}
    if two_d:
        shapes.update({p: (8, 8) for p in range(n_inputs) if p not in entry["value_inputs"]})
        shapes.update({p: (8, 8) for p in (0, 1, 3) if p in entry["value_inputs"]})
    # xnnpack: 'scales is input 1 for opset 10, input 2 for opset >= 11'
    opset = 10 if (name, op, pos) == ("xnnpack", "Resize", 1) else 17
    const_all = set(range(1, n_inputs)) | set(entry["value_inputs"])  # input 0: data
    results = []
    for const_at in (const_all, const_all - {pos}):
        g = one_node(op, domain, n_inputs, const_at, shapes, opset=opset)
        prop = prop_for(name, g)
        results.append(set(prop.explain_all(g.nodes[0])))
    with_const, without = results
    assert without - with_const, f"{name} {key}: non-constant input {pos} was not refused"


@pytest.mark.parametrize("name", SELECTORS)
def test_ops_outside_the_table_and_unsupported_rows_are_refused(name):
    g = one_node("NoSuchOp", "", 1, set(), {})
    prop = prop_for(name, g)
    assert not prop.accepts(g.nodes[0])
    assert "NoSuchOp" in prop.explain(g.nodes[0])
    for key, entry in table(name)["ops"].items():
        if entry.get("supported", True):
            continue
        domain, _, op = key.rpartition(":")
        g = one_node(op, domain, 1, set(), {})
        prop = prop_for(name, g)
        assert not prop.accepts(g.nodes[0]), key
        assert "not supported" in prop.explain(g.nodes[0])


def test_tensorrt_refuses_every_row_marked_unsupported_in_an_onnx_model():
    unsupported = [k for k, e in table("tensorrt")["ops"].items() if not e["supported"]]
    assert "Unique" in unsupported and "QLinearMatMul" in unsupported
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [6])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [None])
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node("Unique", ["r"], ["y"], name="unique")], "m", [x], [y]),
        opset_imports=[helper.make_opsetid("", 17)])
    g = ck.load_graph(model)
    prop = prop_for("tensorrt", g)
    assert prop.accepts(g.node("relu"))
    assert not prop.accepts(g.node("unique"))
    assert "not supported" in prop.explain(g.node("unique"))


# ====================================================================== real-model conditions
def test_coreml_refuses_reshape_with_a_nonconstant_shape():
    g = graph("bert_base")
    prop = prop_for("coreml", g)
    dynamic = [n for n in nodes_of(g, "Reshape") if not g.tensors[n.inputs[1]].is_constant]
    assert dynamic
    for n in dynamic:
        assert not prop.accepts(n)
        assert any("input 1" in r and "constant" in r for r in prop.explain_all(n))


def test_coreml_takes_reshape_with_constant_shape_and_static_input():
    g = graph("light_resnet50")
    prop = prop_for("coreml", g)
    (reshape,) = nodes_of(g, "Reshape")
    x, shape = (g.tensors[t] for t in reshape.inputs)
    assert shape.is_constant and all(isinstance(d, int) for d in x.shape) and x.dtype == "float32"
    assert prop.accepts(reshape), prop.explain(reshape)


def test_coreml_clip_min_must_differ_from_max():
    g = graph("fasterrcnn_mobilenet_v3_large_320_fpn")
    prop = prop_for("coreml", g)
    clip = g.node("/m/roi_heads/box_roi_pool/Clip")
    lo, hi = (onnx.numpy_helper.to_array(g.nodes[g.tensors[t].producer].attrs["value"])
              for t in clip.inputs[1:])
    assert lo == hi
    assert not prop.accepts(clip)
    assert "min equals max" in prop.explain(clip)


def test_coreml_format_decides_op_availability():
    g = graph("bert_base")
    gather = nodes_of(g, "Gather")[0]
    formats = table("coreml")["ops"]["Gather"]["formats"]
    assert formats == ["NeuralNetwork"]
    ml = prop_for("coreml", g)
    assert not ml.accepts(gather) and "MLProgram" in ml.explain(gather)
    with pytest.raises(SelectorError, match="model_format"):
        prop_for("coreml", model_format="FancyFormat")


def test_coreml_neuralnetwork_cast_only_after_argmax():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 5, 5])
    y = helper.make_tensor_value_info("y", TensorProto.INT32, [1, 1, 5, 5])
    z = helper.make_tensor_value_info("z", TensorProto.INT32, [1, 4, 5, 5])
    model = helper.make_model(helper.make_graph([
        helper.make_node("ArgMax", ["x"], ["a"], name="argmax", axis=1),
        helper.make_node("Cast", ["a"], ["y"], name="cast_after_argmax", to=TensorProto.INT32),
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("Cast", ["r"], ["z"], name="cast_after_relu", to=TensorProto.INT32),
    ], "m", [x], [y, z]), opset_imports=[helper.make_opsetid("", 13)])
    g = ck.load_graph(model)
    nn = prop_for("coreml", g, model_format="NeuralNetwork")
    assert nn.accepts(g.node("cast_after_argmax"))
    assert not nn.accepts(g.node("cast_after_relu"))
    sel = nn.create_subgraph_selector()
    cast, argmax = g.node("cast_after_argmax"), g.node("argmax")
    assert sel.filter([cast]) == [] and sel.filter([argmax, cast]) == [argmax, cast]
    ml = prop_for("coreml", g)  # MLProgram: Cast stands alone (dtype rule only)
    assert ml.accepts(g.node("cast_after_relu"))


def test_nnapi_refuses_rank5_inputs():
    g = graph("light_shufflenet")
    prop = prop_for("nnapi", g)
    rank5 = [n for n in g.nodes if n.op_type in ("Transpose", "Reshape")
             and len(g.tensors[n.inputs[0]].shape) == 5]
    assert rank5
    for n in rank5:
        assert not prop.accepts(n)
        assert "rank 5" in prop.explain(n)
    convs = nodes_of(g, "Conv")
    assert all(prop.accepts(n) for n in convs)


def test_nnapi_clip_only_relu6_or_relu1():
    g = graph("mobilenet_v2")
    prop = prop_for("nnapi", g)
    for clip in nodes_of(g, "Clip"):
        bounds = [float(onnx.numpy_helper.to_array(
            g.nodes[g.tensors[t].producer].attrs["value"])) for t in clip.inputs[1:]]
        assert prop.accepts(clip) == (bounds in ([0.0, 6.0], [-1.0, 1.0]))
    g = graph("fasterrcnn_mobilenet_v3_large_320_fpn")
    prop = prop_for("nnapi", g)
    clip = g.node("/m/rpn/Clip")
    assert clip.inputs[1] == ""  # no min: -inf
    assert any("(min, max)" in r for r in prop.explain_all(clip))


def test_nnapi_feature_level_gates_div():
    g = graph("convnext_tiny")
    div = nodes_of(g, "Div")[0]
    cond = table("nnapi")["ops"]["Div"]["conditions"]
    assert any("feature level 2" in c for c in cond)
    assert prop_for("nnapi", g, feature_level=2).accepts(div)
    low = prop_for("nnapi", g, feature_level=1)
    assert not low.accepts(div) and "feature level 2" in low.explain(div)


def test_xnnpack_relu_only_fused_after_conv_or_pool():
    g = graph("resnet18")
    prop = prop_for("xnnpack", g)
    for relu in nodes_of(g, "Relu"):
        producer = g.nodes[g.tensors[relu.inputs[0]].producer]
        fused = producer.op_type in ("Conv", "MaxPool", "AveragePool") and prop.accepts(producer)
        assert prop.accepts(relu) == fused, relu.name
        if not fused:
            assert "fused" in prop.explain(relu)
    assert any(prop.accepts(r) for r in nodes_of(g, "Relu"))
    assert not all(prop.accepts(r) for r in nodes_of(g, "Relu"))


def test_xnnpack_conv_needs_opset_11_so_light_relus_are_refused():
    g = graph("light_squeezenet")  # opset 9
    prop = prop_for("xnnpack", g)
    assert all(not prop.accepts(n) for n in nodes_of(g, "Conv") + nodes_of(g, "Relu"))
    assert "opset 9 < 11" in prop.explain(nodes_of(g, "Conv")[0])


def test_xnnpack_fusion_pairs_filter_subgraph_node_and_together_groups():
    g = graph("resnet18")
    prop = prop_for("xnnpack", g)
    relu = next(r for r in nodes_of(g, "Relu") if prop.accepts(r))
    conv = g.nodes[g.tensors[relu.inputs[0]].producer]
    sel = prop.create_subgraph_selector()
    assert sel.filter([relu]) == []
    assert sel.filter([conv, relu]) == [conv, relu]
    assert prop.create_subgraph_node(Subgraph.from_nodes(g, [relu.index], "xnnpack", 0)) is None
    assert prop.create_subgraph_node(Subgraph.from_nodes(g, [conv.index, relu.index],
                                                         "xnnpack", 0)) is not None
    groups = prop.pattern_groups(g, fusion_only=True)
    taken_relus = {r.index for r in nodes_of(g, "Relu") if prop.accepts(r)}
    assert {v for grp in groups for v in grp if g.nodes[v].op_type == "Relu"} == taken_relus
    for grp in groups:  # each pair is an edge producer -> Relu
        assert len(grp) == 2 and grp[1] in g.succ_lists[grp[0]]
    problem = Constraints.default(together=groups).compile(g, [prop])
    cluster = ck.run_strategy(problem, "singleton").assignment()
    for grp in groups:
        assert len({cluster[v] for v in grp}) == 1


def test_qnn_static_shapes_and_source_checks():
    g = graph("bert_base")
    prop = prop_for("qnn", g)
    dynamic = [n for n in g.nodes if any(
        not isinstance(d, int) for t in n.inputs if t for d in (g.tensors[t].shape or ()))]
    assert dynamic and not any(prop.accepts(n) for n in dynamic)
    g = graph("gpt2_dynamo")
    prop = prop_for("qnn", g)
    # onnxruntime-qnn 2.7.0 takes Reshape with allowzero=1 (verified: tests/test_verify_eps.py)
    allowzero = [n for n in nodes_of(g, "Reshape") if n.attrs.get("allowzero") == 1]
    assert allowzero and not any("allowzero" in (prop.explain(n) or "") for n in allowzero)
    masks = [n for n in nodes_of(g, "GatherND") if g.tensors[n.inputs[0]].dtype == "bool"]
    assert masks and all("bool data" in prop.explain(n) for n in masks)
    with pytest.raises(SelectorError, match="backend"):
        prop_for("qnn", backend="tpu")


def test_dnnl_erf_only_inside_gelu():
    g = graph("bert_base")
    prop = prop_for("dnnl", g)
    for erf in nodes_of(g, "Erf"):
        assert prop.accepts(erf)
        div = g.nodes[g.tensors[erf.inputs[0]].producer]
        assert div.op_type == "Div" and g.tensors[div.inputs[1]].is_constant
    off = prop_for("dnnl", g, fusion=False)
    assert all("fusion" in off.explain(e) for e in nodes_of(g, "Erf"))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    lone = ck.load_graph(helper.make_model(helper.make_graph(
        [helper.make_node("Erf", ["x"], ["y"], name="erf")], "m", [x], [y]),
        opset_imports=[helper.make_opsetid("", 17)]))
    assert not prop_for("dnnl", lone).accepts(lone.node("erf"))


def test_dnnl_softmax_refused_before_opset_13():
    g = graph("light_bvlc_alexnet")
    assert "opset 9 < 13" in prop_for("dnnl", g).explain(nodes_of(g, "Softmax")[0])


def test_tensorrt_topk_needs_constant_k_and_nonzero_types():
    g = graph("fasterrcnn_mobilenet_v3_large_320_fpn")
    prop = prop_for("tensorrt", g)
    assert table("tensorrt")["ops"]["TopK"]["value_inputs"] == [1]
    for topk in nodes_of(g, "TopK"):
        assert prop.accepts(topk) == g.tensors[topk.inputs[1]].is_constant
    types = table("tensorrt")["ops"]["NonZero"]["dtypes"]
    for nz in nodes_of(g, "NonZero"):
        assert prop.accepts(nz) == (g.tensors[nz.inputs[0]].dtype in types)


def test_openvino_version_gates_rows():
    g = graph("bert_base")
    ln = nodes_of(g, "LayerNormalization")[0]
    since = table("openvino_npu")["ops"]["LayerNormalization"]["devices_min_ov_version"]["NPU"]
    assert "2023.0" in since
    assert prop_for("openvino_npu", g, ov_version="2023.0").accepts(ln)
    old = prop_for("openvino_npu", g, ov_version="2022.3")
    assert not old.accepts(ln) and "2022.3" in old.explain(ln)
    hs = nodes_of(graph("mobilenet_v3_large"), "HardSwish")[0]
    assert "HardSwish" not in table("openvino_npu")["ops"]
    assert not prop_for("openvino_npu", graph("mobilenet_v3_large")).accepts(hs)


def test_openvino_unsqueeze_input_named_axes():
    g = one_node("Unsqueeze", "", 2, {1}, {1: (1,)}, names={1: "axes"})
    assert "'axes'" in prop_for("openvino_npu", g).explain(g.nodes[0])
    assert prop_for("openvino_npu", g, ov_version="2022.1").accepts(g.nodes[0])


# ====================================================================== patterns as data
def test_patterns_are_parsed_from_the_table_text():
    for name in SELECTORS:
        prop = prop_for(name)
        raw = table(name)["patterns"]
        assert [p.text for p in prop.patterns] == [" -> ".join(p) for p in raw]
        for pat, steps in zip(prop.patterns, raw):
            assert len(pat.steps) == len(steps)
            for step, text in zip(pat.steps, steps):
                assert step.optional == text.endswith("?")
                assert step.repeat == text.rstrip("?").endswith("+")
                if step.ops is not None:
                    assert all(op in text for op in step.ops)
    dnnl = prop_for("dnnl").patterns
    post_ops = next(p for p in dnnl if p.steps[0].ops == {"MatMul"})
    assert post_ops.steps[1].repeat and {"Add", "Relu", "Tanh"} <= post_ops.steps[1].ops
    gelu = next(p for p in prop_for("qnn").patterns if "Erf" in p.text)
    assert gelu.steps[0].ops == {"Div", "Mul"} and gelu.steps[0].note == "sqrt2"
    assert gelu.steps[0].optional and not gelu.steps[1].optional
    assert prop_for("openvino_npu").patterns[0].steps[1].ops is None  # 'op': any op


def test_qnn_channel_shuffle_chains_are_matched():
    g = graph("light_shufflenet")
    prop = prop_for("qnn", g)
    index = next(p.index for p in prop.patterns if p.text == "Reshape -> Transpose -> Reshape")
    expected = sorted((a, b, c) for a in range(g.n) if g.nodes[a].op_type == "Reshape"
                      for b in g.succ_lists[a] if g.nodes[b].op_type == "Transpose"
                      for c in g.succ_lists[b] if g.nodes[c].op_type == "Reshape")
    assert len(expected) == 16
    assert sorted(m for i, m in prop.pattern_matches(g) if i == index) == expected


def test_dnnl_gelu_matches_carry_every_erf():
    g = graph("bert_base")
    prop = prop_for("dnnl", g)
    ctx = prop.bind(g)
    for erf in nodes_of(g, "Erf"):
        (match,) = prop.partner_sets(ctx, erf)
        assert [g.nodes[v].op_type for v in match] == ["Div", "Erf", "Add", "Mul", "Mul"]
        assert all(b in g.succ_lists[a] for a, b in zip(match, match[1:]))


# ====================================================================== protocol details
@pytest.mark.parametrize("name", SELECTORS)
def test_mask_explain_and_select_agree_on_real_models(name):
    for model in ("resnet18", "bert_base", "light_inception_v1"):
        g = graph(model)
        prop = prop_for(name)
        mask = prop.query(g)
        sel = prop.create_subgraph_selector()
        assert mask.dtype == bool and mask.shape == (g.n,)
        for n in g.nodes:
            why = prop.explain(n)
            assert (why is None) == bool(mask[n.index]) == sel.select(n)
            assert why is None or why.startswith(f"{name}: ")


def test_unbound_nodes_are_an_error_naming_the_fix():
    prop = prop_for("coreml")
    node = graph("resnet18").nodes[0]
    with pytest.raises(SelectorError, match="query\\(graph\\) or bind\\(graph\\)"):
        prop.create_subgraph_selector().select(node)
    assert prop.explain(node, graph=graph("resnet18")) is not None  # ConstantOfShape


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(SELECTORS),
       st.sampled_from(["resnet18", "light_shufflenet", "gpt2_dynamo"]), st.data())
def test_explain_all_lists_the_first_reason(name, model, data):
    g = graph(model)
    prop = prop_for(name, g)
    node = g.nodes[data.draw(st.integers(0, g.n - 1))]
    reasons = prop.explain_all(node)
    assert (prop.explain(node) is None) == (not reasons)
    if reasons:
        assert prop.explain(node) == f"{name}: {reasons[0]}"
        assert all(" (table" in r or "table" in r for r in reasons)


# ====================================================================== partitions on real models
STRATEGIES = sorted(set(ck.strategy_names()) | {"singleton"})
LINEAR = {"singleton", "longest-path"}  # run on the 11k-node llama too
# cpsat: one worker (OR-tools with 2 workers and a short limit aborted the process now and then)
OPTIONS = {"cpsat": {"time_limit": 0.5, "workers": 1}}


def partition_cases():
    models = [p.stem for p in BUNDLED_MODEL_PATHS]
    for s_i, strategy in enumerate(STRATEGIES):
        for m_i, model in enumerate(models):
            if strategy not in LINEAR and "llama" in model:
                continue
            if strategy == "singleton":  # every selector
                for name in SELECTORS:
                    yield model, strategy, name
            else:  # one selector per (model, strategy), rotating, to keep the suite fast
                yield model, strategy, SELECTORS[(m_i + s_i) % len(SELECTORS)]


@pytest.mark.parametrize("model,strategy,name", list(partition_cases()))
def test_every_strategy_gives_a_valid_partition(model, strategy, name):
    g = graph(model)
    func = ck.get_strategy(strategy)
    params = inspect.signature(func).parameters
    options = {k: v for k, v in OPTIONS.get(strategy, {}).items() if k in params}
    result = ck.partition(g, [name], strategy=strategy, **options)
    result.validate()
    prop = ck.get_selector(name)
    mask = prop.query(g)
    devices = result.device_of_nodes()
    for v, dev in enumerate(devices):
        assert dev == result.fallback or mask[v]


# ====================================================================== robustness
DIM = st.one_of(st.integers(0, 5), st.just("batch"), st.none())
SHAPE = st.one_of(st.none(), st.lists(DIM, max_size=6).map(tuple))
DTYPE = st.sampled_from([None, "float32", "float16", "float64", "int64", "int32", "int8",
                         "uint8", "bool", "bfloat16"])
ATTRS = st.fixed_dictionaries({}, optional={
    "axis": st.integers(-4, 4), "mode": st.sampled_from(["constant", "linear", "nearest",
                                                         "DCR", "CRD", "reflect", "cubic"]),
    "kernel_shape": st.lists(st.integers(1, 3), max_size=3),
    "dilations": st.lists(st.integers(1, 2), max_size=3),
    "pads": st.lists(st.integers(0, 2), max_size=6), "to": st.sampled_from([1, 6, 7, 9, 10]),
    "alpha": st.floats(0, 2), "beta": st.floats(0, 2), "transB": st.integers(0, 1),
    "ceil_mode": st.integers(0, 1), "allowzero": st.integers(0, 1),
    "coordinate_transformation_mode": st.sampled_from(["half_pixel", "asymmetric",
                                                       "pytorch_half_pixel",
                                                       "tf_half_pixel_for_nn"]),
    "auto_pad": st.sampled_from(["NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"]),
    "noop_with_empty_axes": st.integers(0, 1), "num_outputs": st.integers(1, 3),
    "start": st.integers(-3, 3), "end": st.integers(-3, 3)})


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(SELECTORS), st.data())
def test_rules_never_crash_on_odd_nodes(name, data):
    """Any op of the table, with unknown/symbolic/zero dims, odd dtypes, optional inputs left
    out and plausible attributes: the answer is a bool and agrees with explain."""
    key = data.draw(st.sampled_from(sorted(table(name)["ops"])), label="op")
    domain, _, op = key.rpartition(":")
    n_in = data.draw(st.integers(0, 5), label="inputs")
    tensors, inputs, names, inits = {}, [], [], []
    for p in range(n_in):
        if p and data.draw(st.booleans()):
            names.append("")  # an omitted optional input
            continue
        t = Tensor(f"in{p}", shape=data.draw(SHAPE), dtype=data.draw(DTYPE))
        t.is_initializer = data.draw(st.booleans())
        if not t.is_initializer:
            inputs.append(t.name)
        elif t.shape is not None and all(isinstance(d, int) for d in t.shape) and int(
                np.prod(t.shape)) <= 8 and t.dtype in ("float32", "int64"):
            values = data.draw(st.lists(st.integers(-3, 8), min_size=int(np.prod(t.shape)),
                                        max_size=int(np.prod(t.shape))))
            array = np.asarray(values, dtype=t.dtype).reshape(t.shape)
            inits.append(onnx.numpy_helper.from_array(array, t.name))  # readable contents
        tensors[t.name] = t
        names.append(t.name)
    outs = [f"out{k}" for k in range(data.draw(st.integers(1, 2)))]
    for o in outs:
        tensors[o] = Tensor(o, shape=data.draw(SHAPE), dtype=data.draw(DTYPE))
    opset = data.draw(st.sampled_from([None, 9, 10, 11, 13, 17, 18, 21]))
    model = None if opset is None else helper.make_model(
        helper.make_graph([], "g", [], [], initializer=inits),
        opset_imports=[helper.make_opsetid("", opset)])
    node = Node(0, "n", op, domain, attrs=data.draw(ATTRS), inputs=names, outputs=outs)
    g = Graph.build([node], tensors, inputs, outs, model=model)
    prop = prop_for(name, g)
    sel = prop.create_subgraph_selector()
    answer = sel.select(g.nodes[0])
    assert isinstance(answer, bool)
    assert answer == (prop.explain(g.nodes[0]) is None)
    assert sel.filter([g.nodes[0]]) in ([], [g.nodes[0]])


def test_mxnet_keeps_xnnpack_fusions_whole_without_extra_constraints():
    """The mxnet engine calls filter/create_subgraph_node: no offloaded cluster may hold a
    fused-only Relu without the Conv/pool it is fused onto."""
    assert "mxnet" in ck.strategy_names()
    g = graph("resnet18")
    result = ck.partition(g, ["xnnpack"], strategy="mxnet")
    cluster = result.assignment()
    devices = result.device_of_nodes()
    for relu in nodes_of(g, "Relu"):
        if devices[relu.index] == "xnnpack":
            producer = g.tensors[relu.inputs[0]].producer
            assert cluster[producer] == cluster[relu.index]
