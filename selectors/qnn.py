"""Qualcomm QNN (HTP NPU by default) through ONNX Runtime's QNN EP: static shapes, QDQ or fp16.

The op table (``qnn_ep.json`` in this package's ``data`` folder) transcribes the QNN EP's
documented op table and fusions (v2.5.0) and the op-builder checks of ONNX Runtime 1.22, brought
to what the real EP of ``clusterkit[qnn]`` (onnxruntime-qnn 2.7.0) answers: ``clusterkit verify``
agrees with it node by node on every bundled and light model (the table's ``verified`` block
names the version and the listed exceptions; its rows' ``verified_changes`` say what changed).
Settings:

- ``backend``: ``"htp"`` (default, the NPU), ``"cpu"`` or ``"gpu"``; gates backend-only ops and
  rules (HTP LayerNorm axis, CPU float32-only, GPU-only contrib ops, ...).
- ``htp_fp16_precision``: ORT's ``enable_htp_fp16_precision`` (default True): float32 nodes run
  on HTP in fp16; with False, HTP takes only nodes inside QDQ units.
- ``htp_bf16``: HTP ``bf16_mode`` (default False; enables 3D LpPool).
- ``offload_graph_io_quantization``: ORT's option of that name (default True): a
  QuantizeLinear reading a graph input and a DequantizeLinear writing a graph output stay on CPU.
- ``qairt_sdk``: QAIRT SDK version as a tuple (default ``(2, 49)``, the doc's version).

On HTP, a node with an input or output tensor of rank > 5 is refused (the backend's op
validation), except the members of a ``Reshape -> Transpose -> Reshape`` chain with rank-6
middle tensors that the EP's Rank6ToRank5Fusion lowers to rank 5 (constant shapes, a unit dim
the perm keeps in place). Value inputs: the device keeps the default policy
(``computes_value_inputs`` False: a Reshape's computed shape comes from another cluster); with
static shapes those values are constants on every bundled model, where ``verify`` agrees.

Fusion: ConvInteger, MatMulInteger and DynamicQuantizeLinear are taken only inside the documented
``DynamicQuantizeLinear -> ConvInteger/MatMulInteger -> Cast -> Mul [-> Add]`` chains, and Erf
only inside the Erf-GELU chain (the EP refuses a lone Erf). The other
22 documented fusions are exposed by ``pattern_matches`` (their value notes are not checked).
A partition that is a single QuantizeLinear or DequantizeLinear node is dropped, as the EP does.
Final support is decided by QNN's backend validation (SDK/SoC dependent): see ``undecidable``.
"""

from __future__ import annotations

from clusterkit.errors import SelectorError
from clusterkit.selectors._attr_checks import attr_absent, attr_in, attr_is, default_dilations
from clusterkit.selectors._checks import (
    check,
    first,
    non_negative,
    not_a_restriction,
    setting,
    value,
    when,
)
from clusterkit.selectors._facts import attr_of, numel
from clusterkit.selectors._op_rules import (
    axis_dim,
    last_axis,
    no_noop_on_empty_axes,
    shape_slice_nonempty,
)
from clusterkit.selectors._optable import load_table
from clusterkit.selectors._property import TableProperty
from clusterkit.selectors._rules import Fusion, N, R, in_pattern
from clusterkit.selectors._tensor_checks import (
    absent_input,
    all_static,
    const,
    dtype_in,
    inputs_between,
    io_rank_at_most,
    not_const,
    outputs_at_most,
    per_tensor_dq,
    rank,
    static,
)

TABLE = "qnn_ep.json"
BACKENDS = ("htp", "cpu", "gpu")
QUANT = ("uint8", "int8", "uint16", "int16")
REDUCE_AXES = ["ReduceMax", "ReduceMean", "ReduceMin", "ReduceSum", "ReduceProd"]


