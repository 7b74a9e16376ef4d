"""A cluster seen as a subgraph (what ``create_subgraph_node`` receives) and the node that
replaces it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from clusterkit.graph.core import Graph, Tensor


@dataclass(init=False)
class Subgraph:
    """Nodes of one cluster (topological indices, sorted) with their boundary: ``inputs`` are
    non-constant tensors read from outside the cluster, ``outputs`` tensors read outside it or
    graph outputs; ``constants`` are constant tensors the nodes read (initializers and tensors
    computed from constants), in first-use order. The boundary is worked out on first use
    when it is not given (a property that only reads the nodes never pays for it)."""

    graph: "Graph"
    nodes: list[int]
    device: str
    cluster_id: int

    def __init__(self, graph: "Graph", nodes: list[int], device: str, cluster_id: int,
                 inputs: list[str] | None = None, outputs: list[str] | None = None,
                 constants: list[str] | None = None):
        self.graph, self.nodes, self.device, self.cluster_id = graph, nodes, device, cluster_id
        self._boundary: tuple[list[str], list[str], list[str]] | None = None
        if inputs is not None and outputs is not None and constants is not None:
            self._boundary = (inputs, outputs, constants)

    @classmethod
    def from_nodes(cls, graph: "Graph", nodes, device: str, cluster_id: int) -> "Subgraph":
        """The subgraph of ``nodes`` (any iterable of node indices)."""
        return cls(graph, sorted(int(v) for v in nodes), device, cluster_id)

    @property
    def inputs(self) -> list[str]:
        return self._edges()[0]

    @property
    def outputs(self) -> list[str]:
        return self._edges()[1]

    @property
    def constants(self) -> list[str]:
        return self._edges()[2]

    def _edges(self) -> tuple[list[str], list[str], list[str]]:
        """(inputs, outputs, constants), worked out once."""
        if self._boundary is None:
            self._boundary = _find_boundary(self.graph, self.nodes)
        return self._boundary

    def tensor(self, name: str) -> "Tensor":
        """A boundary or inner tensor by name."""
        return self.graph.tensors[name]

    @property
    def op_types(self) -> list[str]:
        """Op types of the nodes, in topological order."""
        return [self.graph.nodes[v].op_type for v in self.nodes]

    def __len__(self) -> int:
        return len(self.nodes)


@dataclass
class SubgraphNode:
    """The fused node that replaces a cluster: op ``op_type`` in ``domain``, wired to the
    subgraph's boundary tensors. ``payload`` is free for a property's own use (a compiled
    engine, a serialized blob...)."""

    name: str
    op_type: str
    domain: str
    subgraph: Subgraph
    attrs: dict[str, Any] = field(default_factory=dict)
    payload: Any = None

    @classmethod
    def default(cls, subgraph: Subgraph) -> "SubgraphNode":
        """``<device>_subgraph_<id>`` of op ``FusedSubgraph`` in domain ``clusterkit.<device>``."""
        return cls(name=f"{subgraph.device}_subgraph_{subgraph.cluster_id}",
                   op_type="FusedSubgraph", domain=f"clusterkit.{subgraph.device}",
                   subgraph=subgraph)


def _find_boundary(graph: "Graph", members: list[int]) -> tuple[list[str], list[str], list[str]]:
    """Inputs, outputs and constants of the sorted node list ``members`` (see
    :class:`Subgraph`)."""
    inside = set(members)
    inputs: dict[str, None] = {}  # insertion-ordered sets: first-use order
    constants: dict[str, None] = {}
    outputs: list[str] = []
    gnodes, tensors, within = graph.nodes, graph.tensors, inside.issuperset
    for v in members:
        node = gnodes[v]
        for t in node.all_inputs():
            ten = tensors[t]
            if ten.producer is not None and ten.producer in inside:
                continue
            (constants if ten.is_constant else inputs)[t] = None
        for t in node.outputs:
            if not t:
                continue
            ten = tensors[t]
            if ten.is_output or not within(ten.consumers):
                outputs.append(t)
    return list(inputs), outputs, list(constants)
