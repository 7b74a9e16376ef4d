"""What the pieces below a table-driven property read of it: the :class:`TableOwner` protocol.

:class:`~clusterkit.selectors._property.TableProperty` builds its graph contexts and its selector
and hands itself to them; they name it through this protocol, so that the modules the property
imports do not import it back (no import cycle, not even for annotations).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Mapping, Protocol

if TYPE_CHECKING:
    import numpy as np

    from clusterkit.graph.core import Graph, Node
    from clusterkit.selectors._optable import Table


class HasGraph(Protocol):
    """A graph context as its owner's selector reads it."""

    @property
    def graph(self) -> Graph: ...


class TableOwner(Protocol):
    """The table-driven property that owns a graph context or a selector (``ctx`` and ``fusion``
    are a :class:`GraphContext` and a :class:`Fusion`, typed loosely: their modules are below)."""

    @property
    def name(self) -> str: ...

    @property
    def table(self) -> Table: ...

    @property
    def fusions(self) -> Mapping[str, Any]: ...

    def allowed_dtypes(self, key: str) -> frozenset | None: ...

    def key_of(self, node: Node) -> str | None: ...

    def partner_sets(self, ctx: Any, node: Node,
                     fusion: Any = None) -> list[tuple[int, ...]]: ...

    def _reasons(self, ctx: Any, node: Node, base: bool = False) -> list[str]: ...

    def _context_of(self, node: Node, graph: Graph | None = None) -> HasGraph: ...

    def accepts(self, node: Node, graph: Graph | None = None) -> bool: ...

    def explain(self, node: Node, graph: Graph | None = None) -> str | None: ...

    def supported_mask(self, graph: Graph) -> np.ndarray: ...

    def orphans(self, graph: Graph, members: Iterable[int]) -> list[int]: ...

    def bind(self, graph: Graph) -> object: ...