def make_property(device: str = "qnn", *, backend: str = "htp", htp_fp16_precision: bool = True,
                  htp_bf16: bool = False, offload_graph_io_quantization: bool = True,
                  qairt_sdk: tuple = (2, 49)) -> TableProperty:
    """The QNN device (see the module docstring)."""
    if backend not in BACKENDS:
        raise SelectorError(f"qnn: backend must be one of {BACKENDS}, got {backend!r}")
    table = load_table(TABLE)
    htp, cpu, gpu = backend == "htp", backend == "cpu", backend == "gpu"
    conv_int = Fusion("ConvInteger", (3,))  # the chain's structure is the documented condition
    matmul_int = Fusion("MatMulInteger", (4,))
    dql = Fusion("DynamicQuantizeLinear", (3, 4))
    erf = Fusion("Erf", (7,))  # the Erf-GELU chain

    def only(name: str, ok: bool):
        return setting(ok, f"needs the QNN {name} backend (backend={backend!r})")

    rules = (_global_rules(htp, cpu, htp_fp16_precision, offload_graph_io_quantization)
             + _pool_norm_conv_rules(cpu) + _fused_integer_rules(conv_int, matmul_int, dql, erf)
             + _gather_gru_if_rules(cpu) + _norm_softmax_rules(htp, cpu, only)
             + _pool_matmul_nms_rules(htp, gpu, htp_bf16) + _pad_reduce_rules(htp)
             + _resize_shape_rules(htp, gpu, qairt_sdk, only))
    notes = [
        N("*", "final support is decided by QNN backend op validation",
          "QNN's backend validation runs on the device SDK; not modelled"),
        N("*", "data types vary by op and backend", "per-op QAIRT type tables are not in the data"),
        N("Gemm", "C must have shape [M]",
          "the table's [M] is ambiguous (ORT names the bias dim N elsewhere); not enforced"),
        N(["DequantizeLinear", "QuantizeLinear"], "standalone",
          "whether a Q/DQ is standalone depends on ORT's QDQ node-unit selection"),
        N("GRU", "fixed-length sequences",
          "'fixed-length' is not defined by the table (static shapes are checked globally)"),
        N("Resize", "NPU: restricted nearest_mode", "the table does not list the combinations"),
    ]
    return TableProperty(device, name="qnn", table=table, rules=rules, notes=notes, settings={
        "backend": backend, "htp_fp16_precision": htp_fp16_precision, "htp_bf16": htp_bf16,
        "offload_graph_io_quantization": offload_graph_io_quantization,
        "qairt_sdk": tuple(qairt_sdk)}, fusions=[conv_int, matmul_int, dql, erf],
        subgraph_rules=(_lone_quantize_op,))


# ---------------------------------------------------------------------- rule sections
def _global_rules(htp: bool, cpu: bool, htp_fp16_precision: bool,
                  offload_graph_io_quantization: bool) -> list:
    """The global conditions (every op)."""
    return [
        R("*", "does not support dynamic shapes", all_static(outputs=True)),
        R("*", "HTP backend: a node with an input or output tensor of rank > 5", when(
            lambda c, n: htp and not _in_rank6_chain(c, n), io_rank_at_most(5))),
        R("*", "float32 models run on HTP only with", when(
            lambda c, n: htp and not htp_fp16_precision and not c.in_qdq(n)
            and n.op_type not in ("QuantizeLinear", "DequantizeLinear"),
            dtype_in(0, QUANT + ("int32", "int64", "bool")))),
        R("*", "QNN CPU backend: float32 only", when(
            lambda c, n: cpu, check(lambda ctx, node: not ctx.in_qdq(node)
                                    and ctx.dtype(node, 0) not in ("float16",) + QUANT,
                                    "the CPU backend runs float32 only"))),
        R("*", "QDQ node units (DQ -> op -> Q) are taken as a group", when(
            lambda c, n: offload_graph_io_quantization, check(
                _not_graph_io_quantization, "graph-input Q / graph-output DQ stay on CPU "
                                            "(offload_graph_io_quantization)"))),
    ]


