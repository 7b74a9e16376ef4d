"""Fused nodes of one device that follow one another in the schedule run as one unit; a merged
unit its device refuses is split again (each part falling back on its own); outputs stay those
of one onnxruntime session on the whole model."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import clusterkit as ck
from clusterkit.fusion import fuse
from clusterkit.runtime.backends import OnnxRuntimeBackend, register_backend
from clusterkit.runtime.executor import Executor, compare_outputs, random_inputs, run_model
from support.models import BUNDLED_MODELS
from support.onnx_models import FAST_ORT, float_model, load

CONFIG = {"onnxruntime": FAST_ORT}
HOST_ONLY = {"Softmax", "Erf", "Pow", "Sqrt", "ReduceMean", "Where", "GlobalAveragePool",
             "Gather", "Cast"}


def _runs(steps) -> list[tuple[str, set[int]]]:
    """Maximal runs of consecutive subgraph steps on one device: (device, their nodes)."""
    out: list[tuple[str, set[int]]] = []
    prev = None
    for u in steps:
        if u.kind == "subgraph" and prev is not None and prev.kind == "subgraph" \
                and prev.device == u.device:
            out[-1][1].update(u.subgraph.nodes)
        elif u.kind == "subgraph":
            out.append((u.device, set(u.subgraph.nodes)))
        prev = u
    return out


@pytest.mark.parametrize("name", ["bert_base", "swin_t"])
def test_merged_steps_are_the_runs_of_the_unmerged_schedule(name):
    graph = load(BUNDLED_MODELS / f"{name}.onnx")
    feeds = random_inputs(graph)
    ops = sorted(set(graph.op_types) - HOST_ONLY)
    fg = fuse(ck.run_strategy(ck.make_problem(graph, ["acc=ops:" + ",".join(ops)]), "cycles"))
    plain = Executor(fg, backend_config=CONFIG, merge_steps=False)
    merged = Executor(fg, backend_config=CONFIG)
    live = [v for v in fg.fused_nodes() if not fg.nodes[v].is_constant]
    assert sum(u.kind == "subgraph" for u in plain.steps) <= len(live)
    got = [(u.device, set(u.subgraph.nodes)) for u in merged.steps if u.kind == "subgraph"]
    assert got == _runs(plain.steps)
    assert len(merged.steps) <= len(plain.steps)
    if name == "swin_t":  # its schedule has fused nodes of the device one after another
        assert len(merged.steps) < len(plain.steps)
    made = set(graph.inputs)
    for u in merged.steps:
        assert set(u.inputs) <= made, u.name
        made.update(u.outputs)
        assert not u.parts or sorted(v for p in u.parts for v in p.subgraph.nodes) \
            == sorted(u.subgraph.nodes)
    expected = run_model(graph.model, feeds, FAST_ORT)
    for ex in (plain, merged, merged):  # the second merged run reuses what the first kept
        cmp = compare_outputs(expected, ex.run(feeds))
        assert cmp["outputs_match"], cmp["outputs"]


class NoSigmoid(OnnxRuntimeBackend):
    """Refuses every subgraph holding a Sigmoid."""

    name = "no_sigmoid"

    def _compile(self, sub, *args):
        if any(sub.graph.nodes[v].op_type == "Sigmoid" for v in sub.nodes):
            raise RuntimeError("no sigmoid here")
        return super()._compile(sub, *args)


register_backend("no_sigmoid", NoSigmoid)


def _chain_model():
    """x -> Relu (a) -> Sigmoid (b) -> Abs (c); a, b feed Neg (host) and Add (acc)."""
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="relu"),
             helper.make_node("Sigmoid", ["a"], ["b"], name="sigmoid"),
             helper.make_node("Add", ["a", "b"], ["c"], name="add"),
             helper.make_node("Neg", ["c"], ["y"], name="neg")]
    return float_model(nodes, "chain", ["x"], ["y", "b"])


def test_a_refused_merged_unit_is_split_and_only_the_refused_part_falls_back():
    graph = ck.load_graph(_chain_model())
    part = ck.run_strategy(ck.make_problem(graph, ["acc=ops:Relu,Sigmoid,Add"]), "singleton")
    fg = fuse(part)
    ex = Executor(fg, backends={"acc": "no_sigmoid"},
                  backend_config={"no_sigmoid": FAST_ORT, "onnxruntime": FAST_ORT})
    x = np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3)
    out = ex.run({"x": x})
    a = np.maximum(x, 0)
    b = 1 / (1 + np.exp(-a))
    np.testing.assert_allclose(out["b"], b, rtol=1e-6)
    np.testing.assert_allclose(out["y"], -(a + b), rtol=1e-6)
    ops = [[graph.nodes[v].op_type for v in u.subgraph.nodes] for u in ex.steps]
    assert ops == [["Relu"], ["Sigmoid"], ["Add"], ["Neg"]]
    assert [u.fallback_reason is not None for u in ex.steps] == [False, True, False, False]
    assert [u.device for u in ex.steps] == ["acc", "cpu", "acc", "cpu"]
    assert len(ex.fallbacks) == 1 and "no sigmoid here" in ex.fallbacks[0]["error"]
    whole = Executor(fg, backend_config=CONFIG)  # no refusal: one acc unit, then the host
    assert [u.kind for u in whole.steps] == ["subgraph", "host"]
    assert len(whole.steps[0].parts) == 3
    np.testing.assert_allclose(whole.run({"x": x})["y"], -(a + b), rtol=1e-6)
