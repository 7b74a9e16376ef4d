"""Both engines on every real model (onnx's light set and the bundled models) under several ``ops:``
selectors with the default value-input constraints (Reshape, Expand, Tile, Slice, Resize, ...),
size limits on real weights, ``clusterkit partition --explain``, the bulk graph builder against
the networkx reader, and a 1e4-node synthetic DAG."""

from __future__ import annotations

from functools import lru_cache

import networkx as nx
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusterkit import Constraints, OpsProperty, from_networkx, load_graph, run_strategy
from clusterkit.analysis.explain import explain
from clusterkit.cli import main as cli_main
from clusterkit.graph.fast import graph_from_arrays, graph_from_dag
from clusterkit.testing.synthetic import random_dag
from support.models import ALL_MODELS, BUNDLED_MODELS, model_id
from support.problems import fast

ENGINES = ("longest-path", "cycles")
CONV = ["Conv", "Relu", "Add", "BatchNormalization", "MaxPool", "GlobalAveragePool", "Clip",
        "Mul", "Sigmoid", "HardSwish", "Concat", "Reshape", "Flatten", "Gemm"]
MATMUL = ["MatMul", "Add", "Mul", "Div", "Sub", "Softmax", "Reshape", "Transpose", "Pow", "Sqrt",
          "ReduceMean", "Erf", "Tanh", "Gather", "Concat", "Unsqueeze", "Slice", "Shape", "Cast",
          "Where", "Expand", "Tile", "Resize"]
SPARSE = ["Relu", "Add", "Mul", "Reshape", "Expand", "Slice"]
SELECTORS = {
    "conv": [OpsProperty(CONV, device="npu")],
    "matmul": [OpsProperty(MATMUL, device="gpu")],
    "sparse": [OpsProperty(SPARSE, device="dsp")],
    "two-devices": [OpsProperty(CONV, device="npu"), OpsProperty(MATMUL, device="gpu")],
}


@lru_cache(maxsize=None)
def graph_of(path) -> object:
    """Each model is read once per test module."""
    return load_graph(str(path))


@pytest.mark.parametrize("path", ALL_MODELS, ids=model_id)
def test_models_partition_validly(path):
    """Both engines, every selector set, default value inputs: validated (run_strategy does),
    deterministic, and every explanation line names an edge between supported nodes."""
    g = graph_of(path)
    for name, props in SELECTORS.items():
        problem = Constraints.default().compile(g, props)
        for engine in ENGINES:
            part = run_strategy(problem, engine)
            again = run_strategy(problem, engine)
            assert [c.nodes for c in part.clusters] == [c.nodes for c in again.clusters]
            if name == "matmul":
                a = part.assignment()
                sup = problem.any_supported
                split = sum(1 for u, v in zip(g.edge_src.tolist(), g.edge_dst.tolist())
                            if a[u] != a[v] and sup[u] and sup[v])
                assert len(explain(part)) == split


@pytest.mark.parametrize("path", [BUNDLED_MODELS / "resnet18.onnx",
                                  BUNDLED_MODELS / "mobilenet_v2.onnx",
                                  BUNDLED_MODELS / "bert_base.onnx"], ids=model_id)
def test_size_limits_on_real_weights(path):
    """max_size, min_size and max_const_bytes (the models' ConstantOfShape weights) hold."""
    g = graph_of(path)
    heavy = int(np.percentile(g.const_bytes[g.const_bytes > 0], 75))
    cons = Constraints.default(min_size=2, max_size=12, max_const_bytes=3 * heavy)
    for props in (SELECTORS["conv"], SELECTORS["two-devices"]):
        problem = cons.compile(g, props)
        for engine in ENGINES:
            part = run_strategy(problem, engine)
            for c in part.offloaded_clusters():
                assert 2 <= len(c.nodes) <= 12


def test_cli_explain(capsys):
    """``clusterkit partition MODEL --explain`` prints the split pairs and their reasons."""
    model = str(BUNDLED_MODELS / "gpt2.onnx")
    sel = "ops:" + ",".join(MATMUL)
    for engine in ENGINES:
        assert cli_main(["partition", model, "--strategy", engine, "--selector", sel,
                         "--explain", "--explain-limit", "100000"]) == 0
        out = capsys.readouterr().out
        assert "adjacent supported node pairs split, by reason:" in out
        count = int(out.split(" adjacent supported node pairs split")[0].split()[-1])
        body = out.split("split, by reason:\n")[1].splitlines()
        assert count > 0 and sum(1 for line in body if line.startswith("    ")) == count


