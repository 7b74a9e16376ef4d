"""Tests for clusterkit.graph.graphcycles: random operation sequences against a networkx oracle."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterkit.graph.graphcycles import GraphCycles, OneSidedGraphCycles
from clusterkit.testing.synthetic import random_dag

# ------------------------------------------------------------------ helpers


def merged(g: nx.DiGraph, keep: int, drop: int, self_loops: bool) -> nx.DiGraph:
    """``g`` with ``drop`` folded into ``keep`` (built from scratch, no GraphCycles logic)."""
    h = nx.DiGraph()
    h.add_nodes_from(v for v in g if v != drop)
    for u, v in g.edges:
        u2, v2 = (keep if u == drop else u), (keep if v == drop else v)
        if u2 != v2 or self_loops:
            h.add_edge(u2, v2)
    return h


def degree(g: nx.DiGraph, v: int) -> int:
    return g.in_degree(v) + g.out_degree(v)


def assert_matches(gc: GraphCycles, mirror: nx.DiGraph) -> None:
    """Compare every query of ``gc`` with a from-scratch computation on ``mirror``."""
    gc.check_invariants()
    alive = [v for v in range(gc.num_nodes) if gc.alive(v)]
    assert alive == sorted(mirror.nodes)
    desc = {v: nx.descendants(mirror, v) for v in alive}
    for x in alive:
        assert gc.successors(x) == sorted(mirror.successors(x))
        assert gc.predecessors(x) == sorted(mirror.predecessors(x))
        for y in alive:
            assert gc.is_reachable(x, y) == (x == y or y in desc[x]), (x, y)
            assert gc.has_edge(x, y) == mirror.has_edge(x, y)
            if x != y:
                independent = y not in desc[x] and x not in desc[y]
                assert gc.can_merge(x, y) == independent, (x, y)
        for y in mirror.successors(x):
            other_path = any(y in desc[w] for w in mirror.successors(x) if w != y)
            assert gc.can_contract_edge(x, y) == (not other_path), (x, y)
    order = gc.topological_order()
    assert sorted(order) == alive
    pos = {v: i for i, v in enumerate(order)}
    assert all(pos[u] < pos[v] for u, v in mirror.edges)


@st.composite
def initial_graphs(draw):
    """(n, edges, use_from_edges, class): a random DAG; ids relabel a topological order."""
    n = draw(st.sampled_from(range(1, 13)))
    perm = draw(st.permutations(range(n)))
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    count = draw(st.sampled_from(range(min(len(pairs), 2 * n) + 1)))
    chosen = draw(st.permutations(pairs))[:count]
    edges = [(perm[i], perm[j]) for i, j in chosen]
    return n, edges, draw(st.booleans()), draw(st.sampled_from(CLASSES))


CLASSES = [GraphCycles, OneSidedGraphCycles]

OPS = st.lists(
    st.tuples(
        st.sampled_from(["insert", "insert", "remove", "contract", "contract", "merge",
                         "between"]),
        st.integers(0, 1000),
        st.integers(0, 1000),
    ),
    min_size=10,
    max_size=40,
)


def build(n: int, edges: list[tuple[int, int]], use_from_edges: bool,
          cls: type[GraphCycles] = GraphCycles) -> GraphCycles:
    if use_from_edges:
        src = np.array([u for u, _ in edges], dtype=np.int64)
        dst = np.array([v for _, v in edges], dtype=np.int64)
        return cls.from_edges(n, src, dst)
    gc = cls(n)
    for u, v in edges:
        assert gc.insert_edge(u, v)
    return gc


# ------------------------------------------------------- property tests


@settings(max_examples=400, deadline=None)
@given(initial=initial_graphs(), ops=OPS)
def test_random_operations_match_oracle(initial, ops):
    n, edges, use_from_edges, cls = initial
    gc = build(n, edges, use_from_edges, cls)
    mirror = nx.DiGraph()
    mirror.add_nodes_from(range(n))
    mirror.add_edges_from(edges)
    assert_matches(gc, mirror)

    for kind, i, j in ops:
        alive = sorted(mirror.nodes)
        x, y = alive[i % len(alive)], alive[j % len(alive)]
        edge_list = sorted(mirror.edges)
        if kind == "insert":
            closes_cycle = x == y or not nx.is_directed_acyclic_graph(
                nx.DiGraph(list(mirror.edges) + [(x, y)])
            )
            assert gc.insert_edge(x, y) == (not closes_cycle)
            if not closes_cycle:
                mirror.add_edge(x, y)
        elif kind == "remove":
            if edge_list and j % 3:
                x, y = edge_list[i % len(edge_list)]
            gc.remove_edge(x, y)
            if mirror.has_edge(x, y):
                mirror.remove_edge(x, y)
        elif kind == "contract" and (not edge_list or j % 7 == 0):
            if not mirror.has_edge(x, y):
                with pytest.raises(ValueError, match=rf"\b{x}\b"):
                    gc.contract_edge(x, y)
        elif kind == "contract":
            x, y = edge_list[i % len(edge_list)]
            keep, drop = (y, x) if degree(mirror, y) > degree(mirror, x) else (x, y)
            contracted = merged(mirror, keep, drop, self_loops=False)
            ok = nx.is_directed_acyclic_graph(contracted)
            # refused exactly when another path x ~> y exists
            others = [w for w in mirror.successors(x) if w != y]
            assert ok == (not any(nx.has_path(mirror, w, y) for w in others))
            result = gc.contract_edge(x, y)
            if ok:
                assert result == keep
                mirror = contracted
                with pytest.raises(ValueError, match=rf"\b{drop}\b"):
                    gc.successors(drop)
            else:
                assert result is None
        elif kind == "between":  # contract_between: the edge joining x and y, either way
            if mirror.has_edge(x, y) or mirror.has_edge(y, x):
                a, b = (x, y) if mirror.has_edge(x, y) else (y, x)
                keep, drop = (b, a) if degree(mirror, b) > degree(mirror, a) else (a, b)
                contracted = merged(mirror, keep, drop, self_loops=False)
                ok = nx.is_directed_acyclic_graph(contracted)
            else:
                ok = False
            result = gc.contract_between(x, y)
            if ok:
                assert result == keep
                mirror = contracted
            else:
                assert result is None
        else:  # merge
            keep, drop = (y, x) if degree(mirror, y) > degree(mirror, x) else (x, y)
            both = merged(mirror, keep, drop, self_loops=True)
            ok = x != y and nx.is_directed_acyclic_graph(both)
            joined = nx.has_path(mirror, x, y) or nx.has_path(mirror, y, x)
            assert ok == (x != y and not joined)
            result = gc.merge(x, y)
            if ok:
                assert result == keep
                mirror = merged(mirror, keep, drop, self_loops=False)
            else:
                assert result is None
        assert_matches(gc, mirror)


@settings(max_examples=200, deadline=None)
@given(initial=initial_graphs())
def test_from_edges_matches_oracle(initial):
    n, edges, _, cls = initial
    gc = build(n, edges, use_from_edges=True, cls=cls)
    mirror = nx.DiGraph()
    mirror.add_nodes_from(range(n))
    mirror.add_edges_from(edges)
    assert_matches(gc, mirror)


@settings(max_examples=100, deadline=None)
@given(n=st.integers(2, 10), data=st.data())
def test_from_edges_rejects_cycles(n, data):
    cycle = data.draw(st.lists(st.integers(0, n - 1), min_size=2, max_size=n, unique=True))
    src = np.array(cycle, dtype=np.int64)
    dst = np.roll(src, -1)
    with pytest.raises(ValueError, match="cycle"):
        GraphCycles.from_edges(n, src, dst)


# ------------------------------------------------------------ unit tests

A0, A1, A2, X0, A3, A4, B0, A0B0, A4B0 = range(9)
SEED_EDGES = [
    (A0, A2), (A1, A2), (A2, X0), (X0, A3), (X0, A4), (A0, B0), (A4, B0),
    (A0, A0B0), (A0B0, B0),  # B0 must know A0's value: dummy node keeps them apart
]


def seed_graph(constrain_a4_b0: bool) -> GraphCycles:
    edges = SEED_EDGES + ([(A4, A4B0), (A4B0, B0)] if constrain_a4_b0 else [])
    src, dst = (np.array(a, dtype=np.int64) for a in zip(*edges))
    gc = GraphCycles.from_edges(9, src, dst)  # ids are not a topological order (A0B0 -> B0)
    gc.check_invariants()
    return gc


def test_seed_dummy_node_blocks_contraction():
    gc = seed_graph(constrain_a4_b0=True)
    assert gc.has_edge(A0, B0)
    assert not gc.can_contract_edge(A0, B0)
    assert gc.contract_edge(A0, B0) is None
    assert gc.has_edge(A0, B0) and gc.alive(B0)
    assert not gc.can_contract_edge(A4, B0)
    assert gc.contract_edge(A4, B0) is None
    gc.check_invariants()


def test_seed_graph0_clusters():
    gc = seed_graph(constrain_a4_b0=True)
    c = gc.contract_edge(A0, A2)
    assert c in (A0, A2)
    c = gc.contract_edge(A1, c)
    assert c is not None
    assert gc.contract_edge(c, B0) is None  # A0 -> A0B0 -> B0 still there
    assert gc.contract_edge(A4, B0) is None
    assert gc.can_merge(A3, A4)  # computationally independent
    alive = [v for v in range(9) if gc.alive(v)]
    assert sorted(alive) == sorted([c, X0, A3, A4, B0, A0B0, A4B0])
    gc.check_invariants()


def test_seed_graph1_allows_a4_b0():
    gc = seed_graph(constrain_a4_b0=False)
    assert gc.can_contract_edge(A4, B0)
    assert gc.contract_edge(A4, B0) in (A4, B0)
    gc.check_invariants()


def test_insert_edge_basics():
    gc = GraphCycles(3)
    assert not gc.insert_edge(1, 1)
    assert gc.insert_edge(2, 1)  # against the initial order: reorders
    assert gc.rank(2) < gc.rank(1)
    assert gc.insert_edge(2, 1)  # existing edge
    assert gc.insert_edge(1, 0)
    assert not gc.insert_edge(0, 2)  # would close 0 -> 2 -> 1 -> 0
    assert not gc.has_edge(0, 2)
    assert gc.is_reachable(2, 0) and not gc.is_reachable(0, 2)
    assert gc.is_reachable(1, 1)
    gc.remove_edge(1, 0)
    gc.remove_edge(1, 0)  # absent: no-op
    assert gc.insert_edge(0, 2)
    gc.check_invariants()


def test_is_reachable_rank_pruning():
    gc = GraphCycles(4)
    gc.insert_edge(0, 1)
    gc.insert_edge(1, 3)
    assert gc.rank(3) > gc.rank(0)
    assert not gc.is_reachable(3, 0)
    assert gc.is_reachable(0, 3)
    assert not gc.is_reachable(0, 2)


def test_contract_keeps_node_with_more_edges():
    gc = GraphCycles(5)
    for u, v in [(0, 1), (1, 2), (1, 3), (4, 1)]:
        gc.insert_edge(u, v)
    assert gc.contract_edge(0, 1) == 1
    assert not gc.alive(0)
    assert gc.predecessors(1) == [4]
    assert gc.successors(1) == [2, 3]
    gc.check_invariants()

    gc = GraphCycles(4)
    for u, v in [(0, 1), (2, 0), (1, 3)]:
        gc.insert_edge(u, v)
    assert gc.contract_edge(0, 1) == 0  # one edge each once 0 -> 1 is gone: x survives
    assert gc.predecessors(0) == [2] and gc.successors(0) == [3]
    gc.check_invariants()


def test_merge():
    gc = GraphCycles(5)
    for u, v in [(0, 1), (2, 3), (3, 4)]:
        gc.insert_edge(u, v)
    assert gc.merge(0, 0) is None
    assert gc.merge(2, 4) is None  # 2 reaches 4
    assert gc.merge(0, 3) == 3
    assert gc.successors(3) == [1, 4] and gc.predecessors(3) == [2]
    assert gc.merge(1, 4) == 1  # tie: x survives
    assert gc.successors(3) == [1]
    gc.check_invariants()


def test_bad_ids_raise_value_error():
    gc = GraphCycles(3)
    with pytest.raises(ValueError, match=r"\b7\b"):
        gc.insert_edge(0, 7)
    with pytest.raises(ValueError, match=r"-1"):
        gc.rank(-1)
    with pytest.raises(ValueError, match=r"\b0\b.*\b1\b"):
        gc.contract_edge(0, 1)  # no such edge
    gc.insert_edge(0, 1)
    survivor = gc.contract_edge(0, 1)
    dead = 1 - survivor
    assert not gc.alive(dead)
    for call in (gc.successors, gc.predecessors, gc.rank):
        with pytest.raises(ValueError, match=rf"node {dead} is dead"):
            call(dead)
    with pytest.raises(ValueError, match=rf"\b{dead}\b"):
        gc.insert_edge(2, dead)
    with pytest.raises(ValueError, match=r"\b9\b"):
        gc.alive(9)


def test_from_edges_orders_and_dedupes():
    src = np.array([2, 1, 2, 2])
    dst = np.array([1, 0, 1, 0])
    gc = GraphCycles.from_edges(3, src, dst)
    assert gc.rank(2) < gc.rank(1) < gc.rank(0)
    assert gc.topological_order() == [2, 1, 0]
    assert gc.successors(2) == [0, 1]
    gc.check_invariants()


def test_from_edges_errors():
    with pytest.raises(ValueError, match=r"\b5\b"):
        GraphCycles.from_edges(3, np.array([0]), np.array([5]))
    with pytest.raises(ValueError, match="self-loop on node 1"):
        GraphCycles.from_edges(3, np.array([1]), np.array([1]))
    with pytest.raises(ValueError, match=r"0 -> 1 -> 2 -> 0"):
        GraphCycles.from_edges(4, np.array([0, 1, 2, 3]), np.array([1, 2, 0, 0]))


@pytest.mark.parametrize("cls", CLASSES)
def test_add_node_and_empty_graph(cls):
    gc = cls.from_edges(0, np.array([], dtype=np.int64), np.array([], dtype=np.int64))
    assert gc.num_nodes == 0
    assert gc.add_node() == 0 and gc.add_node() == 1
    assert gc.insert_edge(1, 0)
    assert gc.add_node() == 2 and gc.insert_edge(2, 1)
    assert not gc.insert_edge(0, 2)
    assert gc.topological_order() == [2, 1, 0]
    gc.check_invariants()


def test_check_invariants_detects_bad_order():
    gc = GraphCycles(2)
    gc.insert_edge(0, 1)
    gc._rank[0], gc._rank[1] = gc._rank[1], gc._rank[0]
    with pytest.raises(AssertionError, match="order"):
        gc.check_invariants()


@pytest.mark.parametrize("cls", CLASSES)
def test_contractions_on_synthetic_dag_keep_invariants(cls):
    dag = random_dag(3000, seed=3)
    gc = cls.from_edges(dag.n, dag.src, dag.dst)
    gc.check_invariants()
    parent = list(range(dag.n))

    def find(v: int) -> int:
        while parent[v] != v:
            v = parent[v]
        return v

    contracted = refused = 0
    for u, v in zip(dag.src.tolist(), dag.dst.tolist()):
        a, b = find(u), find(v)
        if a == b:
            continue
        expected = gc.can_contract_edge(a, b)
        s = gc.contract_edge(a, b)
        assert (s is not None) == expected
        if s is None:
            refused += 1
        else:
            contracted += 1
            parent[b if s == a else a] = s
    assert contracted and refused
    gc.check_invariants()


@settings(max_examples=150, deadline=None)
@given(st.integers(2, 30).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=80),
    st.integers(0, n - 1), st.integers(0, n - 1), st.integers(0, n - 1))))
def test_related_matches_an_ancestor_and_descendant_oracle(case):
    """``related(x, lo, hi)``: every node ranked in [lo, hi] joined to ``x`` by a path, from
    networkx's ancestors and descendants of the same DAG."""
    n, pairs, x, a, b = case
    edges = sorted({(min(u, v), max(u, v)) for u, v in pairs if u != v})
    gc = GraphCycles.from_edges(n, [u for u, _ in edges], [v for _, v in edges])
    oracle = nx.DiGraph()
    oracle.add_nodes_from(range(n))
    oracle.add_edges_from(edges)
    lo, hi = min(a, b), max(a, b)
    expected = {w for w in nx.ancestors(oracle, x) | nx.descendants(oracle, x)
                if lo <= gc.rank(w) <= hi}
    assert gc.related(x, lo, hi) == expected


def test_successor_and_predecessor_sets_mirror_the_edges_after_contractions():
    g = GraphCycles.from_edges(6, [0, 1, 2, 3, 0, 2], [1, 2, 3, 4, 5, 5])
    s = g.contract_edge(3, 4)
    assert s is not None
    succs, preds = g.successor_sets(), g.predecessor_sets()
    live = [v for v in range(6) if g.alive(v)]
    edges = {(u, w) for u in live for w in g.successors(u)}
    assert {(u, w) for u in live for w in succs[u]} == edges
    assert {(u, w) for w in live for u in preds[w]} == edges
    assert (2, s) in edges and all(v in live for e in edges for v in e)
