"""Device-placement instances of Tarnawski et al. (NeurIPS 2020, "Efficient Algorithms for
Device Placement of DNN Graph Operators", github.com/msr-fiddle/dnn-partitioning): read them,
turn them into a Graph, and write an answer in their split format.

An instance is ``{"maxFPGAs": k, "maxCPUs": c, "maxSizePerFPGA": M, "nodes": [...], "edges":
[...]}``; a node has ``id``, ``supportedOnFpga``, ``cpuLatency``, ``fpgaLatency`` (seconds, or
any one unit), optional ``size`` (bytes of memory on an accelerator), ``isBackwardNode`` and an
optional ``colorClass`` (nodes that must share a device); an edge has ``sourceId``, ``destId``
and ``cost``, the transfer time of its source's output - one figure per source node, as the
paper's evaluator requires. :class:`PlacementInstance` keeps them as numpy arrays in the file's
node order (index ``i`` is node ``ids[i]``); an assignment is one device per index: ``0..k-1``
an accelerator, :data:`HOST` the (first) CPU and ``HOST - j`` CPU ``j`` of ``maxCPUs``
(:func:`cpu_device`; every CPU a device of its own, as the paper's DP and IP treat them). The
file is recognised by its keys (:func:`is_instance`), so it shares the ``.json`` extension with
node-link graphs. clusterkit's own optional fields (nodes' ``name`` and ``opType``, edges'
``size``, the activation limit ``maxActivationsPerFPGA`` and its ``tensors``) are read here and
written by :func:`instance_dict`; every field, with its unit, is in ``docs/placement-instance.md``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from clusterkit.errors import ModelLoadError
from clusterkit.graph.core import Graph
from clusterkit.io.files import read_input, write_atomic
from clusterkit.io.node_link import graph_from_lists

#: device index of the host (the first CPU) in an assignment; CPU ``j`` is ``HOST - j``
HOST = -1
#: the keys that make a JSON document an instance of this format
INSTANCE_KEYS = ("maxFPGAs", "maxSizePerFPGA", "nodes", "edges")
#: op type of the nodes an accelerator takes, and of those only the host runs
ACC_OP, HOST_OP = "PlacedOp", "HostOnlyOp"


@dataclass
class PlacementInstance:
    """One instance, arrays indexed by node position in the file (see the module docstring).

    ``out_cost[i]``: transfer cost of node ``i``'s output (0 when it has no consumer);
    ``color[i]``: its must-link group id (a fresh one when the file gives none);
    ``memory_limit``: each accelerator's memory (``maxSizePerFPGA``), the one place the model
    reads it."""

    name: str
    ids: np.ndarray
    names: list[str]
    cpu_latency: np.ndarray
    acc_latency: np.ndarray
    size: np.ndarray
    supported: np.ndarray
    backward: np.ndarray
    color: np.ndarray
    out_cost: np.ndarray
    edge_src: np.ndarray
    edge_dst: np.ndarray
    accelerators: int
    cpus: int
    memory_limit: float
    #: bytes of each edge's tensor (the edges' optional ``size``; NaN where not given)
    edge_size: np.ndarray | None = None
    #: the model's op type of every node (the nodes' optional ``opType``; None: not given)
    op_types: list[str | None] | None = None
    #: each accelerator's memory for activations (``maxActivationsPerFPGA``; inf: no limit)
    activation_limit: float = float("inf")
    #: bytes of every activation tensor (the top-level ``tensors``' ``size``; empty: none)
    tensor_size: np.ndarray = field(default_factory=lambda: np.zeros(0))
    #: per tensor, the node indices that produce or read it (``tensors[].nodes``, as ids)
    tensor_nodes: list[np.ndarray] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.ids)

    def consumers(self) -> list[list[int]]:
        """Consumer indices of every node (a plain list per node, in edge order)."""
        out: list[list[int]] = [[] for _ in range(self.n)]
        for u, v in zip(self.edge_src.tolist(), self.edge_dst.tolist()):
            out[u].append(v)
        return out


def cpu_device(j: int) -> int:
    """The device index of CPU ``j`` (0-based) in an assignment: ``HOST - j``."""
    return HOST - j


def cpu_slots(inst: PlacementInstance) -> int:
    """How many CPU devices an assignment may name: ``maxCPUs``, at least one (a ``maxCPUs``
    0 instance still has the host, which :func:`placement_problems` forbids using)."""
    return max(inst.cpus, 1)


def is_instance(data: Any) -> bool:
    """Whether a loaded JSON document is a placement instance (by its keys)."""
    return isinstance(data, dict) and all(k in data for k in INSTANCE_KEYS)


def is_instance_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a ``.json`` file holding a placement instance."""
    if os.path.splitext(os.fspath(path))[1].lower() != ".json":
        return False
    try:
        return is_instance(json.loads(read_input(path, "placement instance")))
    except (ModelLoadError, ValueError):
        return False


