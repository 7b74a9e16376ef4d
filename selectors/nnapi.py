"""Android NNAPI through ONNX Runtime's NNAPI EP (static shapes, rank <= 4, float32/uint8 QDQ).

The op table (``nnapi_ep.json`` in this package's ``data`` folder) transcribes the NNAPI EP's
op builders in ONNX Runtime 1.22 and its documented op list (upstream nnapi_supported_ops.md).
Setting:

- ``feature_level``: the device's NNAPI feature level (default 4 = Android 11 / API 30), given
  either as a feature level 1-8 or as the value onnxruntime's ``ANEURALNETWORKS_FEATURE_LEVEL_*``
  constants use: Android API level 27/28/29/30/31 for levels 1/2/3/4/5, and 1000006/1000007/
  1000008 for levels 6/7/8 (after Android 12 the NNAPI level no longer follows the API level, so
  API levels 32 and above are refused). Gates Sub/Div (2), Abs/Exp/Log/Neg/Sin/Sqrt/Pow/PRelu/
  QuantizeLinear (3), Elu (4), batch MatMul, dilated Conv, and several Resize modes; no op rule
  needs more than level 4.

Quantized QDQ node units (``DequantizeLinear -> op -> QuantizeLinear``) are the documented
patterns; the float op inside a unit is checked like any other node, plus the unit's rules
(constant scales, identical scales where required) read from its DQ/Q neighbours.
"""

from __future__ import annotations

from clusterkit.errors import SelectorError
from clusterkit.selectors._attr_checks import (
    attr_absent,
    attr_in,
    attr_is,
    default_dilations,
    kernel_2d,
)
from clusterkit.selectors._checks import (
    check,
    decided_by,
    first,
    non_negative,
    not_a_restriction,
    opset_at_least,
    opset_at_most,
    setting,
    value,
    when,
)
from clusterkit.selectors._facts import (
    DEFAULT_DOMAINS,
    attr_of,
    default_key,
    dim_at,
    float_close,
    numel,
)
from clusterkit.selectors._op_rules import (
    axis_dim,
    clip_bounds,
    downscale_divides,
    last_axis,
    resize_const,
    resize_scales,
)
from clusterkit.selectors._optable import load_table
from clusterkit.selectors._property import TableProperty
from clusterkit.selectors._rules import EACH, N, R, constant_inputs_only
from clusterkit.selectors._tensor_checks import (
    all_static,
    const,
    dtype_in,
    inputs_between,
    no_external_initializers,
    no_zero_dims,
    outputs_at_most,
    rank,
    table_dtypes,
)

TABLE = "nnapi_ep.json"
QUANT_TEXT = "quantized variant: all scales / zero points must be constant"
#: quantized ops: positions of the (uint8) data inputs and of int8-allowed weights
_QLINEAR_DATA = {"QLinearConv": ((0,), (3,)), "QLinearMatMul": ((0,), (3,)),
                 "com.microsoft:QLinearAdd": ((0, 3), ()), "com.microsoft:QLinearMul": ((0, 3), ()),
                 "com.microsoft:QLinearAveragePool": ((0,), ()),
                 "com.microsoft:QLinearSigmoid": ((0,), ()),
                 "DequantizeLinear": ((0,), ()), "QuantizeLinear": ((), ())}


#: onnxruntime's ANEURALNETWORKS_FEATURE_LEVEL_1..8 values (upstream NeuralNetworksTypes.h)
ANDROID_FEATURE_LEVELS = {27: 1, 28: 2, 29: 3, 30: 4, 31: 5, 1000006: 6, 1000007: 7, 1000008: 8}


