"""XNNPACK (CPU, NHWC kernels) through ONNX Runtime's XNNPACK EP: 2D conv/pool/resize/gemm.

The op table (``xnnpack_ep.json`` in this package's ``data`` folder) transcribes the XNNPACK
EP's support checker and kernels in ONNX Runtime 1.22 (upstream node_support_checker.cc).
Setting: ``fp16`` — the build has XNNPACK fp16 support (``XNNPACK_FP16_SUPPORTED``; default
False, so float16 inputs are refused).

Only ONNX-domain nodes are checked: the com.microsoft QLinearConvTranspose, QLinearAveragePool
and QLinearSoftmax rows describe the kernels the EP builds from QDQ groups, so such a node
already in the model is refused.

Fusion: Relu and Clip are taken only fused onto a preceding supported non-QDQ Conv, MaxPool or
AveragePool (patterns ``Conv -> Relu`` ...). ``select`` decides that from the producer; the
selector's ``filter`` drops a Relu/Clip whose producer is not in the same subgraph, and
``create_subgraph_node`` rejects such a subgraph; ``pattern_groups(graph, fusion_only=True)``
gives the pairs as must-stay-together groups for engines.
"""

from __future__ import annotations

from clusterkit.selectors._attr_checks import (
    attr_absent,
    attr_in,
    attr_is,
    default_dilations,
    kernel_2d,
)
from clusterkit.selectors._checks import check, first, opset_at_least, value, when
from clusterkit.selectors._facts import attr_of, float_close, norm_axis, numel
from clusterkit.selectors._op_rules import (
    downscale_divides,
    last_axis,
    output_hw_above_one,
    resize_const,
    resize_scales,
)
from clusterkit.selectors._optable import load_table
from clusterkit.selectors._property import TableProperty
from clusterkit.selectors._rules import Fusion, R, Rule, in_pattern
from clusterkit.selectors._tensor_checks import (
    const,
    dtype_in,
    inputs_between,
    no_zero_dims,
    outputs_used_at_most,
    rank,
    static,
    table_dtypes,
)

TABLE = "xnnpack_ep.json"
CONVS = ["Conv", "ConvTranspose", "QLinearConv", "com.microsoft:QLinearConvTranspose"]
POOLS = ["MaxPool", "AveragePool", "com.microsoft:QLinearAveragePool"]
AUTO_PAD = ("NOTSET", "VALID", "SAME_UPPER")


def make_property(device: str = "xnnpack", *, fp16: bool = False) -> TableProperty:
    """The XNNPACK device (see the module docstring)."""
    table = load_table(TABLE)

    def non_qdq(ctx, match) -> bool:
        return not ctx.in_qdq(ctx.graph.nodes[match[0]])

    relu = Fusion("Relu", (0, 2, 4), where=non_qdq)
    clip = Fusion("Clip", (1, 3, 5), where=non_qdq)

    rules = (_global_rules(fp16) + _conv_rules() + _pool_rules() + _softmax_rules()
             + _resize_rules() + _gemm_matmul_rules() + _fused_rules(relu, clip))
    rules.append(R("*", "only ONNX-domain nodes go through the checker", check(
        lambda ctx, node: node.domain in ("", "ai.onnx"),
        "the EP checks only ONNX-domain nodes; it builds com.microsoft QLinear ops itself "
        "from QDQ groups")))
    return TableProperty(device, name="xnnpack", table=table, rules=rules,
                         settings={"fp16": fp16}, fusions=[relu, clip], dtype_field=True,
                         dtype_qualifiers={"XNNPACK_FP16_SUPPORTED": fp16})


# ---------------------------------------------------------------------- rules by section
def _global_rules(fp16: bool) -> list[Rule]:
    """Global conditions, checked for every op."""
    return [
        R("*", "if the build lacks XNNPACK fp16 support", when(
            lambda c, n: not fp16, check(lambda ctx, node: ctx.dtype(node, 0) != "float16",
                                         "float16 input without XNNPACK fp16 support"))),
        R("*", "quantized (QLinear*/QDQ) ops: quantization scales", check(
            lambda ctx, node: _qdq_scales_const(ctx, node),
            "QDQ scales/zero points must be constant")),
    ]


def _conv_rules() -> list[Rule]:
    """The Conv family."""

    def chw_static(ctx, node):
        return static(0, dims=range(1, ctx.rank(node, 0) or 1))(ctx, node)

    return [
        R(CONVS, "opset >= 11", opset_at_least(11)),
        R(CONVS, "input X must be rank 3 or 4", rank(0, allowed=(3, 4))),
        R(CONVS, "C, H (and W for rank 4) dims of X", chw_static),
        R(["Conv", "ConvTranspose"], "weight (input 1) must be a constant", const(1)),
        R(["Conv", "ConvTranspose"], "bias, if present", const(2)),
        R(CONVS[2:], "weight (input 1) must be a constant", const(3)),
        R(CONVS[2:], "bias, if present", const(8)),
        R(CONVS[2:], "scales and zero points must be constant", const(1, 2, 4, 5, 6, 7)),
        R(CONVS, "if 'pads' is not given, auto_pad", when(
            lambda c, n: "pads" not in n.attrs, attr_in("auto_pad", AUTO_PAD, "NOTSET"))),
        R(CONVS[2:], "quantized: (x,w,out) must form", check(
            _qconv_types_ok, "unsupported (x, w, y) quantization types")),
    ]


