"""The selector of a table-driven property: node-local answers, plus ``filter`` for fusion-only
ops."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from clusterkit.selection.protocol import SubgraphSelector

if TYPE_CHECKING:
    from clusterkit.graph.core import Graph, Node
    from clusterkit.selectors._owner import TableOwner


class TableSelector(SubgraphSelector):
    """The selector of a :class:`TableProperty`: stateless, node-local answers
    (``select_input``/``select_output`` follow an edge when the new node is taken, so pattern
    edges are always followed); ``filter`` drops fusion-only nodes whose pattern is not inside
    the candidates."""

    #: its answers are node-local (``reset`` has nothing to forget): a cluster is judged
    #: without growing it again (see :mod:`clusterkit.constraints.acceptance`)
    stateful = False

    def __init__(self, prop: TableOwner):
        self.property = prop

    def select(self, node: "Node") -> bool:
        """Does the property take ``node``?"""
        return self.property.accepts(node)

    def filter(self, candidates: list["Node"]) -> list["Node"]:
        """The candidates without fusion-only nodes whose pattern is not among them."""
        prop = self.property
        if not prop.fusions or not candidates:
            return list(candidates)
        ctx = prop._context_of(candidates[0])
        dropped = set(prop.orphans(ctx.graph, [c.index for c in candidates]))
        return [c for c in candidates if c.index not in dropped]

    def reset(self) -> None:
        """Nothing to forget: the answers do not depend on history."""

    def supported_mask(self, graph: "Graph") -> np.ndarray:
        """The property's :meth:`~TableProperty.supported_mask`."""
        return self.property.supported_mask(graph)

    def bind(self, graph: "Graph") -> None:
        """Resolve this graph's nodes (done by ``query`` for engines)."""
        self.property.bind(graph)

    def explain(self, node: "Node") -> str | None:
        """Why the property refuses ``node``, or ``None``."""
        return self.property.explain(node)

    def __deepcopy__(self, memo: dict) -> "TableSelector":
        return TableSelector(self.property)

    def __repr__(self) -> str:
        return f"TableSelector({self.property.name})"