# ---- per-op source checks (in the table's op order, split by op family)
def _pool_norm_conv_rules(cpu: bool) -> list:
    """ArgMax to ConvTranspose: pooling, BatchNormalization, Clip and Conv."""
    return [
        R(["ArgMax", "ArgMin"], "select_last_index must be 0", attr_is("select_last_index", 0, 0)),
        R(["AveragePool", "MaxPool"], "auto_pad NOTSET, SAME_LOWER or SAME_UPPER", attr_in(
            "auto_pad", ("NOTSET", "SAME_LOWER", "SAME_UPPER"), "NOTSET")),
        R(["BatchNormalization", "Clip", "PRelu", "Conv", "ConvTranspose"],
          "supported since ORT 1.18", not_a_restriction("a version note; the doc is ORT 1.26")),
        R("BatchNormalization", "input rank <= 4", rank(0, hi=4)),
        R("BatchNormalization", "scale, B, mean, var (inputs 1-4)", const(1, 2, 3, 4)),
        R("BatchNormalization", "scale/B/mean/var must be 1-D of length C", check(
            lambda ctx, node: all(_is_c_vector(ctx, node, p) for p in (1, 2, 3, 4)),
            "scale/B/mean/var must be 1-D of length C")),
        R("BatchNormalization", "single output", outputs_at_most(1)),
        R("BatchNormalization", "per-tensor quantization only", per_tensor_dq((1, 2, 3, 4))),
        R("Clip", "min/max (inputs 1,2), if present", const(1, 2)),
        R("Conv", "input rank 3, 4 or 5", rank(0, allowed=(3, 4, 5))),
        R("Conv", "auto_pad NOTSET, SAME_LOWER or SAME_UPPER (VALID rejected)", attr_in(
            "auto_pad", ("NOTSET", "SAME_LOWER", "SAME_UPPER"), "NOTSET")),
        R("Conv", "non-HTP (CPU) backend: float32 only", when(
            lambda c, n: cpu, dtype_in(0, ("float32",)))),
        R("Conv", "per-channel quantized weights must be signed, quant axis 0", check(
            lambda ctx, node: _per_channel_weight_ok(ctx, node, axis=0),
            "per-channel weights must be signed with quantization axis 0")),
        R(["Conv", "Gemm"], "non-constant inputs: per-tensor", per_tensor_dq((0, 1, 2),
                                                                             only_nonconst=True)),
        R("ConvTranspose", "dilations must be default 1", default_dilations()),
        R("ConvTranspose", "per-channel quantized weights: quant axis 1", check(
            lambda ctx, node: _per_channel_weight_ok(ctx, node, axis=1, signed=False),
            "per-channel weights must use quantization axis 1")),
    ]


def _fused_integer_rules(conv_int: Fusion, matmul_int: Fusion, dql: Fusion,
                         erf: Fusion) -> list:
    """The fusion-only ops: the integer ops (DynamicQuantizeLinear chains) and Erf (GELU)."""
    return [
        R("ConvInteger", "only via the DynamicQuantizeLinear", in_pattern(
            conv_int, "ConvInteger is taken only in a DynamicQuantizeLinear -> ConvInteger -> "
                      "Cast -> Mul chain"), fused=True),
        R("MatMulInteger", "only via the DynamicQuantizeLinear", in_pattern(
            matmul_int, "MatMulInteger is taken only in a DynamicQuantizeLinear -> "
                        "MatMulInteger -> Cast -> Mul chain"), fused=True),
        R("DynamicQuantizeLinear", "only via the ConvInteger / MatMulInteger", in_pattern(
            dql, "DynamicQuantizeLinear is taken only in a ConvInteger/MatMulInteger chain"),
          fused=True),
        R("Erf", "only via the Erf-GELU fusion", in_pattern(
            erf, "Erf is taken only in an Erf-GELU chain (Div|Mul -> Erf -> Add -> Mul)"),
          fused=True),
    ]


