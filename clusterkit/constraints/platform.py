"""A platform: the accelerators and CPUs a throughput placement splits a model over, and the
placement instance (:class:`~clusterkit.io.placement_instance.PlacementInstance`) a model and
a platform make.

The file (``docs/placement-instance.md`` documents it, field by field) is JSON; reading it never
runs code - a selector is a registered name or an ``ops:`` list, never a Python file::

    {"accelerators": [{"count": 2, "selector": "ops:Conv,Relu,MaxPool,Concat",
                       "weights_memory": 4000000, "activations_memory": 2000000,
                       "flops": 2e12, "memory_bandwidth": 1e11, "overhead": 1e-5,
                       "link": {"bandwidth": 1e10, "latency": 1e-5},
                       "latencies": "times.json", "latency_scale": 0.1}],
     "cpu": {"count": 1, "flops": 5e10, "memory_bandwidth": 2e10, "overhead": 1e-6,
             "latencies": "times.json"}}

The costs are derived from :mod:`clusterkit.constraints.costs`: a node's latency on a device is
:meth:`CostModel.compute_time` (the roofline ``overhead + max(flops / peak, bytes /
bandwidth)``, or the measured seconds of ``latencies``, a ``clusterkit profile`` file, times
``latency_scale``), an edge's cost :meth:`CostModel.transfer_time` of its source's activation
bytes over the link, a node's weights the constant bytes it reads. The one idea: folded nodes
(constants, the weight stubs, static shape values) are left out - onnxruntime computes them
before placement, and their outputs, the weights, are free to move.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from clusterkit.constraints.core import Constraints
from clusterkit.constraints.costs import CostModel, DeviceSpec, Link
from clusterkit.errors import ClusterkitError, PlatformError
from clusterkit.graph.core import Graph
from clusterkit.io.files import read_input
from clusterkit.io.loader import load_graph
from clusterkit.io.placement_instance import PlacementInstance
from clusterkit.selection.protocol import SubgraphProperty
from clusterkit.selection.specs import parse_selector, split_device

#: the cost model's names of the two device kinds
ACC, CPU = "acc", "cpu"
_ACC_KEYS = {"name", "count", "selector", "weights_memory", "activations_memory", "flops",
             "memory_bandwidth", "overhead", "link", "latencies", "latency_scale"}
_CPU_KEYS = {"count", "flops", "memory_bandwidth", "overhead", "latencies", "latency_scale"}


@dataclass(frozen=True)
class CpuSpec:
    """The CPUs: how many (each a device of its own), their roofline figures (FLOP/s, bytes/s,
    seconds per node) and optional measured per-node seconds (``latencies``: a ``clusterkit
    profile`` file, times ``latency_scale``)."""

    count: int = 1
    flops: float = 5e10
    memory_bandwidth: float = 2e10
    overhead: float = 1e-6
    latencies: str | None = None
    latency_scale: float = 1.0

    def device_spec(self) -> DeviceSpec:
        """The cost model's :class:`DeviceSpec` of one CPU."""
        return DeviceSpec(self.flops, self.memory_bandwidth, self.overhead)


@dataclass(frozen=True)
class AcceleratorSpec(CpuSpec):
    """One accelerator kind: ``count`` interchangeable devices, the ``selector`` spec that says
    which nodes each takes, its memory in bytes for weights and (None: no limit) activations,
    its roofline figures and its link to the host (bytes/s, seconds per transfer)."""

    count: int = 1
    selector: str = ""
    name: str = "fpga"
    weights_memory: float | None = None
    activations_memory: float | None = None
    flops: float = 1e12
    memory_bandwidth: float = 2e11
    overhead: float = 1e-5
    link_bandwidth: float = 1e10
    link_latency: float = 1e-5

    def property(self) -> SubgraphProperty:
        """The selector's property (the spec was checked when the platform was read)."""
        return parse_selector(self.selector)