def nnapi_feature_level(value: int) -> int:
    """The NNAPI feature level (1-8) of a feature level or of its ``ANEURALNETWORKS_FEATURE_LEVEL``
    value (Android API level 27-31, 1000006-1000008); anything else is a SelectorError."""
    if isinstance(value, int) and not isinstance(value, bool):
        if 1 <= value <= 8:
            return value
        if value in ANDROID_FEATURE_LEVELS:
            return ANDROID_FEATURE_LEVELS[value]
    raise SelectorError(f"nnapi: feature_level must be 1-8 or an Android API level 27-31 "
                        f"(or 1000006-1000008), got {value!r}")


def make_property(device: str = "nnapi", *, feature_level: int = 4) -> TableProperty:
    """The NNAPI device (see the module docstring)."""
    table = load_table(TABLE)
    lvl = nnapi_feature_level(feature_level)

    def qdq(ctx, node) -> bool:
        return ctx.in_qdq(node)

    def level(n: int):
        return setting(lvl >= n, f"needs NNAPI feature level {n} (device: {lvl})")

    rules = (_global_rules() + _opset_level_rules(level) + _quantized_rules()
             + _elementwise_rules() + _pool_rules(qdq) + _norm_cast_clip_concat_rules(lvl)
             + _conv_rules(lvl, qdq) + _gemm_matmul_rules(lvl, level)
             + _depth_flatten_gather_rules(level) + _pad_reduce_reshape_rules()
             + _resize_rules(level) + _slice_softmax_split_rules(lvl, qdq))
    notes = [
        N("*", "QDQ node units only for", "which nodes form a QDQ node unit is decided by ORT's "
                                          "QDQ selectors; not modelled"),
    ]
    return TableProperty(device, name="nnapi", table=table, rules=rules, notes=notes,
                         settings={"feature_level": lvl},
                         subgraph_rules=(_lone_copy_op, constant_inputs_only),
                         dtype_qualifiers={"QDQ": True, "weights": False})


# ---------------------------------------------------------------------- rule sections
def _global_rules() -> list:
    """The global conditions (every op)."""
    return [
        R("*", "fully static shape", all_static()),
        R("*", "by default input 0 must be float32", table_dtypes(0)),
        R("*", "node opset must be within", opset_at_most(21)),
        R("*", "device NNAPI feature level must be", decided_by("the per-op level rules")),
        R("*", "initializers stored as external data", no_external_initializers()),
        R("*", "quantized ops: scale and zero point must be constant", check(
            _per_tensor_scales, "quantization scale/zero point must be per-tensor")),
    ]


def _opset_level_rules(level) -> list:
    """The opset minimums and feature levels."""
    return [
        R(EACH, "opset >= 6", opset_at_least(6)),
        R(EACH, "opset >= 7", opset_at_least(7)),
        R(["Reshape"], "opset >= 5", opset_at_least(5)),
        R(["Slice"], "opset >= 10", opset_at_least(10)),
        R(["Resize"], "opset >= 11", opset_at_least(11)),
        R(["Split"], "opset >= 13", opset_at_least(13)),
        R(EACH, "requires NNAPI feature level 2", level(2)),
        R(EACH, "requires NNAPI feature level 3", level(3)),
        R(EACH, "requires NNAPI feature level 4", level(4)),
    ]


def _quantized_rules() -> list:
    """The quantized variants and QDQ node units."""
    return [
        R(EACH, QUANT_TEXT, check(lambda ctx, node: _quantized_ok(ctx, node) is None,
                                  lambda ctx, node: _quantized_ok(ctx, node))),
        R(EACH, "group supported", not_a_restriction("a QDQ form the EP also takes")),
        R("DequantizeLinear", "input must be uint8", dtype_in(0, ("uint8",))),
        R("QuantizeLinear", "output must be uint8", dtype_in(0, ("uint8",), out=True)),
    ]


