"""The ``qnn`` selector's per-op rules against the real QNN EP (HTP backend, ``soc_model`` 60,
fp16 precision: :func:`~clusterkit.io.ep_query.query_ep` with ``{"backend": "htp"}``), on
one-node models built on both sides of each rule, and op by op.

Each model is asked once (the answers are cached): the EP's answer must be the selector's, and a
model the selector takes must compile (the session is created, and onnxruntime runs every node
on the EP). A case the EP takes and the selector refuses, or the other way round, fails here
with the op's name and the selector's reason.
"""

from __future__ import annotations

from functools import lru_cache

import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

pytest.importorskip("onnxruntime_qnn", reason="needs clusterkit[qnn] (make test installs it)")

from clusterkit.io.ep_query import EpAnswer, graph_node_name, query_ep  # noqa: E402
from clusterkit.io.onnx import load_onnx  # noqa: E402
from clusterkit.selection.specs import parse_selector  # noqa: E402

EP = "QNNExecutionProvider"
F, I64, B = T.FLOAT, T.INT64, T.BOOL


def const(name: str, dtype: int, dims: list[int], values: list) -> onnx.TensorProto:
    return h.make_tensor(name, dtype, dims, values)


def one_node(op: str, inputs: list[tuple[str, int, list[int]]], *, inits=(), attrs=None,
             opset: int = 17, outputs: int = 1) -> onnx.ModelProto:
    """A model of one ``op`` node reading graph inputs ``(name, dtype, shape)`` and then the
    initializers ``inits``; its outputs' types come from onnx's shape inference."""
    xs = [h.make_tensor_value_info(n, d, s) for n, d, s in inputs]
    names = [n for n, _, _ in inputs] + [t.name for t in inits]
    outs = [f"y{i}" for i in range(outputs)]
    node = h.make_node(op, names, outs, name="n0", **(attrs or {}))
    graph = h.make_graph([node], op, xs, [h.make_empty_tensor_value_info(o) for o in outs],
                         initializer=list(inits))
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    known = {v.name: v for v in inferred.graph.value_info}
    for out in model.graph.output:
        out.CopyFrom(known.get(out.name, next(o for o in inferred.graph.output
                                              if o.name == out.name)))
    return model


def x(shape: list[int], dtype: int = F, name: str = "x") -> list[tuple[str, int, list[int]]]:
    return [(name, dtype, shape)]


def unary(op: str, rank: int = 4, **kw) -> onnx.ModelProto:
    return one_node(op, x([2, 3, 4, 5][:rank] + [2] * max(0, rank - 4)), **kw)


def binary(op: str, dtype: int = F) -> onnx.ModelProto:
    return one_node(op, x([2, 3, 4], dtype) + x([2, 3, 4], dtype, "z"))


def transpose(rank: int) -> onnx.ModelProto:
    return one_node("Transpose", x([2] * rank), attrs={"perm": list(range(rank))[::-1]})


def reshape(rank_in: int, rank_out: int) -> onnx.ModelProto:
    shape = [2 ** (rank_in - rank_out + 1)] + [2] * (rank_out - 1)
    return one_node("Reshape", x([2] * rank_in), inits=[const("s", I64, [rank_out], shape)])


def axes(op: str, shape: list[int], values: list[int], **kw) -> onnx.ModelProto:
    return one_node(op, x(shape), inits=[const("a", I64, [len(values)], values)], **kw)


