"""Cost estimates for device placement: compute time per node and device, transfer time per
tensor and link.

Default estimates (no measurements needed):

- **FLOPs from shapes** per op type (:func:`node_flops`): convolutions and matrix products count
  two FLOPs per multiply-add, elementwise ops a few per element (more for transcendental ones),
  pooling the window size per output, reductions and normalizations a few per input element,
  Softmax five per element, attention ops their projections plus the two score products, RNNs
  their gate products per step. Dimensions that are unknown (dynamic) count as 1.
- **Compute time** on a device (:meth:`CostModel.compute_time`): a roofline,
  ``overhead + max(flops * scale / flops_per_second, bytes / memory_bandwidth)``, where ``bytes``
  is what the node reads and writes and ``scale`` is an optional per-op-type factor of the
  device (its op table says how well it runs that op).
- **Transfer time** (:meth:`CostModel.transfer_time`): ``latency + bytes / bandwidth`` over the
  link between two devices; constants are free, graph inputs come from the host (the fallback
  device) and graph outputs go back to it.

Everything can be overridden from a JSON file (:meth:`CostModel.from_json`)::

    {
      "host": "cpu",                                   # the fallback's name (optional)
      "devices": {
        "cpu": {"flops": 5e10, "memory_bandwidth": 2e10, "overhead": 1e-6},
        "npu": {"flops": 4e12, "overhead": 2e-5,
                "ops": {"Softmax": 4.0, "Conv": 0.5},        # time multipliers per op type
                "op_seconds": {"Reshape": 1e-6}}              # fixed seconds per op type
      },
      "default_device": {"flops": 1e12},               # devices not listed
      "links": {"default": {"bandwidth": 1e10, "latency": 1e-5},
                "cpu->npu": {"bandwidth": 8e9}, "npu<->gpu": {"bandwidth": 5e10}},
      "nodes": {"conv1": {"npu": 1.2e-4, "cpu": 3e-3}}  # measured seconds per node name
    }
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from clusterkit.errors import ConstraintError
from clusterkit.graph.core import Graph, Node

# ----------------------------------------------------------------------------- FLOPs
_CHEAP = {"Add", "Sub", "Mul", "Div", "Neg", "Abs", "Relu", "LeakyRelu", "PRelu", "Max", "Min",
          "Mean", "Sum", "Clip", "Where", "Equal", "Less", "Greater", "LessOrEqual",
          "GreaterOrEqual", "And", "Or", "Xor", "Not", "Cast", "CastLike", "Sign", "Floor",
          "Ceil", "Round", "Mod", "BitShift", "IsNaN", "IsInf", "Dropout", "Identity",
          "ThresholdedRelu", "Shrink", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot"}
_TRANSCENDENTAL = {"Exp", "Log", "Sigmoid", "Tanh", "Erf", "Gelu", "FastGelu", "HardSwish",
                   "HardSigmoid", "Softplus", "Softsign", "Elu", "Selu", "Celu", "Mish", "Sin",
                   "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh",
                   "Atanh", "Sqrt", "Reciprocal", "Pow", "QuickGelu", "BiasGelu", "Swish"}
_FREE = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Shape", "Size", "Constant",
         "ConstantOfShape", "Identity", "Optional", "OptionalGetElement"}
_MOVE = {"Transpose", "Concat", "Slice", "Gather", "GatherElements", "GatherND", "Split", "Pad",
         "Tile", "Expand", "ScatterND", "ScatterElements", "Scatter", "DepthToSpace",
         "SpaceToDepth", "Compress", "Trilu", "OneHot", "Range", "EyeLike", "ReverseSequence",
         "SplitToSequence", "ConcatFromSequence", "SequenceAt", "SequenceConstruct"}
_REDUCE = {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
           "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", "ArgMax", "ArgMin",
           "GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool", "CumSum"}
_POOL = {"MaxPool", "AveragePool", "LpPool", "MaxRoiPool", "RoiAlign"}
_NORM = {"LayerNormalization": 8, "SimplifiedLayerNormalization": 6,
         "SkipLayerNormalization": 9, "InstanceNormalization": 8, "GroupNormalization": 8,
         "MeanVarianceNormalization": 8, "LpNormalization": 4, "LRN": 6,
         "BatchNormalization": 2, "RMSNormalization": 6}
_SOFTMAX = {"Softmax", "LogSoftmax", "Hardmax"}
_ATTENTION = {"Attention", "MultiHeadAttention", "GroupQueryAttention", "PackedAttention",
              "ScaledDotProductAttention", "DecoderMaskedMultiHeadAttention",
              "SparseAttention", "PagedAttention"}
_CONV = {"Conv", "ConvInteger", "QLinearConv", "FusedConv", "NhwcConv", "DeformConv"}
_MATMUL = {"MatMul", "MatMulInteger", "QLinearMatMul", "FusedMatMul", "MatMulNBits",
           "DynamicQuantizeMatMul", "MatMulIntegerToFloat"}


def _dims(shape: tuple | None) -> list[int] | None:
    """Shape with unknown (dynamic) dimensions as 1; None when the rank is unknown."""
    if shape is None:
        return None
    return [d if isinstance(d, int) and d >= 0 else 1 for d in shape]


def _numel(shape: tuple | None) -> int:
    d = _dims(shape)
    return int(math.prod(d)) if d is not None else 1


def _shape(graph: Graph, name: str) -> tuple | None:
    if not name:
        return None
    t = graph.tensors.get(name)
    return None if t is None else t.shape


def node_flops(graph: Graph, node: Node | int) -> float:
    """Estimated floating-point operations of one node, from its op type and tensor shapes."""
    if isinstance(node, (int, np.integer)):
        node = graph.nodes[int(node)]
    op = node.op_type
    ins = [_shape(graph, t) for t in node.inputs]
    outs = [_shape(graph, t) for t in node.outputs]
    out0 = outs[0] if outs else None
    in0 = ins[0] if ins else None
    n_out = sum(_numel(s) for s in outs) if outs else 1
    n_in = _numel(in0)
    a = node.attrs
    if op in _FREE:
        return 0.0
    if op in _CONV:
        return float(_conv_flops(node, ins, out0))
    if op == "ConvTranspose":
        x, w = _dims(in0), _dims(ins[1] if len(ins) > 1 else None)
        if x is None or w is None or len(w) < 2:
            return float(2 * n_out)
        return float(2 * x[0] * w[0] * math.prod(x[2:]) * w[1] * math.prod(w[2:]))
    if op in _MATMUL:
        x = _dims(in0)
        k = x[-1] if x else 1
        return float(2 * _numel(out0) * k)
    if op == "Gemm":
        x = _dims(in0)
        if x is None or len(x) != 2:
            return float(2 * _numel(out0))
        k = x[0] if a.get("transA", 0) else x[1]
        bias = _numel(out0) if len(node.inputs) > 2 and node.inputs[2] else 0
        return float(2 * _numel(out0) * k + bias)
    if op == "Einsum":
        return float(2 * max(n_out, n_in))
    if op in _CHEAP:
        return float(n_out)
    if op in _TRANSCENDENTAL:
        return float(8 * n_out)
    if op in _NORM:
        return float(_NORM[op] * max(n_in, n_out))
    if op in _SOFTMAX:
        return float(5 * n_out)
    if op in _POOL:
        kernel = a.get("kernel_shape") or [1]
        return float(n_out * math.prod(int(v) for v in kernel))
    if op in _REDUCE:
        return float(n_in)
    if op in _ATTENTION:
        return float(_attention_flops(node, ins, out0))
    if op in ("LSTM", "GRU", "RNN"):
        return float(_rnn_flops(node, ins))
    if op in ("TopK", "Sort", "NonZero", "Unique", "NonMaxSuppression"):
        return float(n_in * max(1.0, math.log2(max(n_in, 2))))
    if op in ("Resize", "Upsample", "GridSample"):
        return float(4 * n_out)
    if op in _MOVE:
        return float(n_out)
    return float(max(n_out, 1))


def _conv_flops(node: Node, ins: list, out0: tuple | None) -> int:
    out = _dims(out0)
    w = _dims(ins[1] if len(ins) > 1 else None)
    if out is None or len(out) < 2:
        return 2 * _numel(out0)
    if w is not None and len(w) >= 2:
        per_out = w[1] * math.prod(w[2:])
    else:
        x = _dims(ins[0] if ins else None)
        cin = x[1] if x and len(x) > 1 else 1
        group = int(node.attrs.get("group", 1) or 1)
        per_out = max(1, cin // group) * math.prod(int(k) for k in
                                                   node.attrs.get("kernel_shape", [1]))
    bias = math.prod(out) if len(node.inputs) > 2 and node.inputs[2] else 0
    return 2 * math.prod(out) * per_out + bias


def _attention_flops(node: Node, ins: list, out0: tuple | None) -> int:
    q = _dims(ins[0] if ins else None)
    out = _dims(out0)
    if q is None or len(q) < 2:
        return 2 * _numel(out0)
    heads = int(node.attrs.get("num_heads", 1) or 1)
    b, s, hidden = (q[0], q[1], q[-1]) if len(q) >= 3 else (1, q[0], q[-1])
    total = 0
    if node.op_type == "Attention" and len(ins) > 1 and _dims(ins[1]) is not None:
        w = _dims(ins[1])  # input projection [hidden_in, 3 * hidden]
        assert w is not None  # tested just above
        total += 2 * b * s * w[0] * w[-1]
        hidden = w[-1] // 3 if w[-1] >= 3 else hidden
        kv_len = s
    else:
        k = _dims(ins[1] if len(ins) > 1 else None)
        kv_len = k[-2] if k is not None and len(k) >= 2 else s
        if out is not None and len(out) >= 1:
            hidden = out[-1]
    total += 4 * b * s * kv_len * hidden + 5 * b * heads * s * kv_len
    return total


def _rnn_flops(node: Node, ins: list) -> int:
    x = _dims(ins[0] if ins else None)
    w = _dims(ins[1] if len(ins) > 1 else None)
    r = _dims(ins[2] if len(ins) > 2 else None)
    if x is None or w is None or r is None or len(x) < 3 or len(w) < 3:
        return 1
    seq, batch, inp = x[0], x[1], x[2]
    dirs, gates_h = w[0], w[1]
    hidden = r[-1]
    return 2 * seq * batch * dirs * gates_h * (inp + hidden) + 8 * seq * batch * dirs * gates_h


def graph_flops(graph: Graph) -> np.ndarray:
    """FLOPs per node (float64)."""
    return np.fromiter((node_flops(graph, nd) for nd in graph.nodes), dtype=np.float64,
                       count=graph.n)


def node_bytes(graph: Graph, node: Node) -> int:
    """Bytes a node reads and writes (every tensor of known size, constants included)."""
    total = 0
    for t in set(node.all_inputs()) | {o for o in node.outputs if o}:
        ten = graph.tensors.get(t)
        if ten is not None and ten.nbytes:
            total += ten.nbytes
    return total


# ----------------------------------------------------------------------------- cost model
@dataclass
class DeviceSpec:
    """Throughput of one device: FLOP/s, memory bytes/s, seconds per node, per-op-type time
    multipliers (``ops``) and fixed per-op-type seconds (``op_seconds``)."""

    flops: float = 1e12
    memory_bandwidth: float = 2e11
    overhead: float = 1e-5
    ops: dict[str, float] = field(default_factory=dict)
    op_seconds: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str, base: "DeviceSpec | None" = None
                  ) -> "DeviceSpec":
        known = {"flops", "memory_bandwidth", "overhead", "ops", "op_seconds"}
        bad = sorted(set(data) - known)
        if bad:
            raise ConstraintError(f"cost model: {where} has unknown key {bad[0]!r} (keys: "
                                  f"{', '.join(sorted(known))})")
        base = base or cls()
        spec = cls(base.flops, base.memory_bandwidth, base.overhead, dict(base.ops),
                   dict(base.op_seconds))
        for key in ("flops", "memory_bandwidth", "overhead"):
            if key in data:
                setattr(spec, key, _number(data[key], f"{where}.{key}",
                                           positive=key != "overhead"))
        for key in ("ops", "op_seconds"):
            if key in data:
                if not isinstance(data[key], Mapping):
                    raise ConstraintError(f"cost model: {where}.{key} must map op types to "
                                          "numbers")
                getattr(spec, key).update({str(k): _number(v, f"{where}.{key}.{k}")
                                           for k, v in data[key].items()})
        return spec

    def to_dict(self) -> dict[str, Any]:
        return {"flops": self.flops, "memory_bandwidth": self.memory_bandwidth,
                "overhead": self.overhead, "ops": dict(self.ops),
                "op_seconds": dict(self.op_seconds)}


@dataclass
class Link:
    """A link between two devices: bytes per second and seconds per transfer."""

    bandwidth: float = 1e10
    latency: float = 1e-5


DEFAULT_HOST = DeviceSpec(flops=5e10, memory_bandwidth=2e10, overhead=1e-6)
DEFAULT_ACCELERATOR = DeviceSpec(flops=1e12, memory_bandwidth=2e11, overhead=1e-5)


@dataclass
class CostModel:
    """Compute and transfer times. ``host`` names the fallback device (None: whatever the
    problem's fallback is)."""

    devices: dict[str, DeviceSpec] = field(default_factory=dict)
    overrides: dict[str, dict[str, Any]] = field(default_factory=dict)
    default_device: DeviceSpec = field(default_factory=lambda: DeviceSpec(
        **DEFAULT_ACCELERATOR.to_dict()))
    host_device: DeviceSpec = field(default_factory=lambda: DeviceSpec(
        **DEFAULT_HOST.to_dict()))
    links: dict[tuple[str, str], Link] = field(default_factory=dict)
    default_link: Link = field(default_factory=Link)
    node_seconds: dict[str, dict[str, float]] = field(default_factory=dict)
    host: str | None = None

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(cls, costs: "CostModel | Mapping | str | os.PathLike | None") -> "CostModel":
        """A cost model from None (defaults), a dict, a JSON file path or a CostModel."""
        if costs is None:
            return cls()
        if isinstance(costs, CostModel):
            return costs
        if isinstance(costs, (str, os.PathLike)):
            return cls.from_json(costs)
        if isinstance(costs, Mapping):
            return cls.from_dict(costs)
        raise ConstraintError(f"cost model: expected a JSON file, a dict or a CostModel, got "
                              f"{type(costs).__name__}")

    @classmethod
    def from_json(cls, path: str | os.PathLike) -> "CostModel":
        """Read the JSON format of the module docstring."""
        path = os.fspath(path)
        try:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
        except FileNotFoundError:
            raise ConstraintError(f"cost model file {path!r} does not exist") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ConstraintError(f"cost model file {path!r} is not valid JSON ({exc})") \
                from None
        return cls.from_dict(data, where=os.path.basename(path))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "cost model") -> "CostModel":
        if not isinstance(data, Mapping):
            raise ConstraintError(f"{where}: expected a JSON object")
        known = {"host", "devices", "default_device", "links", "nodes"}
        bad = sorted(set(data) - known)
        if bad:
            raise ConstraintError(f"{where}: unknown key {bad[0]!r} (keys: "
                                  f"{', '.join(sorted(known))})")
        model = cls()
        host = data.get("host")
        if host is not None and not isinstance(host, str):
            raise ConstraintError(f"{where}: 'host' must be a device name")
        model.host = host
        if "default_device" in data:
            model.default_device = DeviceSpec.from_dict(data["default_device"],
                                                        f"{where}: default_device")
        devices = data.get("devices", {})
        if not isinstance(devices, Mapping):
            raise ConstraintError(f"{where}: 'devices' must map device names to objects")
        for name, spec in devices.items():
            if not isinstance(spec, Mapping):
                raise ConstraintError(f"{where}: device {name!r} must be an object")
            DeviceSpec.from_dict(spec, f"{where}: device {name!r}")  # validate now
            model.overrides[str(name)] = dict(spec)
        links = data.get("links", {})
        if not isinstance(links, Mapping):
            raise ConstraintError(f"{where}: 'links' must map 'a->b', 'a<->b' or 'default' to "
                                  "objects")
        for key, spec in links.items():
            link = _link(spec, f"{where}: link {key!r}")
            if key == "default":
                model.default_link = link
            elif "<->" in key:
                a, b = (s.strip() for s in key.split("<->", 1))
                model.links[(a, b)] = model.links[(b, a)] = link
            elif "->" in key:
                a, b = (s.strip() for s in key.split("->", 1))
                model.links[(a, b)] = link
            else:
                raise ConstraintError(f"{where}: link key {key!r} must be 'a->b', 'a<->b' or "
                                      "'default'")
        nodes = data.get("nodes", {})
        if not isinstance(nodes, Mapping):
            raise ConstraintError(f"{where}: 'nodes' must map node names to {{device: "
                                  "seconds}}")
        for name, row in nodes.items():
            if not isinstance(row, Mapping):
                raise ConstraintError(f"{where}: node {name!r} must map devices to seconds")
            model.node_seconds[str(name)] = {str(d): _number(s, f"{where}: node {name!r}.{d}")
                                             for d, s in row.items()}
        return model

    # ------------------------------------------------------------------ queries
    def spec(self, device: str, fallback: str) -> DeviceSpec:
        """The spec of a device: explicit ``devices`` entries first, else the file's keys for
        it over the host defaults (the fallback) or ``default_device`` (accelerators)."""
        if device in self.devices:
            return self.devices[device]
        base = self.host_device if device == (self.host or fallback) else self.default_device
        if device in self.overrides:
            return DeviceSpec.from_dict(self.overrides[device], f"device {device!r}", base=base)
        return base

    def compute_time(self, graph: Graph, v: int, device: str, fallback: str,
                     flops: float | None = None, spec: DeviceSpec | None = None) -> float:
        """Seconds node ``v`` takes on ``device`` (``fallback`` names the host)."""
        node = graph.nodes[v]
        row = self.node_seconds.get(node.name)
        if row is not None and device in row:
            return row[device]
        spec = self.spec(device, fallback) if spec is None else spec
        if node.op_type in spec.op_seconds:
            return spec.op_seconds[node.op_type]
        f = node_flops(graph, node) if flops is None else flops
        scale = spec.ops.get(node.op_type, 1.0)
        return spec.overhead + max(f * scale / spec.flops,
                                   node_bytes(graph, node) / spec.memory_bandwidth)

    def link(self, a: str, b: str) -> Link:
        return self.links.get((a, b), self.default_link)

    def transfer_time(self, a: str, b: str, nbytes: int) -> float:
        """Seconds to move ``nbytes`` from device ``a`` to device ``b`` (0 on one device)."""
        if a == b:
            return 0.0
        link = self.link(a, b)
        return link.latency + nbytes / link.bandwidth

    def compute_table(self, problem) -> np.ndarray:
        """Seconds per (device, node): rows are the problem's devices then the fallback; inf
        where a device does not take the node."""
        g = problem.graph
        names = list(problem.devices) + [problem.fallback]
        flops = graph_flops(g)
        table = np.full((len(names), g.n), np.inf)
        for d, name in enumerate(names):
            spec = self.spec(name, problem.fallback)
            for v in range(g.n):
                if d < len(problem.devices) and not problem.supported[d, v]:
                    continue
                table[d, v] = self.compute_time(g, v, name, problem.fallback, flops[v], spec)
        return table

    def to_dict(self) -> dict[str, Any]:
        links = {"default": {"bandwidth": self.default_link.bandwidth,
                             "latency": self.default_link.latency}}
        for (a, b), link in sorted(self.links.items()):
            links[f"{a}->{b}"] = {"bandwidth": link.bandwidth, "latency": link.latency}
        devices = {k: dict(v) for k, v in self.overrides.items()}
        devices.update({k: v.to_dict() for k, v in self.devices.items()})
        out: dict[str, Any] = {"devices": devices,
                               "default_device": self.default_device.to_dict(),
                               "links": links, "nodes": self.node_seconds}
        if self.host:
            out["host"] = self.host
        return out


def _number(value: Any, where: str, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value < 0 or (positive and value == 0):
        kind = "a positive number" if positive else "a non-negative number"
        raise ConstraintError(f"cost model: {where} must be {kind}, got {value!r}")
    return float(value)


def _link(spec: Any, where: str) -> Link:
    if not isinstance(spec, Mapping):
        raise ConstraintError(f"{where} must be an object with bandwidth and latency")
    bad = sorted(set(spec) - {"bandwidth", "latency"})
    if bad:
        raise ConstraintError(f"{where} has unknown key {bad[0]!r} (bandwidth, latency)")
    link = Link()
    if "bandwidth" in spec:
        link.bandwidth = _number(spec["bandwidth"], f"{where}.bandwidth", positive=True)
    if "latency" in spec:
        link.latency = _number(spec["latency"], f"{where}.latency")
    return link