@dataclass(frozen=True)
class Platform:
    """An accelerator kind and the CPUs (see the module docstring); ``where`` names the file."""

    accelerator: AcceleratorSpec
    cpu: CpuSpec
    where: str = "platform"

    @classmethod
    def from_dict(cls, data: Any, where: str = "platform", base_dir: str = ".") -> "Platform":
        """A platform from its loaded JSON document; ``latencies`` paths are relative to
        ``base_dir``. A malformed field is a :class:`PlatformError` naming it."""
        if not isinstance(data, Mapping):
            raise PlatformError(f"{where}: expected a JSON object")
        _no_unknown(data, {"accelerators", "cpu"}, where, "")
        kinds = data.get("accelerators")
        if isinstance(kinds, Mapping):
            kinds = [kinds]
        if not isinstance(kinds, list) or not kinds:
            raise PlatformError(f"{where}: 'accelerators' must be a list of one accelerator "
                                "kind (an object)")
        if len(kinds) > 1:
            raise PlatformError(f"{where}: 'accelerators' names {len(kinds)} kinds; a "
                                "placement instance (the paper's format) has one accelerator "
                                "kind plus CPUs")
        acc = _accelerator(kinds[0], where, base_dir)
        cpu = _cpu(data.get("cpu", {}), where, base_dir)
        return cls(acc, cpu, where)

    def cost_model(self) -> CostModel:
        """The :class:`CostModel` of the platform: devices ``acc`` and ``cpu`` (the host), the
        link between them, and the measured seconds of ``latencies`` (read now) per node."""
        acc = self.accelerator
        link = Link(acc.link_bandwidth, acc.link_latency)
        model = CostModel(devices={ACC: acc.device_spec(), CPU: self.cpu.device_spec()},
                          links={(ACC, CPU): link, (CPU, ACC): link}, default_link=link,
                          host=CPU)
        for device, spec in ((CPU, self.cpu), (ACC, acc)):
            if spec.latencies is not None:
                for name, sec in read_latencies(spec.latencies).items():
                    model.node_seconds.setdefault(name, {})[device] = sec * spec.latency_scale
        return model


def read_platform(path: str | os.PathLike) -> Platform:
    """Read a platform file (see the module docstring)."""
    path = os.fspath(path)
    raw = read_input(path, "platform file")
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise PlatformError(f"platform file {path!r} is not JSON: {exc}") from None
    return Platform.from_dict(data, f"platform file {path!r}",
                              os.path.dirname(os.path.abspath(path)))


def read_latencies(path: str) -> dict[str, float]:
    """Per-node seconds of a ``clusterkit profile`` file (``{"nodes": {name: seconds}}``)."""
    try:
        data = json.loads(read_input(path, "latencies file"))
        nodes = data["nodes"]
        return {str(k): _positive(v, f"latencies file {path!r}: node {k!r}", zero=True)
                for k, v in nodes.items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        if isinstance(exc, ClusterkitError):
            raise
        raise PlatformError(f"latencies file {path!r} is not a clusterkit profile "
                            f"({{\"nodes\": {{name: seconds}}}}): {exc}") from None


def _no_unknown(data: Mapping, known: set[str], where: str, at: str) -> None:
    bad = sorted(set(data) - known)
    if bad:
        raise PlatformError(f"{where}: unknown field {at}{bad[0]!r} (fields: "
                            f"{', '.join(sorted(known))})")


def _positive(value: Any, field: str, zero: bool = False) -> float:
    """A positive (``zero``: non-negative) finite number, else a :class:`PlatformError`."""
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) and \
        math.isfinite(value) and (value > 0 or (zero and value == 0))
    if not ok:
        kind = "a non-negative number" if zero else "a positive number"
        raise PlatformError(f"{field} must be {kind}, got {value!r}")
    return float(value)