def window_chain(unit: bool) -> onnx.ModelProto:
    """Reshape -> rank-6 Transpose -> Reshape (a Swin window partition): with ``unit``, a dim
    of 1 that the perm keeps in place (QNN's Rank6ToRank5Fusion lowers the chain to rank 5)."""
    b = 1 if unit else 2
    perm = [0, 1, 3, 2, 4, 5] if unit else [1, 0, 3, 2, 4, 5]
    nodes = [h.make_node("Reshape", ["x", "s1"], ["t1"], name="r1"),
             h.make_node("Transpose", ["t1"], ["t2"], name="n0", perm=perm),
             h.make_node("Reshape", ["t2", "s2"], ["y"], name="r2")]
    inits = [const("s1", I64, [6], [b, 2, 2, 2, 2, 8]), const("s2", I64, [3], [b, 16, 8])]
    graph = h.make_graph(nodes, "window", [h.make_tensor_value_info("x", F, [b, 4, 4, 8])],
                         [h.make_tensor_value_info("y", F, [b, 16, 8])], initializer=inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    return onnx.shape_inference.infer_shapes(model, strict_mode=True)


#: the rules' two sides: name -> (model, does the EP take it). The rank rule: the HTP backend's
#: op validation refuses a node with an input or output tensor of rank > 5 (a rank-6 Reshape or
#: Transpose of a vision transformer's window partition, the issue's case).
RULE_CASES = {
    "Transpose rank 5": (lambda: transpose(5), True),
    "Transpose rank 6": (lambda: transpose(6), False),
    "Reshape rank 5 -> 4": (lambda: reshape(5, 4), True),
    "Reshape rank 6 -> 5": (lambda: reshape(6, 5), False),
    "Reshape rank 5 -> 6": (lambda: reshape(5, 6), False),
    "Unsqueeze rank 4 -> 5": (lambda: axes("Unsqueeze", [2, 2, 2, 2], [0]), True),
    "Unsqueeze rank 5 -> 6": (lambda: axes("Unsqueeze", [2] * 5, [0]), False),
    "Squeeze rank 6 -> 5": (lambda: axes("Squeeze", [1] + [2] * 5, [0]), False),
    "Relu rank 5": (lambda: unary("Relu", 5), True),
    "Relu rank 6": (lambda: unary("Relu", 6), False),
    "rank-6 window chain with a kept unit dim": (lambda: window_chain(True), True),
    "rank-6 window chain without a unit dim": (lambda: window_chain(False), False),
    "ReduceSum rank 6 -> 5": (lambda: axes("ReduceSum", [2] * 6, [0], attrs={"keepdims": 0}),
                              False),
}

UNARY = ("Abs", "Ceil", "Cos", "Elu", "Erf", "Exp", "Floor", "HardSigmoid", "HardSwish",
         "LeakyRelu", "Log", "Neg", "Reciprocal", "Relu", "Round", "Selu", "Sigmoid", "Sign",
         "Sin", "Softplus", "Sqrt", "Tanh", "Identity", "Softmax", "LogSoftmax",
         "GlobalAveragePool", "GlobalMaxPool")
BINARY = ("Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Equal", "Greater",
          "GreaterOrEqual", "Less", "LessOrEqual", "PRelu", "Mean", "Sum")


def _other_ops() -> dict:
    """Op-by-op models beyond the element-wise ones: name -> builder."""
    n4 = [1, 4, 6, 6]
    w = const("w", F, [4, 4, 3, 3], [0.1] * 144)
    vec = [const(n, F, [4], [1.0] * 4) for n in ("s", "b", "m", "v")]
    return {
        "And": lambda: binary("And", B), "Or": lambda: binary("Or", B),
        "Not": lambda: one_node("Not", x([2, 3], B)),
        "Where": lambda: one_node("Where", x([2, 3], B, "c") + x([2, 3]) + x([2, 3], F, "z")),
        "Cast": lambda: one_node("Cast", x([2, 3]), attrs={"to": T.FLOAT16}),
        "Transpose": lambda: transpose(4), "Reshape": lambda: reshape(4, 3),
        "Flatten": lambda: one_node("Flatten", x(n4), attrs={"axis": 1}),
        "Squeeze": lambda: axes("Squeeze", n4, [0]),
        "Unsqueeze": lambda: axes("Unsqueeze", n4, [0]),
        "Concat": lambda: one_node("Concat", x([2, 3]) + x([2, 3], F, "z"), attrs={"axis": 1}),
        "Split": lambda: one_node("Split", x([2, 4]), attrs={"axis": 1}, outputs=2, opset=13),
        "Slice": lambda: one_node("Slice", x([4, 6]), inits=[
            const("st", I64, [1], [1]), const("en", I64, [1], [3]), const("ax", I64, [1], [1])]),
        "Gather": lambda: one_node("Gather", x([5, 3]), inits=[const("i", I64, [2], [0, 2])]),
        "Tile": lambda: one_node("Tile", x([2, 3]), inits=[const("r", I64, [2], [2, 1])]),
        "Expand": lambda: one_node("Expand", x([1, 3]), inits=[const("e", I64, [2], [2, 3])]),
        "ReduceMean": lambda: axes("ReduceMean", [2, 3, 4], [1], opset=18),
        "ReduceMax": lambda: axes("ReduceMax", [2, 3, 4], [1], opset=18),
        "ReduceSum": lambda: axes("ReduceSum", [2, 3, 4], [1]),
        "ArgMax": lambda: one_node("ArgMax", x([2, 3, 4]), attrs={"axis": 1}),
        "MatMul": lambda: one_node("MatMul", x([2, 3, 4]), inits=[const("w", F, [4, 5],
                                                                        [0.5] * 20)]),
        "Gemm": lambda: one_node("Gemm", x([2, 4]), inits=[const("w", F, [4, 3], [0.5] * 12)]),
        "Conv": lambda: one_node("Conv", x(n4), inits=[w], attrs={"pads": [1] * 4}),
        "AveragePool": lambda: one_node("AveragePool", x(n4), attrs={"kernel_shape": [2, 2]}),
        "MaxPool": lambda: one_node("MaxPool", x(n4), attrs={"kernel_shape": [2, 2]}),
        "BatchNormalization": lambda: one_node("BatchNormalization", x(n4), inits=vec),
        "InstanceNormalization": lambda: one_node("InstanceNormalization", x(n4),
                                                  inits=vec[:2]),
        "LayerNormalization": lambda: one_node("LayerNormalization", x([2, 3, 4]), inits=[
            const("g", F, [4], [1.0] * 4), const("bb", F, [4], [0.0] * 4)], attrs={"axis": -1}),
        "Pad": lambda: one_node("Pad", x(n4), inits=[const("p", I64, [8], [0, 0, 1, 1] * 2)]),
        "DepthToSpace": lambda: one_node("DepthToSpace", x(n4), attrs={"blocksize": 2}),
        "SpaceToDepth": lambda: one_node("SpaceToDepth", x(n4), attrs={"blocksize": 2}),
        "Clip": lambda: one_node("Clip", x([2, 3]), inits=[const("lo", F, [], [0.0]),
                                                          const("hi", F, [], [6.0])]),
        "TopK": lambda: one_node("TopK", x([2, 6]), inits=[const("k", I64, [1], [2])],
                                 outputs=2),
        "CumSum": lambda: one_node("CumSum", x([2, 6]), inits=[const("ax", I64, [], [1])]),
        "LRN": lambda: one_node("LRN", x(n4), attrs={"size": 3}),
        "Resize": lambda: one_node("Resize", x(n4), inits=[
            const("roi", F, [0], []), const("sc", F, [4], [1.0, 1.0, 2.0, 2.0])]),
        "GatherElements": lambda: one_node("GatherElements", x([3, 3]), inits=[
            const("i", I64, [2, 3], [0, 1, 2, 2, 1, 0])]),
    }


def op_cases() -> dict:
    """Every op-by-op case: name -> builder."""
    cases = {op: (lambda op=op: unary(op)) for op in UNARY}
    cases.update({op: (lambda op=op: binary(op)) for op in BINARY})
    cases.update(_other_ops())
    return cases


OP_CASES = op_cases()
BUILDERS = {**{k: b for k, (b, _) in RULE_CASES.items()}, **OP_CASES}


@lru_cache(maxsize=None)
def asked(case: str) -> tuple[onnx.ModelProto, EpAnswer, bool, str | None]:
    """The case's model, the EP's answer (compiled), whether the selector takes the node, and
    the selector's reason when it does not."""
    model = BUILDERS[case]()
    prop = parse_selector("qnn")
    graph = load_onnx(model)
    reasons = [prop.explain(nd, graph) for nd in graph.nodes]  # type: ignore[attr-defined]
    reason = next((r for r in reasons if r), None)
    answer = query_ep(model, EP, {"backend": "htp"}, compile=True)
    assert all(reasons) or reason is None, f"{case}: the selector takes part of the chain"
    return model, answer, reason is None, reason


def graph_nodes(names: list[str] | None, model: onnx.ModelProto) -> set[str]:
    """The model's nodes among ``names`` (the copies the layout transformation made of a node
    are that node; its own Transposes, around a channel-last op, are no node of the model)."""
    index = {n.name: i for i, n in enumerate(model.graph.node)}
    return {m for n in names or () if (m := graph_node_name(n, index))}


def ep_takes(answer: EpAnswer, model: onnx.ModelProto) -> bool:
    """Does the EP take every node of ``model`` (and refuse none)?"""
    taken = graph_nodes(answer.nodes, model)
    assert taken in (set(), {n.name for n in model.graph.node}), f"EP took part: {taken}"
    return bool(taken)


@pytest.mark.parametrize("case", sorted(RULE_CASES))
def test_each_side_of_a_rule_is_the_eps_answer(case):
    model, answer, takes, reason = asked(case)
    expected = RULE_CASES[case][1]
    assert ep_takes(answer, model) == expected, f"{case}: the EP's answer is not the one measured"
    assert takes == expected, f"{case}: the selector {'takes' if takes else 'refuses'} it " \
                              f"({reason})"


def test_the_rank_rule_names_the_tensor_and_its_rank():
    _, _, takes, reason = asked("Transpose rank 6")
    assert not takes and "rank 6 > 5" in reason and "'x'" in reason


@pytest.mark.parametrize("case", sorted(OP_CASES))
def test_op_by_op_the_selector_answers_as_the_ep_and_what_it_takes_compiles(case):
    model, answer, takes, reason = asked(case)
    assert takes == ep_takes(answer, model), f"{case}: EP takes {answer.nodes}, selector: {reason}"
    if takes:
        assert answer.error is None, f"{case}: taken, then failed to compile: {answer.error}"
        assert graph_nodes(answer.assigned, model) == {"n0"}, \
            f"{case}: onnxruntime ran {answer.assigned} on the EP"


def test_every_taken_rule_case_compiles():
    for case in RULE_CASES:
        model, answer, takes, _ = asked(case)
        if takes:
            assert answer.error is None, (case, answer.error)
            assert graph_nodes(answer.assigned, model) == {n.name for n in model.graph.node}
