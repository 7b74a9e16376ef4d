"""Intel NPU through ONNX Runtime's OpenVINO EP (the EP checks NPU against its CPU op lists).

The op table (``openvino_ep_npu.json`` in this package's ``data`` folder) transcribes the OpenVINO
EP's op lists in ONNX Runtime 1.22 (upstream data_ops.cc and capability.cc) and the OpenVINO ONNX
frontend's op table; ``clusterkit verify`` agrees with the real EP of ``clusterkit[openvino]``
(onnxruntime-ep-openvino 1.8.1, virtual NPU) node by node on every bundled and light model (the
table's ``verified`` block). Setting: ``ov_version`` — the installed OpenVINO version (default
``"2025.1"``, the newest the table references). An op row applies only from its NPU version; I/O
dtypes follow the CPU list (float16 from 2022.2, int4/uint4 from 2024.4); scalar (rank-0)
non-constant I/O is refused unless the op's row allows it from a version <= the installed one;
zero-sized dims in non-constant I/O are refused except for the ops the CPU list tolerates (constant
initializer inputs are not checked, as upstream).

Whole-partition rules of the EP's GetCapability (``partition_rules`` in the data; applied only
with the setting ``partition_rules=True``, because the table's op list predates the flat list of
the newest EP source, so with them a Conv feeding an op missing from the table, such as
HardSwish, would drop whole partitions that a newer EP keeps): a partition
with no non-constant input is dropped; when the model is not wholly taken, so is a partition of
one node (other than EPContext) and one where a Conv's or an Identity's output leaves the
partition for another node; when it is wholly taken, a model of at most three nodes whose first
node is a "supported only in a model" op, and a one-node Reshape whose shape is not an
initializer or Expand whose output is not float16, are left to the CPU.

Value inputs: the device computes them inside its clusters (``computes_value_inputs``, from the
data's ``value_input_policy``): the real EP takes all 4,903 nodes of ``llama_48l_dynamic``,
Reshapes whose shapes are computed by Shape -> Gather -> Concat chains included, as one
partition, and so does clusterkit.

Ops are keyed by op type (ORT's list does not separate the com.microsoft contrib ops); ops the
OpenVINO ONNX frontend does not import are refused too. The NPU compiler may still reject ops
at compile time: that is not decidable from the graph.
"""

from __future__ import annotations

import re

from clusterkit.selectors._checks import Check, check, decided_by, when
from clusterkit.selectors._facts import attr_of
from clusterkit.selectors._optable import load_table
from clusterkit.selectors._property import TableProperty
from clusterkit.selectors._rules import N, R, constant_inputs_only
from clusterkit.selectors._tensor_checks import dtype_in, io_dtypes_in

TABLE = "openvino_ep_npu.json"
_BASE_TYPES = {"bool", "float32", "int32", "int16", "uint16", "int8", "uint8", "int64"}


def make_property(device: str = "openvino_npu", *, ov_version: str = "2025.1",
                  partition_rules: bool = False) -> TableProperty:
    """The OpenVINO NPU device (see the module docstring)."""
    table = load_table(TABLE)
    ov = _version(ov_version)
    frontend_missing = frozenset(table.raw.get("onnx_frontend_unsupported_default_domain_ops", ()))

    def available(entry) -> bool:
        return ov >= _npu_version(entry) and entry.key not in frontend_missing

    rules = _global_rules(table, ov, ov_version) + _op_rules(ov)
    notes = [
        N("*", "GPU I/O dtypes", "applies to the GPU device; this selector models NPU"),
        N("*", "HETERO/MULTI/AUTO device strings", "applies to meta devices, not NPU"),
    ]
    return TableProperty(device, name="openvino_npu", table=table, rules=rules, notes=notes,
                         settings={"ov_version": ov_version, "partition_rules": partition_rules},
                         available=available,
                         unavailable_reason=f"not available for NPU in OpenVINO {ov_version}",
                         key=_key,
                         subgraph_rules=_partition_rules(table) if partition_rules else ())


