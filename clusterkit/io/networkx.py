"""networkx and node-link JSON readers and writers.

A networkx DiGraph needs an ``op`` attribute per node; ``affinity`` (node) and ``bytes`` (edge,
or node: the size of the node's output) are optional. Each node has one output tensor named
``"<node>:out"`` consumed by all its successors; when a node's out-edges carry different byte
counts, each edge gets its own tensor ``"<node>-><succ>"`` so that no size is lost.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

import numpy as np

from clusterkit.errors import GraphError
from clusterkit.graph.core import Graph
from clusterkit.io.files import write_atomic
from clusterkit.io.node_link import (
    MAX_BYTES,
    NETWORKX_KEYS,
    graph_from_lists,
    graph_from_node_link,
    load_node_link,
)

if TYPE_CHECKING:
    import networkx as nx

__all__ = ["MAX_BYTES", "from_networkx", "graph_from_node_link", "load_node_link",
           "save_node_link", "to_networkx", "to_node_link"]


def from_networkx(g: "nx.DiGraph", name: str = "graph", source: str = "memory") -> Graph:
    """Build a Graph from a networkx DiGraph (node order = source order)."""
    import networkx as nx

    if not isinstance(g, nx.DiGraph) or g.is_multigraph():
        raise GraphError("expected a networkx DiGraph (not a multigraph or undirected graph)")
    ids = list(g.nodes)
    pos_of = {nid: k for k, nid in enumerate(ids)}
    src, dst, ebytes = [], [], []
    for u, adj in g.adjacency():
        for v, data in adj.items():
            src.append(pos_of[u])
            dst.append(pos_of[v])
            ebytes.append(data.get("bytes"))
    return graph_from_lists(ids, [g.nodes[i] for i in ids], np.asarray(src, dtype=np.int64),
                            np.asarray(dst, dtype=np.int64), ebytes, NETWORKX_KEYS, name=name,
                            source=source)


def to_networkx(graph: Graph) -> "nx.DiGraph":
    """The graph as a DiGraph: nodes are topological indices with ``op``, ``name`` and
    ``affinity``; edges carry ``bytes`` (non-constant tensor bytes along the edge)."""
    import networkx as nx

    g = nx.DiGraph(name=graph.name)
    for node in graph.nodes:
        attrs = {"op": node.op_type, "name": node.name}
        if node.affinity:
            attrs["affinity"] = node.affinity
        g.add_node(node.index, **attrs)
    for u, v, b in zip(graph.edge_src.tolist(), graph.edge_dst.tolist(),
                       graph.edge_bytes.tolist()):
        g.add_edge(u, v, bytes=b)
    return g


def to_node_link(graph: Graph) -> dict:
    """Node-link data of :func:`to_networkx` (the ``edges`` key)."""
    import networkx as nx

    return nx.node_link_data(to_networkx(graph), edges="edges")


def save_node_link(graph: Graph, path: str | os.PathLike) -> None:
    """Write :func:`to_node_link` as JSON, atomically."""
    write_atomic(path, json.dumps(to_node_link(graph)))