def _gather_gru_if_rules(cpu: bool) -> list:
    """DepthToSpace to If: shape ops, Gather, Gemm, GridSample, GRU and If."""
    return [
        R("DepthToSpace", "mode DCR or CRD", attr_in("mode", ("DCR", "CRD"), "DCR")),
        R("Expand", "shape (input 1) must be a constant", const(1)),
        R(["Flatten", "Squeeze", "Unsqueeze"], "statically inferred output shape",
          static(0, out=True)),
        R("Gather", "only non-negative indices", non_negative(1, "indices")),
        R("Gather", "rejected if still out of range", value(1, _indices_in_range,
                                                            "indices out of range")),
        R("GatherND", "bool data (input 0) is not taken", check(
            lambda ctx, node: ctx.dtype(node, 0) != "bool", "bool data")),
        R("GatherElements", "QNN CPU backend: data rank must be 2..4", when(
            lambda c, n: cpu, rank(0, lo=2, hi=4))),
        R("Gemm", "alpha must be 1.0", attr_is("alpha", 1.0, 1.0)),
        R("Gemm", "beta must be 1.0", attr_is("beta", 1.0, 1.0)),
        R("GridSample", "mode bilinear or nearest", attr_in(  # 'linear' is opset 20's name
            "mode", ("bilinear", "nearest", "linear"), "bilinear")),
        R("GridSample", "padding_mode zeros, border or reflection", attr_in(
            "padding_mode", ("zeros", "border", "reflection"), "zeros")),
        R("GRU", "layout=0 only", attr_is("layout", 0, 0)),
        R("GRU", "default activations", check(
            lambda ctx, node: list(attr_of(node, "activations", ["Sigmoid", "Tanh"]))
            in (["Sigmoid", "Tanh"], ["Sigmoid", "Tanh"] * 2), "non-default activations")),
        R("GRU", "no clip", attr_absent("clip")),
        R("GRU", "no initial hidden/cell state input", absent_input(5)),
        R("If", "single output per branch", check(_if_branches_ok, "If needs one output with "
                                                                   "identical branch types")),
        R("If", "cond must be a scalar bool", first(rank(0, allowed=(0,)),
                                                    dtype_in(0, ("bool",)))),
        R("If", "both branches always executed", not_a_restriction("a lowering detail")),
    ]


def _norm_softmax_rules(htp: bool, cpu: bool, only) -> list:
    """InstanceNormalization to LogSoftmax: normalizations, IsInf and Softmax."""
    return [
        R("InstanceNormalization", "input rank 3 or 4", rank(0, allowed=(3, 4))),
        R("InstanceNormalization", "scale/bias 1-D of length C", check(
            lambda ctx, node: all(_is_c_vector(ctx, node, p) for p in (1, 2)),
            "scale/bias must be 1-D of length C")),
        R("InstanceNormalization", "epsilon must be > 0", check(
            lambda ctx, node: attr_of(node, "epsilon", 1e-5) > 0, "epsilon <= 0")),
        R("IsInf", "float32/float16 inputs only", dtype_in(0, ("float32", "float16"))),
        R("IsInf", "QNN CPU backend only", only("cpu", cpu)),
        R("LRN", "input rank 3 or 4", rank(0, allowed=(3, 4))),
        R("LRN", "size must be odd", check(lambda ctx, node: attr_of(node, "size", 1) % 2 == 1,
                                           "size is even")),
        R("LRN", "alpha > 0 and beta > 0", check(
            lambda ctx, node: attr_of(node, "alpha", 1e-4) > 0 and attr_of(node, "beta", 0.75) > 0,
            "alpha and beta must be > 0")),
        R("LayerNormalization", "single output", outputs_at_most(1)),
        R("LayerNormalization", "HTP: axis must be the last dim", when(lambda c, n: htp,
                                                                       last_axis(-1))),
        R(["LogSoftmax", "Softmax"], "input must not be an initializer", not_const(0)),
        R("LogSoftmax", "opset < 13: axis must be rank-1", when(
            lambda c, n: c.opset is not None and c.opset < 13, last_axis(1))),
    ]


def _pool_matmul_nms_rules(htp: bool, gpu: bool, htp_bf16: bool) -> list:
    """LpNormalization to NonMaxSuppression: LpPool, MatMul, MaxPool and NMS."""
    return [
        R("LpNormalization", "p must be 2", attr_is("p", 2, 2), count=2),
        R("LpPool", "p must be 1 or 2", attr_in("p", (1, 2), 2)),
        R("LpPool", "rank-5 (3D pooling) needs GPU", when(
            lambda c, n: c.rank(n, 0) == 5, setting(gpu or (htp and htp_bf16),
                                                    "3D LpPool needs the GPU backend or HTP "
                                                    "bf16_mode"))),
        R("MatMul", "HTP input dtype pairs", when(lambda c, n: htp, check(
            _matmul_pairs_ok, "quantized input types are not (u8,u8), (u8,u16) or (u16,u8)"))),
        R("MatMul", "activation inputs: per-tensor", per_tensor_dq((0, 1), only_nonconst=True)),
        R("MaxPool", "2D kernel/strides/pads only for 2D pool", check(
            _pool_attrs_2d, "kernel/strides/pads must be 2-D for a 2-D pool")),
        R("NonMaxSuppression", "must be static constants", const(2, 3, 4)),
        R("NonMaxSuppression", "max_output_boxes_per_class must be > 0", value(
            2, lambda v, c, n: bool((v > 0).all()), "max_output_boxes_per_class <= 0")),
        R("NonMaxSuppression", "center_point_box must be 0", attr_is("center_point_box", 0, 0)),
        R("NonMaxSuppression", "not on GPU backend", setting(not gpu, "not on the GPU backend")),
    ]


