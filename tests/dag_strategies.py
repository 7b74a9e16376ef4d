"""Hypothesis strategies: random small DAG problems (graph + devices + constraints).

Shapes covered: wide fan-out/fan-in, long chains, diamonds (random edges with a locality knob),
many unsupported nodes, random never-together pairs, value inputs (op ``Reshape`` reads its
second input by value), explicit cut edges.
"""

from __future__ import annotations

import networkx as nx
from hypothesis import strategies as st

from clusterkit import Constraints, OpsProperty, from_networkx

OPS = ["Conv", "Relu", "Add", "Reshape", "MatMul", "Unsupported"]


@st.composite
def dags(draw, min_nodes: int = 1, max_nodes: int = 8, shape: str | None = None) -> nx.DiGraph:
    """A random DAG with ``op`` per node and ``bytes`` per edge (one size per producer)."""
    n = draw(st.integers(min_nodes, max_nodes))
    shape = shape or draw(st.sampled_from(["random", "chain", "fan", "diamond", "dense"]))
    g = nx.DiGraph()
    for v in range(n):
        g.add_node(v, op=draw(st.sampled_from(OPS)))
    if shape == "chain":
        pairs = [(v, v + 1) for v in range(n - 1)]
    elif shape == "fan":
        mid = n // 2
        pairs = [(0, v) for v in range(1, mid + 1)] + [(v, n - 1) for v in range(1, mid + 1)
                                                        if v != n - 1]
    elif shape == "diamond":
        pairs = []
        for v in range(0, n - 3, 3):
            pairs += [(v, v + 1), (v, v + 2), (v + 1, v + 3), (v + 2, v + 3)]
    else:
        p = 0.6 if shape == "dense" else 0.3
        pairs = [(u, v) for u in range(n) for v in range(u + 1, n)
                 if draw(st.floats(0, 1)) < p]
    sizes = {u: draw(st.integers(1, 64)) * 16 for u in range(n)}
    for u, v in pairs:
        if u < n and v < n and u != v:
            g.add_edge(u, v, bytes=sizes[u])
    return g


@st.composite
def problems(draw, min_nodes: int = 1, max_nodes: int = 8, max_devices: int = 2,
             constraints: bool = True, sizes: bool = False):
    """A compiled Problem over a random DAG with 1..max_devices ``ops:`` devices."""
    g = draw(dags(min_nodes, max_nodes))
    graph = from_networkx(g)
    ndev = draw(st.integers(1, max_devices))
    props = []
    for d in range(ndev):
        ops = draw(st.sets(st.sampled_from(OPS[:-1]), min_size=1, max_size=len(OPS) - 1))
        props.append(OpsProperty(sorted(ops), device=f"dev{d}"))
    cons = Constraints()
    if constraints:
        n = graph.n
        if n >= 2 and draw(st.booleans()):
            k = draw(st.integers(1, 3))
            for _ in range(k):
                a = draw(st.integers(0, n - 1))
                b = draw(st.integers(0, n - 1))
                if a != b:
                    cons.never_together.append((graph.nodes[a].name, graph.nodes[b].name))
        if draw(st.booleans()):
            cons.value_inputs = {"Reshape": (1,)}
        if graph.num_edges and draw(st.booleans()):
            e = draw(st.integers(0, graph.num_edges - 1))
            cons.cut_edges.append((int(graph.edge_src[e]), int(graph.edge_dst[e])))
    if sizes:
        cons.min_size = draw(st.integers(1, 2))
        cons.max_size = draw(st.one_of(st.none(), st.integers(max(2, cons.min_size), 4)))
    return cons.compile(graph, props, fallback="cpu")
