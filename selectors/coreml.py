"""Apple CoreML through ONNX Runtime's CoreML EP (MLProgram or NeuralNetwork format).

The op table (``coreml_ep.json`` in this package's ``data`` folder) transcribes the CoreML EP's
op builders in ONNX Runtime 1.22 and the newer MLProgram documentation. Settings:

- ``model_format``: ``"MLProgram"`` (default; CoreML 5+, the format ORT recommends) or
  ``"NeuralNetwork"``. Decides which ops exist (``formats``), float16 inputs (MLProgram only) and
  the format-specific conditions (e.g. Conv/MatMul weights must be constant for NeuralNetwork).
- ``coreml_version``: CoreML version of the target OS (default 7 = iOS 17 / macOS 14); gates
  Conv ``SAME_LOWER`` (>= 6), DCR DepthToSpace in float16 (>= 7), float16 Slice (>= 6).
- ``static_shapes_only``: ORT's ``RequireStaticInputShapes`` option (default False).

Fusion: in NeuralNetwork format a Cast is taken only fused after a supported ArgMax (pattern
``ArgMax -> Cast``); the other documented patterns are exposed by ``pattern_matches``.
"""

from __future__ import annotations

from typing import Callable

from clusterkit.errors import SelectorError
from clusterkit.selectors._attr_checks import attr_absent, attr_in, attr_is, default_dilations
from clusterkit.selectors._checks import (
    check,
    decided_by,
    first,
    non_negative,
    not_a_restriction,
    opset_at_least,
    opset_at_most,
    value,
    when,
)
from clusterkit.selectors._facts import attr_of, dim_at, norm_axis, numel
from clusterkit.selectors._op_rules import (
    axis_dim,
    clip_bounds,
    downscale_divides,
    no_noop_on_empty_axes,
    output_hw_above_one,
    resize_const,
    resize_scales,
    shape_slice_nonempty,
    slice_is_empty,
)
from clusterkit.selectors._optable import load_table
from clusterkit.selectors._property import TableProperty
from clusterkit.selectors._rules import EACH, Fusion, R, Rule, in_pattern
from clusterkit.selectors._tensor_checks import (
    all_inputs,
    const,
    dtype_in,
    no_external_initializers,
    no_zero_dims,
    outputs_at_most,
    rank,
    same_dtype,
    static,
    table_dtypes,
)

TABLE = "coreml_ep.json"
FORMATS = ("MLProgram", "NeuralNetwork")


def make_property(device: str = "coreml", *, model_format: str = "MLProgram",
                  coreml_version: int = 7, static_shapes_only: bool = False) -> TableProperty:
    """The CoreML device (see the module docstring for the settings)."""
    if model_format not in FORMATS:
        raise SelectorError(f"coreml: model_format must be one of {FORMATS}, got {model_format!r}")
    table = load_table(TABLE)
    nn = model_format == "NeuralNetwork"
    ml = not nn

    def is_nn(ctx, node) -> bool:
        return nn

    def is_ml(ctx, node) -> bool:
        return ml

    def in_format(entry) -> bool:
        return model_format in entry.extra.get("formats", FORMATS)

    cast_fusion = Fusion("Cast", (0,), where=lambda ctx, m: _cast_after_argmax(ctx, m))

    rules = (_global_rules(static_shapes_only) + _opset_rules() + _elementwise_rules()
             + _pool_rules(is_nn) + _reduce_rules(is_nn) + _norm_rules()
             + _argmax_cast_rules(is_nn, is_ml, cast_fusion) + _clip_concat_rules(is_nn)
             + _conv_rules(is_nn, ml, coreml_version) + _layout_rules(is_nn, ml, coreml_version)
             + _gemm_matmul_rules(is_nn, is_ml) + _newer_ml_rules(is_nn) + _pad_rules()
             + _reshape_rules() + _resize_rules(nn, is_nn)
             + _shape_slice_rules(nn, is_nn, coreml_version) + _softmax_split_rules())
    return TableProperty(
        device, name="coreml", table=table, rules=rules, notes=NOTES, settings={
            "model_format": model_format, "coreml_version": coreml_version,
            "static_shapes_only": static_shapes_only},
        available=in_format, unavailable_reason=f"not available in {model_format} format",
        dtype_qualifiers={"MLProgram only": ml},
        fusions=[cast_fusion] if nn else [],
        extra_value_inputs={"Conv": (1, 2), "MatMul": (1,)} if nn else None)