def read_instance(path: str | os.PathLike) -> PlacementInstance:
    """Read an instance file; errors name the file and the node or key at fault."""
    raw = read_input(path, "placement instance")
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ModelLoadError(f"placement instance {os.fspath(path)!r} is not JSON: {exc}") from exc
    name = os.path.splitext(os.path.basename(os.fspath(path)))[0]
    return instance_from_dict(data, name, os.fspath(path))


def instance_from_dict(data: Any, name: str = "instance", where: str = "instance"
                       ) -> PlacementInstance:
    """An instance from its loaded JSON document (``where`` names it in errors)."""
    if not is_instance(data):
        raise ModelLoadError(f"{where!r} is not a placement instance: it needs the keys "
                             + ", ".join(INSTANCE_KEYS))
    nodes = data["nodes"]
    try:
        ids = [int(nd["id"]) for nd in nodes]
        cols = [_node_row(nd) for nd in nodes]
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelLoadError(f"{where!r}: a node lacks or mangles {exc}") from exc
    pos = {i: k for k, i in enumerate(ids)}
    if len(pos) != len(ids):
        raise ModelLoadError(f"{where!r}: node ids repeat")
    src, dst, cost, esize = _edges(data["edges"], pos, where)
    color = _colors([c[5] for c in cols])
    arr = np.array([c[:5] for c in cols], dtype=np.float64).reshape(len(cols), 5)
    return PlacementInstance(
        name=name, ids=np.array(ids, dtype=np.int64),
        names=[str(nd.get("name", i)) for nd, i in zip(nodes, ids)],
        cpu_latency=arr[:, 0], acc_latency=arr[:, 1], size=arr[:, 2],
        supported=arr[:, 3] != 0, backward=arr[:, 4] != 0, color=color, out_cost=cost,
        edge_src=src, edge_dst=dst, accelerators=int(data["maxFPGAs"]),
        cpus=int(data.get("maxCPUs", 1)), memory_limit=float(data["maxSizePerFPGA"]),
        edge_size=esize, op_types=_op_types(nodes),
        activation_limit=float(data.get("maxActivationsPerFPGA", float("inf"))),
        **_tensors(data.get("tensors", []), pos, where))


def _tensors(raw: Any, pos: dict[int, int], where: str) -> dict[str, Any]:
    """The activation tensors (``{"size": bytes, "nodes": [ids]}`` each) as the instance's
    ``tensor_size`` and ``tensor_nodes`` (node indices)."""
    try:
        size = np.array([float(t["size"]) for t in raw], dtype=np.float64)
        touched = [np.array(sorted({pos[int(i)] for i in t["nodes"]}), dtype=np.int64)
                   for t in raw]
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelLoadError(f"{where!r}: a tensor names an unknown node or lacks {exc}") \
            from exc
    return {"tensor_size": size, "tensor_nodes": touched}


def _op_types(nodes: list[dict]) -> list[str | None] | None:
    """The nodes' ``opType`` fields (None per node without one; None when no node has one)."""
    ops = [None if nd.get("opType") is None else str(nd["opType"]) for nd in nodes]
    return ops if any(op is not None for op in ops) else None