def _pool_rules() -> list[Rule]:
    """Pooling."""
    return [
        R("MaxPool", "opset >= 8", opset_at_least(8)),
        R("AveragePool", "opset >= 7", opset_at_least(7)),
        R("MaxPool", "float32, float16(if built), uint8 or int8", table_dtypes(0)),
        R("AveragePool", "float32, float16 or uint8", table_dtypes(0)),
        R(POOLS, "input must be rank 4", rank(0, allowed=(4,))),
        R(POOLS, "C, H, W dims must be known", static(0, dims=(1, 2, 3))),
        R(POOLS, "ceil_mode must be 0", attr_is("ceil_mode", 0, 0)),
        R(POOLS, "auto_pad NOTSET, VALID or SAME_UPPER only", attr_in("auto_pad", AUTO_PAD,
                                                                      "NOTSET")),
        R(POOLS, "kernel_shape must be 2D and not 1x1", kernel_2d(not_1x1=True)),
        R("MaxPool", "optional Indices output must not be used", outputs_used_at_most(1)),
        R("MaxPool", "input and output quant types must match", check(
            _qdq_types_match, "QDQ input and output quantization types differ")),
        R("AveragePool", "count_include_pad must be 0", check(
            lambda ctx, node: attr_of(node, "count_include_pad", 0) == (1 if ctx.in_qdq(node)
                                                                      else 0),
            "count_include_pad must be 0 (float) / 1 (quantized)")),
        R("AveragePool", "dilations must be default", default_dilations()),
        R("com.microsoft:QLinearAveragePool", "input and output must be uint8", first(
            dtype_in(0, ("uint8",)), dtype_in(0, ("uint8",), out=True))),
        R("com.microsoft:QLinearAveragePool", "scales and zero points", const(1, 2, 3, 4)),
    ]


def _softmax_rules() -> list[Rule]:
    """Softmax."""
    return [
        R("Softmax", "float32, float16 or uint8", table_dtypes(0)),
        R("Softmax", "input rank >= 1", rank(0, lo=1)),
        R("Softmax", "opset >= 13: axis must be the last dim", when(
            lambda c, n: (c.opset or 13) >= 13, last_axis(-1))),
        R("Softmax", "opset >= 13: last dim must be known", check(
            _softmax_dims_known, "the softmax dims are not known")),
        R("com.microsoft:QLinearSoftmax", "input must be uint8", dtype_in(0, ("uint8",))),
        R("com.microsoft:QLinearSoftmax", "scales and zero points must be constant",
          const(1, 2, 3, 4)),
        R("com.microsoft:QLinearSoftmax", "output scale must be 1/256", first(
            value(3, lambda v, c, n: abs(float(v.ravel()[0]) - 1 / 256) <= 1e-4,
                  "output scale is not 1/256"),
            value(4, lambda v, c, n: int(v.ravel()[0]) == 0, "output zero point is not 0"))),
    ]


def _resize_rules() -> list[Rule]:
    """Resize."""
    return [
        R("Resize", "opset >= 10", opset_at_least(10)),
        R("Resize", "float32, float16(if built), uint8, int8", table_dtypes(0)),
        R("Resize", "input must be rank 4", rank(0, allowed=(4,))),
        R("Resize", "channel dim must be known and > 0", check(
            lambda ctx, node: isinstance(ctx.dim(node, 0, 1), int) and ctx.dim(node, 0, 1) > 0,
            "channel dim is not known and > 0")),
        R("Resize", "scales or sizes must be a constant", resize_const()),
        R("Resize", "scales[1] (channel) must be 1.0", check(
            lambda ctx, node: len(resize_scales(ctx, node) or [1, 1]) < 2
            or float_close((resize_scales(ctx, node) or [1, 1])[1], 1), "channel scale != 1")),
        R("Resize", "downscaling requires 1/scale to divide H and W", check(
            _downscale_divides, "1/scale does not divide H/W")),
        R("Resize", "sizes[1] must equal the input channel count", value(
            3, lambda v, c, n: v.size < 2 or not isinstance(c.dim(n, 0, 1), int)
            or int(v.ravel()[1]) == c.dim(n, 0, 1), "sizes[1] differs from the channel count")),
        R("Resize", "mode must be 'linear'", attr_is("mode", "linear", "nearest")),
        R("Resize", "antialias must be 0", attr_is("antialias", 0, 0)),
        R("Resize", "no 'axes' attribute", attr_absent("axes")),
        R("Resize", "keep_aspect_ratio_policy must be 'stretch'",
          attr_is("keep_aspect_ratio_policy", "stretch", "stretch")),
        R("Resize", "extrapolation_value must be 0", attr_is("extrapolation_value", 0.0, 0.0)),
        R("Resize", "coordinate_transformation_mode asymmetric", check(
            _resize_ctm_ok, "unsupported coordinate_transformation_mode")),
        R("Resize", "exclude_outside must be 0", attr_is("exclude_outside", 0, 0)),
    ]


