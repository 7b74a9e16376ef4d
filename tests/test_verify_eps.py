"""The shipped EP selectors against the real execution providers (``clusterkit[qnn]``,
``clusterkit[openvino]``, installed by ``make test``), node by node, on every bundled and light
model; ``clusterkit verify``; and ``ep:`` selectors.

Each model is optimized once and both selectors are checked on that graph (the EP sessions stop
after partitioning, ``compile=False``: compiling every model for HTP alone takes minutes, and
what is compared is the EP's answer, recorded before compilation). A disagreement is accepted
only where the selector's data lists it (``verified.ep_faults``: the EP's own fault;
``verified.grouping_differs``: the same nodes, grouped otherwise), and then the listed
situation must be what is seen.
"""

from __future__ import annotations

import json
from functools import lru_cache

import onnx
import pytest

pytest.importorskip("onnxruntime_qnn", reason="needs clusterkit[qnn] (make test installs it)")
pytest.importorskip("onnxruntime_ep_openvino",
                    reason="needs clusterkit[openvino] (make test installs it)")

from clusterkit.analysis.verify import ep_of_selector, optimized_graph, verify_graph  # noqa: E402
from clusterkit.cli import main  # noqa: E402
from clusterkit.errors import BackendError  # noqa: E402
from clusterkit.io import ep_query  # noqa: E402
from clusterkit.io.optimize import optimize_model  # noqa: E402
from clusterkit.selection.registry import SHIPPED_TRAITS  # noqa: E402
from clusterkit.selection.specs import parse_selector  # noqa: E402
from support.models import BUNDLED_MODEL_PATHS, LIGHT_MODELS, model_id  # noqa: E402

MODELS = BUNDLED_MODEL_PATHS + LIGHT_MODELS
#: the shipped selectors verified against their real EP (``SelectorEntry.verified``)
SELECTORS = tuple(name for name, traits in SHIPPED_TRAITS.items() if traits.verified)


@lru_cache(maxsize=1)
def optimized(path):
    """The model's basic-optimized graph, kept for the next selector's check."""
    return optimized_graph(path)


def verified_block(selector: str) -> dict:
    return ep_of_selector(parse_selector(selector))[2]


@pytest.mark.slow
@pytest.mark.parametrize("selector", SELECTORS)
@pytest.mark.parametrize("path", MODELS, ids=model_id)
def test_selector_agrees_with_the_real_ep(path, selector):
    proto, graph = optimized(path)
    r = verify_graph(proto, graph, selector, compile=False)
    block = verified_block(selector)
    assert r.ep_version == block["version"]
    fault = block["ep_faults"].get(graph.name)
    if fault:  # listed as the EP's fault: onnxruntime refused the EP's whole answer
        assert r.refused and len(r.refused) == sum(map(len, r.ep_partitions)), fault
        return
    diffs = [(d.name, d.op, d.reason) for d in r.only_ep + r.only_selector]
    assert diffs == [], f"{graph.name}: {len(diffs)} nodes differ, first {diffs[:3]}"
    assert not r.refused and r.ep_partitions, r.notes
    if graph.name in block["grouping_differs"]:
        assert len(r.partitions) == len(r.ep_partitions) and not r.same_partitions
    else:
        # the EP's groups, and clusterkit's strategy (with `partition`'s default constraints,
        # the value-input cuts as the selector's policy says) forms no more partitions
        assert r.same_partitions and not r.more_partitions, r.notes
        assert r.agree


def test_every_listed_disagreement_names_a_model_that_is_checked():
    names = {p.stem for p in MODELS}
    for selector in SELECTORS:
        block = verified_block(selector)
        assert set(block["ep_faults"]) | set(block["grouping_differs"]) <= names


def test_the_answer_is_recorded_when_the_ep_then_fails_to_compile():
    """The OpenVINO NPU has no compiler here: the session fails after the EP answered."""
    proto, graph = optimized_graph(BUNDLED_MODEL_PATHS[0].parent / "resnet18.onnx")
    answer = ep_query.query_ep(proto, "OpenVINOExecutionProvider", compile=True)
    assert answer.error and answer.assigned is None
    assert sorted(answer.nodes) == sorted(n.name for n in graph.nodes if not n.is_folded)
    assert answer.refused() == []


def test_onnxruntime_refusing_the_answer_is_reported():
    path = BUNDLED_MODEL_PATHS[0].parent / "fasterrcnn_mobilenet_v3_large_320_fpn.onnx"
    proto, graph = optimized(path)
    r = verify_graph(proto, graph, "qnn", compile=False)
    assert r.refused and any("onnxruntime refused" in n for n in r.notes)


RESNET18 = BUNDLED_MODEL_PATHS[0].parent / "resnet18.onnx"