_CAST_TYPES = ("int32", "int64", "float32", "float16")

NOTES: list = []


# ---------------------------------------------------------------------- rules by section
def _global_rules(static_shapes_only: bool) -> list[Rule]:
    """Global conditions, checked for every op."""
    return [
        R("*", "every input must have a known shape", first(
            all_inputs(lambda p: rank(p, required=True)),
            when(lambda c, n: static_shapes_only, all_inputs(lambda p: static(p))))),
        R("*", "no input dim may exceed 16384", check(
            # (every tensor a node reads is in the graph: Graph.build checks)
            lambda ctx, node: all(not isinstance(d, int) or d <= 16384
                                  for name in node.inputs if name
                                  for d in (ctx.tensor(name).shape or ())),  # type: ignore[union-attr]
            "an input dim exceeds 16384")),
        R("*", "no zero-sized dims", no_zero_dims()),
        R("*", "input rank must be <= 5", all_inputs(lambda p: rank(p, hi=5))),
        R("*", "by default input 0 must be float32", table_dtypes(0)),
        R("*", "node opset must be within", opset_at_most(21)),
        R("*", "initializers stored as external data", no_external_initializers()),
        R("*", "when MLProgram is requested", decided_by("op availability (formats)")),
        R(EACH, "format only", decided_by("op availability (formats)")),
    ]


def _opset_rules() -> list[Rule]:
    """Opset minimums."""
    return [
        R(["Add", "Sub", "Mul", "Div", "Pow", "Max"], "opset >= 7", opset_at_least(7)),
        R(["Sigmoid", "Tanh", "Relu", "LeakyRelu"], "opset >= 6", opset_at_least(6)),
        R(["BatchNormalization"], "opset >= 7", opset_at_least(7)),
        R(["Reshape"], "opset >= 5", opset_at_least(5)),
        R(["Pad", "Resize"], "opset >= 11", opset_at_least(11)),
        R(["Slice"], "opset >= 10", opset_at_least(10)),
        R(["Split"], "opset >= 13", opset_at_least(13)),
    ]


def _elementwise_rules() -> list[Rule]:
    """Elementwise ops and activations."""
    return [
        R("Pow", "both inputs must have the same dtype", same_dtype([0, 1])),
        R("PRelu", "X must be rank 3 or 4", rank(0, allowed=(3, 4))),
        R("PRelu", "channel dim of X", static(0, dims=[-3])),
        R("PRelu", "slope (input 1) must be a constant", const(1)),
        R("PRelu", "slope must have shape [C,1,1]", check(_prelu_slope_shape,
                                                          "slope shape is not [C,1,1] or [1]")),
        R("PRelu", "single-element slope not supported", check(
            lambda ctx, node: not (numel(ctx.shape(node, 1)) == 1
                                   and ctx.dim(node, 0, -3) == 1),
            "single-element slope with C == 1")),
    ]


def _pool_rules(is_nn: Callable[..., bool]) -> list[Rule]:
    """Pooling."""
    return [
        R(["AveragePool", "MaxPool"], "input must be rank 4", rank(0, allowed=(4,))),
        R(["AveragePool", "MaxPool"], "storage_order=1 not supported",
          attr_in("storage_order", (0,), 0)),
        R(["AveragePool", "MaxPool"], "kernel_shape must have 2 entries", check(
            lambda ctx, node: len(attr_of(node, "kernel_shape", ())) == 2,
            "kernel_shape must have 2 entries")),
        R(["AveragePool", "MaxPool"], "dilations must be the default", default_dilations()),
        R(["AveragePool", "MaxPool"], "ceil_mode=1 not supported with NeuralNetwork",
          when(is_nn, attr_is("ceil_mode", 0, 0))),
        R("MaxPool", "only one output", outputs_at_most(1)),
        R(["GlobalAveragePool", "GlobalMaxPool"], "input must be rank 4", rank(0, allowed=(4,))),
    ]


