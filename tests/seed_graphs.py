"""The OpenVINO HETERO seed's seven-node example, shared by the hetero and mxnet tests."""

from __future__ import annotations

import networkx as nx

import clusterkit as ck

SEED_EDGES = [(1, 2), (2, 3), (2, 4), (3, 5), (4, 5), (5, 6), (6, 7)]


def seed_graph() -> nx.DiGraph:
    """Nodes 1..7 with op A, except node 4 (op B)."""
    g = nx.DiGraph()
    for i in range(1, 8):
        g.add_node(str(i), op="B" if i == 4 else "A")
    g.add_edges_from((str(u), str(v)) for u, v in SEED_EDGES)
    return g


def named_clusters(part: ck.Partition) -> set[tuple[str, frozenset[str]]]:
    """Clusters as (device, node names)."""
    g = part.graph
    return {(c.device, frozenset(g.nodes[v].name for v in c.nodes)) for c in part.clusters}


def descendants(succ: list[list[int]]) -> list[set[int]]:
    """Full transitive closure over topologically numbered nodes (small test graphs only):
    ``descendants(succ)[v]`` is every node reachable from ``v``."""
    reach: list[set[int]] = [set() for _ in succ]
    for v in reversed(range(len(succ))):
        for w in succ[v]:
            reach[v].add(w)
            reach[v] |= reach[w]
    return reach
