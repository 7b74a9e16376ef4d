"""Hypothesis strategies: random small DAG problems (graph + devices + constraints).

Shapes covered: wide fan-out/fan-in, long chains, diamonds (random edges with a locality knob),
many unsupported nodes, random never-together pairs, value inputs (op ``Reshape`` reads its
second input by value), explicit cut edges; ``rich_problems`` adds constant bytes, together
groups and size limits, ``onnxish_problems`` graph inputs, Constant nodes and multi-output nodes.
"""

from __future__ import annotations

import networkx as nx
from hypothesis import HealthCheck, assume, settings
from hypothesis import strategies as st

from clusterkit import ConstraintError, Constraints, OpsProperty, from_networkx
from clusterkit.graph.core import Graph, Node, Tensor
from clusterkit.testing.shapes import SHAPES, shape_edges

OPS = ["Conv", "Relu", "Add", "Reshape", "MatMul", "Unsupported"]


@st.composite
def dags(draw, min_nodes: int = 1, max_nodes: int = 8, shape: str | None = None) -> nx.DiGraph:
    """A random DAG with ``op`` per node and ``bytes`` per edge (one size per producer)."""
    n = draw(st.integers(min_nodes, max_nodes))
    shape = shape or draw(st.sampled_from(SHAPES))
    g = nx.DiGraph()
    for v in range(n):
        g.add_node(v, op=draw(st.sampled_from(OPS)))
    pairs = shape_edges(shape, n, lambda: draw(st.floats(0, 1)))
    sizes = {u: draw(st.integers(1, 64)) * 16 for u in range(n)}
    for u, v in pairs:
        if u < n and v < n and u != v:
            g.add_edge(u, v, bytes=sizes[u])
    return g


def draw_pairs_values_cuts(draw, graph: Graph) -> dict:
    """Constraints' keywords: maybe 1..3 never-together pairs, maybe Reshape's value input,
    maybe one cut edge."""
    n = graph.n
    kw: dict = {"never_together": [], "cut_edges": []}
    if n >= 2 and draw(st.booleans()):
        for _ in range(draw(st.integers(1, 3))):
            a, b = draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))
            if a != b:
                kw["never_together"].append((graph.nodes[a].name, graph.nodes[b].name))
    if draw(st.booleans()):
        kw["value_inputs"] = {"Reshape": (1,)}
    if graph.num_edges and draw(st.booleans()):
        e = draw(st.integers(0, graph.num_edges - 1))
        kw["cut_edges"].append((int(graph.edge_src[e]), int(graph.edge_dst[e])))
    return kw


def draw_sizes(draw, top: int, const_bytes: bool) -> dict:
    """Constraints' size keywords: min_size 1..2, maybe max_size, maybe max_const_bytes."""
    lo = draw(st.integers(1, 2))
    kw = {"min_size": lo, "max_size": draw(st.one_of(st.none(), st.integers(max(2, lo), top)))}
    if const_bytes:
        kw["max_const_bytes"] = draw(st.sampled_from([None, None, 300, 1500]))
    return kw


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
    kw = draw_pairs_values_cuts(draw, graph) if constraints else {}
    if sizes:
        kw.update(draw_sizes(draw, 4, const_bytes=False))
    return Constraints(**kw).compile(graph, props, fallback="cpu")


def fast(examples: int) -> settings:
    """Hypothesis settings for these tests: no deadline, no example database."""
    return settings(max_examples=examples, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))