def _reduce_rules(is_nn: Callable[..., bool]) -> list[Rule]:
    """Reductions."""
    return [
        R(["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd"],
          "axes (input 1), if present, must be a constant", const(1)),
        R(["ReduceSum", "ReduceMean"], "empty axes with noop_with_empty_axes=1", when(
            is_nn, no_noop_on_empty_axes())),
    ]


def _norm_rules() -> list[Rule]:
    """Normalization."""
    return [
        R("BatchNormalization", "single output only", outputs_at_most(1)),
        R("BatchNormalization", "input must be rank 4", rank(0, allowed=(4,))),
        R("BatchNormalization", "spatial must be 1", attr_is("spatial", 1, 1)),
        R("BatchNormalization", "scale, B, mean, var", const(1, 2, 3, 4)),
        R(["GroupNormalization", "LayerNormalization", "InstanceNormalization"],
          "single output only", outputs_at_most(1)),
        R(["GroupNormalization", "LayerNormalization", "InstanceNormalization"],
          "scale (input 1) must be a constant", const(1, required=True)),
        R(["GroupNormalization", "LayerNormalization", "InstanceNormalization"],
          "bias (input 2), if present", const(2)),
        R(["GroupNormalization", "LayerNormalization", "InstanceNormalization"],
          "inputs 0,1,2 must share one dtype", first(
              same_dtype([0, 1, 2]), dtype_in(0, ("float32", "float16")))),
        R(["GroupNormalization", "LayerNormalization"], "stash_type must be 1",
          attr_is("stash_type", 1, 1)),
    ]


def _argmax_cast_rules(is_nn: Callable[..., bool], is_ml: Callable[..., bool],
                       cast_fusion: Fusion) -> list[Rule]:
    """ArgMax and Cast (a NeuralNetwork Cast only fused after an ArgMax)."""
    return [
        R("ArgMax", "select_last_index must be 0", attr_is("select_last_index", 0, 0)),
        R("ArgMax", "NeuralNetwork: rejected if it has several consumers", when(
            is_nn, check(_argmax_consumers_ok, "several consumers, one a Cast to int32"))),
        R("Cast", "MLProgram: input and output dtypes", when(is_ml, first(
            dtype_in(0, _CAST_TYPES), dtype_in(0, _CAST_TYPES, out=True)))),
        R("Cast", "NeuralNetwork: only supported directly after", when(
            is_nn, in_pattern(cast_fusion, "NeuralNetwork: Cast is taken only int64->int32 "
                                           "directly after a supported ArgMax")), fused=True),
        R("Cast", "at least one input edge", check(
            lambda ctx, node: ctx.producer(node, 0) is not None,
            "input comes straight from a graph input/initializer")),
    ]


def _clip_concat_rules(is_nn: Callable[..., bool]) -> list[Rule]:
    """Clip and Concat."""
    return [
        R("Clip", "must be constant initializers", const(1, 2)),
        R("Clip", "min/max must be float32 or float16", first(
            dtype_in(1, ("float32", "float16")), dtype_in(2, ("float32", "float16")))),
        R("Clip", "min must differ from max", check(
            lambda ctx, node: (clip_bounds(ctx, node) or (0, 1))[0]
            != (clip_bounds(ctx, node) or (0, 1))[1], "min equals max")),
        R("Concat", "at least 2 inputs", check(lambda ctx, node: sum(map(bool, node.inputs)) >= 2,
                                               "needs at least 2 inputs")),
        R("Concat", "NeuralNetwork: input must be rank 4", when(is_nn, first(
            rank(0, allowed=(4,)), check(lambda ctx, node: ctx.rank(node, 0) is None or
                                         norm_axis(attr_of(node, "axis", 0), 4) == 1,
                                         "NeuralNetwork concatenates on the channel axis only")))),
    ]


