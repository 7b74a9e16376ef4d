"""The graph model: nodes, tensors, and the compact integer structures engines walk.

A :class:`Graph` is built once (by a reader in :mod:`clusterkit.io`) and never mutated. Nodes are
numbered in a topological order (``node.index``); ``node.source_index`` keeps the position the node
had in its source (an ONNX ``graph.node`` list or a node-link ``nodes`` list). Engines use the CSR
arrays (:attr:`Graph.succ_ptr` ...) or their plain-list twins (:attr:`Graph.succ_lists` ...), never
dicts of node objects in their hot loops. Constants (``is_constant``: computable from initializers
alone) and the wider folded values (``is_folded``: also shape values known statically, which
onnxruntime computes before placement) are marked once, in topological order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from itertools import chain
from operator import attrgetter
from typing import Any, Iterable, Sequence, TypeVar

import numpy as np

from clusterkit.errors import CycleError, GraphError
from clusterkit.graph.algorithms import pair_order, topological_order

HOST = -1
"""Producer id of a graph input (it comes from the host)."""
_G = TypeVar("_G", bound="Graph")  # build() makes a graph of its own class (a FusedGraph)


@dataclass(slots=True, eq=False)
class Tensor:
    """A value flowing along edges: ``producer`` is a node index or ``None`` for graph inputs and
    initializers; ``nbytes`` is ``None`` when the shape or dtype is not fully known."""

    name: str
    shape: tuple | None = None
    dtype: str | None = None
    nbytes: int | None = None
    producer: int | None = None
    consumers: list[int] = field(default_factory=list)
    is_constant: bool = False
    is_initializer: bool = False
    is_input: bool = False
    is_output: bool = False
    #: constant in the broad sense onnxruntime folds: a constant, or a shape value known
    #: statically (``Shape``/``Size`` of a statically shaped tensor) or computed from such alone
    is_folded: bool = False


@dataclass(slots=True, eq=False)
class Node:
    """One operator. ``inputs``/``outputs`` are ordered tensor names ('' marks an omitted optional
    input); ``implicit_inputs`` are outer-scope tensors read by an If/Loop/Scan body."""

    index: int
    name: str
    op_type: str
    domain: str = ""
    attrs: dict[str, Any] = field(default_factory=dict)
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    implicit_inputs: list[str] = field(default_factory=list)
    source_index: int = -1
    affinity: str | None = None
    is_constant: bool = False
    proto: Any = None
    #: every output is folded (see :attr:`Tensor.is_folded`): onnxruntime computes the node
    #: before any execution provider sees the graph
    is_folded: bool = False

    def all_inputs(self) -> list[str]:
        """Explicit then implicit inputs, without omitted ones."""
        return [t for t in self.inputs if t] + self.implicit_inputs

    def __repr__(self) -> str:
        return f"Node({self.index}, {self.name!r}, {self.op_type})"


class Graph:
    """An operator DAG with tensors. Build one with :meth:`build` or a reader in
    :mod:`clusterkit.io`; the constructor expects already-validated, topologically sorted parts."""

    def __init__(self, nodes: list[Node], tensors: dict[str, Tensor], inputs: list[str],
                 outputs: list[str], name: str = "graph", model: Any = None,
                 source: str = "memory"):
        self.nodes = nodes
        self.tensors = tensors
        self.inputs = inputs
        self.outputs = outputs
        self.name = name
        self.model = model
        self.source = source
        self._build_edges()

    # ------------------------------------------------------------------ construction
    @classmethod
    def build(cls: type[_G], nodes: Sequence[Node], tensors: dict[str, Tensor], inputs: list[str],
              outputs: list[str], name: str = "graph", model: Any = None,
              source: str = "memory") -> _G:
        """Wire producers/consumers, check every read tensor is produced, sort topologically
        (stable: the source order is kept where it is already topological), mark constants."""
        nodes = list(nodes)
        for pos, node in enumerate(nodes):
            if node.source_index < 0:
                node.source_index = pos
        producer: dict[str, int] = {}
        for pos, node in enumerate(nodes):
            for out in node.outputs:
                if not out:
                    continue
                if out in producer:
                    raise GraphError(f"tensor {out!r} is produced twice: by node "
                                     f"{nodes[producer[out]].name!r} and by node {node.name!r}")
                producer[out] = pos
        available = set(inputs) | {n for n, t in tensors.items() if t.is_initializer}
        for out in outputs:
            if out not in producer and out not in available:
                raise GraphError(f"graph output {out!r} is never produced")
        # edges between source positions
        src, dst = [], []
        for pos, node in enumerate(nodes):
            for t in node.all_inputs():
                p = producer.get(t)
                if p is None:
                    if t not in available:
                        raise GraphError(f"node {node.name!r} ({node.op_type}) reads tensor {t!r},"
                                         " which no node produces and is no graph input or"
                                         " initializer")
                    continue
                if p == pos:
                    raise CycleError(f"cycle: node {node.name!r} reads its own output {t!r}",
                                     [node.name])
                src.append(p)
                dst.append(pos)
        order = topological_order(len(nodes), src, dst, names=[n.name for n in nodes])
        nodes = [nodes[i] for i in order]
        for idx, node in enumerate(nodes):
            node.index = idx
        _wire_tensors(nodes, tensors, inputs, outputs)
        _mark_constants(nodes, tensors)
        return cls(nodes, tensors, inputs, outputs, name=name, model=model, source=source)

    @classmethod
    def from_parts(cls, nodes: list[Node], tensors: dict[str, Tensor], inputs: list[str],
                   outputs: list[str], edge_src: np.ndarray, edge_dst: np.ndarray,
                   edge_bytes: np.ndarray, name: str = "graph", model: Any = None,
                   source: str = "memory") -> "Graph":
        """Trusted constructor for bulk readers (:mod:`clusterkit.graph.fast`): the parts are
        already wired (indices topological, producers/consumers and constant flags set) and the
        distinct producer→consumer edges with their non-constant bytes are given, so the
        per-node edge scan of ``__init__`` is skipped."""
        self = cls.__new__(cls)
        self.nodes, self.tensors, self.inputs, self.outputs = nodes, tensors, inputs, outputs
        self.name, self.model, self.source = name, model, source
        self._set_edges(len(nodes), np.asarray(edge_src, dtype=np.int64),
                        np.asarray(edge_dst, dtype=np.int64),
                        np.asarray(edge_bytes, dtype=np.int64))
        return self

    def _build_edges(self) -> None:
        n = len(self.nodes)
        tensors = self.tensors
        src, dst, eb = [], [], []
        for node in self.nodes:
            v = node.index
            seen: dict[int, int] = {}
            for t in node.all_inputs():
                ten = tensors[t]
                p = ten.producer
                if p is None:
                    continue
                b = 0 if ten.is_folded else (ten.nbytes or 0)
                if p in seen:
                    seen[p] += b
                else:
                    seen[p] = b
            for p, b in seen.items():
                src.append(p)
                dst.append(v)
                eb.append(b)
        self._set_edges(n, np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64),
                        np.asarray(eb, dtype=np.int64))

    def _set_edges(self, n: int, src: np.ndarray, dst: np.ndarray, eb: np.ndarray) -> None:
        # aggregate duplicate tensors between the same pair (already distinct per consumer above)
        if len(src) and np.any(src >= dst):
            bad = int(np.argmax(src >= dst))
            raise GraphError(f"internal: edge {src[bad]}->{dst[bad]} is not topological")
        order = pair_order(src, dst)
        self.edge_src = src[order]
        self.edge_dst = dst[order]
        self.edge_bytes = eb[order]
        self.succ_ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.edge_src, minlength=n), out=self.succ_ptr[1:])
        self.succ_idx = self.edge_dst
        porder = pair_order(self.edge_dst, self.edge_src)
        self.pred_edge = porder
        self.pred_ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.edge_dst, minlength=n), out=self.pred_ptr[1:])
        self.pred_idx = self.edge_src[porder]

    # ------------------------------------------------------------------ basic queries
    @property
    def n(self) -> int:
        """Number of nodes."""
        return len(self.nodes)

    @property
    def num_edges(self) -> int:
        """Number of distinct producer→consumer links."""
        return len(self.edge_src)

    def node(self, key: int | str) -> Node:
        """A node by topological index or by name."""
        if isinstance(key, (int, np.integer)):
            if not 0 <= key < self.n:
                raise GraphError(f"no node with index {key} (graph has {self.n} nodes)")
            return self.nodes[int(key)]
        idx = self.name_to_index.get(key)
        if idx is None:
            raise GraphError(f"no node named {key!r}")
        return self.nodes[idx]

    @cached_property
    def name_to_index(self) -> dict[str, int]:
        """Node name → topological index."""
        return {node.name: node.index for node in self.nodes}

    @cached_property
    def duplicate_names(self) -> dict[str, list[int]]:
        """Names that several nodes carry → their source positions, sorted (ONNX allows it)."""
        seen: dict[str, list[int]] = {}
        for node in self.nodes:
            seen.setdefault(node.name, []).append(node.source_index)
        return {name: sorted(pos) for name, pos in seen.items() if len(pos) > 1}

    @cached_property
    def source_to_index(self) -> np.ndarray:
        """Source position (ONNX ``graph.node`` / node-link ``nodes``) → topological index."""
        out = np.empty(self.n, dtype=np.int64)
        out[[nd.source_index for nd in self.nodes]] = np.arange(self.n)
        return out

    @cached_property
    def index_to_source(self) -> np.ndarray:
        """Topological index → source position."""
        return np.asarray([nd.source_index for nd in self.nodes], dtype=np.int64)

    @cached_property
    def succ_lists(self) -> list[list[int]]:
        """Successors per node as plain lists (for Python loops)."""
        return _split(self.succ_idx, self.succ_ptr)

    @cached_property
    def pred_lists(self) -> list[list[int]]:
        """Predecessors per node as plain lists (for Python loops)."""
        return _split(self.pred_idx, self.pred_ptr)

    @cached_property
    def op_types(self) -> list[str]:
        """Op type per node."""
        return [nd.op_type for nd in self.nodes]

    @cached_property
    def is_constant_node(self) -> np.ndarray:
        """True where a node computes from constants alone (its outputs are free to move)."""
        return np.fromiter((nd.is_constant for nd in self.nodes), dtype=bool, count=self.n)

    @cached_property
    def folded(self) -> np.ndarray:
        """True where a node is folded (:attr:`Node.is_folded`): its outputs are constants or
        shape values known statically, so onnxruntime computes it before placement."""
        return np.fromiter((nd.is_folded for nd in self.nodes), dtype=bool, count=self.n)

    @cached_property
    def const_bytes(self) -> np.ndarray:
        """Bytes of the constant tensors each node reads (initializers and computed constants)."""
        out = np.zeros(self.n, dtype=np.int64)
        if not any(t.is_constant and t.nbytes for t in self.tensors.values()):
            return out  # no node reads a constant byte (most node-link graphs)
        for node in self.nodes:
            total = 0
            for t in set(node.all_inputs()):
                ten = self.tensors[t]
                if ten.is_constant and ten.nbytes:
                    total += ten.nbytes
            out[node.index] = total
        return out

    def successors(self, v: int) -> np.ndarray:
        """Successor indices of node ``v``."""
        return self.succ_idx[self.succ_ptr[v]:self.succ_ptr[v + 1]]

    def predecessors(self, v: int) -> np.ndarray:
        """Predecessor indices of node ``v``."""
        return self.pred_idx[self.pred_ptr[v]:self.pred_ptr[v + 1]]

    def edge_index(self, u: int, v: int) -> int:
        """Position of edge ``u→v`` in the edge arrays; raises if there is no such edge."""
        lo, hi = int(self.succ_ptr[u]), int(self.succ_ptr[u + 1])
        pos = lo + int(np.searchsorted(self.succ_idx[lo:hi], v))
        if pos >= hi or self.succ_idx[pos] != v:
            raise GraphError(f"no edge from node {self.nodes[u].name!r} to {self.nodes[v].name!r}")
        return pos

    # ------------------------------------------------------------------ tensor incidence
    @cached_property
    def tensor_table(self) -> "TensorTable":
        """Integer tables of tensors for vectorized metrics."""
        return TensorTable.from_graph(self)

    def summary(self) -> str:
        """One line: name, nodes, edges, op types."""
        return (f"{self.name}: {self.n} nodes, {self.num_edges} edges, "
                f"{len(set(self.op_types))} op types")

    def __repr__(self) -> str:
        return f"Graph({self.summary()})"


@dataclass
class TensorTable:
    """Tensors as arrays: ``producer`` (HOST=-1 for inputs), ``nbytes`` (0 when unknown),
    ``known`` (size known), ``free`` (folded: a constant or a static shape value),
    ``is_output``, the (tensor, consumer) incidence ``inc_tensor``/``inc_node``, and
    ``estimated``: ``nbytes`` where the size is known, the size with every symbolic dimension
    at 1 where only symbolic dimensions are unknown (dtype and the other dimensions known),
    else 0; ``estimable`` marks the tensors of known or estimated size (default: ``known``)."""

    names: list[str]
    producer: np.ndarray
    nbytes: np.ndarray
    known: np.ndarray
    free: np.ndarray
    is_output: np.ndarray
    inc_tensor: np.ndarray
    inc_node: np.ndarray
    estimated: np.ndarray | None = None
    estimable: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.estimated is None:  # no symbolic shapes (graphs made from arrays)
            self.estimated = self.nbytes
            self.estimable = self.known
        elif self.estimable is None:
            self.estimable = self.known

    @classmethod
    def from_graph(cls, graph: Graph) -> "TensorTable":
        names = list(graph.tensors)
        tens = list(graph.tensors.values())
        count = len(tens)

        def column(attr: str, dtype: type) -> np.ndarray:
            return np.fromiter(map(attrgetter(attr), tens), dtype=dtype, count=count)

        producers = list(map(attrgetter("producer"), tens))
        producer = np.fromiter((HOST if u is None else u for u in producers), dtype=np.int64,
                               count=count)
        sizes = list(map(attrgetter("nbytes"), tens))
        known = np.fromiter((b is not None for b in sizes), dtype=bool, count=count)
        nbytes = np.fromiter((b or 0 for b in sizes), dtype=np.int64, count=count)
        consumers = list(map(attrgetter("consumers"), tens))
        per = np.fromiter(map(len, consumers), dtype=np.int64, count=count)
        inc_node = np.fromiter(chain.from_iterable(consumers), dtype=np.int64,
                               count=int(per.sum()))
        inc_tensor = np.repeat(np.arange(count, dtype=np.int64), per)
        estimated, estimable = nbytes, known
        guess = [(k, _at_one(tens[k])) for k in np.flatnonzero(~known).tolist()]
        guess = [(k, b) for k, b in guess if b is not None]
        if guess:  # only the tensors of unknown size, once per graph
            estimated, estimable = nbytes.copy(), known.copy()
            at, size = zip(*guess)
            estimated[list(at)] = size
            estimable[list(at)] = True
        return cls(names, producer, nbytes, known, column("is_folded", bool),
                   column("is_output", bool), inc_tensor, inc_node, estimated, estimable)


def _at_one(tensor: Tensor) -> int | None:
    """The byte size of ``tensor`` with every symbolic dimension (a named one: a string) at 1,
    or None when its dtype, rank or another dimension is unknown."""
    shape, dtype = tensor.shape, tensor.dtype
    if shape is None or dtype is None:
        return None
    if not all(isinstance(d, str) or (isinstance(d, (int, np.integer)) and d >= 0)
               for d in shape):
        return None
    try:
        item = np.dtype(dtype).itemsize
    except TypeError:
        return None
    count = 1
    for d in shape:
        if not isinstance(d, str):
            count *= int(d)
    return min(count * item, 2 ** 63 - 1)


def _split(idx: np.ndarray, ptr: np.ndarray) -> list[list[int]]:
    flat = idx.tolist()
    bounds = ptr.tolist()
    return [flat[bounds[i]:bounds[i + 1]] for i in range(len(bounds) - 1)]


_NONDETERMINISTIC = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                     "Multinomial", "Bernoulli"}


def _wire_tensors(nodes: list[Node], tensors: dict[str, Tensor], inputs: list[str],
                  outputs: list[str]) -> None:
    """Set every tensor's producer, consumers (each node once, in node order) and input/output
    flags; tensors named nowhere else are created."""
    for tname in inputs:
        tensors.setdefault(tname, Tensor(tname)).is_input = True
    for tname in outputs:
        tensors.setdefault(tname, Tensor(tname)).is_output = True
    for t in tensors.values():
        t.consumers = []
        t.producer = None
    for node in nodes:
        for out in node.outputs:
            if out:
                tensors.setdefault(out, Tensor(out)).producer = node.index
        seen = set()
        for tname in node.all_inputs():
            if tname not in seen:
                seen.add(tname)
                tensors.setdefault(tname, Tensor(tname)).consumers.append(node.index)


def _mark_constants(nodes: Iterable[Node], tensors: dict[str, Tensor]) -> None:
    """A tensor is constant if it is an initializer, a ``Constant`` output, or computed by a
    deterministic node without subgraphs whose inputs are all constant. It is folded if it is
    constant, the output of a ``Shape`` or ``Size`` of a statically shaped tensor, or computed
    the same way from folded tensors alone."""
    for t in tensors.values():
        t.is_constant = t.is_folded = t.is_initializer
    for node in nodes:  # topological order: inputs are decided before their consumers
        ins = node.all_inputs()
        onnx_op = node.domain in ("", "ai.onnx")
        pure = bool(ins) and not node.implicit_inputs and node.op_type not in _NONDETERMINISTIC
        const = (node.op_type == "Constant" and onnx_op) or (
            pure and all(tensors[t].is_constant for t in ins))
        folded = const or (onnx_op and node.op_type in _SHAPE_OPS and bool(ins)
                           and _static(tensors[ins[0]].shape)) or (
            pure and all(tensors[t].is_folded for t in ins))
        node.is_constant = const
        node.is_folded = folded
        for out in node.outputs:
            if out:
                tensors[out].is_constant = const
                tensors[out].is_folded = folded


_SHAPE_OPS = {"Shape", "Size"}


def _static(shape: tuple | None) -> bool:
    """True for a fully known shape (every dimension a non-negative integer)."""
    return shape is not None and all(isinstance(d, (int, np.integer)) and d >= 0 for d in shape)
