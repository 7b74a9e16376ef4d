"""A device whose supported nodes are an installed execution provider's own answer.

``--selector ep:QNNExecutionProvider[backend=htp]`` (any installed plugin EP by name, its
provider options as settings; ``device_type=NPU|GPU|CPU`` picks which of the EP's devices;
QNN's ``backend=htp|gpu`` picks its backend library) asks the EP which nodes of the graph it takes
(:func:`~clusterkit.io.ep_query.answer_by_position`) and uses exactly those as the device's
supported nodes, so clusterkit's strategies, limits and reports run on the runtime's own truth
without a hand-written table. The EP sees the graph as clusterkit has it: partition with
``--optimize basic`` for the graph onnxruntime hands its EPs at run time. The EP's own grouping
is kept (:meth:`EpProperty.ep_groups`) so a report can say where clusterkit groups differently.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import numpy as np

from clusterkit.errors import SelectorError
from clusterkit.io.ep_query import answer_by_position, find_ep
from clusterkit.selection.protocol import SubgraphProperty, SubgraphSelector

if TYPE_CHECKING:
    from clusterkit.graph.core import Graph, Node

log = logging.getLogger(__name__)


class EpSelector(SubgraphSelector):
    """Selects the nodes its property's EP took (of the graphs the property was queried on)."""

    def __init__(self, prop: "EpProperty"):
        self.prop = prop

    def select(self, node: "Node") -> bool:
        return id(node) in self.prop.taken_ids

    def supported_mask(self, graph: "Graph") -> np.ndarray:
        return self.prop.mask(graph).copy()

    def __repr__(self) -> str:
        return f"EpSelector({self.prop.ep})"


class EpProperty(SubgraphProperty):
    """The device of execution provider ``ep`` with provider options ``settings``."""

    name = "ep"

    def __init__(self, ep: str, settings: dict[str, str] | None = None,
                 device: str | None = None):
        super().__init__(device or ep)
        self.ep = find_ep(ep).name  # a missing EP fails here, naming its extra
        self.settings = dict(settings or {})
        self.taken_ids: set[int] = set()
        self._seen: dict[int, tuple["Graph", np.ndarray, list[list[int]]]] = {}

    def create_subgraph_selector(self) -> EpSelector:
        return EpSelector(self)

    def mask(self, graph: "Graph") -> np.ndarray:
        """The nodes of ``graph`` the EP takes (asked once per graph)."""
        seen = self._seen.get(id(graph))
        if seen is None or seen[0] is not graph:
            seen = self._ask(graph)
            self._seen[id(graph)] = seen
        return seen[1]

    def ep_groups(self, graph: "Graph") -> list[list[int]]:
        """The EP's own groups of ``graph``'s nodes (node indices)."""
        self.mask(graph)
        return self._seen[id(graph)][2]

    def _ask(self, graph: "Graph") -> tuple["Graph", np.ndarray, list[list[int]]]:
        import onnx

        if not isinstance(graph.model, onnx.ModelProto):
            raise SelectorError(f"selector ep:{self.ep} needs a graph read from an ONNX model")
        _, groups = answer_by_position(graph.model, self.ep, self.settings)
        if not groups:
            log.warning("%s took no node of %s: the session ran on the CPU EP (an EP that "
                        "could not initialise looks the same)", self.ep, graph.name)
        by_source = {nd.source_index: nd.index for nd in graph.nodes}
        mine = [sorted(by_source[p] for p in g if p in by_source) for g in groups]
        mask = np.zeros(graph.n, dtype=bool)
        for g in mine:
            mask[g] = True
        self.taken_ids.update(id(graph.nodes[i]) for i in np.flatnonzero(mask))
        return graph, mask, [g for g in mine if g]

    def __repr__(self) -> str:
        opts = ",".join(f"{k}={v}" for k, v in sorted(self.settings.items()))
        return f"EpProperty({self.device}: {self.ep}{f'[{opts}]' if opts else ''})"


def ep_of_selector(prop: Any, label: str | None = None
                   ) -> tuple[str, dict[str, str], dict[str, Any]]:
    """The EP a shipped selector models, the EP settings that follow from the selector's own,
    and the selector data's ``verified`` block; a selector without one is a
    :class:`SelectorError` naming it (``label``: the spec as the user wrote it)."""
    table = getattr(prop, "table", None)
    verified = (getattr(table, "raw", None) or {}).get("verified")
    if not verified:
        raise SelectorError(f"selector {label or selector_name(prop)!r} does not model an "
                            "installable plugin execution provider (its data has no 'verified')")
    settings = {k: str(prop.settings[k]) for k in verified.get("ep_settings", [])
                if k in getattr(prop, "settings", {})}
    return verified["ep"], settings, verified


def selector_name(prop: Any) -> str:
    """What to call a selector in a message: its ``name``, unless that is the protocol's
    placeholder (``"property"``, a user's class that set none), then its class's name."""
    name = getattr(prop, "name", None)
    if not name or name == SubgraphProperty.name:
        return type(prop).__name__
    return str(name)


def ep_of_property(prop: Any, where: str) -> tuple[str, dict[str, str]]:
    """The plugin EP a device's property stands for and its provider options: an ``ep:NAME``
    selector's own, or those a shipped selector is verified with
    (:func:`ep_of_selector`). Any other property is a :class:`SelectorError` saying, in one
    line, how to name an EP (``where``: what asked)."""
    if isinstance(prop, EpProperty):
        return prop.ep, dict(prop.settings)
    if prop is None:
        raise SelectorError(f"{where}: no selector says which plugin execution provider; name "
                            "one: ep:EPNAME[key=value,...]")
    try:
        ep, settings, _ = ep_of_selector(prop)
    except SelectorError:
        name = selector_name(prop)
        raise SelectorError(f"{where}: selector {name!r} models no plugin execution provider; "
                            "name one: ep:EPNAME[key=value,...]") from None
    return ep, settings