def _elementwise_rules() -> list:
    """The elementwise ops."""
    ranks_le4 = first(rank(0, hi=4), rank(1, hi=4))
    return [
        R(["Sigmoid", "LeakyRelu"], "input rank must be 1..4", rank(0, lo=1, hi=4)),
        R(["Add", "Mul", "Sub", "Div", "Pow", "PRelu"], "both inputs rank <= 4", ranks_le4),
        R(["com.microsoft:QLinearAdd", "com.microsoft:QLinearMul"], "both inputs rank <= 4",
          first(rank(0, hi=4), rank(3, hi=4))),
        R("Pow", "both inputs must be float32", first(
            dtype_in(0, ("float32",)), dtype_in(1, ("float32",)))),
        R(["Max", "Min"], "exactly 2 inputs", inputs_between(2, 2)),
    ]


def _pool_rules(qdq) -> list:
    """The pooling ops (and LRN, DepthToSpace: rank 4)."""
    return [
        R(["AveragePool", "MaxPool", "GlobalAveragePool", "GlobalMaxPool",
           "com.microsoft:QLinearAveragePool", "LRN", "DepthToSpace"],
          "input rank must be 4", rank(0, allowed=(4,))),
        R("AveragePool", "count_include_pad must be 0", attr_is("count_include_pad", 0, 0)),
        R(["AveragePool", "MaxPool"], "storage_order must be 0", attr_is("storage_order", 0, 0)),
        R(["AveragePool", "MaxPool"], "kernel_shape must be 2D", kernel_2d()),
        R(["AveragePool", "MaxPool"], "ceil_mode must be 0", attr_is("ceil_mode", 0, 0)),
        R(["AveragePool", "MaxPool"], "dilations must be default", default_dilations()),
        R(["AveragePool", "MaxPool"], "single output", outputs_at_most(1)),
        R("AveragePool", "QDQ variant: input and output scale", when(
            qdq, check(lambda ctx, node: _qdq_same_scales(ctx, node),
                       "QDQ input and output scale/zero point differ"))),
        R("MaxPool", "float32 or uint8", dtype_in(0, ("float32", "uint8"))),
        R("com.microsoft:QLinearAveragePool", "same attribute limits as AveragePool", first(
            attr_is("count_include_pad", 0, 0), kernel_2d(), attr_is("ceil_mode", 0, 0),
            default_dilations())),
        R("com.microsoft:QLinearAveragePool", "input and output scale/zero point must be", check(
            lambda ctx, node: _values_equal(ctx, node, (1, 2), (3, 4)),
            "input and output scale/zero point differ")),
    ]


def _norm_cast_clip_concat_rules(lvl: int) -> list:
    """Normalization / Cast / Clip / Concat (and the rank 1..4 ops)."""
    return [
        R("BatchNormalization", "single output", outputs_at_most(1)),
        R("BatchNormalization", "input rank <= 4", rank(0, hi=4)),
        R("BatchNormalization", "spatial must be 1", attr_is("spatial", 1, 1)),
        R("BatchNormalization", "scale, B, mean, var", const(1, 2, 3, 4)),
        R("Cast", "'to' must be float32 or int32", attr_in("to", (1, 6))),
        R("Clip", "min/max must be readable constants", const(1, 2)),
        R("Clip", "(min,max) must be exactly (0,6) or (-1,1)", check(
            lambda ctx, node: clip_bounds(ctx, node) in (None, (0.0, 6.0), (-1.0, 1.0)),
            lambda ctx, node: f"(min, max) = {clip_bounds(ctx, node)} is not (0,6) or (-1,1)")),
        R(["Concat", "Flatten", "Gather", "Pad", "ReduceMean", "Reshape", "Squeeze", "Unsqueeze",
           "Transpose"], "input rank must be 1..4", rank(0, lo=1, hi=4)),
        R(["Concat", "Transpose"], "float32 or uint8", dtype_in(0, ("float32", "uint8"))),
        R("Concat", "quantized, feature level < 3", when(
            lambda c, n: lvl < 3 and c.in_qdq(n), check(
                lambda ctx, node: _qdq_same_scales(ctx, node, every_input=True),
                "quantized inputs/output do not share the first input's scale/zero point"))),
    ]


