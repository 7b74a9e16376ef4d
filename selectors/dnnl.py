"""Intel oneDNN (DNNL) through ONNX Runtime's DNNL EP: float32 CPU kernels, optional bf16/GPU.

The op table (``dnnl_ep.json`` in this package's ``data`` folder) transcribes the DNNL EP's
capability checks in ONNX Runtime 1.22 (upstream dnnl_op_manager.cc and dnnl_node_capability).
Settings:

- ``bf16``: the CPU (or GPU) supports bfloat16 (default False).
- ``gpu``: oneDNN runs on a GPU engine (default False): rank limits, no MatMulInteger, no bf16
  comparisons.
- ``training``: a training build (default False): enables the ``*Grad`` ops and MaxPool's
  Indices output when consumed by MaxPoolGrad.
- ``fusion``: DNNL graph fusion is enabled (default True); Erf is taken only inside a Gelu
  pattern and only with fusion.

As in the EP, shape checks pass when shapes are unknown (the EP's optimistic claim).
"""

from __future__ import annotations

import math

from clusterkit.selectors._attr_checks import attr_in, attr_is
from clusterkit.selectors._checks import check, decided_by, first, opset_at_least, setting, when
from clusterkit.selectors._facts import ONNX_TYPES, attr_of, numel
from clusterkit.selectors._optable import load_table
from clusterkit.selectors._property import TableProperty
from clusterkit.selectors._rules import Fusion, R, in_pattern
from clusterkit.selectors._tensor_checks import (
    absent_input,
    const,
    dtype_in,
    no_zero_dims,
    outputs_at_most,
    rank,
    table_dtypes,
)

TABLE = "dnnl_ep.json"
ELTWISE = ["Abs", "Elu", "Exp", "LeakyRelu", "Log", "Relu", "Round", "Sigmoid", "Softplus",
           "Sqrt", "Tanh", "Gelu", "com.microsoft:BiasGelu", "com.microsoft:FastGelu"]
BINARY = ["Add", "Sub", "Mul", "Div", "Equal", "Greater", "GreaterOrEqual", "Less",
          "LessOrEqual", "Gemm"]
POOLS = ["AveragePool", "MaxPool", "GlobalAveragePool", "GlobalMaxPool"]
REDUCE = ["ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum", "ReduceLogSum",
          "ReduceLogSumExp", "ReduceSumSquare"]
MATMULS = ["Gemm", "MatMul", "com.microsoft:FusedMatMul", "MatMulInteger"]
COMPARISONS = ("Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual")
#: divisors the EP accepts before a Gelu's Erf: sqrt(2) and an approximation some BERT models use
SQRT2 = (math.sqrt(2), 1.4142099618911743)
#: (from, to) casts the CPU runtime rejects
_BAD_CASTS = {("uint8", "float16"), ("int8", "float16"), ("int32", "float16"),
              ("int32", "bfloat16"), ("float16", "uint8"), ("float16", "int8"),
              ("float16", "int32"), ("float16", "bfloat16"), ("bfloat16", "int32"),
              ("bfloat16", "float16")}


def make_property(device: str = "dnnl", *, bf16: bool = False, gpu: bool = False,
                  training: bool = False, fusion: bool = True) -> TableProperty:
    """The DNNL device (see the module docstring)."""
    table = load_table(TABLE)
    gelu = Fusion("Erf", (3, 4), where=lambda ctx, m: _gelu_div_ok(ctx, m))

    def on_gpu(ctx, node) -> bool:
        return gpu

    rules = (_global_rules(on_gpu, gpu) + _pool_norm_rules(training)
             + _cast_concat_rules(on_gpu, gpu) + _erf_matmul_rules(gelu, fusion, gpu)
             + _other_rules(training))
    return TableProperty(device, name="dnnl", table=table, rules=rules, settings={
        "bf16": bf16, "gpu": gpu, "training": training, "fusion": fusion},
        fusions=[gelu], dtype_qualifiers={"supports bf16": bf16})


# ---------------------------------------------------------------------- rule sections
def _global_rules(on_gpu, gpu: bool) -> list:
    """Global conditions, then the elementwise and binary ops' GPU limits."""
    return [
        R("*", "dtype check is on input 0", table_dtypes(0)),
        R("*", "most shape checks pass when shapes are unknown",
          decided_by("every shape check here passes on unknown shapes")),
        R(ELTWISE + ["ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"],
          "on a GPU engine: input rank must be <= 5", when(on_gpu, rank(0, hi=5))),
        R(BINARY, "bf16 Less/Greater/*Equal rejected", when(
            lambda c, n: gpu and n.op_type in COMPARISONS, check(
                lambda ctx, node: ctx.dtype(node, 0) != "bfloat16", "bf16 comparison on GPU"))),
    ]


