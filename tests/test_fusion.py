"""fuse(): clusters become single nodes wired to their boundary tensors; the result is a Graph
that can be partitioned and fused again. Also the standalone subgraph models."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import clusterkit as ck
from clusterkit import OpsProperty, Partition, SelectorError, SubgraphNode, SubgraphProperty
from clusterkit.fusion import FusedGraph, flatten, fuse, runtime_outputs, subgraph_model
from clusterkit.selection.protocol import ContainOpSelector
from support.models import BUNDLED_MODELS, LIGHT_DIR
from support.onnx_models import (
    MULTI,
    intermediate_values,
    level_partition,
    load,
    partition_with,
    random_problems,
)


def oracle_boundary(model: onnx.ModelProto, graph: ck.Graph, members) -> tuple[set, set]:
    """Tensors a set of nodes reads from outside and tensors read outside it (or graph outputs),
    computed from the ONNX proto alone."""
    src = set(graph.index_to_source[list(members)].tolist())
    inside = [nd for k, nd in enumerate(model.graph.node) if k in src]
    outside = [nd for k, nd in enumerate(model.graph.node) if k not in src]
    made = {o for nd in inside for o in nd.output if o}
    reads = {t for nd in inside for t in nd.input if t and t not in made}
    wanted = {t for nd in outside for t in nd.input} | {o.name for o in model.graph.output}
    return reads, {t for t in made if t in wanted}


def check_fused_structure(model, part: Partition, fg: FusedGraph) -> None:
    """Members cover the original nodes once; one node per offloaded cluster; every fused node
    is wired to its cluster's boundary as the oracle computes it."""
    root = part.graph
    seen = sorted(m for mem in fg.members for m in mem)
    assert seen == list(range(root.n))
    acc = part.offloaded_clusters()
    fallback = sum(len(c.nodes) for c in part.clusters if c.device == part.fallback)
    assert fg.n == fallback + len(acc)
    assert len(fg.fused_nodes()) == len(acc)
    for v in fg.fused_nodes():
        node = fg.nodes[v]
        reads, outs = oracle_boundary(model, root, fg.members[v])
        assert set(node.inputs) == reads
        assert set(node.outputs) == outs
        assert node.op_type == "FusedSubgraph"
        assert node.domain == f"clusterkit.{fg.device_of(v)}"
    for v in range(fg.n):
        if fg.fused[v] is None:
            assert fg.nodes[v].proto is root.nodes[fg.members[v][0]].proto


# ---------------------------------------------------------------------- random graphs
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_problems(), st.sampled_from(["singleton", "level"] + MULTI), st.data())
def test_fused_graph_is_wired_to_cluster_boundaries(mp, strategy, data):
    model, problem = mp
    part = partition_with(problem, strategy)
    fg = fuse(part)
    check_fused_structure(model, part, fg)
    # the fused graph is a Graph that can be partitioned and fused again
    ops = sorted(set(fg.op_types))
    take = data.draw(st.sets(st.sampled_from(ops), min_size=1))
    again = ck.Constraints.default().compile(fg, [OpsProperty(sorted(take), device="outer")])
    part2 = partition_with(again, data.draw(st.sampled_from(["singleton", "level"])))
    fg2 = fuse(part2)
    assert fg2.root is problem.graph
    for v in range(fg2.n):
        if fg2.fused[v] is not None and fg2.device_of(v) == "outer":
            sub = fg2.fused[v].subgraph
            assert fg2.members[v] == sorted(m for w in sub.nodes for m in fg.members[w])
    assert sorted(m for mem in fg2.members for m in mem) == list(range(problem.graph.n))


# ---------------------------------------------------------------------- real models
MODEL = BUNDLED_MODELS / "resnet18.onnx"


def _resnet_problem(props):
    return ck.Constraints.default().compile(load(MODEL), props)


@pytest.mark.parametrize("strategy", ["singleton", "level"] + MULTI)
def test_real_model_fusion_structure(strategy):
    graph = load(BUNDLED_MODELS / "resnet50.onnx")
    problem = ck.make_problem(graph, ["acc=ops:Conv,Relu,Add,MaxPool,Flatten,Gemm"])
    part = partition_with(problem, strategy)
    fg = fuse(part)
    check_fused_structure(graph.model, part, fg)
    if strategy != "singleton":  # whole resnet blocks in one cluster
        assert part.metrics()["largest_cluster"] >= 10


class _Named(OpsProperty):
    """Makes its own fused nodes; rejects clusters of one node."""

    def create_subgraph_node(self, subgraph):
        if len(subgraph) == 1:
            return None
        return SubgraphNode(f"blob{subgraph.cluster_id}", "MyFused", "my.domain", subgraph,
                            attrs={"n": len(subgraph)})


def test_property_makes_or_rejects_the_fused_node():
    problem = _resnet_problem([_Named(["Conv", "Relu", "Add"], device="npu")])
    part = level_partition(problem)
    fg = fuse(part)
    sizes = [len(c.nodes) for c in part.offloaded_clusters()]
    assert len(fg.fused_nodes()) == sum(1 for s in sizes if s > 1)
    assert len(fg.rejected) == sum(1 for s in sizes if s == 1)
    for v in fg.fused_nodes():
        node = fg.nodes[v]
        assert node.op_type == "MyFused" and node.domain == "my.domain"
        assert node.name.startswith("blob") and node.attrs["n"] == len(fg.members[v])
    # rejected clusters stay ordinary nodes: every original node is still behind one node
    assert sorted(m for mem in fg.members for m in mem) == list(range(problem.n))


