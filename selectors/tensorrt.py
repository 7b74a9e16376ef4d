"""NVIDIA TensorRT 10.1 through its ONNX parser (onnx-tensorrt operator matrix, opsets 9-20).

The op table (``tensorrt_onnx_parser.json`` in this package's ``data`` folder) transcribes the
parser's documented operator matrix: 150 supported rows with their types, 46 rows
marked unsupported (refused), and the documented restrictions (constant axes of
Reduce*/Slice/Squeeze/Unsqueeze/Pad/CumSum, OneHot depth, Dropout training_mode, Clip bounds,
pooling dilations, Resize modes, TopK, ScatterND, RNN activations). Clip takes tensor bounds:
the parser imports them as elementwise Max/Min. Input 0's dtype must be one
of the row's types (float64 is accepted where float32 is, as the parser casts it down). No
settings: the matrix is for one TensorRT version. No fusion patterns are documented.
"""

from __future__ import annotations

from clusterkit.selectors._attr_checks import attr_all, attr_in, attr_is
from clusterkit.selectors._checks import (
    all_zero,
    check,
    first,
    not_a_restriction,
    opset_at_least,
    opset_at_most,
    value,
)
from clusterkit.selectors._facts import attr_of
from clusterkit.selectors._op_rules import softmax_axis
from clusterkit.selectors._optable import load_table
from clusterkit.selectors._property import TableProperty
from clusterkit.selectors._rules import N, R, Rule
from clusterkit.selectors._tensor_checks import (
    const,
    io_dtypes_in,
    outputs_used_at_most,
    rank,
    static,
)

TABLE = "tensorrt_onnx_parser.json"
TYPES = frozenset({"float64", "float32", "float16", "bfloat16", "int32", "int64", "int8", "uint8",
                   "bool", "int4", "float8e4m3fn", "float8e4m3fnuz", "float8e5m2",
                   "float8e5m2fnuz"})
LOW = frozenset({"int8", "int4", "float8e4m3fn", "float8e4m3fnuz", "float8e5m2",
                 "float8e5m2fnuz"})
REDUCE = ["ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean",
          "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare"]
RNNS = ["GRU", "LSTM", "RNN"]


def make_property(device: str = "tensorrt") -> TableProperty:
    """The TensorRT device."""
    table = load_table(TABLE)
    rules = (_global_rules() + _pool_rules() + _other_op_rules() + _resize_rules()
             + _scatter_slice_topk_rules())
    notes = [
        N("Loop", "scan output length cannot be dynamic", "depends on the loop body at run time"),
        N("Loop", "loop-carried dependency shapes", "depends on the loop body at run time"),
    ]
    return TableProperty(device, name="tensorrt", table=table, rules=rules, notes=notes,
                         dtype_field=True, dtype_aliases={"float64": "float32"})


# ---------------------------------------------------------------------- rules by section
def _global_rules() -> list[Rule]:
    """Global conditions: opsets, tensor types, low precision only via QDQ."""
    return [
        R("*", "ONNX opsets 9 through 20", first(opset_at_least(9), opset_at_most(20))),
        R("*", "supported tensor types", io_dtypes_in(TYPES)),
        R("*", "INT8/INT4/FP8 only through quantization", check(
            _low_precision_via_qdq, "int8/int4/fp8 tensors only through QuantizeLinear or "
                                    "as constants")),
        R("*", "UINT8 only as network input or output", check(
            _uint8_only_io, "uint8 tensors only as network inputs/outputs")),
    ]


def _pool_rules() -> list[Rule]:
    """Pooling."""
    no_dilation = attr_all("dilations", lambda d: d == 1, "dilations must be empty or all 1")
    return [
        R(["AveragePool", "MaxPool"], "2D or 3D pooling only", rank(0, allowed=(4, 5))),
        R(["AveragePool", "MaxPool", "LpPool"], "dilations empty or all 1", no_dilation),
        R("MaxPool", "Indices output unsupported", outputs_used_at_most(1)),
    ]