def test_cli_verify_exit_status_and_json(tmp_path, capsys):
    out = tmp_path / "v.json"
    assert main(["verify", str(RESNET18), "--selector", "qnn", "--no-compile",
                 "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["agree"] and data["ep"] == "QNNExecutionProvider" and data["offloaded"] == 49
    # a selector setting that refuses Relu: the EP takes them, clusterkit does not
    assert main(["verify", str(RESNET18), "--selector", "qnn[exclude=Relu]",
                 "--no-compile"]) == 1
    text = capsys.readouterr().out
    assert "taken by QNNExecutionProvider only: 17" in text and "(Relu, #" in text
    assert text.rstrip().endswith("differ")
    assert main(["verify", str(RESNET18), "--selector", "tensorrt"]) == 2
    assert capsys.readouterr().err.startswith("clusterkit: error: selector 'tensorrt'")


def test_a_missing_ep_is_one_line_naming_the_extra(monkeypatch):
    real = ep_query._import
    monkeypatch.setattr(ep_query, "_import",
                        lambda name: None if name == "onnxruntime_qnn" else real(name))
    with pytest.raises(BackendError, match=r"pip install 'clusterkit\[qnn\]'"):
        ep_query.find_ep("QNNExecutionProvider")


def test_ep_selector_takes_exactly_the_eps_answer(capsys):
    proto = optimize_model(RESNET18, "basic")
    answer = ep_query.query_ep(proto, "QNNExecutionProvider", compile=False)
    names = {n.name: i for i, n in enumerate(proto.graph.node)}
    taken = {ep_query.graph_node_name(n, names) for n in answer.nodes} - {None}
    assert main(["partition", str(RESNET18), "--optimize", "basic", "--selector",
                 "npu=ep:QNNExecutionProvider[backend=htp]"]) == 0
    text = capsys.readouterr().out
    assert f"{len(taken)}/{len(proto.graph.node)} compute nodes offloaded" in text
    # a size limit the EP does not have: clusterkit splits, and says so
    assert main(["partition", str(RESNET18), "--optimize", "basic", "--strategy", "cycles",
                 "--selector", "npu=ep:QNNExecutionProvider", "--max-size", "20"]) == 0
    assert "QNNExecutionProvider itself makes 1 (49 nodes)" in capsys.readouterr().out
    # the QNN GPU backend does not initialise without a GPU: the session silently runs on
    # the CPU EP, which the warning says
    assert main(["partition", str(RESNET18), "--optimize", "basic", "--selector",
                 "ep:QNNExecutionProvider[backend=gpu]"]) == 0
    assert "QNNExecutionProvider took no node of resnet18" in capsys.readouterr().err
    with pytest.raises(BackendError, match="no installed plugin execution provider"):
        parse_selector("ep:NoSuchExecutionProvider")


def test_optimize_keeps_the_shapes_of_ir3_folded_weights():
    """The light models (IR 3): onnxruntime folds their ConstantOfShape weights into
    initializers; each must stay declared so shape inference knows every conv's shape."""
    path = next(p for p in LIGHT_MODELS if p.stem == "light_squeezenet")
    proto = optimize_model(path, "basic")
    assert proto.ir_version < 4
    inputs = {vi.name for vi in proto.graph.input}
    assert all(t.name in inputs for t in proto.graph.initializer)
    inferred = onnx.shape_inference.infer_shapes(proto)
    shapes = {vi.name: vi for vi in inferred.graph.value_info}
    conv = next(n for n in proto.graph.node if n.op_type == "Conv")
    assert shapes[conv.output[0]].type.tensor_type.shape.dim[1].dim_value > 0


def test_the_answer_is_the_last_round_with_layout_copies_and_cancelled_transposes():
    """A QNN-like record: a first round on the graph, then a second after the layout
    transformation (a Conv copied as ``_token_``, its own Transposes inserted, the graph's
    Transpose ``t`` cancelled away), then a compile request."""
    events = [("group", [("conv", "Conv"), ("t", "Transpose"), ("relu", "Relu")]),
              ("group", [("gemm", "Gemm")]),
              ("group", [("Transpose", "Transpose"), ("conv_token_3", "Conv"),
                         ("relu", "Relu"), ("gemm", "Gemm")]),
              ("compile", [("1", "")])]
    answer = ep_query.EpAnswer("X", "0")
    ep_query._read_answer(events, answer)
    assert answer.rounds == 2 and answer.compiled == 1
    assert answer.groups == [["Transpose", "conv_token_3", "relu", "gemm"]]
    assert answer.absorbed == ["t"]
    names = {"conv": 0, "t": 1, "relu": 2, "gemm": 3, "Transpose_token_9": 4}
    assert [ep_query.graph_node_name(n, names) for n in answer.groups[0]] == [
        None, "conv", "relu", "gemm"]
    assert ep_query.graph_node_name("Transpose_token_9", names) == "Transpose_token_9"


def test_onnxruntime_groups_take_every_ready_supported_node_before_any_other():
    """a -> u -> c and a -> b -> c with u unsupported: a and b are ready one after the other
    and form the first group; c waits for u, so it opens a second one. x, unconnected and
    supported, is ready at the start and joins the first group."""
    import networkx as nx

    from clusterkit import from_networkx
    from clusterkit.analysis.verify import onnxruntime_groups

    g = nx.DiGraph()
    for name in "aubcx":
        g.add_node(name, op="Relu" if name != "u" else "TopK")
    g.add_edges_from([("a", "u"), ("u", "c"), ("a", "b"), ("b", "c")])
    graph = from_networkx(g)
    idx = graph.name_to_index
    groups = onnxruntime_groups(graph, {idx[n] for n in "abcx"})
    named = sorted(sorted(graph.nodes[v].name for v in grp) for grp in groups)
    assert named == [["a", "b", "x"], ["c"]]