# ---------------------------------------------------------------------- rule sections
def _global_rules(table, ov: tuple[int, ...], ov_version: str) -> list:
    """The I/O dtype, scalar, zero-dim and availability rules that apply to every op."""
    types = set(_BASE_TYPES)
    if ov >= (2022, 2):
        types.add("float16")
    if ov >= (2024, 4):
        types |= {"int4", "uint4"}
    scalar_ok = {k: _scalar_version(e) for k, e in table.ops.items()}
    zero_ok = frozenset(k for k, e in table.ops.items() if any(
        c.text.startswith("zero-sized dims tolerated") for c in e.conditions))
    return [
        R("*", "CPU (and NPU via CPU) I/O dtypes", io_dtypes_in(
            types, f"is not supported by OV {ov_version} on NPU")),
        R("*", "non-initializer inputs/outputs must not be scalars", _no_scalar_io(scalar_ok, ov)),
        R("*", "zero-sized dims in non-constant inputs and in outputs rejected",
          _no_zero_dims_except(zero_ok)),
        R("*", "an op row applies only if the installed OV version",
          decided_by("op availability (ov_version)")),
        R(_with("scalar (rank-0)", table), "scalar (rank-0) inputs/outputs allowed",
          decided_by("the global scalar rule")),
        R(sorted(zero_ok), "zero-sized dims tolerated", decided_by("the global zero-dim rule")),
        R("Pad", "scalar-shaped I/O tolerated when fed by DequantizeLinear",
          decided_by("the global scalar rule")),
    ]


def _op_rules(ov: tuple[int, ...]) -> list:
    """The per-op checks (ReduceMax, Reshape, Upsample, Unsqueeze)."""
    return [
        R("ReduceMax", "rejected when any input is int8 or uint8", when(
            lambda c, n: ov >= (2024, 1), check(
                lambda ctx, node: not any(ctx.dtype(node, p) in ("int8", "uint8")
                                          for p in range(len(node.inputs))),
                "int8/uint8 input"))),
        R("Reshape", "rejected when the shape input tensor itself is empty", when(
            lambda c, n: ov >= (2023, 1), check(
                lambda ctx, node: not any(d == 0 for d in (ctx.shape(node, 1) or ())),
                "the shape input is empty"))),
        R("Upsample", "'scales' attribute has > 2 entries", check(
            lambda ctx, node: len(attr_of(node, "scales", [])) <= 2
            or list(attr_of(node, "scales"))[:2] == [1.0, 1.0], "scales[0:2] are not 1")),
        R("Upsample", "rejected if input rank is 1 or 4", check(
            lambda ctx, node: ctx.rank(node, 0) not in (1, 4), "input rank 1 or 4")),
        R("Upsample", "input must be float32, int8 or float16",
          dtype_in(0, ("float32", "int8", "float16"))),
        R("Unsqueeze", "one of its inputs is named 'axes'", when(
            lambda c, n: ov >= (2023, 1), check(lambda ctx, node: "axes" not in node.inputs,
                                                "an input is named 'axes'"))),
    ]


# ---------------------------------------------------------------------- helpers
def _key(node) -> str | None:
    """OpenVINO's list is keyed by op type, for ONNX and com.microsoft ops alike."""
    return node.op_type if node.domain in ("", "ai.onnx", "com.microsoft") else None


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text)[:2])


def _npu_version(entry) -> tuple[int, ...]:
    npu = entry.extra.get("devices_min_ov_version", {}).get("NPU", "0.0")
    return _version(npu)


def _scalar_version(entry):
    """From which OV version the (NPU = CPU list) row allows scalar I/O, or None."""
    found = []
    for c in entry.conditions:
        if not c.text.startswith("scalar (rank-0) inputs/outputs allowed:"):
            continue
        for part in c.text.split(":", 1)[1].split(";"):
            devices, _, ver = part.partition("from OV")
            if "All" in devices or "CPU" in devices:
                found.append(_version(ver))
    return min(found) if found else None


def _with(fragment: str, table) -> list[str]:
    return sorted(k for k, e in table.ops.items() if any(fragment in c.text for c in e.conditions))


