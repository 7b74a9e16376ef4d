"""SuperNodeGraph (together groups contracted) against an independent networkx contraction, on
random DAGs with random convex groups: the units' members, the unit edges and a topological rank."""

from __future__ import annotations

import random

import networkx as nx
import numpy as np
import pytest

import clusterkit as ck
from clusterkit import Constraints
from clusterkit.engines.super_nodes import SuperNodeGraph, _preorder


def random_case(seed: int) -> tuple[nx.DiGraph, list[list[str]]]:
    """A random DAG and disjoint convex groups no two of which depend on each other."""
    rng = random.Random(seed)
    n = rng.randint(2, 24)
    g = nx.DiGraph()
    names = [f"n{i}" for i in range(n)]
    rng.shuffle(names)  # node names in no particular order
    for name in names:
        g.add_node(name, op="Relu")
    for j in range(n):
        for i in range(j):
            if rng.random() < 0.18:
                g.add_edge(names[i], names[j], bytes=4)
    groups: list[set[str]] = []
    for _ in range(rng.randint(0, 4)):
        free = [v for v in g if not any(v in grp for grp in groups)]
        if len(free) < 2:
            break
        picks = set(rng.sample(free, rng.randint(2, min(3, len(free)))))
        hull = picks | {v for a in picks for b in picks
                        for v in nx.descendants(g, a) & nx.ancestors(g, b)}
        if any(hull & grp for grp in groups):
            continue
        if nx.is_directed_acyclic_graph(contract(g, groups + [hull])):
            groups.append(hull)
    return g, [sorted(grp) for grp in groups]


def contract(g: nx.DiGraph, groups: list[set[str]]) -> nx.DiGraph:
    """The quotient graph: a node per group (its members as a frozenset) and per other node."""
    block = {v: frozenset([v]) for v in g}
    for grp in groups:
        for v in grp:
            block[v] = frozenset(grp)
    q = nx.DiGraph()
    q.add_nodes_from(set(block.values()))
    q.add_edges_from((block[u], block[v]) for u, v in g.edges if block[u] != block[v])
    return q


@pytest.mark.parametrize("seed", range(60))
def test_unit_graph_matches_a_networkx_contraction(seed):
    g, groups = random_case(seed)
    problem = ck.make_problem(g, ["ops:Relu"], constraints=Constraints(together=groups))
    ug = SuperNodeGraph(problem)
    names = [nd.name for nd in problem.graph.nodes]
    unit_set = [frozenset(names[v] for v in ug.members[u]) for u in range(ug.n)]
    oracle = contract(g, [set(grp) for grp in groups])

    assert sorted(map(sorted, unit_set)) == sorted(map(sorted, oracle.nodes))
    assert all(ug.super_node_of[v] == u for u in range(ug.n) for v in ug.members[u])
    assert ug.size == [len(s) for s in unit_set]
    edges = {(unit_set[a], unit_set[b]) for a, b in zip(ug.esrc.tolist(), ug.edst.tolist())}
    assert len(edges) == len(ug.esrc) and edges == set(oracle.edges)
    assert {(unit_set[a], unit_set[b]) for a in range(ug.n) for b in ug.succ[a]} == edges
    assert {(unit_set[a], unit_set[b]) for b in range(ug.n) for a in ug.pred[b]} == edges
    for a in range(ug.n):
        assert [ug.edst[e] for e in ug.succ_e[a]] == ug.succ[a]
        assert [ug.esrc[e] for e in ug.pred_e[a]] == ug.pred[a]

    assert sorted(ug.rank) == list(range(ug.n))
    assert [ug.rank[u] for u in ug.order] == list(range(ug.n))
    for a, b in oracle.edges:
        assert ug.rank[unit_set.index(a)] < ug.rank[unit_set.index(b)]
    for order in ug.orders:
        assert all(order[ug.esrc[e]] < order[ug.edst[e]] for e in range(len(ug.esrc)))

    gr = problem.graph
    for e, (u, v) in enumerate(zip(gr.edge_src.tolist(), gr.edge_dst.tolist())):
        a, b = ug.super_node_of[u], ug.super_node_of[v]
        if a == b:
            assert ug.edge_of[e] == -1
        else:
            assert (ug.esrc[ug.edge_of[e]], ug.edst[ug.edge_of[e]]) == (a, b)


