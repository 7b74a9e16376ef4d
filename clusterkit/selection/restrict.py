"""``exclude=`` / ``include=`` for any selector: a property restricted to some op types.

:class:`OpFilterProperty` wraps another property (onnxruntime's ``trt_op_types_to_exclude``,
Torch-TensorRT's ``torch_executed_ops``): a node is taken when its op type is allowed *and* the
wrapped property takes it. Being a plain conjunction with a node-local test, the wrapper keeps
every answer of the wrapped selector for allowed nodes, so the fast ``supported_mask`` path,
edge answers, ``filter`` and ``create_subgraph_node`` keep their meaning; every other attribute
(``explain``, ``settings``, ``patterns``, ...) is the wrapped property's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

from clusterkit.selection.protocol import (
    SubgraphProperty,
    SubgraphSelector,
    call_create_subgraph_selector,
    is_stateful,
)

if TYPE_CHECKING:
    from clusterkit.graph.core import Graph, Node


def op_names(node: "Node") -> tuple[str, str]:
    """The names a spec may give ``node``'s op: its type and ``domain:type``."""
    return node.op_type, f"{node.domain}:{node.op_type}"


class OpFilter:
    """Which op types may be taken: not in ``exclude``, and in ``include`` when one is given."""

    def __init__(self, exclude: Iterable[str] = (), include: Iterable[str] | None = None):
        self.exclude = frozenset(exclude)
        self.include = None if include is None else frozenset(include)

    def allows(self, node: "Node") -> bool:
        """May ``node``'s op type be taken?"""
        names = op_names(node)
        if any(n in self.exclude for n in names):
            return False
        return self.include is None or any(n in self.include for n in names)

    def refusal(self, node: "Node") -> str | None:
        """Why ``node`` is not allowed (None when it is)."""
        names = op_names(node)
        if any(n in self.exclude for n in names):
            return (f"op {node.op_type} is excluded by the spec (exclude="
                    f"{'|'.join(sorted(self.exclude))})")
        if self.include is not None and not any(n in self.include for n in names):
            return (f"op {node.op_type} is not among the spec's include="
                    f"{'|'.join(sorted(self.include))}")
        return None

    def mask(self, graph: "Graph") -> np.ndarray:
        """:meth:`allows` for every node of ``graph``."""
        return np.fromiter((self.allows(nd) for nd in graph.nodes), dtype=bool, count=graph.n)

    def label(self) -> str:
        """The settings as a spec writes them."""
        parts = [f"exclude={'|'.join(sorted(self.exclude))}"] if self.exclude else []
        if self.include is not None:
            parts.append(f"include={'|'.join(sorted(self.include))}")
        return ",".join(parts)


class OpFilterSelector(SubgraphSelector):
    """The wrapped selector, refusing nodes whose op type the filter does not allow."""

    def __init__(self, inner: SubgraphSelector, ops: OpFilter):
        self.inner = inner
        self.ops = ops

    def select(self, node: "Node") -> bool:
        return self.ops.allows(node) and self.inner.select(node)

    def select_input(self, node: "Node", new_node: "Node") -> bool:
        return self.ops.allows(new_node) and self.inner.select_input(node, new_node)

    def select_output(self, node: "Node", new_node: "Node") -> bool:
        return self.ops.allows(new_node) and self.inner.select_output(node, new_node)

    def filter(self, candidates: list["Node"]) -> list["Node"]:
        return self.inner.filter([c for c in candidates if self.ops.allows(c)])

    def reset(self) -> None:
        self.inner.reset()

    def supported_mask(self, graph: "Graph") -> np.ndarray | None:
        mask = self.inner.supported_mask(graph)
        return None if mask is None else np.asarray(mask, dtype=bool) & self.ops.mask(graph)

    @property
    def edge_sensitive(self) -> bool:
        return bool(getattr(self.inner, "edge_sensitive", True))

    @property
    def stateful(self) -> bool:
        return is_stateful(self.inner)

    def __repr__(self) -> str:
        return f"OpFilterSelector({self.inner!r}, {self.ops.label()})"


class OpFilterProperty(SubgraphProperty):
    """``inner`` restricted to the op types ``ops`` allows (see the module docstring)."""

    def __init__(self, inner: SubgraphProperty, ops: OpFilter):
        self.inner = inner
        self.ops = ops
        self.name = getattr(inner, "name", type(inner).__name__)
        self.value_inputs = dict(getattr(inner, "value_inputs", {}) or {})
        self.computes_value_inputs = bool(getattr(inner, "computes_value_inputs", False))

    @property
    def device(self) -> str:
        return self.inner.device

    @device.setter
    def device(self, value: str) -> None:
        self.inner.device = value

    # the device's limits are the wrapped property's (class attributes would hide them)
    max_nodes = property(lambda self: getattr(self.inner, "max_nodes", None),
                         lambda self, v: setattr(self.inner, "max_nodes", v))
    min_nodes = property(lambda self: getattr(self.inner, "min_nodes", None),
                         lambda self, v: setattr(self.inner, "min_nodes", v))
    max_const_bytes = property(lambda self: getattr(self.inner, "max_const_bytes", None),
                               lambda self, v: setattr(self.inner, "max_const_bytes", v))

    def __getattr__(self, attr: str) -> Any:
        if attr in ("inner", "ops"):  # not set yet (e.g. while unpickling)
            raise AttributeError(attr)
        return getattr(self.inner, attr)

    def create_subgraph_selector(self) -> SubgraphSelector:
        return OpFilterSelector(call_create_subgraph_selector(self.inner), self.ops)

    def create_subgraph_node(self, subgraph: Any) -> Any:
        return self.inner.create_subgraph_node(subgraph)

    def query(self, graph: "Graph") -> np.ndarray:
        return np.asarray(self.inner.query(graph), dtype=bool) & self.ops.mask(graph)

    def supported_mask(self, graph: "Graph") -> np.ndarray:
        """:meth:`query` (for callers of a table property's fast path)."""
        return self.query(graph)

    def accepts(self, node: "Node", graph: "Graph | None" = None) -> bool:
        """Does this device take ``node``?"""
        # accepts and pattern_groups: of table properties; on another the AttributeError says so
        return self.ops.allows(node) and bool(self.inner.accepts(  # type: ignore[attr-defined]
            node, graph))

    def explain_all(self, node: "Node", graph: "Graph | None" = None) -> list[str]:
        """Every reason ``node`` is refused: the spec's op filter first, then the wrapped
        property's reasons (when it explains)."""
        own = self.ops.refusal(node)
        inner = getattr(self.inner, "explain_all", None)
        rest = list(inner(node, graph)) if inner is not None else []
        return ([own] if own else []) + rest

    def explain(self, node: "Node", graph: "Graph | None" = None) -> str | None:
        """Why ``node`` is refused (the spec's op filter first), or ``None`` when taken."""
        own = self.ops.refusal(node)
        if own:
            return f"{self.name}: {own}"
        inner = getattr(self.inner, "explain", None)
        return inner(node, graph) if inner is not None else None

    def pattern_groups(self, graph: "Graph", fusion_only: bool = False) -> list[list[int]]:
        """The wrapped property's must-stay-together groups whose nodes are all allowed."""
        allowed = self.ops.mask(graph)
        return [list(g) for g in self.inner.pattern_groups(  # type: ignore[attr-defined]
                    graph, fusion_only)
                if all(allowed[v] for v in g)]

    def __repr__(self) -> str:
        return f"OpFilterProperty({self.inner!r}, {self.ops.label()})"