def test_cli_engine_options(capsys):
    model = str(BUNDLED_MODELS / "resnet18.onnx")
    assert cli_main(["partition", model, "--strategy", "cycles", "--selector", "ops:Conv,Relu",
                     "--option", "merge_non_adjacent=true", "--option", "far_span=null"]) == 0
    assert cli_main(["partition", model, "--strategy", "longest-path", "--selector",
                     "ops:Conv,Relu", "--option", "split_components=false",
                     "--option", "refine=false"]) == 0
    assert cli_main(["partition", model, "--strategy", "cycles", "--selector", "ops:Conv",
                     "--option", "no_such_option=1"]) == 2
    assert "no option 'no_such_option'" in capsys.readouterr().err


# ---------------------------------------------------------------------- bulk graph builder
@fast(80)
@given(st.integers(0, 30), st.data())
def test_graph_from_arrays_matches_networkx_reader(n, data):
    """Same nodes, tensors, edges and tables as from_networkx on the same DAG (node 'bytes')."""
    pairs = data.draw(st.lists(st.tuples(st.integers(0, max(n - 1, 0)),
                                         st.integers(0, max(n - 1, 0))), max_size=3 * n))
    pairs = [(min(a, b), max(a, b)) for a, b in pairs if a != b] if n else []
    ops = data.draw(st.lists(st.sampled_from(["Conv", "Relu", "Constant", "Add"]),
                             min_size=n, max_size=n))
    nb = data.draw(st.lists(st.integers(0, 4096), min_size=n, max_size=n))
    src = np.asarray([a for a, _ in pairs], dtype=np.int64)
    dst = np.asarray([b for _, b in pairs], dtype=np.int64)
    fast_g = graph_from_arrays(n, src, dst, ops, nb)
    nxg = nx.DiGraph()
    for v in range(n):
        nxg.add_node(v, op=ops[v], bytes=nb[v])
    nxg.add_edges_from(pairs)
    ref = from_networkx(nxg)
    def rows(graph):
        return [(x.index, x.name, x.op_type, x.inputs, x.outputs, x.is_constant)
                for x in graph.nodes]

    assert rows(fast_g) == rows(ref)
    assert fast_g.outputs == ref.outputs and fast_g.inputs == ref.inputs
    for name, t in ref.tensors.items():
        f = fast_g.tensors[name]
        assert (f.nbytes, f.producer, f.consumers, f.is_constant, f.is_output) == \
            (t.nbytes, t.producer, t.consumers, t.is_constant, t.is_output)
    assert set(fast_g.tensors) == set(ref.tensors)
    for attr in ("edge_src", "edge_dst", "edge_bytes", "succ_ptr", "pred_ptr", "pred_idx",
                 "const_bytes", "is_constant_node"):
        assert np.array_equal(getattr(fast_g, attr), getattr(ref, attr)), attr
    ft, rt = fast_g.tensor_table, ref.tensor_table
    order = [ft.names.index(x) for x in rt.names]
    for attr in ("producer", "nbytes", "known", "free", "is_output"):
        assert np.array_equal(getattr(ft, attr)[order], getattr(rt, attr)), attr
    assert fast_g.op_types == ref.op_types


def test_graph_from_arrays_not_topological_and_cycle():
    g = graph_from_arrays(3, [2, 1], [1, 0], ["A", "B", "C"], [8, 8, 8])
    assert [nd.name for nd in g.nodes] == ["2", "1", "0"]
    with pytest.raises(Exception, match="cycle"):
        graph_from_arrays(2, [0, 1], [1, 0], ["A", "B"], [8, 8])
    with pytest.raises(Exception, match="read-only"):
        graph_from_arrays(2, [0], [1], ["A", "B"], [8, 8]).nodes[0].attrs["x"] = 1


def test_synthetic_ten_thousand_nodes():
    """A 1e4-node random DAG (20% unsupported) through both engines: valid, and the engines'
    cut is below the singleton baseline's."""
    dag = random_dag(10_000, seed=3)
    g = graph_from_dag(dag)
    problem = Constraints.default().compile(g, [OpsProperty(["Conv", "Relu", "Add", "MatMul",
                                                             "Mul"], device="acc")])
    single = run_strategy(problem, "singleton").metrics()["cut_bytes"]
    for engine in ENGINES:
        m = run_strategy(problem, engine).metrics()
        assert m["cut_bytes"] < single
        assert m["fallback_nodes"] == 2000