def _pad_reduce_rules(htp: bool) -> list:
    """OneHot to Reshape: Pad, QLinearMatMul, Range and the reductions."""
    return [
        R("OneHot", "depth and values (inputs 1,2)", const(1, 2)),
        R("OneHot", "indices int32, int64 or uint32", dtype_in(0, ("int32", "int64", "uint32"))),
        R("Pad", "mode constant, reflect or edge", attr_in("mode", ("constant", "reflect", "edge"),
                                                           "constant")),
        R("Pad", "axes input (input 3) not supported", absent_input(3)),
        R("Pad", "input rank <= 5", rank(0, hi=5)),
        R("Pad", "pads (input 1) and constant_value (input 2)", const(1, 2)),
        R("Pad", "reflect mode: each pad amount", when(
            lambda c, n: attr_of(n, "mode", "constant") == "reflect",
            value(1, _reflect_pads_ok, "a reflect pad exceeds dim-1"))),
        R("Pad", "constant_value: per-tensor quantization", per_tensor_dq((2,))),
        R("QLinearMatMul", "per-tensor (scalar) scale/zero point only", check(
            lambda ctx, node: all((numel(ctx.shape(node, p)) or 1) == 1
                                  for p in (1, 2, 4, 5, 6, 7) if ctx.has_input(node, p)),
            "scales/zero points must be scalars")),
        R("QLinearMatMul", "scale float32/float16/bfloat16", first(
            dtype_in(1, ("float32", "float16", "bfloat16")), dtype_in(0, ("int8", "uint8")),
            dtype_in(3, ("int8", "uint8")), dtype_in(0, ("int8", "uint8"), out=True))),
        R("Range", "start, limit, delta (inputs 0-2)", const(0, 1, 2)),
        R(["ReduceL2", "ReduceLogSumExp"], "quantized input not supported", check(
            lambda ctx, node: not ctx.in_qdq(node) and ctx.dtype(node, 0) not in QUANT,
            "quantized input")),
        R("ReduceLogSumExp", "decomposed to", not_a_restriction("a lowering detail")),
        R(REDUCE_AXES, "axes (input 1), if non-empty", when(
            lambda c, n: numel(c.shape(n, 1)) != 0, const(1))),
        R(["ReduceMax", "ReduceMean", "ReduceMin", "ReduceSum"], "empty axes with "
          "noop_with_empty_axes=1", no_noop_on_empty_axes()),
        R("ReduceProd", "not supported on the HTP backend", setting(not htp, "not on HTP")),
        R("Reshape", "output shape comes from static shape inference", static(0, out=True)),
    ]