def _conv_rules(lvl: int, qdq) -> list:
    """Conv and QLinearConv."""
    return [
        R("Conv", "weight (input 1) must be a constant", const(1)),
        R("Conv", "weight must be rank 4", rank(1, allowed=(4,))),
        R("Conv", "non-default dilations need feature level 3", check(
            lambda ctx, node: _dilation_ok(ctx, node, lvl),
            "dilated Conv needs feature level 3 and group 1 or depthwise weights")),
        R(["Conv", "Gemm"], "QDQ variant: bias", when(qdq, const(2))),
        R("QLinearConv", "weight must be a constant initializer of rank 4", first(
            const(3), rank(3, allowed=(4,)))),
        R("QLinearConv", "bias must be a constant", const(8)),
        R("QLinearConv", "com.microsoft-domain QLinearConv", check(
            lambda ctx, node: node.domain in DEFAULT_DOMAINS, "com.microsoft QLinearConv")),
    ]


def _gemm_matmul_rules(lvl: int, level) -> list:
    """Gemm / MatMul and QLinearMatMul."""
    return [
        R("Gemm", "A and B rank 2", check(lambda ctx, node: _matmul_ranks_ok(ctx, node),
                                          "A and B must both be rank 2 or both > 2")),
        R("Gemm", "transA must be 0", attr_is("transA", 0, 0)),
        R("Gemm", "alpha must be 1.0", attr_is("alpha", 1.0, 1.0)),
        R("Gemm", "beta must be 1.0", attr_is("beta", 1.0, 1.0)),
        R("Gemm", "if transB == 0", when(lambda c, n: attr_of(n, "transB", 0) == 0, const(1))),
        R("Gemm", "C must be a bias of size N", check(
            lambda ctx, node: _gemm_bias_ok(ctx, node, lvl),
            "C must be a 1-D bias of size N, or shaped {1,...,1,N} at feature level >= 2")),
        R("MatMul", "A and B both rank 2", check(lambda ctx, node: _matmul_ranks_ok(ctx, node),
                                                 "A and B must both be rank 2 or both > 2")),
        R("MatMul", "2-D case: B (input 1)", when(
            lambda c, n: c.rank(n, 0) == 2 or c.rank(n, 1) == 2, const(1))),
        R("MatMul", "batch MatMul (rank > 2)", when(
            lambda c, n: (c.rank(n, 0) or 0) > 2 and (c.rank(n, 1) or 0) > 2, first(
                level(3), check(lambda ctx, node: not ctx.in_qdq(node), "batch MatMul in QDQ"),
                dtype_in(0, ("float32",)), check(
                    # (shapes known: both ranks are above 2)
                    lambda ctx, node: ctx.shape(node, 0)[:-2]  # type: ignore[index]
                    == ctx.shape(node, 1)[:-2],  # type: ignore[index]
                    "batch dims differ")))),
        R("QLinearMatMul", "A and B rank 2", first(rank(0, allowed=(2,)), rank(3, allowed=(2,)))),
        R("QLinearMatMul", "B (input 3) must be a constant", const(3)),
    ]


def _depth_flatten_gather_rules(level) -> list:
    """DepthToSpace / Flatten / Gather."""
    return [
        R("DepthToSpace", "mode must be DCR", attr_is("mode", "DCR", "DCR")),
        R("DepthToSpace", "NCHW layout needs feature level 3", level(3)),
        R("Flatten", "resulting 2D shape must not be 0x0", check(
            lambda ctx, node: ctx.shape(node, 0, out=True) != (0, 0), "output shape is 0x0")),
        R(["Gather", "Pad", "Slice"], "no zero-sized dims", no_zero_dims([0])),
        R("Gather", "indices (input 1) must be a constant", when(
            lambda c, n: c.dtype(n, 1) != "int32", const(1))),
    ]