def _other_op_rules() -> list[Rule]:
    """Clip through the Reduce family, in table order."""
    return [
        R("Clip", "min/max (inputs 1,2) may be initializers or tensors", not_a_restriction(
            "tensor bounds are imported as elementwise Max/Min")),
        R("Constant", "sparse_value, value_string", check(
            lambda ctx, node: not {"sparse_value", "value_string", "value_strings"}
            & set(node.attrs), "sparse/string Constant")),
        R("CumSum", "axis (input 1) must be an initializer", const(1)),
        R("DeformConv", "input must have 1D or 2D spatial dims", rank(0, allowed=(3, 4))),
        R("DeformConv", "begin and end pads must be equal", check(
            lambda ctx, node: _pads_symmetric(attr_of(node, "pads", ())), "asymmetric pads")),
        R("DequantizeLinear", "x_zero_point must be zero", first(
            const(2), all_zero(2, "x_zero_point is not zero"))),
        R("QuantizeLinear", "y_zero_point must be 0", first(
            const(2), all_zero(2, "y_zero_point is not zero"))),
        R("Dropout", "training_mode (input 2) must be an initializer", const(2)),
        R("Dropout", "training_mode must evaluate to False", all_zero(
            2, "training_mode is True")),
        R("EyeLike", "input must have static dims", static(0)),
        R("GridSample", "input must be 4D", rank(0, allowed=(4,))),
        R(RNNS, "bidirectional: same activation functions", check(
            _same_activations, "forward and reverse activations differ")),
        R("LSTM", "input_forget must be 0", attr_is("input_forget", 0, 0)),
        R("LSTM", "layout must be 0", attr_is("layout", 0, 0)),
        R("Hardmax", "size of the 'axis' dimension", check(
            _axis_dim_static, "the axis dimension is not a build-time constant")),
        R("If", "both branch outputs must have the same rank", check(
            _if_branches_ok, "branch outputs differ in rank or share names")),
        R("LayerNormalization", "only output Y supported", outputs_used_at_most(1)),
        R("OneHot", "depth (input 1) must be a build-time constant", const(1)),
        R("Pad", "axes (input 3) must be an initializer", const(3)),
        R(["RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike"],
          "seed is ignored", not_a_restriction("a behaviour note")),
        R(["RandomNormalLike", "RandomUniformLike"], "input must be a tensor, not an initializer",
          # (None is tested first: mypy does not narrow a call made twice)
          check(lambda ctx, node: not (ctx.input(node, 0) is not None
                                       and ctx.input(node, 0).is_constant),  # type: ignore[union-attr]
                "input 0 is a constant")),
        R(REDUCE, "axes (input 1) must be an initializer", const(1)),
    ]


def _resize_rules() -> list[Rule]:
    """Resize."""
    return [
        R("Resize", "coordinate_transformation_mode: half_pixel", attr_in(
            "coordinate_transformation_mode", ("half_pixel", "pytorch_half_pixel",
                                               "tf_half_pixel_for_nn", "asymmetric",
                                               "align_corners"), "half_pixel")),
        R("Resize", "mode: nearest or linear", attr_in("mode", ("nearest", "linear"), "nearest")),
        R("Resize", "nearest_mode: floor, ceil", attr_in(
            "nearest_mode", ("floor", "ceil", "round_prefer_floor", "round_prefer_ceil"),
            "round_prefer_floor")),
        R("Resize", "keep_aspect_ratio_policy: stretch only",
          attr_is("keep_aspect_ratio_policy", "stretch", "stretch")),
        R("Resize", "the axes attribute must be an iota vector", check(
            _resize_axes_iota, "axes must be 0..rank-1 when scales is an input")),
        R("Resize", "antialias not supported", attr_is("antialias", 0, 0)),
    ]


def _scatter_slice_topk_rules() -> list[Rule]:
    """ScatterND, Slice, Squeeze/Unsqueeze and TopK."""
    return [
        R("ScatterND", "'reduction' attribute not supported", check(
            lambda ctx, node: attr_of(node, "reduction", "none") == "none",
            "reduction is not supported")),
        R("Slice", "axes (input 3) must be an initializer", const(3)),
        R(["Squeeze", "Unsqueeze"], "axes (input 1) must be a", const(1)),
        R("TopK", "sorted must be 1", attr_is("sorted", 1, 1)),
        R("TopK", "K (input 1) must be < 3840", first(const(1), value(
            1, lambda v, c, n: int(v.ravel()[0]) < 3840, "K >= 3840"))),
    ]


# ---------------------------------------------------------------------- helpers
def _low_precision_via_qdq(ctx, node) -> bool:
    for name in node.inputs:
        t = ctx.tensor(name)
        if t is None or t.dtype not in LOW or t.is_constant:
            continue
        p = ctx.graph.nodes[t.producer] if t.producer is not None else None
        if p is None or p.op_type != "QuantizeLinear":
            return False
    return True


def _uint8_only_io(ctx, node) -> bool:
    for name in node.inputs:
        t = ctx.tensor(name)
        if t is not None and t.dtype == "uint8" and not (t.is_input or t.is_constant):
            return False
    for name in node.outputs:
        t = ctx.tensor(name)
        if t is not None and t.dtype == "uint8" and not t.is_output:
            return False
    return True


def _pads_symmetric(pads) -> bool:
    pads = list(pads)
    k = len(pads) // 2
    return pads[:k] == pads[k:]


def _same_activations(ctx, node) -> bool:
    if attr_of(node, "direction", "forward") != "bidirectional":
        return True
    acts = list(attr_of(node, "activations", []))
    half = len(acts) // 2
    return acts[:half] == acts[half:]


def _axis_dim_static(ctx, node) -> bool:
    return isinstance(ctx.dim(node, 0, softmax_axis(ctx, node)), int)


def _if_branches_ok(ctx, node) -> bool:
    then, other = node.attrs.get("then_branch"), node.attrs.get("else_branch")
    if then is None or other is None:
        return True
    if len(then.output) != len(other.output):
        return False
    for a, b in zip(then.output, other.output):
        if a.name == b.name:
            return False
        ra, rb = (len(x.type.tensor_type.shape.dim) if x.type.tensor_type.HasField("shape")
                  else None for x in (a, b))
        if None not in (ra, rb) and ra != rb:
            return False
    return True


def _resize_axes_iota(ctx, node) -> bool:
    axes = node.attrs.get("axes")
    if axes is None or not ctx.has_input(node, 2):
        return True
    r = ctx.rank(node, 0)
    return r is None or list(axes) == list(range(r))