def _node_row(nd: dict) -> tuple:
    return (float(nd["cpuLatency"]), float(nd["fpgaLatency"]), float(nd.get("size", 0.0)),
            int(nd["supportedOnFpga"]), int(nd.get("isBackwardNode", 0)), nd.get("colorClass"))


def _colors(raw: list[Any]) -> np.ndarray:
    """Dense must-link group ids: equal ``colorClass`` values share one; no value: alone."""
    seen: dict[Any, int] = {}
    out = np.empty(len(raw), dtype=np.int64)
    for k, c in enumerate(raw):
        key = ("given", int(c)) if c is not None else ("alone", k)
        out[k] = seen.setdefault(key, len(seen))
    return out


def _edges(edges: Any, pos: dict[int, int], where: str
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Edge index arrays, the per-source transfer cost (one figure per source node) and each
    edge's bytes (its optional ``size``, NaN when absent)."""
    src, dst, size = [], [], []
    cost = np.zeros(len(pos), dtype=np.float64)
    given = np.zeros(len(pos), dtype=bool)
    for e in edges:
        try:
            u, v, c = pos[int(e["sourceId"])], pos[int(e["destId"])], float(e["cost"])
            size.append(float(e.get("size", "nan")))
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelLoadError(f"{where!r}: edge {e!r} names an unknown node or lacks "
                                 f"{exc}") from exc
        if u == v:
            raise ModelLoadError(f"{where!r}: edge {e!r} is a self-loop")
        if given[u] and abs(cost[u] - c) > 1e-6:
            raise ModelLoadError(f"{where!r}: node {e['sourceId']} has two different outgoing "
                                 "edge costs")
        cost[u], given[u] = c, True
        src.append(u)
        dst.append(v)
    return (np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64), cost,
            np.array(size, dtype=np.float64))


def graph_names(inst: PlacementInstance) -> list[str]:
    """The graph's node names: the instance's ``name`` fields when every node has a distinct
    one (the model's node names), else the ids."""
    ids = [str(int(i)) for i in inst.ids.tolist()]
    named = len(set(inst.names)) == inst.n and inst.names != ids
    return list(inst.names) if named else ids


def instance_graph(inst: PlacementInstance, source: str = "memory") -> Graph:
    """The instance as a Graph: one node per instance node (named by :func:`graph_names`, op
    type its ``opType``, else :data:`ACC_OP`, or :data:`HOST_OP` when no accelerator supports
    it), one output tensor
    per node, of the bytes its edges' ``size`` give (unknown without; 0 for a node without
    consumers, whose output the instance charges nothing for). The instance itself is
    kept as ``graph.model``. Built straight from the arrays: each distinct edge once, grouped
    by source in node order (as node-link graphs are read)."""
    size = inst.edge_size if inst.edge_size is not None else np.full(len(inst.edge_src), np.nan)
    seen: dict[tuple[int, int], float] = {}
    for u, v, b in zip(inst.edge_src.tolist(), inst.edge_dst.tolist(), size.tolist()):
        seen.setdefault((u, v), b)  # each distinct edge once, its first size
    pairs = sorted(seen.items(), key=lambda e: e[0][0])  # stable: a source's edges keep order
    src = np.array([u for (u, _), _ in pairs], dtype=np.int64)
    dst = np.array([v for (_, v), _ in pairs], dtype=np.int64)
    nbytes = [None if b != b else int(b) for _, b in pairs]  # NaN: not given
    sink = np.bincount(inst.edge_src, minlength=inst.n) == 0
    ops = inst.op_types or [None] * inst.n
    data: list[dict[str, Any]] = [{"op": op or (ACC_OP if ok else HOST_OP)} for op, ok in
                                  zip(ops, inst.supported.tolist())]
    for v in np.flatnonzero(sink).tolist():  # a sink's output costs nothing in the instance
        data[v]["bytes"] = 0
    graph = graph_from_lists(graph_names(inst), data, src, dst, nbytes,
                             name=inst.name, source=source)
    graph.model = inst
    return graph