def graph_with_constants(g: nx.DiGraph, weights: list[int], shared: int) -> Graph:
    """The DAG as a Graph whose nodes also read initializers (``weights[v]`` bytes, 0 = none;
    nodes with ``shared`` > 0 read one common initializer too), so constant bytes are real."""
    nodes, tensors = [], {}
    order = list(g.nodes)
    for v in order:
        out = f"{v}:out"
        nb = max([d["bytes"] for _, _, d in g.out_edges(v, data=True)], default=16)
        tensors[out] = Tensor(out, nbytes=nb)
        ins = [f"{u}:out" for u in sorted(g.predecessors(v))]
        if weights[v]:
            tensors[f"w{v}"] = Tensor(f"w{v}", nbytes=weights[v], is_initializer=True)
            ins.append(f"w{v}")
        if shared and v % 2 == 0:
            tensors["wshared"] = Tensor("wshared", nbytes=shared, is_initializer=True)
            ins.append("wshared")
        nodes.append(Node(index=v, name=str(v), op_type=g.nodes[v]["op"], inputs=ins,
                          outputs=[out]))
    outs = [f"{v}:out" for v in order if g.out_degree(v) == 0]
    return Graph.build(nodes, tensors, [], outs, name="rich")


@st.composite
def rich_problems(draw, min_nodes: int = 1, max_nodes: int = 12, max_devices: int = 3,
                  sizes: bool = True, groups: bool | None = None):
    """Random problems with never-together pairs, value inputs, cut edges, together groups,
    constant bytes and size limits (each drawn or not)."""
    g = draw(dags(min_nodes, max_nodes))
    n = g.number_of_nodes()
    weights = [draw(st.sampled_from([0, 0, 64, 256, 1024])) for _ in range(n)]
    shared = draw(st.sampled_from([0, 0, 512]))
    graph = graph_with_constants(g, weights, shared)
    props = []
    for d in range(draw(st.integers(1, max_devices))):
        ops = draw(st.sets(st.sampled_from(OPS[:-1]), min_size=1, max_size=len(OPS) - 1))
        props.append(OpsProperty(sorted(ops), device=f"dev{d}"))
    kw = draw_pairs_values_cuts(draw, graph)
    if sizes:
        kw.update(draw_sizes(draw, 5, const_bytes=True))
    want_groups = draw(st.booleans()) if groups is None else groups
    groups: list[list[int]] = []
    if n >= 2 and want_groups:
        for _ in range(draw(st.integers(1, 3))):
            seed = draw(st.sets(st.integers(0, n - 1), min_size=2, max_size=2))
            hull = convex_hull(g, seed)
            if len(hull) <= 4 and not any(hull & set(grp) for grp in groups):
                groups.append(sorted(hull))
    try:
        return Constraints(**kw, together=[[str(v) for v in grp] for grp in groups]).compile(
            graph, props, fallback="cpu")
    except ConstraintError:  # a group that is not convex or contradicts another constraint
        return Constraints(**kw).compile(graph, props, fallback="cpu")


def convex_hull(g: nx.DiGraph, members: set[int]) -> set[int]:
    """The members plus every node on a path between two of them."""
    down = set().union(*(nx.descendants(g, v) for v in members))
    up = set().union(*(nx.ancestors(g, v) for v in members))
    return set(members) | (down & up)


def groups_depend(problem) -> bool:
    """Oracle: contracting every together group leaves a cycle (no partition keeps them)."""
    q = nx.DiGraph()
    rep = {int(v): int(grp[0]) for grp in problem.groups for v in grp}
    q.add_nodes_from(rep.get(v, v) for v in range(problem.n))
    for u, v in zip(problem.graph.edge_src.tolist(), problem.graph.edge_dst.tolist()):
        a, b = rep.get(u, u), rep.get(v, v)
        if a != b:
            q.add_edge(a, b)
    return not nx.is_directed_acyclic_graph(q)


ONNXISH_OPS = ["Conv", "Relu", "Add", "Reshape", "MatMul", "Constant", "Unsupported"]