class _Broken(OpsProperty):
    def create_subgraph_node(self, subgraph):
        raise RuntimeError("no room on the chip")


class _Wrong(OpsProperty):
    def create_subgraph_node(self, subgraph):
        return "not a node"


@pytest.mark.parametrize("cls, text", [(_Broken, "no room on the chip"),
                                       (_Wrong, "expected a SubgraphNode")])
def test_misbehaving_property_is_a_selector_error(cls, text):
    problem = _resnet_problem([cls(["Relu"], device="npu")])
    with pytest.raises(SelectorError, match=text) as err:  # run_strategy asks it too
        fuse(ck.run_strategy(problem, "singleton"))
    assert "npu" in str(err.value) and "cluster" in str(err.value)


def test_invalid_partition_is_refused_before_fusing():
    problem = _resnet_problem([OpsProperty(["Conv", "Relu"], device="npu")])
    g = problem.graph
    conv = [v for v in range(g.n) if g.op_types[v] == "Conv"][:2]
    rest = [v for v in range(g.n) if v not in conv]
    part = Partition.from_clusters(problem, [("npu", conv)] + [("cpu", [v]) for v in rest])
    with pytest.raises(ck.PartitionError):
        fuse(part)


class _Fresh(SubgraphProperty):
    """A selector property without a supported_mask fast path (asks node by node)."""

    def create_subgraph_selector(self):
        class Sel(ContainOpSelector):
            def supported_mask(self, graph):
                return None
        return Sel(["Relu", "Add"])


def test_default_fused_node_names_are_unique():
    problem = _resnet_problem([_Fresh(device="npu")])
    fg = fuse(ck.run_strategy(problem, "singleton"))
    names = [nd.name for nd in fg.nodes]
    assert len(set(names)) == len(names)


# ---------------------------------------------------------------------- subgraph models
@pytest.mark.parametrize("path, ops", [
    (BUNDLED_MODELS / "resnet18.onnx", "Conv,Relu,Add"),
    (BUNDLED_MODELS / "fasterrcnn_mobilenet_v3_large_320_fpn.onnx", "If,Squeeze,Gather,Reshape"),
    (BUNDLED_MODELS / "bert_base.onnx", "MatMul,Add,Softmax,Div,Transpose,Reshape"),
])
def test_subgraph_model_computes_the_cluster_like_the_whole_model(path, ops):
    """Each cluster's standalone model (boundary inputs as graph inputs, constants brought along,
    If bodies' outer-scope reads as inputs) passes the checker and, fed the values the whole model
    computes for its inputs, returns what the whole model computes for its outputs."""
    from clusterkit.runtime.executor import random_inputs

    graph = load(path)
    problem = ck.make_problem(graph, [f"acc=ops:{ops}"])
    part = level_partition(problem)
    clusters = sorted(part.offloaded_clusters(), key=lambda c: -len(c.nodes))[:6]
    if "If" in ops:  # make sure If nodes (subgraph bodies with outer-scope reads) are covered
        ifs = [c for c in part.offloaded_clusters()
               if any(graph.nodes[v].op_type == "If" for v in c.nodes)]
        assert ifs and any(graph.nodes[v].implicit_inputs for c in ifs for v in c.nodes)
        clusters = ifs + clusters[:2]
    feeds = random_inputs(graph)
    subs = [ck.Subgraph.from_nodes(graph, c.nodes, c.device, c.id) for c in clusters]
    wanted = sorted({t for s in subs for t in s.inputs + runtime_outputs(s)} - set(graph.inputs))
    values = {**intermediate_values(graph.model, graph, wanted, feeds), **feeds}
    for sub in subs:
        m = subgraph_model(sub)
        onnx.checker.check_model(m)
        assert m.ir_version == graph.model.ir_version
        assert list(m.opset_import) == list(graph.model.opset_import)
        assert [i.name for i in m.graph.input] == sub.inputs
        so = ort.SessionOptions()
        so.log_severity_level = 3
        sess = ort.InferenceSession(m.SerializeToString(), so,
                                    providers=["CPUExecutionProvider"])
        outs = runtime_outputs(sub)
        got = sess.run(outs, {t: values[t] for t in sub.inputs})
        for t, a in zip(outs, got):
            np.testing.assert_allclose(a, values[t], rtol=1e-4, atol=1e-5, err_msg=t)


def test_subgraph_of_a_fused_graph_flattens_to_the_original_nodes():
    problem = _resnet_problem([OpsProperty(["Conv", "Relu", "Add"], device="npu")])
    fg = fuse(level_partition(problem))
    sub = ck.Subgraph.from_nodes(fg, fg.fused_nodes()[:2], "npu", 0)
    flat = flatten(sub)
    assert flat.graph is problem.graph
    assert flat.nodes == sorted(fg.members[fg.fused_nodes()[0]] + fg.members[fg.fused_nodes()[1]])


def test_light_model_keeps_ir3_rules():
    """IR 3 (the onnx light models): initializers of a standalone model are graph inputs too."""
    graph = load(LIGHT_DIR / "light_squeezenet.onnx")
    problem = ck.make_problem(graph, ["acc=ops:Conv,Relu"])
    part = level_partition(problem)
    c = max(part.offloaded_clusters(), key=lambda c: len(c.nodes))
    m = subgraph_model(ck.Subgraph.from_nodes(graph, c.nodes, c.device, c.id))
    assert m.ir_version == 3
    names = {i.name for i in m.graph.input}
    assert all(t.name in names for t in m.graph.initializer)
    onnx.checker.check_model(m)