def _conv_rules(is_nn: Callable[..., bool], ml: bool, coreml_version: int) -> list[Rule]:
    """Conv and ConvTranspose."""
    return [
        R("Conv", "weight must be rank 3 or 4", rank(1, allowed=(3, 4))),
        R("Conv", "NeuralNetwork: weight (input 1) must be a constant", when(is_nn, const(1))),
        R(["Conv", "ConvTranspose"], "bias (input 2), if present", const(2)),
        R(["Conv", "ConvTranspose"], "kernel_shape, if given, must equal", check(
            _kernel_matches_weight, "kernel_shape differs from the weight's spatial dims")),
        R("Conv", "MLProgram with CoreML < 6", when(
            lambda c, n: ml and coreml_version < 6,
            attr_in("auto_pad", ("NOTSET", "VALID", "SAME_UPPER"), "NOTSET"))),
        R("ConvTranspose", "weight (input 1) must be a constant", const(1)),
        R("ConvTranspose", "auto_pad SAME_UPPER/SAME_LOWER not supported",
          attr_in("auto_pad", ("NOTSET", "VALID"), "NOTSET")),
        R("ConvTranspose", "all pads values must be equal", check(
            lambda ctx, node: attr_of(node, "auto_pad", "NOTSET") != "NOTSET"
            or len(set(attr_of(node, "pads", [0]))) <= 1, "pads are not all equal")),
        R("ConvTranspose", "output_shape attribute", attr_absent("output_shape")),
        R("ConvTranspose", "output_padding must be all zeros", check(
            lambda ctx, node: not any(attr_of(node, "output_padding", ())),
            "output_padding is not all zeros")),
    ]


def _layout_rules(is_nn: Callable[..., bool], ml: bool, coreml_version: int) -> list[Rule]:
    """Layout ops: DepthToSpace, Flatten, Gather."""
    return [
        R("DepthToSpace", "NeuralNetwork: mode must be DCR", when(is_nn,
                                                                  attr_is("mode", "DCR", "DCR"))),
        R("DepthToSpace", "MLProgram: mode CRD requires", when(
            lambda c, n: ml and attr_of(n, "mode", "DCR") == "CRD", static(0))),
        R("DepthToSpace", "MLProgram: DCR with float16", when(
            lambda c, n: ml and coreml_version < 7 and attr_of(n, "mode", "DCR") == "DCR",
            dtype_in(0, ("float32",)))),
        R("Flatten", "input must not be a scalar", rank(0, lo=1)),
        R("Gather", "data must be float32 or int64", dtype_in(0, ("float32", "int64"))),
        R("Gather", "indices must not be a scalar", rank(1, lo=1)),
        R("Gather", "rank(data) + rank(indices) - 1", check(
            # (None is tested first: mypy does not narrow a call made twice)
            lambda ctx, node: None in (ctx.rank(node, 0), ctx.rank(node, 1))
            or ctx.rank(node, 0) + ctx.rank(node, 1) - 1 <= 5,  # type: ignore[operator]
            "output rank would exceed 5")),
    ]


def _gemm_matmul_rules(is_nn: Callable[..., bool], is_ml: Callable[..., bool]) -> list[Rule]:
    """Gemm and MatMul."""
    return [
        R("Gemm", "B (input 1) must be a constant", const(1)),
        R("Gemm", "transA must be 0", attr_is("transA", 0, 0)),
        R("Gemm", "alpha must be 1.0", attr_is("alpha", 1.0, 1.0)),
        R("Gemm", "beta must be 1.0", attr_is("beta", 1.0, 1.0)),
        R("Gemm", "C (input 2), if present", const(2)),
        R("Gemm", "C shape must be scalar", check(_gemm_c_shape,
                                                  "C shape is not (), [1], [N] or [1,N]")),
        R("MatMul", "NeuralNetwork: B (input 1) must be a constant", when(is_nn, const(1))),
        R("MatMul", "NeuralNetwork: A and B must both be rank 2", when(
            is_nn, rank(0, allowed=(2,)), rank(1, allowed=(2,)))),
        R("MatMul", "MLProgram: a rank-1 operand", when(is_ml, check(
            lambda ctx, node: not ({ctx.rank(node, 0), ctx.rank(node, 1)} & {1})
            or max(ctx.rank(node, 0) or 1, ctx.rank(node, 1) or 1) == 1,
            "a rank-1 operand with a rank>1 operand"))),
    ]