def _no_scalar_io(scalar_ok: dict, ov: tuple[int, ...]) -> Check:
    """No non-constant rank-0 input or output, unless the op's row allows it from a version
    <= ``ov`` (or it is a Pad fed by DequantizeLinear)."""
    def run(ctx, node) -> str | None:
        since = scalar_ok.get(node.op_type)
        if since is not None and ov >= since:
            return None
        if node.op_type == "Pad" and ctx.in_qdq(node):
            return None  # scalar-shaped I/O tolerated when fed by DequantizeLinear
        for t in ctx.io_tensors(node):
            if t.shape == () and not t.is_constant:
                return f"tensor {t.name!r} is a scalar (rank 0)"
        return None
    return run


def _no_zero_dims_except(zero_ok: frozenset) -> Check:
    """No zero-sized dim in a non-constant input or in an output, except for the ops in
    ``zero_ok`` (constant initializer inputs, such as an empty Resize ``roi``, are skipped)."""
    def run(ctx, node) -> str | None:
        if node.op_type in zero_ok:
            return None
        for t in ctx.io_tensors(node):
            if t.name in node.inputs and t.is_constant:
                continue
            if t.shape and any(d == 0 for d in t.shape):
                return f"tensor {t.name!r} has a zero-sized dim {t.shape}"
        return None
    return run


# ---------------------------------------------------------------------- partition rules
def _partition_rules(table) -> tuple:
    """The whole-partition rules of GetCapability (the data's ``partition_rules``, in order)."""
    only_in_model = frozenset(table.raw["ops_supported_only_in_model"])
    return (constant_inputs_only, _lone_node, _conv_or_identity_output_leaves,
            _whole_model_rules(only_in_model))


def _wholly_taken(subgraph) -> bool:
    """Whether ``subgraph`` holds every node onnxruntime does not fold beforehand."""
    graph, inside = subgraph.graph, set(subgraph.nodes)
    return all(v in inside or graph.nodes[v].is_folded for v in range(graph.n))


def _lone_node(subgraph) -> str | None:
    """In a model not wholly taken, a one-node partition (but EPContext) is dropped."""
    if len(subgraph) == 1 and subgraph.op_types[0] != "EPContext" \
            and not _wholly_taken(subgraph):
        return "a partition of a single node is dropped when the model is not wholly taken"
    return None


def _conv_or_identity_output_leaves(subgraph) -> str | None:
    """In a model not wholly taken, a partition is dropped when the first output of one of
    its Conv or Identity nodes is a partition output that some node reads."""
    if _wholly_taken(subgraph):
        return None
    graph, outputs = subgraph.graph, set(subgraph.outputs)
    for v in subgraph.nodes:
        node = graph.nodes[v]
        if node.op_type in ("Conv", "Identity") and node.outputs \
                and node.outputs[0] in outputs and graph.tensors[node.outputs[0]].consumers:
            return f"the output of {node.op_type} {node.name!r} leaves the partition"
    return None


def _whole_model_rules(only_in_model: frozenset):
    """The checks GetCapability makes when every node is supported: a model of at most three
    nodes whose first node is an op "supported only in a model", and a one-node model
    (SpecialConditionForClusterSizeOne: Reshape with a non-initializer shape, Expand with a
    non-float16 output) are left to the CPU."""
    def run(subgraph) -> str | None:
        if len(subgraph) > 3 or not _wholly_taken(subgraph):
            return None
        graph = subgraph.graph
        first = graph.nodes[subgraph.nodes[0]]
        if first.op_type in only_in_model:
            return f"a model of at most 3 nodes starting with {first.op_type} is left to the CPU"
        if len(subgraph) == 1 and _special_single_node(graph, first):
            return f"a model of a single {first.op_type} is left to the CPU"
        return None
    return run


def _special_single_node(graph, node) -> bool:
    if node.op_type == "Reshape" and len(node.inputs) > 1:
        return not graph.tensors[node.inputs[1]].is_initializer
    if node.op_type == "Expand" and node.outputs:
        return graph.tensors[node.outputs[0]].dtype != "float16"
    return False