def _pool_norm_rules(training: bool) -> list:
    """Pooling, reductions and BatchNormalization."""
    return [
        R(POOLS, "float32 only", dtype_in(0, ("float32",))),
        R(POOLS, "input rank >= 3", rank(0, lo=3)),
        R(POOLS, "ceil_mode must be 0", attr_is("ceil_mode", 0, 0)),
        R(POOLS, "inference builds: only one output", check(
            lambda ctx, node: _indices_ok(ctx, node, training),
            "the Indices output is not supported here")),
        R("MaxPool", "dilations must all be <= 1", check(
            lambda ctx, node: all(d <= 1 for d in attr_of(node, "dilations", ())),
            "dilations > 1")),
        R(REDUCE, "input must not be a scalar", rank(0, lo=1)),
        R("BatchNormalization", "input must not be rank 3", check(
            lambda ctx, node: ctx.rank(node, 0) != 3, "rank-3 (1D) batchnorm")),
        R("BatchNormalization", "scale, B, mean, var must be 1-D", first(
            *[rank(p, allowed=(1,)) for p in (1, 2, 3, 4)])),
    ]


def _cast_concat_rules(on_gpu, gpu: bool) -> list:
    """Cast, Concat, Conv and DequantizeLinear."""
    return [
        R("Cast", "'to' must be float32", attr_in("to", (1, 10, 16, 6, 3, 2))),
        R("Cast", "CPU runtime rejects", when(lambda c, n: not gpu, check(
            lambda ctx, node: (ctx.dtype(node, 0), ONNX_TYPES.get(attr_of(node, "to"))) not in
            _BAD_CASTS, "this cast is rejected by the CPU runtime"))),
        R("Concat", "all inputs must have the same dtype", check(
            lambda ctx, node: len({ctx.dtype(node, p) for p in range(len(node.inputs))
                                   if ctx.has_input(node, p)} - {None}) <= 1,
            "inputs have different dtypes")),
        R("Concat", "'axis' attribute must be present", check(
            lambda ctx, node: "axis" in node.attrs, "no axis attribute")),
        R("Concat", "all inputs same rank and equal dims", check(_concat_shapes_ok,
                                                                 "input shapes do not match")),
        R("Concat", "GPU engine: rank <= 6", when(on_gpu, rank(0, hi=6))),
        R("Conv", "float32 only", dtype_in(0, ("float32",))),
        R("DequantizeLinear", "x uint8/int8, x_scale float32", first(
            dtype_in(0, ("uint8", "int8")), dtype_in(1, ("float32",)),
            dtype_in(2, ("uint8", "int8")))),
    ]


def _erf_matmul_rules(gelu: Fusion, fusion: bool, gpu: bool) -> list:
    """Erf (Gelu fusion) and the MatMul family."""
    return [
        R("Erf", "only when it is part of a Gelu pattern", when(
            lambda c, n: True, setting(fusion, "Erf needs DNNL fusion enabled"),
            in_pattern(gelu, "Erf is taken only inside a Gelu pattern")), fused=True),
        R("Erf", "the Div divisor before Erf must be a constant scalar", check(
            lambda ctx, node: _div_before_ok(ctx, node), "the Div before Erf must divide by "
                                                         "a constant scalar sqrt(2)")),
        R(MATMULS, "A and B must each be rank >= 2", first(rank(0, lo=2), rank(1, lo=2))),
        R(MATMULS, "no zero-sized dims in A or B", no_zero_dims([0, 1])),
        R("MatMulInteger", "inputs int8/uint8; B (weights) must not be uint8", first(
            dtype_in(0, ("int8", "uint8")), dtype_in(1, ("int8",)))),
        R("MatMulInteger", "not supported on a GPU engine", setting(not gpu, "not on GPU")),
        R("MatMulInteger", "a_zero_point must be a scalar", check(
            lambda ctx, node: not ctx.has_input(node, 2) or not ctx.rank(node, 2),
            "a_zero_point is not a rank-0 scalar")),
        R("MatMulInteger", "b_zero_point of rank >= 1", check(
            _b_zero_point_ok, "a b_zero_point of rank >= 1 must be a constant of zeros")),
    ]