def _newer_ml_rules(is_nn: Callable[..., bool]) -> list[Rule]:
    """Newer MLProgram ops."""
    return [
        R("GridSample", "input must be rank 4", rank(0, allowed=(4,))),
        R("GridSample", "mode must be linear/bilinear", check(
            lambda ctx, node: attr_of(node, "mode", "bilinear") in ("linear", "bilinear"),
            lambda ctx, node: f"mode {attr_of(node, 'mode')!r} is not linear/bilinear")),
        R("GridSample", "padding_mode=reflection and align_corners=0", check(
            lambda ctx, node: not (attr_of(node, "mode", "bilinear") in ("linear", "bilinear")
                                   and attr_of(node, "padding_mode", "zeros") == "reflection"
                                   and attr_of(node, "align_corners", 0) == 0),
            "linear with reflection padding and align_corners=0")),
        R("LRN", "input must be rank 3 or 4", rank(0, allowed=(3, 4))),
        R("GatherND", "batch_dims must be 0", attr_is("batch_dims", 0, 0)),
        R("And", "both inputs must be bool", dtype_in(1, ("bool",))),
        R("Where", "X and Y (inputs 1 and 2)", first(
            dtype_in(1, ("float32", "float16")), dtype_in(2, ("float32", "float16")))),
        R("Range", "MLProgram only; lowered to MIL", decided_by("op availability (formats)")),
        R("Range", "int32/float16/float32", dtype_in(0, ("int32", "float16", "float32"))),
        R("Tile", "repeats (input 1) may be a constant", when(is_nn, const(1))),
        R("Tile", "input rank up to 5", rank(0, hi=5)),
        R("com.microsoft:QuickGelu", "produced by ORT's QuickGeluFusion",
          not_a_restriction("where the op comes from")),
        R("com.microsoft:FusedConv", "activation one of", attr_in(
            "activation", ("Relu", "Sigmoid", "Tanh", "LeakyRelu", "Clip", "HardSigmoid"))),
    ]


def _pad_rules() -> list[Rule]:
    """Pad (NeuralNetwork only)."""
    return [
        R("Pad", "input rank >= 2", rank(0, lo=2)),
        R("Pad", "input must not be empty", no_zero_dims([0])),
        R("Pad", "mode must be 'constant'", attr_is("mode", "constant", "constant")),
        R("Pad", "constant_value (input 2) must be present", const(2, required=True)),
        R("Pad", "pads (input 1) must be a constant", const(1)),
        R("Pad", "pads values must be non-negative", non_negative(1, "pads")),
        R("Pad", "axes (input 3), if present", const(3)),
        R("Pad", "only the last two dims may be padded", check(
            _pads_last_two_only, "pads a dim other than the last two")),
    ]


def _reshape_rules() -> list[Rule]:
    """Reshape."""
    return [
        R("Reshape", "shape (input 1) must be a constant", const(1)),
        R("Reshape", "shape tensor (input 1) must be non-empty", check(
            # (None is tested first: mypy does not narrow a call made twice)
            lambda ctx, node: numel(ctx.shape(node, 1)) is None
            or 1 <= numel(ctx.shape(node, 1)) <= 5,  # type: ignore[operator]
            "shape tensor must have 1..5 entries")),
        R("Reshape", "fully static, non-scalar shape", first(static(0), rank(0, lo=1))),
        R("Reshape", "allowzero=1 with a 0", value(
            1, lambda v, c, n: not (attr_of(n, "allowzero", 0) == 1 and (v == 0).any()),
            "allowzero=1 with a 0 in the shape")),
    ]


