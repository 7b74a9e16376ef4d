"""How the executor moves tensors and groups host nodes: OrtValues pass from session to session
without copies, host nodes are grouped into the fewest runs a topological order allows, steps
without inputs run once; outputs stay those of one onnxruntime session on the whole model."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import clusterkit as ck
from clusterkit.fusion import fuse
from clusterkit.runtime.backends.base import NUMPY_VALUES
from clusterkit.runtime.backends.onnxruntime_backend import ORT_VALUES
from clusterkit.runtime.executor import (
    Executor,
    compare_outputs,
    host_runs,
    phase_order,
    random_inputs,
    run_model,
)
from support.models import BUNDLED_MODELS
from support.onnx_models import FAST_ORT, float_model, load

CONFIG = {"onnxruntime": FAST_ORT}
#: the ops a typical accelerator lacks (as in benchmarks/bench_fusion.py)
HOST_ONLY = {"Softmax", "Erf", "Pow", "Sqrt", "ReduceMean", "Where", "GlobalAveragePool",
             "Gather", "Cast"}


def _assert_match(expected, got, what):
    cmp = compare_outputs(expected, got)
    assert cmp["outputs_match"], f"{what}: max |diff| {cmp['max_abs_diff']}: {cmp['outputs']}"


# ---------------------------------------------------------------------- host runs
@st.composite
def two_kind_dags(draw):
    n = draw(st.integers(1, 7))
    edges = [(i, j) for i, j in itertools.combinations(range(n), 2) if draw(st.booleans())]
    host = [draw(st.booleans()) for _ in range(n)]
    live = [draw(st.integers(0, 5)) > 0 for _ in range(n)]
    return n, edges, host, live


def _fewest_host_runs(n, edges, host, live) -> int:
    """Brute force: every topological order of the live nodes."""
    g = nx.DiGraph()
    g.add_nodes_from(v for v in range(n) if live[v])
    g.add_edges_from((u, v) for u, v in edges if live[u] and live[v])
    return min(host_runs(list(order), host) for order in nx.all_topological_sorts(g))


@settings(max_examples=150, deadline=None)
@given(two_kind_dags())
def test_phase_order_gives_the_fewest_host_runs(dag):
    n, edges, host, live = dag
    preds = [[u for u, v in edges if v == w] for w in range(n)]
    succs = [[v for u, v in edges if u == w] for w in range(n)]
    orders = [phase_order(preds, succs, live, host, start) for start in (True, False)]
    for order in orders:  # a topological order of exactly the live nodes
        assert sorted(order) == [v for v in range(n) if live[v]]
        pos = {v: k for k, v in enumerate(order)}
        assert all(pos[u] < pos[v] for u, v in edges if live[u] and live[v])
    if any(live):
        assert min(host_runs(o, host) for o in orders) == _fewest_host_runs(n, edges, host, live)


def _two_branch_model():
    """acc nodes a=Relu(x), b=Sigmoid(x); host nodes Neg(a), Abs(b): the host nodes can share
    one unit once both acc nodes ran (taking a host node as soon as it is ready gives two)."""
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="relu"),
             helper.make_node("Sigmoid", ["x"], ["b"], name="sigmoid"),
             helper.make_node("Neg", ["a"], ["y"], name="neg"),
             helper.make_node("Abs", ["b"], ["z"], name="abs")]
    return float_model(nodes, "two_branch", ["x"], ["y", "z"])


def test_independent_host_nodes_share_one_unit():
    graph = ck.load_graph(_two_branch_model())
    part = ck.run_strategy(ck.make_problem(graph, ["acc=ops:Relu,Sigmoid"]), "singleton")
    x = np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3)
    for merge, kinds in ((False, ["subgraph", "subgraph", "host"]), (True, ["subgraph", "host"])):
        ex = Executor(fuse(part), backend_config=CONFIG, merge_steps=merge)
        assert [u.kind for u in ex.steps] == kinds
        out = ex.run({"x": x})
        np.testing.assert_allclose(out["y"], -np.maximum(x, 0), rtol=1e-6)
        np.testing.assert_allclose(out["z"], 1 / (1 + np.exp(-x)), rtol=1e-6)


@pytest.mark.parametrize("name", ["bert_base", "swin_t"])
def test_merged_host_segments_match_one_session(name):
    """A selector leaving the usual ops to the host: every unit reads only tensors made
    before it, host steps are never adjacent, and the outputs are those of one session."""
    graph = load(BUNDLED_MODELS / f"{name}.onnx")
    feeds = random_inputs(graph)
    ops = sorted(set(graph.op_types) - HOST_ONLY)
    part = ck.run_strategy(ck.make_problem(graph, ["acc=ops:" + ",".join(ops)]), "cycles")
    ex = Executor(fuse(part), backend_config=CONFIG)
    made = set(graph.inputs)
    for u in ex.steps:
        assert set(u.inputs) <= made, u.name
        made.update(u.outputs)
    kinds = [u.kind for u in ex.steps]
    assert "host" in kinds and not any(a == b == "host" for a, b in zip(kinds, kinds[1:]))
    expected = run_model(graph.model, feeds, FAST_ORT)
    for _ in range(2):  # the second run reuses what the first kept
        _assert_match(expected, ex.run(feeds), name)


# ---------------------------------------------------------------------- values
def _spy(ex: Executor) -> dict:
    """Record the buffer address of every value each unit reads and writes."""
    seen: dict = {}
    for u in ex.steps:
        inner = u.compiled.run_values

        def wrapped(values, u=u, inner=inner):
            outs = inner(values)
            for side, names, vals in (("in", u.inputs, values), ("out", u.outputs, outs)):
                for t, v in zip(names, vals):
                    seen[u.name, side, t] = (type(v).__module__,
                                             v.data_ptr() if hasattr(v, "data_ptr")
                                             else v.ctypes.data)
            return outs

        u.compiled.run_values = wrapped
    return seen


def test_ortvalues_pass_between_sessions_without_copies():
    graph = load(BUNDLED_MODELS / "resnet50.onnx")
    feeds = random_inputs(graph)
    part = ck.run_strategy(ck.make_problem(graph, ["acc=ops:Conv,Relu,MaxPool"]), "cycles")
    ex = Executor(fuse(part), backend_config=CONFIG)
    assert len(ex.steps) >= 3
    assert all(u.compiled.value_kind is ORT_VALUES for u in ex.steps)
    seen = _spy(ex)
    _assert_match(run_model(graph.model, feeds, FAST_ORT), ex.run(feeds), "resnet50")
    producer = {t: u.name for u in ex.steps for t in u.outputs}
    passed = 0
    for u in ex.steps:
        for t in u.inputs:
            module, ptr = seen[u.name, "in", t]
            assert module.startswith("onnxruntime"), (u.name, t, module)
            if t in producer:
                assert ptr == seen[producer[t], "out", t][1], (t, producer[t], u.name)
                passed += 1
            else:  # a graph input: the OrtValue views the caller's array
                assert ptr == feeds[t].ctypes.data
    assert passed >= 2


def test_numpy_backend_and_ortvalue_backend_exchange_values():
    """The reference backend (numpy values) on the accelerator, onnxruntime on the host."""
    graph = load(BUNDLED_MODELS / "resnet18.onnx")
    feeds = random_inputs(graph)
    part = ck.run_strategy(ck.make_problem(graph, ["acc=ops:Relu,Add"]), "cycles")
    ex = Executor(fuse(part), backends={"acc": "reference"}, backend_config=CONFIG)
    kinds = {u.kind: u.compiled.value_kind for u in ex.steps}
    assert kinds == {"subgraph": NUMPY_VALUES, "host": ORT_VALUES}
    _assert_match(run_model(graph.model, feeds, FAST_ORT), ex.run(feeds), "resnet18")


def _no_input_model():
    """``c`` = w1 + w2 is fixed (a constant graph output); ``r`` = RandomUniform() differs from
    run to run; ``y`` = Relu(x)."""
    vi = lambda t, s: helper.make_tensor_value_info(t, TensorProto.FLOAT, s)  # noqa: E731
    init = [numpy_helper.from_array(np.arange(4, dtype=np.float32), "w1"),
            numpy_helper.from_array(np.ones(4, dtype=np.float32), "w2")]
    nodes = [helper.make_node("Add", ["w1", "w2"], ["c"], name="add"),
             helper.make_node("RandomUniform", [], ["r"], name="rand", shape=[64]),
             helper.make_node("Relu", ["x"], ["y"], name="relu")]
    g = helper.make_graph(nodes, "no_input", [vi("x", [3])],
                          [vi("c", [4]), vi("r", [64]), vi("y", [3])], initializer=init)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_steps_without_inputs_run_once_unless_random():
    graph = ck.load_graph(_no_input_model())
    part = ck.run_strategy(ck.make_problem(graph, ["acc=ops:RandomUniform"]), "singleton")
    ex = Executor(fuse(part), backend_config=CONFIG)
    x = np.asarray([-1.0, 0.5, 2.0], dtype=np.float32)
    first = ex.run({"x": x})
    first["c"][:] = -7  # the caller's copy: the next run still gives w1 + w2
    second = ex.run({"x": x})
    np.testing.assert_array_equal(second["c"], np.arange(4) + 1.0)
    np.testing.assert_array_equal(second["y"], np.maximum(x, 0))
    assert not np.array_equal(first["r"], second["r"])  # random: computed at every run
    runs = {u.outputs[0]: u.runs for u in ex.steps}
    assert runs == {"c": 1, "r": 2, "y": 2}


def test_sessions_share_the_environment_allocator_unless_told_not_to():
    from clusterkit.runtime.backends import OnnxRuntimeBackend

    key = "session.use_env_allocators"
    assert OnnxRuntimeBackend().session_options().get_session_config_entry(key) == "1"
    off = OnnxRuntimeBackend(config={"shared_allocator": "false"}).session_options()
    with pytest.raises(Exception, match="does not have configuration"):
        off.get_session_config_entry(key)
    graph = ck.load_graph(_two_branch_model())
    part = ck.run_strategy(ck.make_problem(graph, ["acc=ops:Relu,Sigmoid"]), "singleton")
    x = np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3)
    outs = [Executor(fuse(part), backend_config={"onnxruntime": {"shared_allocator": flag}})
            .run({"x": x}) for flag in (True, False)]
    for out in outs:
        np.testing.assert_allclose(out["y"], -np.maximum(x, 0), rtol=1e-6)