def _gemm_matmul_rules() -> list[Rule]:
    """Gemm and MatMul."""
    return [
        R("Gemm", "alpha must be 1.0", attr_is("alpha", 1.0, 1.0)),
        R("Gemm", "beta must be 1.0", attr_is("beta", 1.0, 1.0)),
        R(["Gemm", "MatMul"], "A must be float32 or float16", table_dtypes(0)),
        R(["Gemm", "MatMul"], "B (input 1) must be a constant", const(1)),
        R("Gemm", "C (input 2), if present", const(2)),
        R("Gemm", "A, B, C must have rank <= 2", first(rank(0, hi=2), rank(1, hi=2),
                                                       rank(2, hi=2))),
        R("Gemm", "C's first dim must match", check(_gemm_c_ok, "C's first dim matches neither "
                                                                "of B's dims")),
        R("MatMul", "exactly 2 inputs", inputs_between(2, 2)),
        R("MatMul", "A and B rank <= 2", first(rank(0, hi=2), rank(1, hi=2))),
        R("MatMul", "A and B dims must be non-zero", no_zero_dims([0, 1])),
    ]


def _fused_rules(relu: Fusion, clip: Fusion) -> list[Rule]:
    """Fused-only activations: Relu and Clip only after a supported Conv or pool."""
    fused_msg = "taken only fused after a supported non-QDQ Conv/MaxPool/AveragePool"
    return [
        R(["Relu"], "only as a fused activation", in_pattern(relu, fused_msg), fused=True),
        R(["Clip"], "only as a fused activation", in_pattern(clip, fused_msg), fused=True),
        R("Clip", "min (input 1) and max (input 2) must be constant", const(1, 2)),
    ]


# ---------------------------------------------------------------------- helpers
def _qdq_scales_const(ctx, node) -> bool:
    """Scales/zero points of the DQ nodes feeding and the Q node after a QDQ unit are constant."""
    if not ctx.in_qdq(node):
        return True
    dqs = [ctx.dq_producer(node, p) for p in range(len(node.inputs))]
    users = ctx.consumers(node.outputs[0]) if node.outputs else []
    qs = [u for u in users if u.op_type == "QuantizeLinear"]
    return all(const(1, 2)(ctx, q) is None for q in [d for d in dqs if d is not None] + qs)


def _qconv_types_ok(ctx, node) -> bool:
    x, w, y = ctx.dtype(node, 0), ctx.dtype(node, 3), ctx.dtype(node, 0, out=True)
    if None in (x, w, y):
        return True
    if (x, w, y) not in (("uint8", "uint8", "uint8"), ("int8", "int8", "int8")):
        return False
    per_channel = (numel(ctx.shape(node, 4)) or 1) > 1
    if per_channel and (x != "int8" or node.op_type == "QLinearConvTranspose"):
        return False
    return True


def _qdq_types_match(ctx, node) -> bool:
    if not ctx.in_qdq(node):
        return True
    dq, q = ctx.producer(node, 0), ctx.q_consumer(node)
    if q is None:
        return True
    a, b = ctx.dtype(dq, 0), ctx.dtype(q, 0, out=True)
    return a is None or b is None or a == b


def _softmax_dims_known(ctx, node) -> bool:
    s = ctx.shape(node, 0)
    if s is None:
        return False
    if (ctx.opset or 13) >= 13:
        return isinstance(s[-1], int) if s else True
    axis = norm_axis(attr_of(node, "axis", 1), len(s))
    return all(isinstance(d, int) for d in s[axis:])


def _downscale_divides(ctx, node) -> bool:
    s = resize_scales(ctx, node)
    shape = ctx.shape(node, 0)
    if not s or len(s) != 4 or shape is None:
        return True
    return downscale_divides(s[2:], shape[2:])


def _resize_ctm_ok(ctx, node) -> bool:
    ctm = attr_of(node, "coordinate_transformation_mode", "half_pixel")
    if ctm in ("asymmetric", "half_pixel", "align_corners"):
        return True
    if ctm == "pytorch_half_pixel":
        return output_hw_above_one(ctx, node)
    return False


def _gemm_c_ok(ctx, node) -> bool:
    if not ctx.has_input(node, 2):
        return True
    c, b = ctx.shape(node, 2), ctx.shape(node, 1)
    if not c or b is None or len(b) != 2:
        return True
    return c[0] in (b[0], b[1])