def _resize_shape_rules(htp: bool, gpu: bool, qairt_sdk: tuple, only) -> list:
    """Resize to the end: Resize, shape ops, TopK and the contrib ops."""
    return [
        R("Resize", "tf_half_pixel_for_nn: on HTP only", when(
            lambda c, n: htp and attr_of(n, "coordinate_transformation_mode", "half_pixel")
            == "tf_half_pixel_for_nn", first(
                attr_is("mode", "nearest", "nearest"),
                attr_is("nearest_mode", "floor", "round_prefer_floor"),
                rank(0, allowed=(4,))))),
        R("Resize", "input rank >= 3; max rank 5 on NPU", rank(0, lo=3, hi=5 if htp else None)),
        R("Resize", "only spatial dims may change", check(
            lambda ctx, node: _same_dims(ctx.shape(node, 0), ctx.shape(node, 0, out=True), 2),
            "batch/channel dims change")),
        R("Resize", "antialias not supported", attr_is("antialias", 0, 0)),
        R(["RotaryEmbedding", "com.microsoft:RotaryEmbedding"], "HTP backend only",
          only("htp", htp)),
        R("Shape", "start/end supported", not_a_restriction("extra support")),
        R("Shape", "empty result (end <= start)", check(shape_slice_nonempty,
                                                        "empty Shape result")),
        R("Shape", "output int64", not_a_restriction("a lowering detail")),
        R("Slice", "starts, ends, axes, steps", const(1, 2, 3, 4)),
        R("Split", "split (input 1), if present", const(1)),
        R("Sum", "exactly 2 inputs", inputs_between(2, 2)),
        R("Tile", "repeats (input 1)", const(1)),
        R("TopK", "K (input 1) must be a constant", const(1)),
        R("TopK", "sorted must be 1", attr_is("sorted", 1, 1)),
        R("TopK", "largest must be 1", attr_is("largest", 1, 1)),
        R("TopK", "axis must be the last dim", last_axis(-1)),
        R(["com.microsoft:GatherBlockQuantized", "com.microsoft:GroupQueryAttention"],
          "GPU backend only; QAIRT SDK >= 2.48", setting(
              gpu and tuple(qairt_sdk) >= (2, 48), "needs the GPU backend and QAIRT SDK 2.48+")),
        R("com.microsoft:GatherBlockQuantized", "bits=4, block_size power of 2", first(
            attr_is("bits", 4, 4), check(lambda ctx, node: _pow2_at_least(
                attr_of(node, "block_size", 128), 16), "block_size must be a power of 2 >= 16"),
            attr_is("quantize_axis", 1, 1), absent_input(3))),
        R("com.microsoft:GroupQueryAttention", "rotary_interleaved=0", first(
            attr_is("rotary_interleaved", 0, 0), attr_absent("k_quant_type"),
            attr_absent("v_quant_type"))),
        R(["com.microsoft:DequantizeLinear", "com.microsoft:QuantizeLinear"],
          "adds 16-bit integer", not_a_restriction("extra support")),
    ]


# ---------------------------------------------------------------------- helpers
#: Transpose perms of the rank-6 SpaceToDepth decompositions (DCR, CRD), which
#: Rank6ToRank5Fusion leaves to the SpaceToDepth fusion
_S2D_PERMS = ([0, 3, 5, 1, 2, 4], [0, 1, 3, 5, 2, 4])


def _in_rank6_chain(ctx, node) -> bool:
    """Is ``node`` a member of a Reshape -> Transpose -> Reshape chain that the QNN EP's
    Rank6ToRank5Fusion lowers to rank 5 (onnxruntime-qnn
    builder/qnn_node_group/reshape_transpose_rank5.cc: MatchRank6ToRank5Pattern,
    ValidatePatternConditions)?"""
    if node.op_type not in ("Reshape", "Transpose"):
        return False
    chain = _rank6_chain_of(ctx, node)
    return chain is not None and _rank6_chain_ok(ctx, *chain)


def _rank6_chain_of(ctx, node) -> tuple | None:
    """The (Reshape, Transpose, Reshape) chain ``node`` can sit in, each link the only reader
    of the previous node's output."""
    def only_reader(n, op):
        readers = ctx.consumers(n.outputs[0]) if n.outputs and n.outputs[0] else []
        return readers[0] if len(readers) == 1 and readers[0].op_type == op else None

    def feeder(n, op):
        p = ctx.producer(n, 0)
        return p if p is not None and p.op_type == op and only_reader(p, n.op_type) is n \
            else None

    if node.op_type == "Transpose":
        first_, last = feeder(node, "Reshape"), only_reader(node, "Reshape")
        return (first_, node, last) if first_ and last else None
    mid = only_reader(node, "Transpose")
    if mid is not None and (last := only_reader(mid, "Reshape")) is not None:
        return node, mid, last
    mid = feeder(node, "Transpose")
    if mid is not None and (first_ := feeder(mid, "Reshape")) is not None:
        return first_, mid, node
    return None