def _resize_rules(nn: bool, is_nn: Callable[..., bool]) -> list[Rule]:
    """Resize."""
    ml = not nn
    return [
        R("Resize", "input must not have zero elements", no_zero_dims([0])),
        R("Resize", "NeuralNetwork: input rank must be 4",
          rank(0, allowed=(4,) if nn else (3, 4, 5))),
        R("Resize", "antialias must be 0", attr_is("antialias", 0, 0)),
        R("Resize", "mode must be 'nearest' or 'linear'", attr_in("mode", ("nearest", "linear"),
                                                                  "nearest")),
        R("Resize", "nearest mode requires nearest_mode='floor'", when(
            lambda c, n: attr_of(n, "mode", "nearest") == "nearest",
            attr_is("nearest_mode", "floor", "round_prefer_floor"))),
        R("Resize", "exclude_outside must be 0", attr_is("exclude_outside", 0, 0)),
        R("Resize", "keep_aspect_ratio_policy must be 'stretch'",
          attr_is("keep_aspect_ratio_policy", "stretch", "stretch")),
        R("Resize", "must be provided as a constant", resize_const()),
        R("Resize", "upsampling scales on H and W must be integers", check(
            lambda ctx, node: all(s < 1 or float(s).is_integer() for s in _hw(ctx, node)),
            "upsampling H/W scale is not an integer")),
        R("Resize", "downsampling (scales <= 1) only in MLProgram", check(
            lambda ctx, node: _downsampling_ok(ctx, node, ml), "unsupported downsampling")),
        R("Resize", "mixed up- and down-scaling", check(
            lambda ctx, node: not (any(s > 1 for s in _hw(ctx, node))
                                   and any(s < 1 for s in _hw(ctx, node))),
            "mixed up- and down-scaling")),
        R("Resize", "NeuralNetwork with sizes", when(
            lambda c, n: nn and c.has_input(n, 3) and not _scales_given(c, n),
            static(0), check(lambda ctx, node: all(float(s).is_integer()
                                                   for s in _hw(ctx, node)),
                             "output H/W are not integer multiples of the input"))),
        R("Resize", "NeuralNetwork: coordinate_transformation_mode must be", when(
            is_nn, attr_is("coordinate_transformation_mode", "asymmetric", "half_pixel"))),
        R("Resize", "MLProgram nearest: coordinate_transformation_mode", when(
            lambda c, n: ml and attr_of(n, "mode", "nearest") == "nearest",
            attr_is("coordinate_transformation_mode", "asymmetric", "half_pixel"))),
        R("Resize", "MLProgram linear: coordinate_transformation_mode", when(
            lambda c, n: ml and attr_of(n, "mode", "nearest") == "linear",
            check(_ml_linear_ctm_ok, "unsupported coordinate_transformation_mode"))),
    ]


def _shape_slice_rules(nn: bool, is_nn: Callable[..., bool], coreml_version: int) -> list[Rule]:
    """Shape and Slice."""
    ml = not nn
    return [
        R("Shape", "NeuralNetwork: 'end' attribute not supported", when(
            is_nn, attr_absent("end"), attr_is("start", 0, 0))),
        R("Shape", "MLProgram: non-default start/end", when(
            lambda c, n: ml and ("start" in n.attrs or "end" in n.attrs),
            rank(0, required=True), check(shape_slice_nonempty, "empty Shape slice"))),
        R("Shape", "NeuralNetwork: input float32", dtype_in(
            0, ("float32",) if nn else ("int32", "float32", "float16"))),
        R("Slice", "data input must have a fully static shape", static(0)),
        R("Slice", "starts, ends (inputs 1,2)", first(const(1, 2, required=True), const(3, 4))),
        R("Slice", "empty slices", check(
            lambda ctx, node: not slice_is_empty(ctx, node), "empty slice")),
        R("Slice", "data float32 or int64", dtype_in(
            0, ("float32", "int64", "float16") if ml and coreml_version >= 6
            else ("float32", "int64"))),
    ]


def _softmax_split_rules() -> list[Rule]:
    """Softmax, Split, Squeeze and Unsqueeze."""
    return [
        R("Softmax", "fully static shape with > 0 elements", first(static(0), no_zero_dims([0]))),
        R("Split", "split (input 1), if present", const(1)),
        R("Split", "split must have >= 2 entries", value(1, _split_entries_ok,
                                                         "split must have >= 2 non-zero entries "
                                                         "summing to the axis dim")),
        R("Split", "split-axis dim must be known", when(
            lambda c, n: c.has_input(n, 1), check(
                lambda ctx, node: ctx.rank(node, 0) is not None and isinstance(
                    axis_dim(ctx, node), int),
                "split-axis dim is not known"))),
        R("Split", "opset >= 18 without split input", when(
            lambda c, n: (c.opset or 0) >= 18 and not c.has_input(n, 1),
            check(_num_outputs_ok, "num_outputs must be >= 2, equal #outputs, <= axis dim"))),
        R("Squeeze", "axes (input 1, opset >= 13), if present", const(1)),
        R("Unsqueeze", "axes (input 1, opset >= 13) must be a constant", when(
            lambda c, n: (c.opset or 13) >= 13, const(1, required=True))),
        R("Unsqueeze", "output rank (input rank + #axes)", check(
            lambda ctx, node: (ctx.rank(node, 0, out=True) or 0) <= 5, "output rank > 5")),
    ]


