"""The selector API of MXNet's subgraph proposal, in snake_case.

A :class:`SubgraphSelector` says which nodes may start a subgraph (``select``), which neighbours
to follow (``select_input``/``select_output``) and prunes the candidates (``filter``). Selectors may
keep state while one cluster grows; engines ask :meth:`SubgraphProperty.create_subgraph_selector`
for a fresh one per growing cluster. A :class:`SubgraphProperty` ties a selector to a device and
builds the fused node of a finished cluster (``create_subgraph_node``, which may reject it by
returning ``None``) and may declare the device's limits (``max_nodes``, ``min_nodes``,
``max_const_bytes``; :data:`LIMIT_SETTINGS`). What makes a cluster acceptable to its device is
defined once, in :mod:`clusterkit.constraints.acceptance`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np

from clusterkit.errors import SelectorError

if TYPE_CHECKING:
    from clusterkit.graph.core import Graph, Node


class SubgraphSelector:
    """Base selector. Subclasses override :meth:`select` and, when they care about edges,
    :meth:`select_input`/:meth:`select_output`. The defaults follow an edge when the new node
    itself would be selected."""

    def select(self, node: "Node") -> bool:
        """May ``node`` start (or belong to) a subgraph?"""
        raise NotImplementedError(f"{type(self).__name__}.select is not implemented")

    def select_input(self, node: "Node", new_node: "Node") -> bool:
        """Follow the edge from producer ``new_node`` into ``node`` (already in the subgraph)?"""
        return self.select(new_node)

    def select_output(self, node: "Node", new_node: "Node") -> bool:
        """Follow the edge from ``node`` (already in the subgraph) to consumer ``new_node``?"""
        return self.select(new_node)

    def filter(self, candidates: list["Node"]) -> list["Node"]:
        """Prune the candidate nodes of a finished subgraph; returns a subset."""
        return list(candidates)

    def reset(self) -> None:
        """Forget any state gathered while growing a subgraph."""

    def supported_mask(self, graph: "Graph") -> np.ndarray | None:
        """Optional fast path: ``select`` of a fresh selector for every node, as a bool array.
        ``None`` (the default) means: ask node by node."""
        return None

    @property
    def edge_sensitive(self) -> bool:
        """True when the selector overrides ``select_input`` or ``select_output`` (its edge
        answers may differ from ``select`` on the new node)."""
        cls = type(self)
        return (cls.select_input is not SubgraphSelector.select_input
                or cls.select_output is not SubgraphSelector.select_output)

    @property
    def stateful(self) -> bool:
        """True when a cluster's acceptance depends on the order it grows in: the selector is
        :attr:`edge_sensitive`, or overrides ``reset`` (it keeps state while a cluster grows,
        which MXNet's protocol asks ``reset`` to forget). Such a cluster is judged by growing it
        again (:mod:`clusterkit.constraints.acceptance`). A selector whose ``reset`` has nothing
        to forget may set ``stateful = False``; a wrapper answers for the selector it wraps."""
        cls = type(self)
        return self.edge_sensitive or cls.reset is not SubgraphSelector.reset

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class ContainOpSelector(SubgraphSelector):
    """Selects every node whose op type is in ``op_types`` (MXNet's stock selector)."""

    def __init__(self, op_types: Iterable[str]):
        self.op_types = frozenset(op_types)

    def select(self, node: "Node") -> bool:
        return node.op_type in self.op_types

    def supported_mask(self, graph: "Graph") -> np.ndarray:
        ops = self.op_types
        return np.fromiter((op in ops for op in graph.op_types), dtype=bool, count=graph.n)

    def __repr__(self) -> str:
        return f"ContainOpSelector({sorted(self.op_types)})"


class SubgraphProperty:
    """A device (backend) with its selector. ``value_inputs`` maps op types to input positions
    whose values the device must know (constraints it brings along).

    ``computes_value_inputs`` is the device's value-input policy: ``False`` (the default) when
    an op's value input (a Reshape's shape, a Resize's scales: the constraints'
    ``value_inputs``, by default :data:`~clusterkit.constraints.core.DEFAULT_VALUE_INPUTS`)
    must be a constant or come from another cluster; ``True`` when the device computes such
    values inside its own cluster (its compiler takes the shape computation with the Reshape),
    so those cuts do not apply between two nodes it takes. The device's own ``value_inputs``
    apply either way."""

    name: str = "property"
    value_inputs: dict[str, tuple[int, ...]] = {}
    computes_value_inputs: bool = False
    #: the device's own limits (``None``: none): nodes per cluster at most / at least, and
    #: bytes of constants one cluster may hold (see :mod:`clusterkit.constraints.limits`)
    max_nodes: int | None = None
    min_nodes: int | None = None
    max_const_bytes: int | None = None

    def __init__(self, device: str = "acc"):
        self.device = device
        check_device_limits(self)

    def create_subgraph_selector(self) -> SubgraphSelector:
        """A fresh selector for one growing subgraph."""
        raise NotImplementedError(f"{type(self).__name__}.create_subgraph_selector")

    def create_subgraph_node(self, subgraph: Any) -> Any:
        """The node replacing a finished subgraph, or ``None`` to reject the subgraph.
        The default accepts every subgraph with a
        :class:`~clusterkit.graph.subgraph.SubgraphNode`."""
        from clusterkit.graph.subgraph import SubgraphNode

        return SubgraphNode.default(subgraph)

    def query(self, graph: "Graph") -> np.ndarray:
        """Which nodes this device supports: ``select`` of a fresh selector, per node."""
        sel = call_create_subgraph_selector(self)
        mask = sel.supported_mask(graph)
        if mask is not None:
            mask = np.asarray(mask, dtype=bool)
            if mask.shape != (graph.n,):
                raise SelectorError(f"{describe(sel)}.supported_mask returned shape {mask.shape},"
                                    f" expected ({graph.n},)")
            return mask
        out = np.zeros(graph.n, dtype=bool)
        for node in graph.nodes:
            sel = self.create_subgraph_selector()
            out[node.index] = call_select(sel, node)
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}(device={self.device!r})"


class OpsProperty(SubgraphProperty):
    """A device that takes a fixed set of op types (the ``[DEVICE=]ops:A,B`` spec)."""

    name = "ops"

    def __init__(self, op_types: Iterable[str], device: str = "acc",
                 value_inputs: dict[str, Sequence[int]] | None = None):
        super().__init__(device)
        self.op_types = frozenset(op_types)
        if not self.op_types:
            raise SelectorError(f"device {device!r}: an ops: selector needs at least one op type")
        self.value_inputs = {k: tuple(v) for k, v in (value_inputs or {}).items()}

    def create_subgraph_selector(self) -> SubgraphSelector:
        return ContainOpSelector(self.op_types)

    def __repr__(self) -> str:
        return f"OpsProperty({self.device}: {','.join(sorted(self.op_types))})"


#: the limits a property may declare, as settings (``qnn[max_nodes=64]``) and attributes
LIMIT_SETTINGS = {"max_nodes": "at most this many nodes per subgraph",
                  "min_nodes": "at least this many nodes per subgraph, smaller ones fall back",
                  "max_const_bytes": "at most this many bytes of constants per subgraph"}


def device_limits(prop: Any) -> dict[str, int | None]:
    """The limits ``prop`` declares (:data:`LIMIT_SETTINGS`, ``None`` where it has none)."""
    return {k: getattr(prop, k, None) for k in LIMIT_SETTINGS}


def check_device_limits(prop: Any) -> None:
    """Refuse limits that are not counts or contradict each other, naming the setting and the
    device."""
    lim = device_limits(prop)
    where = f"device {getattr(prop, 'device', '?')!r}"
    for key, value in lim.items():
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise SelectorError(f"{where}: setting {key} must be an integer, got {value!r}")
        if value < (1 if key != "max_const_bytes" else 0):
            least = 1 if key != "max_const_bytes" else 0
            raise SelectorError(f"{where}: setting {key} must be >= {least}, got {value}")
    lo, hi = lim["min_nodes"], lim["max_nodes"]
    if lo is not None and hi is not None and lo > hi:
        raise SelectorError(f"{where}: setting min_nodes={lo} is above max_nodes={hi}")


def set_device_limits(prop: SubgraphProperty, **limits: int | None) -> SubgraphProperty:
    """Set limits of :data:`LIMIT_SETTINGS` on ``prop`` (checked); returns ``prop``."""
    for key, value in limits.items():
        if key not in LIMIT_SETTINGS:
            raise SelectorError(f"device {prop.device!r}: no limit {key!r} (limits: "
                                f"{', '.join(LIMIT_SETTINGS)})")
        setattr(prop, key, value)
    check_device_limits(prop)
    return prop


def is_stateful(selector: Any) -> bool:
    """:attr:`SubgraphSelector.stateful` of any selector (one without the attribute counts as
    stateful: nothing says its answers are node-local)."""
    return bool(getattr(selector, "stateful", True))


def describe(selector: Any) -> str:
    """A short name for error messages."""
    return type(selector).__name__


def _check_bool(value: Any, selector: Any, method: str, node: "Node") -> bool:
    if value is True or value is False:
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    raise SelectorError(f"selector {describe(selector)}.{method} returned {type(value).__name__}"
                        f" {value!r} for node {node.name!r} ({node.op_type}); expected a bool")


def _failed(selector: SubgraphSelector, method: str, exc: Exception, about: str) -> SelectorError:
    """The error for an exception raised by ``selector.<method>`` on ``about``."""
    return SelectorError(f"selector {describe(selector)}.{method} raised {exc!r} on {about}")


def call_select(selector: SubgraphSelector, node: "Node") -> bool:
    """``selector.select(node)`` with errors that name the selector and the node."""
    try:
        value = selector.select(node)
    except SelectorError:
        raise
    except Exception as exc:
        raise _failed(selector, "select", exc, f"node {node.name!r} ({node.op_type})") from exc
    return _check_bool(value, selector, "select", node)


def call_select_input(selector: SubgraphSelector, node: "Node", new_node: "Node") -> bool:
    """``selector.select_input(node, new_node)``, checked (the error message is built only
    when there is an error: this runs once per edge a growth looks at)."""
    return _edge_call(selector, "select_input", node, new_node, "input")


def call_select_output(selector: SubgraphSelector, node: "Node", new_node: "Node") -> bool:
    """``selector.select_output(node, new_node)``, checked (see :func:`call_select_input`)."""
    return _edge_call(selector, "select_output", node, new_node, "output")


def _edge_call(selector: SubgraphSelector, method: str, node: "Node", new_node: "Node",
               side: str) -> bool:
    try:
        value = getattr(selector, method)(node, new_node)
    except SelectorError:
        raise
    except Exception as exc:
        raise _failed(selector, method, exc,
                      f"node {node.name!r} with {side} node {new_node.name!r}") from exc
    return _check_bool(value, selector, method, new_node)


def call_filter(selector: SubgraphSelector, candidates: list["Node"]) -> list["Node"]:
    """``selector.filter(candidates)``; the result must be a subset of the candidates."""
    try:
        kept = selector.filter(list(candidates))
    except SelectorError:
        raise
    except Exception as exc:
        first = candidates[0].name if candidates else "-"
        raise SelectorError(f"selector {describe(selector)}.filter raised {exc!r} on the subgraph"
                            f" starting at node {first!r}") from exc
    if kept is None or not hasattr(kept, "__iter__"):
        raise SelectorError(f"selector {describe(selector)}.filter returned {kept!r}; expected a"
                            " list of nodes")
    kept = list(kept)
    ids = {id(c) for c in candidates}
    for node in kept:
        if id(node) not in ids:
            name = getattr(node, "name", repr(node))
            raise SelectorError(f"selector {describe(selector)}.filter returned node {name!r},"
                                " which was not a candidate")
    return kept


def call_create_subgraph_selector(prop: "SubgraphProperty") -> SubgraphSelector:
    """``prop.create_subgraph_selector()``; an exception, or an answer without a callable
    ``select``, becomes a :class:`SelectorError` naming the property and its device."""
    where = f"property {describe(prop)} ({prop.device}).create_subgraph_selector"
    try:
        sel = prop.create_subgraph_selector()
    except SelectorError:
        raise
    except Exception as exc:
        raise SelectorError(f"{where} raised {exc!r}") from exc
    if not callable(getattr(sel, "select", None)):
        raise SelectorError(f"{where} returned {type(sel).__name__}, which has no select method")
    return sel


def call_create_subgraph_node(prop: "SubgraphProperty", subgraph: Any, where: str) -> Any:
    """``prop.create_subgraph_node(subgraph)``; an exception becomes a :class:`SelectorError`
    naming the property, its device and ``where`` (the cluster or seed at fault). ``None``
    (a rejection) is returned as is."""
    try:
        return prop.create_subgraph_node(subgraph)
    except SelectorError:
        raise
    except Exception as exc:
        raise SelectorError(f"property {describe(prop)} ({prop.device}).create_subgraph_node "
                            f"raised {exc!r} on {where}") from exc