@pytest.mark.parametrize("seed", range(40))
def test_landmarks_and_numberings_match_networkx_reachability(seed, monkeypatch):
    """Landmark bitsets are exact for the landmarks (so ``lout[a] & lin[b]`` only ever proves a
    real path), and every numbering of ``orders`` grows along every path; few landmarks, so
    that most units are not one."""
    import clusterkit.engines.super_nodes as units

    monkeypatch.setattr(units, "LANDMARKS", 3)
    g, groups = random_case(seed)
    problem = ck.make_problem(g, ["ops:Relu"], constraints=Constraints(together=groups))
    ug = SuperNodeGraph(problem)
    q = nx.DiGraph()
    q.add_nodes_from(range(ug.n))
    q.add_edges_from(zip(ug.esrc.tolist(), ug.edst.tolist()))
    own, lin, lout = ug.landmarks
    marks = [u for u in range(ug.n) if own[u]]
    assert len(marks) == min(ug.n, 3) and len({own[u] for u in marks}) == len(marks)
    for u in range(ug.n):
        down, up = nx.descendants(q, u) | {u}, nx.ancestors(q, u) | {u}
        assert lout[u] == sum(own[h] for h in marks if h in down)
        assert lin[u] == sum(own[h] for h in marks if h in up)
        for w in nx.descendants(q, u):
            assert all(o[u] < o[w] for o in ug.orders)
    for a in range(ug.n):
        for b in range(ug.n):
            if a != b and lout[a] & lin[b]:
                assert nx.has_path(q, a, b)


@pytest.mark.parametrize("seed", range(30))
def test_depth_and_height_orders_are_longest_paths(seed):
    """``orders[1]`` is each unit's longest path from a source and ``orders[2]`` the longest
    path to a sink counted down from the longest one (networkx longest paths, in edges: in
    the subgraph of a unit's ancestors every longest path ends at it)."""
    g, groups = random_case(seed)
    ug = SuperNodeGraph(ck.make_problem(g, ["ops:Relu"], constraints=Constraints(together=groups)))
    q = nx.DiGraph()
    q.add_nodes_from(range(ug.n))
    q.add_edges_from(zip(ug.esrc.tolist(), ug.edst.tolist()))
    depth = [nx.dag_longest_path_length(q.subgraph(nx.ancestors(q, u) | {u}))
             for u in range(ug.n)]
    height = [nx.dag_longest_path_length(q.subgraph(nx.descendants(q, u) | {u}))
              for u in range(ug.n)]
    assert ug.orders[1] == depth
    assert ug.orders[2] == [max(height) - h for h in height]


@pytest.mark.parametrize("seed", range(30))
def test_grail_intervals_nest_along_every_path(seed):
    """Each GRAIL labelling: ``post`` numbers the units 0..n-1, and ``u ~> w`` implies
    ``low[u] <= low[w]`` and ``post[w] <= post[u]``; ``low[u]`` is the smallest ``post`` among
    ``u`` and its descendants (networkx)."""
    g, groups = random_case(seed)
    ug = SuperNodeGraph(ck.make_problem(g, ["ops:Relu"], constraints=Constraints(together=groups)))
    q = nx.DiGraph()
    q.add_nodes_from(range(ug.n))
    q.add_edges_from(zip(ug.esrc.tolist(), ug.edst.tolist()))
    assert len(ug.intervals) == 3
    for low, post in ug.intervals:
        assert sorted(post) == list(range(ug.n))
        for u in range(ug.n):
            below = nx.descendants(q, u)
            assert low[u] == min(post[w] for w in below | {u})
            assert all(post[w] < post[u] for w in below)


