"""Two reference graphs: the OpenVINO HETERO seven-node example (hetero and mxnet tests) and the
TVM longest-path example with value edges (longest-path and cycles tests)."""

from __future__ import annotations

import networkx as nx

from clusterkit import Constraints, OpsProperty, Problem, from_networkx

SEED_EDGES = [(1, 2), (2, 3), (2, 4), (3, 5), (4, 5), (5, 6), (6, 7)]


def seed_graph() -> nx.DiGraph:
    """Nodes 1..7 with op A, except node 4 (op B)."""
    g = nx.DiGraph()
    for i in range(1, 8):
        g.add_node(str(i), op="B" if i == 4 else "A")
    g.add_edges_from((str(u), str(v)) for u, v in SEED_EDGES)
    return g


def descendants(succ: list[list[int]]) -> list[set[int]]:
    """Full transitive closure over topologically numbered nodes (small test graphs only):
    ``descendants(succ)[v]`` is every node reachable from ``v``."""
    reach: list[set[int]] = [set() for _ in succ]
    for v in reversed(range(len(succ))):
        for w in succ[v]:
            reach[v].add(w)
            reach[v] |= reach[w]
    return reach


def value_edge_problem(value_edges: list[tuple[str, str]]) -> Problem:
    """TVM's example graphs: A0..A4 supported, X0 unsupported, B0 reads values of its inputs."""
    g = nx.DiGraph()
    for name in ["A0", "A1", "A2", "X0", "A3", "A4", "B0"]:
        g.add_node(name, op="Unsupported" if name == "X0" else "Op")
    for u, v in [("A0", "A1"), ("A1", "A2"), ("A0", "A2"), ("A2", "X0"), ("X0", "A3"),
                 ("X0", "A4"), ("A0", "B0"), ("A4", "B0")]:
        g.add_edge(u, v, bytes=64)
    graph = from_networkx(g)
    cons = Constraints(cut_edges=list(value_edges))
    return cons.compile(graph, [OpsProperty(["Op"], device="acc")])