def _rank6_chain_ok(ctx, reshape1, transpose, reshape2) -> bool:
    """Rank6ToRank5Fusion's conditions: constant shapes, rank-6 middle tensors sharing a unit
    dim that the (non-SpaceToDepth) perm keeps in place, and rank <= 5 at the chain's ends."""
    if not all(ctx.has_input(r, 1) and ctx.input(r, 1).is_constant for r in (reshape1, reshape2)):
        return False
    t0, t3 = ctx.shape(reshape1, 0), ctx.shape(reshape2, 0, out=True)
    t1, t2 = ctx.shape(reshape1, 0, out=True), ctx.shape(transpose, 0, out=True)
    if None in (t0, t1, t2, t3) or len(t1) != 6 or len(t2) != 6 or max(len(t0), len(t3)) > 5:
        return False
    perm = list(attr_of(transpose, "perm", []))
    unit = next((i for i in range(6) if t1[i] == 1 and t2[i] == 1), None)
    return unit is not None and len(perm) == 6 and perm not in _S2D_PERMS and perm[unit] == unit


def _lone_quantize_op(subgraph) -> str | None:
    """The EP drops a partition that is a single QuantizeLinear or DequantizeLinear node."""
    if len(subgraph) == 1 and subgraph.op_types[0] in ("QuantizeLinear", "DequantizeLinear"):
        return f"a partition of a single {subgraph.op_types[0]} is not supported by the QNN EP"
    return None


def _not_graph_io_quantization(ctx, node) -> bool:
    if node.op_type == "QuantizeLinear":
        t = ctx.input(node, 0)
        return t is None or not t.is_input
    if node.op_type == "DequantizeLinear":
        t = ctx.output(node, 0)
        return t is None or not t.is_output
    return True


def _is_c_vector(ctx, node, pos) -> bool:
    if not ctx.has_input(node, pos):
        return True
    s, x = ctx.shape(node, pos), ctx.shape(node, 0)
    if s is None:
        return True
    if len(s) != 1:
        return False
    return x is None or len(x) < 2 or not isinstance(x[1], int) or s[0] == x[1]


def _per_channel_weight_ok(ctx, node, axis: int, signed: bool = True) -> bool:
    dq = ctx.dq_producer(node, 1)
    if dq is None:
        return True
    n = numel(ctx.shape(dq, 1))
    if n is None or n <= 1:
        return True
    if signed and ctx.dtype(dq, 0) not in (None, "int8", "int16", "int4"):
        return False
    return attr_of(dq, "axis", 1) == axis


def _indices_in_range(v, ctx, node) -> bool:
    dim = axis_dim(ctx, node)
    if not isinstance(dim, int):
        return True
    w = v.ravel()
    w = w + (w < 0) * dim
    return bool(((w >= 0) & (w < dim)).all())


def _if_branches_ok(ctx, node) -> bool:
    if len([o for o in node.outputs if o]) != 1:
        return False
    then, other = node.attrs.get("then_branch"), node.attrs.get("else_branch")
    if then is None or other is None:
        return True
    return len(then.output) == 1 and len(other.output) == 1 and \
        then.output[0].type == other.output[0].type


def _matmul_pairs_ok(ctx, node) -> bool:
    dqs = [ctx.dq_producer(node, p) for p in (0, 1)]
    if None in dqs:
        return True
    pair = tuple(ctx.dtype(d, 0) for d in dqs)
    return None in pair or pair in (("uint8", "uint8"), ("uint8", "uint16"), ("uint16", "uint8"))


def _pool_attrs_2d(ctx, node) -> bool:
    if ctx.rank(node, 0) != 4:
        return True
    k, s, p = (node.attrs.get(a) for a in ("kernel_shape", "strides", "pads"))
    return (k is None or len(k) == 2) and (s is None or len(s) == 2) and \
        (p is None or len(p) == 4)


def _reflect_pads_ok(v, ctx, node) -> bool:
    s = ctx.shape(node, 0)
    if s is None:
        return True
    pads = v.ravel().tolist()
    r = len(s)
    if len(pads) != 2 * r:
        return True
    return all(not isinstance(s[i % r], int) or p <= s[i % r] - 1 for i, p in enumerate(pads))


def _same_dims(a, b, count) -> bool:
    if a is None or b is None:
        return True
    return all(not (isinstance(x, int) and isinstance(y, int)) or x == y
               for x, y in zip(a[:count], b[:count]))


def _pow2_at_least(x: int, lo: int) -> bool:
    return x >= lo and x & (x - 1) == 0
