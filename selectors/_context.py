"""What a selector rule may read about one graph: tensors, shapes, dtypes, neighbours, the
model's opset, and the contents of small constants, with per-graph memos.

A :class:`GraphContext` belongs to one graph and one property. It reads constant *contents* only
from initializers and ``Constant`` outputs; anything else (a tensor computed by
``ConstantOfShape``, external data) is unreadable, and value rules pass on it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from clusterkit.selectors._facts import DEFAULT_DOMAINS, dim_at
from clusterkit.selectors._patterns import match_chains

if TYPE_CHECKING:
    from clusterkit.graph.core import Graph, Node, Tensor
    from clusterkit.selectors._owner import TableOwner


class GraphContext:
    """What the checks may read about one graph, with per-property memos."""

    def __init__(self, graph: "Graph", prop: "TableOwner"):
        self.graph = graph
        self.prop = prop
        self.opset = _default_opset(graph)
        self._values: dict[str, Any] = {}
        self._inits: dict[str, Any] | None = None
        self.reasons: list[Optional[list[str]]] = [None] * graph.n
        self.base_reasons: list[Optional[list[str]]] = [None] * graph.n
        self._matches: dict[int, list[tuple[int, ...]]] | None = None
        self._by_node: dict[int, list[tuple[int, tuple[int, ...]]]] | None = None

    # --- tensors
    def tensor(self, name: str) -> "Tensor | None":
        """The tensor named ``name`` (``None`` for an absent optional name)."""
        return self.graph.tensors.get(name) if name else None

    def input(self, node: "Node", pos: int) -> "Tensor | None":
        """The tensor of input ``pos``, ``None`` when absent."""
        return self.tensor(node.inputs[pos]) if pos < len(node.inputs) else None

    def output(self, node: "Node", pos: int) -> "Tensor | None":
        """The tensor of output ``pos``, ``None`` when absent."""
        return self.tensor(node.outputs[pos]) if pos < len(node.outputs) else None

    def has_input(self, node: "Node", pos: int) -> bool:
        """Is input ``pos`` given?"""
        return pos < len(node.inputs) and bool(node.inputs[pos])

    def shape(self, node: "Node", pos: int, out: bool = False) -> tuple | None:
        """Shape of input (or output) ``pos``; ``None`` when unknown."""
        t = self.output(node, pos) if out else self.input(node, pos)
        return None if t is None else t.shape

    def rank(self, node: "Node", pos: int, out: bool = False) -> int | None:
        """Rank of input (or output) ``pos``; ``None`` when unknown."""
        s = self.shape(node, pos, out)
        return None if s is None else len(s)

    def dtype(self, node: "Node", pos: int, out: bool = False) -> str | None:
        """Dtype of input (or output) ``pos``; ``None`` when unknown."""
        t = self.output(node, pos) if out else self.input(node, pos)
        return None if t is None else t.dtype

    def producer(self, node: "Node", pos: int) -> "Node | None":
        """The node producing input ``pos`` (``None`` for a graph input or initializer)."""
        t = self.input(node, pos)
        if t is None or t.producer is None:
            return None
        return self.graph.nodes[t.producer]

    def consumers(self, name: str) -> list["Node"]:
        """The nodes reading tensor ``name``."""
        t = self.tensor(name)
        return [] if t is None else [self.graph.nodes[c] for c in t.consumers]

    def used(self, node: "Node", pos: int) -> bool:
        """Is output ``pos`` present and read (by a node or as a graph output)?"""
        t = self.output(node, pos)
        return t is not None and (bool(t.consumers) or t.is_output)

    def dim(self, node: "Node", pos: int, axis: int, out: bool = False) -> Any:
        """Dim ``axis`` of input (or output) ``pos``; ``None`` when unknown or out of range."""
        return dim_at(self.shape(node, pos, out), axis)

    def io_tensors(self, node: "Node") -> list["Tensor"]:
        """The node's known input and output tensors, inputs first."""
        names = list(node.inputs) + list(node.outputs)
        return [t for t in (self.tensor(name) for name in names) if t is not None]

    def dq_producer(self, node: "Node", pos: int) -> "Node | None":
        """The producer of input ``pos`` when it is a DequantizeLinear."""
        p = self.producer(node, pos)
        return p if p is not None and p.op_type == "DequantizeLinear" else None

    def q_consumer(self, node: "Node") -> "Node | None":
        """The QuantizeLinear reading output 0 when it is that output's only reader."""
        users = self.consumers(node.outputs[0]) if node.outputs else []
        return users[0] if len(users) == 1 and users[0].op_type == "QuantizeLinear" else None

    def in_qdq(self, node: "Node") -> bool:
        """Input 0 comes from a DequantizeLinear (the node sits in a QDQ node unit)."""
        return self.dq_producer(node, 0) is not None

    # --- constant contents
    def value(self, name: str) -> np.ndarray | None:
        """Contents of a constant tensor when it is an initializer or a ``Constant`` output."""
        if not name:
            return None
        if name in self._values:
            return self._values[name]
        out = None
        t = self.tensor(name)
        try:
            if t is not None and t.is_initializer:
                init = self._initializers().get(name)
                if init is not None and init.data_location != 1:  # 1 = EXTERNAL
                    from onnx import numpy_helper

                    out = numpy_helper.to_array(init)
            elif t is not None and t.producer is not None:
                p = self.graph.nodes[t.producer]
                if p.op_type == "Constant" and p.domain in DEFAULT_DOMAINS:
                    out = _constant_value(p.attrs)
        except Exception:  # unreadable: the value rules pass
            out = None
        self._values[name] = out
        return out

    def input_value(self, node: "Node", pos: int) -> np.ndarray | None:
        """Contents of constant input ``pos`` (see :meth:`value`)."""
        return self.value(node.inputs[pos]) if self.has_input(node, pos) else None

    def external(self, name: str) -> bool:
        """Is this initializer stored as external data?"""
        init = self._initializers().get(name)
        return init is not None and init.data_location == 1

    def _initializers(self) -> dict:
        if self._inits is None:
            model = self.graph.model
            inits = getattr(getattr(model, "graph", None), "initializer", [])
            self._inits = {i.name: i for i in inits}
        return self._inits

    # --- neighbours' acceptance and patterns
    def accepts_base(self, node: "Node") -> bool:
        """Does this property take ``node`` when fusion-context rules are ignored?"""
        return not self.prop._reasons(self, node, base=True)

    def matches(self, pattern_index: int) -> list[tuple[int, ...]]:
        """Chain matches (node indices) of one pattern of this property's table."""
        if self._matches is None:
            self._matches = {}
        got = self._matches.get(pattern_index)
        if got is None:
            got = match_chains(self.graph, self.prop.table.patterns[pattern_index])
            self._matches[pattern_index] = got
        return got


def _default_opset(graph: "Graph") -> int | None:
    model = graph.model
    for imp in getattr(model, "opset_import", []) or []:
        if imp.domain in DEFAULT_DOMAINS:
            return int(imp.version)
    return None


def _constant_value(attrs: dict) -> np.ndarray | None:
    if "value" in attrs:
        from onnx import numpy_helper

        return numpy_helper.to_array(attrs["value"])
    for key in ("value_float", "value_int"):
        if key in attrs:
            return np.asarray(attrs[key])
    for key in ("value_floats", "value_ints"):
        if key in attrs:
            return np.asarray(list(attrs[key]))
    return None