# ---------------------------------------------------------------------- helpers
def _prelu_slope_shape(ctx, node) -> bool:
    s, x = ctx.shape(node, 1), ctx.shape(node, 0)
    if s is None or x is None or numel(s) is None:
        return True
    if numel(s) == 1:
        return True
    c = x[-3] if len(x) >= 3 else None
    return tuple(s) == (c, 1, 1)


def _argmax_consumers_ok(ctx, node) -> bool:
    users = ctx.consumers(node.outputs[0]) if node.outputs else []
    return not (len(users) > 1 and any(u.op_type == "Cast" and u.attrs.get("to") == 6
                                       for u in users))


def _cast_after_argmax(ctx, match) -> bool:
    argmax, cast = (ctx.graph.nodes[v] for v in match)
    return (cast.attrs.get("to") == 6 and ctx.dtype(cast, 0) in (None, "int64")
            and ctx.producer(cast, 0) is argmax)


def _kernel_matches_weight(ctx, node) -> bool:
    k = node.attrs.get("kernel_shape")
    w = ctx.shape(node, 1)
    if k is None or w is None:
        return True
    return list(w[2:]) == list(k) or not all(isinstance(d, int) for d in w[2:])


def _gemm_c_shape(ctx, node) -> bool:
    if not ctx.has_input(node, 2):
        return True
    c, n = ctx.shape(node, 2), dim_at(ctx.shape(node, 0, out=True), -1)
    if c is None or not isinstance(n, int):
        return True
    return tuple(c) in ((), (1,), (n,), (1, n))


def _pads_last_two_only(ctx, node) -> bool:
    pads = ctx.input_value(node, 1)
    r = ctx.rank(node, 0)
    if pads is None or r is None:
        return True
    pads = pads.ravel().tolist()
    k = len(pads) // 2
    if ctx.has_input(node, 3):
        axes = ctx.input_value(node, 3)
        if axes is None:
            return True
        axes = [norm_axis(int(a), r) for a in axes.ravel().tolist()]
    else:
        axes = list(range(k))
    if len(axes) != k:
        return True  # malformed pads: not this rule's business
    return all(a >= r - 2 or (pads[j] == 0 and pads[j + k] == 0) for j, a in enumerate(axes))


def _hw(ctx, node) -> list[float]:
    s = resize_scales(ctx, node)
    return [] if not s or len(s) < 2 else s[-2:]


def _scales_given(ctx, node) -> bool:
    pos = 2 if (ctx.opset or 11) >= 11 else 1
    return ctx.has_input(node, pos) and numel(ctx.shape(node, pos)) not in (0,)


def _downsampling_ok(ctx, node, ml: bool) -> bool:
    hw = _hw(ctx, node)
    down = [s for s in hw if s < 1]
    if not down:
        return True
    if not ml:
        return False
    shape = ctx.shape(node, 0)
    return downscale_divides(hw, (shape or (None, None))[-2:])


def _ml_linear_ctm_ok(ctx, node) -> bool:
    ctm = attr_of(node, "coordinate_transformation_mode", "half_pixel")
    if ctm in ("half_pixel", "align_corners"):
        return True
    if ctm == "pytorch_half_pixel":
        return output_hw_above_one(ctx, node)
    if ctm == "asymmetric":
        return ctx.has_input(node, 3) and not _scales_given(ctx, node)
    return False


def _split_entries_ok(v, ctx, node) -> bool:
    v = v.ravel().tolist()
    if len(v) < 2 or 0 in v:
        return False
    dim = axis_dim(ctx, node)
    return not isinstance(dim, int) or sum(v) == dim


def _num_outputs_ok(ctx, node) -> bool:
    k = node.attrs.get("num_outputs")
    if k is None or k < 2 or k != len(node.outputs):
        return False
    dim = axis_dim(ctx, node)
    return not isinstance(dim, int) or k <= dim