@st.composite
def onnxish_problems(draw, max_nodes: int = 7, max_devices: int = 2):
    """Graphs with what random DAGs lack: a graph input read by several nodes, an initializer,
    Constant nodes and nodes computed from constants only (free tensors), nodes with two
    outputs, graph outputs in the middle, unknown sizes, together groups."""
    n = draw(st.integers(2, max_nodes))
    size = st.one_of(st.none(), st.integers(1, 64).map(lambda b: 16 * b))
    tensors = {"x": Tensor("x", nbytes=draw(st.integers(1, 64)) * 16),
               "w": Tensor("w", nbytes=64, is_initializer=True)}
    available = ["x", "w"]
    nodes = []
    for i in range(n):
        op = draw(st.sampled_from(ONNXISH_OPS))
        inputs = [] if op == "Constant" else [draw(st.sampled_from(available))
                                              for _ in range(draw(st.integers(1, 2)))]
        outs = [f"t{i}_{j}" for j in range(draw(st.integers(1, 2)))]
        for o in outs:
            tensors[o] = Tensor(o, nbytes=draw(size))
        nodes.append(Node(i, f"n{i}", op, inputs=inputs, outputs=outs))
        available += outs
    produced = [o for nd in nodes for o in nd.outputs]
    outputs = sorted(set(draw(st.lists(st.sampled_from(produced), max_size=3)))
                     | {nodes[-1].outputs[0]})
    graph = Graph.build(nodes, tensors, ["x"], outputs)
    props = []
    for d in range(draw(st.integers(1, max_devices))):
        ops = draw(st.sets(st.sampled_from(ONNXISH_OPS[:-1]), min_size=1,
                           max_size=len(ONNXISH_OPS) - 1))
        props.append(OpsProperty(sorted(ops), device=f"dev{d}"))
    kw: dict = {"never_together": [], "together": []}
    if draw(st.booleans()):
        kw["value_inputs"] = {"Reshape": (1,)}
    if graph.n >= 2 and draw(st.booleans()):
        a, b = draw(st.integers(0, graph.n - 1)), draw(st.integers(0, graph.n - 1))
        if a != b:
            kw["never_together"].append((a, b))
    if graph.num_edges and draw(st.booleans()):
        e = draw(st.integers(0, graph.num_edges - 1))
        kw["together"].append([int(graph.edge_src[e]), int(graph.edge_dst[e])])
    try:
        return Constraints(**kw).compile(graph, props, fallback="cpu")
    except ConstraintError:
        assume(False)


@st.composite
def letter_dags(draw, max_nodes: int = 24, ops: str = "ABC") -> nx.DiGraph:
    """A random connected DAG of 2..``max_nodes`` nodes with one-letter ops: every node after
    the first reads one or two earlier nodes, near ones or any (long skip edges)."""
    n = draw(st.integers(2, max_nodes))
    g = nx.DiGraph()
    for i in range(n):
        g.add_node(i, op=draw(st.sampled_from(ops)))
    for v in range(1, n):
        for _ in range(draw(st.integers(1, 2))):
            far = draw(st.booleans())
            u = draw(st.integers(0, v - 1)) if far else draw(st.integers(max(0, v - 3), v - 1))
            g.add_edge(u, v)
    return g


def draw_letter_constraints(draw, g: nx.DiGraph) -> Constraints:
    """Random constraints on a :func:`letter_dags` graph: up to three cut edges, up to two never
    pairs, a together pair when its edge is the only path between them, size limits."""
    nodes, edges = list(g.nodes), list(g.edges)
    cuts = draw(st.lists(st.sampled_from(edges), max_size=3, unique=True)) if edges else []
    never = [(a, b) for a, b in draw(st.lists(st.tuples(st.sampled_from(nodes),
                                                         st.sampled_from(nodes)), max_size=2))
             if a != b]
    together = []
    if edges and draw(st.booleans()):
        u, v = draw(st.sampled_from(edges))
        h = g.copy()
        h.remove_edge(u, v)
        if not nx.has_path(h, u, v):
            together.append([u, v])
    return Constraints(cut_edges=cuts, never_together=never, together=together,
                       min_size=draw(st.integers(1, 2)),
                       max_size=draw(st.one_of(st.none(), st.integers(2, 6))))