def _other_rules(training: bool) -> list:
    """LayerNormalization, Pow, QAttention, shape ops, Sum and the training-only ops."""
    return [
        R(["LayerNormalization", "com.microsoft:SkipLayerNormalization"], "single output",
          outputs_at_most(1)),
        R(["LayerNormalization", "com.microsoft:SkipLayerNormalization"], "input rank 2..5",
          rank(0, lo=2, hi=5)),
        R("Pow", "exponent (input 1) must be a constant", when(
            lambda c, n: c.shape(n, 1) is not None, const(1))),
        R("Pow", "exponent must be a scalar", check(
            lambda ctx, node: (numel(ctx.shape(node, 1)) or 1) == 1,
            "exponent is not a scalar")),
        R("com.microsoft:QAttention", "past (input 8) and present (output 1)", first(
            absent_input(8), outputs_at_most(1))),
        R("com.microsoft:QAttention", "unidirectional must be 0", attr_is("unidirectional", 0, 0)),
        R("com.microsoft:QAttention", "input_scale, weight_scale", check(
            lambda ctx, node: all((numel(ctx.shape(node, p)) or 1) == 1 for p in (3, 4)),
            "input_scale/weight_scale are not scalars")),
        R("com.microsoft:QAttention", "mask_index (input 5), if present", rank(5, allowed=(2,))),
        R("com.microsoft:QAttention", "input/weight zero points", check(
            lambda ctx, node: all((numel(ctx.shape(node, p)) or 1) == 1 for p in (6, 7)
                                  if ctx.has_input(node, p)), "zero points are not scalars")),
        R("Reshape", "shape input must not be an empty 1-D tensor", check(
            lambda ctx, node: ctx.shape(node, 1) != (0,), "empty shape tensor")),
        R("Softmax", "opset < 13 only with axis == 2", opset_at_least(13)),
        R(["Squeeze", "Unsqueeze"], "output must not be a scalar", rank(0, lo=1, out=True)),
        R(["Squeeze", "Unsqueeze"], "axes (input 1, opset >= 13), if shape known", when(
            lambda c, n: c.shape(n, 1) is not None, const(1))),
        R("Sum", "no broadcasting", check(
            lambda ctx, node: len({ctx.shape(node, p) for p in range(len(node.inputs))
                                   if ctx.has_input(node, p)} - {None}) <= 1,
            "inputs have different shapes (broadcasting)")),
        R(["com.microsoft:AveragePoolGrad", "com.microsoft:MaxPoolGrad",
           "com.microsoft:ConvGrad", "com.microsoft:ReluGrad", "com.microsoft:SoftmaxGrad"],
          "training builds only", setting(training, "training builds only")),
    ]


# ---------------------------------------------------------------------- helpers
def _indices_ok(ctx, node, training: bool) -> bool:
    if len([o for o in node.outputs if o]) <= 1:
        return True
    if not training:
        return False
    users = ctx.consumers(node.outputs[1])
    return all(u.op_type == "MaxPoolGrad" for u in users)


def _concat_shapes_ok(ctx, node) -> bool:
    shapes = [ctx.shape(node, p) for p in range(len(node.inputs)) if ctx.has_input(node, p)]
    shapes = [s for s in shapes if s is not None]
    if len({len(s) for s in shapes}) > 1:
        return False
    if not shapes:
        return True
    r = len(shapes[0])
    axis = attr_of(node, "axis", 0)
    axis = axis + r if axis < 0 else axis
    for i in range(r):
        if i == axis:
            continue
        dims = {s[i] for s in shapes if isinstance(s[i], int)}
        if len(dims) > 1:
            return False
    return True


def _div_before_ok(ctx, node) -> bool:
    div = ctx.producer(node, 0)
    if div is None or div.op_type != "Div":
        return True  # no Div: the Gelu-pattern rule decides
    return _constant_scalar(ctx, div, 1, SQRT2)


def _gelu_div_ok(ctx, match) -> bool:
    """The Div before the match's Erf divides by sqrt(2), and the Add after it adds 1.0."""
    nodes = [ctx.graph.nodes[v] for v in match]
    erf = next(n for n in nodes if n.op_type == "Erf")
    add = next((n for n in nodes if n.op_type == "Add" and erf.outputs[0] in n.inputs), None)
    if add is None:
        return _div_before_ok(ctx, erf)
    other = 1 if add.inputs[0] == erf.outputs[0] else 0
    return _div_before_ok(ctx, erf) and _constant_scalar(ctx, add, other, (1.0,))


def _constant_scalar(ctx, node, pos: int, expected: tuple[float, ...]) -> bool:
    """Input ``pos`` is a constant of one element close to one of ``expected`` (the EP's
    IsInitilizedWithExpectedValue: atol 1e-8, rtol 1e-5); an unreadable value passes."""
    t = ctx.input(node, pos)
    if t is None or not t.is_constant or (numel(t.shape) or 1) != 1:
        return False
    v = ctx.value(node.inputs[pos])
    if v is None or v.size != 1:
        return v is None
    x = float(v.ravel()[0])
    return any(abs(x - e) <= 1e-8 + 1e-5 * abs(e) for e in expected)


def _b_zero_point_ok(ctx, node) -> bool:
    if not ctx.has_input(node, 3) or not ctx.rank(node, 3):
        return True
    t = ctx.input(node, 3)
    if not t.is_constant:
        return False
    v = ctx.value(node.inputs[3])
    return v is None or not v.any()