def _count(value: Any, field: str, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise PlatformError(f"{field} must be an integer >= {least}, got {value!r}")
    return value


def _figures(data: Mapping, at: str, base_dir: str, least: int) -> dict[str, Any]:
    """The fields CPUs and accelerators share, checked (``at`` names the object; ``least``:
    the smallest ``count``)."""
    out: dict[str, Any] = {}
    for key in ("flops", "memory_bandwidth", "latency_scale"):
        if key in data:
            out[key] = _positive(data[key], f"{at}.{key}")
    if "overhead" in data:
        out["overhead"] = _positive(data["overhead"], f"{at}.overhead", zero=True)
    if "count" in data:
        out["count"] = _count(data["count"], f"{at}.count", least)
    if "latencies" in data:
        if not isinstance(data["latencies"], str):
            raise PlatformError(f"{at}.latencies must be the path of a clusterkit profile "
                                f"file, got {data['latencies']!r}")
        out["latencies"] = os.path.join(base_dir, data["latencies"])
    return out


def _cpu(data: Any, where: str, base_dir: str) -> CpuSpec:
    at = f"{where}: cpu"
    if not isinstance(data, Mapping):
        raise PlatformError(f"{at} must be an object")
    _no_unknown(data, _CPU_KEYS, where, "cpu.")
    return CpuSpec(**_figures(data, at, base_dir, 0))


def _accelerator(data: Any, where: str, base_dir: str) -> AcceleratorSpec:
    at = f"{where}: accelerators[0]"
    if not isinstance(data, Mapping):
        raise PlatformError(f"{at} must be an object")
    _no_unknown(data, _ACC_KEYS, where, "accelerators[0].")
    out = _figures(data, at, base_dir, 1)
    out["selector"] = _selector(data.get("selector"), f"{at}.selector")
    if "name" in data:
        if not isinstance(data["name"], str) or not data["name"]:
            raise PlatformError(f"{at}.name must be a non-empty string")
        out["name"] = data["name"]
    for key in ("weights_memory", "activations_memory"):
        if data.get(key) is not None:
            out[key] = _positive(data[key], f"{at}.{key}")
    link = data.get("link", {})
    if not isinstance(link, Mapping):
        raise PlatformError(f"{at}.link must be an object with bandwidth and latency")
    _no_unknown(link, {"bandwidth", "latency"}, where, "accelerators[0].link.")
    if "bandwidth" in link:
        out["link_bandwidth"] = _positive(link["bandwidth"], f"{at}.link.bandwidth")
    if "latency" in link:
        out["link_latency"] = _positive(link["latency"], f"{at}.link.latency", zero=True)
    return AcceleratorSpec(**out)


def _selector(spec: Any, field: str) -> str:
    """A registered selector spec (checked by parsing it); a Python file is refused."""
    if not isinstance(spec, str) or not spec.strip():
        raise PlatformError(f"{field} must be a selector spec such as 'qnn' or 'ops:Conv,Relu'"
                            f", got {spec!r}")
    _, body = split_device(spec.strip())
    if body.endswith(".py") or "/" in body or os.sep in body:
        raise PlatformError(f"{field} {spec!r} is a Python file: a platform file names only "
                            "registered selectors or ops: lists (reading it never runs code)")
    try:
        parse_selector(spec)
    except ClusterkitError as exc:
        raise PlatformError(f"{field}: {exc}") from None
    return spec.strip()


# ---------------------------------------------------------------- model + platform → instance
def model_instance(model: Graph | str | os.PathLike, platform: Platform | str | os.PathLike,
                   *, name: str | None = None) -> PlacementInstance:
    """The placement instance of ``model`` (a Graph, or a model file :func:`load_graph`
    reads) on ``platform`` (a :class:`Platform` or its file): one node per compute (not
    folded) node, in the model's node order (a topological one; ids are the ``graph.node``
    positions), named and typed as in the model; latencies, weights, edge costs and
    activation tensors as the module docstring says."""
    graph = model if isinstance(model, Graph) else load_graph(model)
    plat = platform if isinstance(platform, Platform) else read_platform(platform)
    order = _node_order(graph)
    pos = np.full(graph.n, -1, dtype=np.int64)
    pos[order] = np.arange(len(order))
    costs = plat.cost_model()
    acc = plat.accelerator
    cpu_lat = np.array([costs.compute_time(graph, v, CPU, CPU) for v in order.tolist()])
    acc_lat = np.array([costs.compute_time(graph, v, ACC, CPU) for v in order.tolist()])
    size = graph.const_bytes[order].astype(np.float64)
    src, dst, out_bytes = _activation_edges(graph, pos)
    cost = np.array([costs.transfer_time(ACC, CPU, b) if b > 0 else 0.0
                     for b in out_bytes.tolist()])
    tensor_size, tensor_nodes = _activation_tensors(graph, pos)
    n = len(order)
    return PlacementInstance(
        name=name or graph.name, ids=graph.index_to_source[order],
        names=[graph.nodes[v].name for v in order.tolist()],
        cpu_latency=cpu_lat, acc_latency=acc_lat, size=size,
        supported=_supported(graph, acc.property())[order],
        backward=np.zeros(n, dtype=bool), color=np.arange(n, dtype=np.int64),
        out_cost=cost, edge_src=src, edge_dst=dst, accelerators=acc.count,
        cpus=plat.cpu.count, memory_limit=float(acc.weights_memory if acc.weights_memory
                                                is not None else max(size.sum(), 1.0)),
        edge_size=out_bytes[src].astype(np.float64),
        op_types=[graph.nodes[v].op_type for v in order.tolist()],
        activation_limit=(float(acc.activations_memory) if acc.activations_memory is not None
                          else math.inf),
        tensor_size=tensor_size, tensor_nodes=tensor_nodes)


def _node_order(graph: Graph) -> np.ndarray:
    """The compute (not folded) nodes' graph indices, in the model's order when that is
    topological, else in the graph's."""
    order = np.argsort(graph.index_to_source, kind="stable")
    rank = np.empty(graph.n, dtype=np.int64)
    rank[order] = np.arange(graph.n)
    if not (rank[graph.edge_src] < rank[graph.edge_dst]).all():
        order = np.arange(graph.n)
    return order[~graph.folded[order]]


def _supported(graph: Graph, prop: SubgraphProperty) -> np.ndarray:
    """Which nodes the accelerator's selector takes."""
    problem = Constraints().compile(graph, [prop], fallback=CPU)
    return np.asarray(problem.supported[0], dtype=bool).copy()


def _free(graph: Graph, name: str) -> bool:
    t = graph.tensors[name]
    return t.is_constant or t.is_folded


def _activation_edges(graph: Graph, pos: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Instance edges (one per producer and consumer of a non-constant tensor, by instance
    index) and per instance node the bytes of its outputs that some node reads."""
    pairs: set[tuple[int, int]] = set()
    out_bytes = np.zeros(int(pos.max(initial=-1)) + 1)
    for node in graph.nodes:
        u = int(pos[node.index])
        if u < 0:
            continue
        for name in node.outputs:
            if not name or _free(graph, name) or not graph.tensors[name].consumers:
                continue
            out_bytes[u] += graph.tensors[name].nbytes or 0
            pairs.update((u, int(pos[c])) for c in graph.tensors[name].consumers
                         if c != node.index and pos[c] >= 0)
    edges = sorted(pairs)
    src = np.array([a for a, _ in edges], dtype=np.int64)
    dst = np.array([b for _, b in edges], dtype=np.int64)
    return src, dst, out_bytes


def _activation_tensors(graph: Graph, pos: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """Every non-constant tensor of known size some node touches: its bytes and the instance
    indices of its producer and readers."""
    sizes, touched = [], []
    for t in graph.tensors.values():
        if t.is_constant or t.is_folded or not t.nbytes:
            continue
        nodes = set(t.consumers) | ({t.producer} if t.producer is not None else set())
        inside = sorted(int(pos[v]) for v in nodes if pos[v] >= 0)
        if inside:
            sizes.append(float(t.nbytes))
            touched.append(np.array(inside, dtype=np.int64))
    return np.array(sizes, dtype=np.float64), touched