def _pad_reduce_reshape_rules() -> list:
    """Pad / ReduceMean / Reshape."""
    return [
        R("Pad", "mode must be 'constant'", attr_is("mode", "constant", "constant")),
        R("Pad", "pads (input 1) must be a constant", const(1)),
        R("Pad", "pads values must be non-negative", non_negative(1, "pads")),
        R("Pad", "constant_value (input 2), if present", const(2)),
        R("ReduceMean", "axes (input 1, opset 18)", const(1)),
        R("ReduceMean", "noop_with_empty_axes=1 not supported",
          attr_is("noop_with_empty_axes", 0, 0)),
        R("Reshape", "shape (input 1) must be a constant", const(1)),
        R("Reshape", "a 0 in the shape tensor", value(1, _reshape_zeros_ok,
                                                      "a 0 in the shape where not allowed")),
    ]


def _resize_rules(level) -> list:
    """Resize."""
    return [
        R("Resize", "input rank must be 4", rank(0, allowed=(4,))),
        R("Resize", "mode must be 'linear' or 'nearest'", attr_in("mode", ("linear", "nearest"),
                                                                  "nearest")),
        R("Resize", "exclude_outside must be 0", attr_is("exclude_outside", 0, 0)),
        R("Resize", "linear: coordinate_transformation_mode", when(
            lambda c, n: attr_of(n, "mode", "nearest") == "linear",
            attr_in("coordinate_transformation_mode", ("half_pixel", "align_corners",
                                                        "asymmetric"), "half_pixel"))),
        R("Resize", "linear with half_pixel/align_corners needs", when(
            lambda c, n: attr_of(n, "mode", "nearest") == "linear" and attr_of(
                n, "coordinate_transformation_mode", "half_pixel") in ("half_pixel",
                                                                       "align_corners"),
            level(4))),
        R("Resize", "nearest: coordinate_transformation_mode 'asymmetric'", when(
            lambda c, n: attr_of(n, "mode", "nearest") == "nearest", first(
                attr_is("coordinate_transformation_mode", "asymmetric", "half_pixel"),
                attr_is("nearest_mode", "floor", "round_prefer_floor")))),
        R("Resize", "opset >= 18: antialias=0", first(
            attr_is("antialias", 0, 0), attr_absent("axes"),
            attr_is("keep_aspect_ratio_policy", "stretch", "stretch"))),
        R("Resize", "scales (input 2) or sizes (input 3) must be", resize_const()),
        R("Resize", "scales for N and C must be 1.0", check(
            _resize_scales_ok, "scales for N/C must be 1 and 1/scale must divide H/W")),
        R("Resize", "sizes must keep N and C unchanged", value(
            # (None is tested first: mypy does not narrow a call made twice)
            3, lambda v, c, n: c.shape(n, 0) is None or list(v.ravel()[:2]) == list(
                c.shape(n, 0)[:2]), "sizes change N or C")),  # type: ignore[index]
        R("Resize", "NCHW input needs feature level > 2", level(3)),
        R("Resize", "float32 or uint8", dtype_in(0, ("float32", "uint8"))),
    ]