def instance_dict(inst: PlacementInstance) -> dict[str, Any]:
    """The instance as the paper's JSON document (what :func:`instance_from_dict` reads back as
    the same problem): one edge per consumer with the source's one ``cost``, nodes in index
    order, clusterkit's optional fields where the instance has them (see the module
    docstring)."""
    ids = inst.ids.tolist()
    nodes = []
    for k in range(inst.n):
        row: dict[str, Any] = {"id": ids[k], "name": inst.names[k],
                               "supportedOnFpga": int(inst.supported[k]),
                               "cpuLatency": float(inst.cpu_latency[k]),
                               "fpgaLatency": float(inst.acc_latency[k]),
                               "size": float(inst.size[k]),
                               "isBackwardNode": int(inst.backward[k]),
                               "colorClass": int(inst.color[k])}
        if inst.op_types is not None and inst.op_types[k] is not None:
            row["opType"] = inst.op_types[k]
        nodes.append(row)
    sizes = inst.edge_size if inst.edge_size is not None else [None] * len(inst.edge_src)
    edges = []
    for u, v, b in zip(inst.edge_src.tolist(), inst.edge_dst.tolist(), list(sizes)):
        edge: dict[str, Any] = {"sourceId": ids[u], "destId": ids[v],
                                "cost": float(inst.out_cost[u])}
        if b is not None and b == b:  # NaN: no size given
            edge["size"] = float(b)
        edges.append(edge)
    out: dict[str, Any] = {"maxFPGAs": inst.accelerators, "maxCPUs": inst.cpus,
                           "maxSizePerFPGA": inst.memory_limit, "nodes": nodes, "edges": edges}
    if np.isfinite(inst.activation_limit):
        out["maxActivationsPerFPGA"] = inst.activation_limit
    if len(inst.tensor_size):
        out["tensors"] = [{"size": float(b), "nodes": inst.ids[t].tolist()}
                          for b, t in zip(inst.tensor_size.tolist(), inst.tensor_nodes)]
    return out


def write_instance(path: str | os.PathLike, inst: PlacementInstance) -> None:
    """Write :func:`instance_dict` to ``path`` atomically."""
    write_atomic(path, json.dumps(instance_dict(inst)) + "\n")


def split_dict(inst: PlacementInstance, device: Sequence[int] | np.ndarray) -> dict[str, Any]:
    """The paper's split format: ``{"fpgas": [{"nodes": [ids]}] * k, "cpus": [{"nodes":
    [ids]}] * c}`` with the original ids, sorted, every accelerator and CPU listed (an idle one
    empty; ``c`` = :func:`cpu_slots`)."""
    dev = np.asarray(device, dtype=np.int64)
    fpgas = [{"nodes": np.sort(inst.ids[dev == d]).tolist()} for d in range(inst.accelerators)]
    cpus = [{"nodes": np.sort(inst.ids[dev == cpu_device(j)]).tolist()}
            for j in range(cpu_slots(inst))]
    return {"fpgas": fpgas, "cpus": cpus}


def split_text(inst: PlacementInstance, device: Sequence[int] | np.ndarray,
               figures: dict[str, Any] | None = None) -> str:
    """:func:`split_dict` as JSON text; ``figures`` (optional) go under ``"clusterkit"`` (the
    paper's evaluator reads only ``fpgas`` and ``cpus``)."""
    data = split_dict(inst, device)
    if figures is not None:
        data["clusterkit"] = figures
    return json.dumps(data) + "\n"


def write_split(path: str | os.PathLike, inst: PlacementInstance,
                device: Sequence[int] | np.ndarray,
                figures: dict[str, Any] | None = None) -> None:
    """Write :func:`split_text` to ``path`` atomically (temporary file, then rename)."""
    write_atomic(path, split_text(inst, device, figures))