def recursive_preorder(n, children, starts):
    """Preorder and parents of a plain recursive depth-first search."""
    seen, order, parent = [False] * n, [], [-1] * n

    def visit(v):
        seen[v] = True
        order.append(v)
        for w in children[v]:
            if not seen[w]:
                parent[w] = v
                visit(w)

    for s in starts:
        if not seen[s]:
            visit(s)
    return order, parent


@pytest.mark.parametrize("seed", range(40))
def test_preorder_takes_children_in_the_given_order(seed):
    """``_preorder`` (scipy with chain nodes) equals a recursive search that takes every node's
    children, and the starts, in the given (unsorted) order, repeats and unreached nodes
    included."""
    rng = random.Random(seed)
    n = rng.randint(1, 30)
    children = [[rng.randrange(n) for _ in range(rng.randint(0, 4))] for _ in range(n)]
    starts = [rng.randrange(n) for _ in range(rng.randint(1, 5))]
    owner = np.asarray([v for v in range(n) for _ in children[v]], dtype=np.int64)
    kids = np.asarray([w for v in range(n) for w in children[v]], dtype=np.int64)
    order, parent = _preorder(n, owner, kids, np.asarray(starts, dtype=np.int64))
    want_order, want_parent = recursive_preorder(n, children, starts)
    assert order.tolist() == want_order
    assert parent.tolist() == want_parent


@pytest.mark.parametrize("seed", range(20))
def test_grail_post_is_a_recursive_search_with_the_seeded_orders(seed):
    """``post`` is the post-order of a recursive search that takes the roots in the seeded
    permutation and each unit's successors in the seeded random order."""
    g, groups = random_case(seed)
    ug = SuperNodeGraph(ck.make_problem(g, ["ops:Relu"], constraints=Constraints(together=groups)))
    src, dst = ug.esrc.tolist(), ug.edst.tolist()
    for k, (_, post) in enumerate(ug.intervals):
        rng = np.random.default_rng(k + 1)
        keys = rng.random(len(src)).tolist()
        kids = [[] for _ in range(ug.n)]
        for e in sorted(range(len(src)), key=lambda e: (src[e], keys[e])):
            kids[src[e]].append(dst[e])
        roots = [v for v in range(ug.n) if v not in set(dst)]
        roots = [roots[i] for i in rng.permutation(len(roots)).tolist()]
        seen, finished = [False] * ug.n, []

        def visit(v, seen=seen, kids=kids, finished=finished):
            seen[v] = True
            for w in kids[v]:
                if not seen[w]:
                    visit(w)
            finished.append(v)

        for r in roots:
            visit(r)
        assert [finished.index(v) for v in range(ug.n)] == post


@pytest.mark.parametrize("seed", range(20))
def test_node_labels_match_one_assignment_per_piece(seed):
    """``node_labels``: each piece's nodes get its index and device (a later piece wins a
    unit held twice), every other node a label of its own after the pieces and device -1."""
    from clusterkit.engines.growth import GrowingCluster

    g, groups = random_case(seed)
    ug = SuperNodeGraph(ck.make_problem(g, ["ops:Relu"], constraints=Constraints(together=groups)))
    rng = random.Random(seed)
    pieces = [GrowingCluster(rng.randrange(3), rng.sample(range(ug.n), rng.randint(1, ug.n)))
              for _ in range(rng.randint(0, 4))]
    n = ug.problem.n
    labels, devices = list(range(len(pieces), len(pieces) + n)), [-1] * n
    for k, p in enumerate(pieces):
        for u in p.super_nodes:
            for v in ug.members[u]:
                labels[v], devices[v] = k, p.device
    got_labels, got_devices = ug.node_labels(pieces)
    assert got_labels.tolist() == labels
    assert got_devices.tolist() == devices