def _slice_softmax_split_rules(lvl: int, qdq) -> list:
    """Slice / Softmax / Split / Squeeze / Unsqueeze / Transpose."""
    return [
        R("Slice", "input rank <= 4", rank(0, hi=4)),
        R("Slice", "starts, ends, axes, steps", const(1, 2, 3, 4)),
        R("Softmax", "opset >= 13: input rank <= 4", when(
            lambda c, n: (c.opset or 13) >= 13, rank(0, hi=4))),
        R("Softmax", "feature level < 3: rank must be 2 or 4", when(
            lambda c, n: lvl < 3, rank(0, allowed=(2, 4)), last_axis())),
        R("Softmax", "QDQ variant: output scale must be 1/256", when(qdq, check(
            _softmax_out_scale_ok, "QDQ output scale must be 1/256 with zero point 0"))),
        R("Split", "split (input 1), if present", const(1)),
        R("Split", "split entries must sum to the axis dim and all be equal", value(
            1, _split_equal_ok, "split entries must be equal and sum to the axis dim")),
        R("Split", "without split input: #outputs must evenly divide", when(
            lambda c, n: not c.has_input(n, 1), check(
                lambda ctx, node: not isinstance(axis_dim(ctx, node), int)
                or axis_dim(ctx, node) % max(1, len(node.outputs)) == 0,
                "#outputs does not divide the axis dim"))),
        R("Split", "opset >= 18 without split input", when(
            lambda c, n: (c.opset or 0) >= 18 and not c.has_input(n, 1), check(
                lambda ctx, node: node.attrs.get("num_outputs") == len(node.outputs),
                "num_outputs must equal the number of outputs"))),
        R(["Squeeze", "Unsqueeze"], "axes (input 1, opset >= 13)", const(1)),
    ]


# ---------------------------------------------------------------------- helpers
def _scalar(ctx, node, pos) -> bool:
    n = numel(ctx.shape(node, pos)) if ctx.has_input(node, pos) else 1
    return n is None or n == 1


def _per_tensor_scales(ctx, node) -> bool:
    """Scale/zero-point inputs of quantized ops are scalars (QLinearConv weights may be
    per-channel)."""
    key = default_key(node)
    if key not in _QLINEAR_DATA:
        return True
    entry = ctx.prop.table.ops.get(key)
    data, weights = _QLINEAR_DATA[key]
    skip = set(data) | set(weights) | {8}
    if key == "QLinearConv":
        skip |= {4, 5}
    return all(_scalar(ctx, node, p) for p in entry.value_inputs if p not in skip)


def _quantized_ok(ctx, node):
    """The shared 'quantized variant' rule: constant scales/zero points, uint8 data (int8 only
    for Conv/MatMul/Gemm weights). For float ops it applies to the QDQ unit around them."""
    key = default_key(node)
    if key in _QLINEAR_DATA:
        entry = ctx.prop.table.ops[key]
        r = const(*entry.value_inputs)(ctx, node)
        if r:
            return r
        data, weights = _QLINEAR_DATA[key]
        for p in data:
            if ctx.dtype(node, p) not in (None, "uint8"):
                return f"input {p} dtype {ctx.dtype(node, p)} is not uint8"
        for p in weights:
            if ctx.dtype(node, p) not in (None, "uint8", "int8"):
                return f"weight input {p} dtype {ctx.dtype(node, p)} is not uint8/int8"
        if key != "DequantizeLinear" and ctx.dtype(node, 0, out=True) not in (None, "uint8"):
            return f"output dtype {ctx.dtype(node, 0, out=True)} is not uint8"
        return None
    for p in range(len(node.inputs)):  # a float op inside a QDQ unit
        dq = ctx.dq_producer(node, p)
        if dq is None:
            continue
        r = const(1, 2)(ctx, dq)
        if r:
            return f"DequantizeLinear {dq.name!r} feeding input {p}: {r}"
        ok = ("uint8", "int8") if (p == 1 and node.op_type in ("Conv", "MatMul", "Gemm")) \
            else ("uint8",)
        if ctx.dtype(dq, 0) not in (None,) + ok:
            return f"input {p} is quantized as {ctx.dtype(dq, 0)}, not {'/'.join(ok)}"
    for q in ctx.consumers(node.outputs[0] if node.outputs else ""):
        if q.op_type == "QuantizeLinear":
            r = const(1, 2)(ctx, q)
            if r:
                return f"QuantizeLinear {q.name!r}: {r}"
            if ctx.dtype(q, 0, out=True) not in (None, "uint8"):
                return f"output is quantized as {ctx.dtype(q, 0, out=True)}, not uint8"
    return None


