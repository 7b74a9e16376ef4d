"""networkx and node-link JSON readers and writers.

A networkx DiGraph needs an ``op`` attribute per node; ``affinity`` (node) and ``bytes`` (edge,
or node: the size of the node's output) are optional. Each node has one output tensor named
``"<node>:out"`` consumed by all its successors; when a node's out-edges carry different byte
counts, each edge gets its own tensor ``"<node>-><succ>"`` so that no size is lost.
"""

from __future__ import annotations

import json
import os
from typing import Any

import networkx as nx

from clusterkit.errors import GraphError, ModelLoadError
from clusterkit.graph.core import Graph, Node, Tensor
from clusterkit.io.files import read_input, write_atomic


def from_networkx(g: nx.DiGraph, name: str = "graph", source: str = "memory") -> Graph:
    """Build a Graph from a networkx DiGraph (node order = source order)."""
    if not isinstance(g, nx.DiGraph) or g.is_multigraph():
        raise GraphError("expected a networkx DiGraph (not a multigraph or undirected graph)")
    ids = list(g.nodes)
    names = [str(i) for i in ids]
    if len(set(names)) != len(names):
        raise GraphError("node ids must stay distinct when written as strings")
    pos_of = {nid: k for k, nid in enumerate(ids)}
    nodes: list[Node] = []
    tensors: dict[str, Tensor] = {}
    inputs_of: list[list[str]] = [[] for _ in ids]
    outputs: list[str] = []
    for k, nid in enumerate(ids):
        data = g.nodes[nid]
        op = data.get("op")
        if not isinstance(op, str) or not op:
            raise GraphError(f"node {names[k]!r} has no 'op' attribute (a non-empty string)")
        out_edges = list(g.out_edges(nid, data=True))
        sizes = {_edge_bytes(names[k], names[pos_of[v]], d) for _, v, d in out_edges}
        node_bytes = data.get("bytes")
        outs: list[str] = []
        if node_bytes is not None or len(sizes) <= 1:
            t = f"{names[k]}:out"
            nbytes = node_bytes if node_bytes is not None else (sizes.pop() if sizes else None)
            tensors[t] = Tensor(t, nbytes=_check_bytes(f"node {names[k]!r}", nbytes))
            outs.append(t)
            for _, v, _d in out_edges:
                inputs_of[pos_of[v]].append(t)
            if not out_edges:
                outputs.append(t)
        else:
            for _, v, d in out_edges:
                t = f"{names[k]}->{names[pos_of[v]]}"
                tensors[t] = Tensor(t, nbytes=_edge_bytes(names[k], names[pos_of[v]], d))
                outs.append(t)
                inputs_of[pos_of[v]].append(t)
        affinity = data.get("affinity")
        attrs = {key: val for key, val in data.items() if key not in ("op", "affinity", "bytes")}
        nodes.append(Node(index=k, name=names[k], op_type=op, attrs=attrs, outputs=outs,
                          source_index=k, affinity=str(affinity) if affinity else None))
    for k, node in enumerate(nodes):
        node.inputs = inputs_of[k]
    return Graph.build(nodes, tensors, [], outputs, name=name, source=source)


def _edge_bytes(u: str, v: str, data: dict) -> int | None:
    return _check_bytes(f"edge {u!r} -> {v!r}", data.get("bytes"))


#: the largest byte count a tensor may carry (the graph keeps them as int64)
MAX_BYTES = 2 ** 63 - 1


def _check_bytes(where: str, value: Any) -> int | None:
    if value is None:
        return None
    # NaN fails both comparisons; infinity and huge numbers fail the second
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not 0 <= value <= MAX_BYTES:
        raise GraphError(f"'bytes' of {where} must be a non-negative number below 2**63, got "
                         f"{value!r}")
    return int(value)


def to_networkx(graph: Graph) -> nx.DiGraph:
    """The graph as a DiGraph: nodes are topological indices with ``op``, ``name`` and
    ``affinity``; edges carry ``bytes`` (non-constant tensor bytes along the edge)."""
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


def load_node_link(path: str | os.PathLike) -> Graph:
    """Read a networkx node-link JSON file (``edges`` or ``links`` key)."""
    path = os.fspath(path)
    raw = read_input(path, "graph")
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelLoadError(f"{path!r} is not a node-link JSON graph ({exc})") from exc
    return graph_from_node_link(data, name=os.path.splitext(os.path.basename(path))[0],
                                source=path)


def graph_from_node_link(data: Any, name: str = "graph", source: str = "memory") -> Graph:
    """Build a Graph from node-link data (a dict as ``networkx.node_link_data`` writes)."""
    if not isinstance(data, dict) or "nodes" not in data:
        raise ModelLoadError(f"{source!r} is not a node-link graph: no 'nodes' list")
    key = "edges" if "edges" in data else "links"
    data = dict(data)
    data.setdefault(key, [])
    _check_node_link(data["nodes"], data[key], key, source)
    if not data["nodes"]:
        raise ModelLoadError(f"node-link graph {name!r} has no nodes")
    data["directed"] = True
    data["multigraph"] = False
    try:
        g = nx.node_link_graph(data, edges=key)
    except (KeyError, TypeError, nx.NetworkXError) as exc:
        raise ModelLoadError(f"{source!r} is not a valid node-link graph ({exc!r})") from exc
    return from_networkx(g, name=name, source=source)


def _check_node_link(nodes: Any, edges: Any, key: str, source: str) -> None:
    """Refuse what ``networkx.node_link_graph`` would silently merge or invent: duplicate node
    ids, and edges to nodes that are not listed."""
    if not isinstance(nodes, list) or not all(isinstance(d, dict) and "id" in d for d in nodes):
        raise ModelLoadError(f"{source!r} is not a node-link graph: 'nodes' must be a list of "
                             f"objects with an 'id', got {_brief(nodes)}")
    if not isinstance(edges, list) or not all(isinstance(d, dict) and "source" in d and
                                              "target" in d for d in edges):
        raise ModelLoadError(f"{source!r} is not a node-link graph: {key!r} must be a list of "
                             f"objects with a 'source' and a 'target', got {_brief(edges)}")
    seen: set = set()
    for d in nodes:
        nid = d["id"]
        if not isinstance(nid, (str, int, float)):
            raise GraphError(f"node-link graph {source!r}: node id {nid!r} is not a string or a "
                             "number")
        if nid in seen:
            raise GraphError(f"node-link graph {source!r} has a duplicate node id {nid!r}")
        seen.add(nid)
    for d in edges:
        for end in ("source", "target"):
            nid = d[end]
            if not isinstance(nid, (str, int, float)) or nid not in seen:
                raise GraphError(f"node-link graph {source!r}: edge {d['source']!r} -> "
                                 f"{d['target']!r} names node {nid!r}, which is not in 'nodes'")


def _brief(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def to_node_link(graph: Graph) -> dict:
    """Node-link data of :func:`to_networkx` (the ``edges`` key)."""
    return nx.node_link_data(to_networkx(graph), edges="edges")


def save_node_link(graph: Graph, path: str | os.PathLike) -> None:
    """Write :func:`to_node_link` as JSON, atomically."""
    write_atomic(path, json.dumps(to_node_link(graph)))
