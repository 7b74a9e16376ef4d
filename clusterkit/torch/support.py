"""Capability predicates both ways between torch.fx and clusterkit.

- :class:`FxSupportProperty`: any fx ``OperatorSupportBase`` (``is_node_supported(submodules,
  node)``) as a clusterkit device, so every clusterkit strategy can use it. It asks the fx
  predicate once per node of the Graph read from the same GraphModule (names map clusterkit
  nodes back to fx nodes).
- :class:`OpsSupport`: an fx ``OperatorSupportBase`` that takes the nodes whose op name
  (:func:`clusterkit.torch.reader.op_name`, e.g. ``aten.convolution.default``) is in a set.
- :class:`SelectorSupport`: a clusterkit selector (a spec such as ``ops:aten.relu.default`` or a
  :class:`~clusterkit.selection.protocol.SubgraphProperty`) as an fx ``OperatorSupportBase``.
"""

from __future__ import annotations

import weakref
from typing import Iterable

import numpy as np
from torch.fx import GraphModule
from torch.fx import Node as FxNode
from torch.fx.passes.operator_support import OperatorSupportBase

from clusterkit.errors import SelectorError
from clusterkit.graph.core import Graph, Node
from clusterkit.selection.protocol import SubgraphProperty, SubgraphSelector
from clusterkit.selection.specs import parse_selectors
from clusterkit.torch.reader import CALL_OPS, graph_module_of, op_name, read_fx

__all__ = ["FxSupportProperty", "FxSupportSelector", "OpsSupport", "SelectorSupport"]


class FxSupportSelector(SubgraphSelector):
    """Selects the nodes its property's fx predicate supports (stateless)."""

    def __init__(self, prop: "FxSupportProperty"):
        self.prop = prop

    def select(self, node: Node) -> bool:
        return self.prop.is_supported(node.name)

    def supported_mask(self, graph: Graph) -> np.ndarray:
        return np.fromiter((self.prop.is_supported(nd.name) for nd in graph.nodes), dtype=bool,
                           count=graph.n)

    def __repr__(self) -> str:
        return f"FxSupportSelector({type(self.prop.operator_support).__name__})"


class FxSupportProperty(SubgraphProperty):
    """A clusterkit device whose nodes are the ones ``operator_support`` supports in
    ``graph_module`` (a GraphModule or an ExportedProgram); each fx node is asked once."""

    name = "fx"

    def __init__(self, operator_support: OperatorSupportBase, graph_module: GraphModule,
                 device: str = "acc"):
        super().__init__(device)
        if not callable(getattr(operator_support, "is_node_supported", None)):
            raise SelectorError(f"{type(operator_support).__name__} has no is_node_supported("
                                "submodules, node) method: not a torch.fx OperatorSupportBase")
        self.operator_support = operator_support
        self.graph_module = graph_module_of(graph_module)
        self._submodules = dict(self.graph_module.named_modules())
        self._fx_nodes = {nd.name: nd for nd in self.graph_module.graph.nodes}
        self._answers: dict[str, bool] = {}

    def is_supported(self, name: str) -> bool:
        """The fx predicate's answer for the fx node called ``name`` (False for a node that is
        not in the GraphModule or does not compute)."""
        answer = self._answers.get(name)
        if answer is None:
            fx = self._fx_nodes.get(name)
            answer = fx is not None and fx.op in CALL_OPS and self._ask(fx)
            self._answers[name] = answer
        return answer

    def _ask(self, fx: FxNode) -> bool:
        try:
            value = self.operator_support.is_node_supported(self._submodules, fx)
        except Exception as exc:
            raise SelectorError(f"{type(self.operator_support).__name__}.is_node_supported "
                                f"raised {exc!r} on fx node {fx.name!r} ({fx.target})") from exc
        return bool(value)

    def create_subgraph_selector(self) -> SubgraphSelector:
        return FxSupportSelector(self)

    def __repr__(self) -> str:
        return f"FxSupportProperty({self.device}: {type(self.operator_support).__name__})"


class OpsSupport(OperatorSupportBase):
    """An fx predicate: a computing node is supported when its op name is in ``op_names``."""

    def __init__(self, op_names: Iterable[str]):
        self.op_names = frozenset(op_names)

    def is_node_supported(self, submodules, node: FxNode) -> bool:
        return node.op in CALL_OPS and op_name(node, submodules) in self.op_names

    def __repr__(self) -> str:
        return f"OpsSupport({sorted(self.op_names)})"


class SelectorSupport(OperatorSupportBase):
    """An fx predicate from a clusterkit selector spec or property: a node is supported when
    the property's selector selects it in the Graph read from the node's GraphModule (read
    once per fx graph, again when the graph has changed)."""

    def __init__(self, selector: str | SubgraphProperty):
        self.property = parse_selectors([selector])[0] if isinstance(selector, str) else selector
        self._cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def is_node_supported(self, submodules, node: FxNode) -> bool:
        if node.op not in CALL_OPS:
            return False
        graph, mask = self._read(node)
        idx = graph.name_to_index.get(node.name)
        return bool(mask[idx]) if idx is not None else False

    def _read(self, node: FxNode) -> tuple[Graph, np.ndarray]:
        fx_graph = node.graph
        size = len(fx_graph.nodes)
        hit = self._cache.get(fx_graph)
        if hit is None or hit[0] != size or node.name not in hit[1].name_to_index:
            graph = read_fx(fx_graph.owning_module)
            hit = (size, graph, self.property.query(graph))
            self._cache[fx_graph] = hit
        return hit[1], hit[2]

    def __repr__(self) -> str:
        return f"SelectorSupport({self.property!r})"