def _same(a, b) -> bool:
    if a is None or b is None:
        return True
    return a.shape == b.shape and bool((a == b).all())


def _qdq_same_scales(ctx, node, every_input: bool = False) -> bool:
    """Input DQ(s) and output Q share scale and zero point (unreadable passes)."""
    q = ctx.q_consumer(node)
    dqs = [ctx.dq_producer(node, p) for p in (range(len(node.inputs)) if every_input else [0])]
    dqs = [d for d in dqs if d is not None]
    if not dqs:
        return True
    ref = dqs[0]
    others = dqs[1:] + ([q] if q is not None else [])
    return all(_same(ctx.input_value(ref, 1), ctx.input_value(o, 1))
               and _same(ctx.input_value(ref, 2), ctx.input_value(o, 2)) for o in others)


def _values_equal(ctx, node, left, right) -> bool:
    return all(_same(ctx.input_value(node, a), ctx.input_value(node, b))
               for a, b in zip(left, right))


def _dilation_ok(ctx, node, lvl: int) -> bool:
    dil = node.attrs.get("dilations")
    if not dil or all(d == 1 for d in dil):
        return True
    if lvl < 3:
        return False
    group = attr_of(node, "group", 1)
    w = ctx.shape(node, 1)
    x = ctx.shape(node, 0)
    depthwise = dim_at(w, 1) == 1 and dim_at(x, 1) == group
    return group == 1 or depthwise


def _matmul_ranks_ok(ctx, node) -> bool:
    a, b = ctx.rank(node, 0), ctx.rank(node, 1)
    if a is None or b is None:
        return True
    return (a == 2 and b == 2) or (a > 2 and b > 2)


def _gemm_bias_ok(ctx, node, lvl: int) -> bool:
    """C is a vector of N, or (feature level >= 2) shaped ``{1, ..., 1, N}``; never a scalar."""
    if not ctx.has_input(node, 2):
        return True
    c, n = ctx.shape(node, 2), dim_at(ctx.shape(node, 0, out=True), -1)
    if c is None:
        return True
    if len(c) == 0 or (len(c) > 1 and lvl < 2) or any(d != 1 for d in c[:-1]):
        return False
    return not isinstance(n, int) or not isinstance(c[-1], int) or c[-1] == n


def _lone_copy_op(subgraph) -> str | None:
    """The EP drops a partition that is a single Reshape, Flatten or Identity (a copy)."""
    if len(subgraph) == 1 and subgraph.op_types[0] in ("Reshape", "Flatten", "Identity"):
        return f"a partition of a single {subgraph.op_types[0]} only copies data"
    return None


def _reshape_zeros_ok(v, ctx, node) -> bool:
    v = v.ravel().tolist()
    if 0 not in v:
        return True
    if attr_of(node, "allowzero", 0) == 1:
        return False
    shape = ctx.shape(node, 0) or ()
    return all(not (x == 0 and i < len(shape) and shape[i] == 0) for i, x in enumerate(v))


def _resize_scales_ok(ctx, node) -> bool:
    s = resize_scales(ctx, node)
    if not s or len(s) != 4:
        return True
    if not (float_close(s[0], 1) and float_close(s[1], 1)):
        return False
    shape = ctx.shape(node, 0)
    return downscale_divides(s[2:], (shape or (None,) * 4)[2:])


def _softmax_out_scale_ok(ctx, node) -> bool:
    q = ctx.q_consumer(node)
    if q is None:
        return True
    scale, zp = ctx.input_value(q, 1), ctx.input_value(q, 2)
    if scale is not None and not float_close(scale.ravel()[0], 1 / 256):
        return False
    return zp is None or int(zp.ravel()[0]) == 0


def _split_equal_ok(v, ctx, node) -> bool:
    v = v.ravel().tolist()
    dim = axis_dim(ctx, node)
    return len(set(v)) <= 1 and (not isinstance(dim, int) or sum(v) == dim)
