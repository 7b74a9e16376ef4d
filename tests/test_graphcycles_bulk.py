"""GraphCycles' bulk helpers (a given initial order, contract_if_edge, descendant_marks,
out_set/in_set) against networkx on random DAGs."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from clusterkit.errors import GraphError
from clusterkit.graph.graphcycles import GraphCycles, OneSidedGraphCycles


def shuffled_dag(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Edges of a random DAG whose ids are not topological, and one topological order of it
    (networkx's, not the one GraphCycles would pick)."""
    rng = np.random.default_rng(seed)
    src, dst = [], []
    for u in range(n - 1):
        for v in rng.choice(np.arange(u + 1, n), size=min(3, n - 1 - u), replace=False):
            src.append(u)
            dst.append(int(v))
    perm = rng.permutation(n)
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from(zip(perm[src].tolist(), perm[dst].tolist()))
    return perm[src], perm[dst], list(nx.topological_sort(g))


@pytest.mark.parametrize("cls", [GraphCycles, OneSidedGraphCycles])
@pytest.mark.parametrize("seed", range(4))
def test_a_given_order_gives_the_ranks_and_the_same_answers(cls, seed):
    src, dst, order = shuffled_dag(40, seed)
    given = cls.from_edges(40, src, dst, order=order)
    given.check_invariants()
    assert [given.rank(v) for v in order] == list(range(40))
    plain = cls.from_edges(40, src, dst)
    rng = np.random.default_rng(seed)
    for _ in range(60):  # the same contractions and merges succeed on both
        alive = [v for v in range(40) if plain.alive(v)]
        x, y = (int(v) for v in rng.choice(alive, size=2, replace=False))
        if plain.has_edge(x, y):
            assert plain.contract_edge(x, y) == given.contract_edge(x, y)
        else:
            assert plain.merge(x, y) == given.merge(x, y)
        given.check_invariants()
    assert [plain.alive(v) for v in range(40)] == [given.alive(v) for v in range(40)]


def test_an_order_that_is_no_topological_order_is_refused():
    src, dst, order = shuffled_dag(12, 0)
    with pytest.raises(GraphError, match="no topological order"):
        GraphCycles.from_edges(12, src, dst, order=order[::-1])
    with pytest.raises(GraphError, match="no topological order"):
        GraphCycles.from_edges(12, src, dst, order=order[:-1])
    with pytest.raises(GraphError, match="no topological order"):
        GraphCycles.from_edges(12, src, dst, order=order[:-1] + order[:1])


@pytest.mark.parametrize("seed", range(4))
def test_contract_if_edge_is_contract_edge_or_none(seed):
    src, dst, _ = shuffled_dag(30, seed)
    one, two = GraphCycles.from_edges(30, src, dst), GraphCycles.from_edges(30, src, dst)
    mirror = nx.DiGraph(list(zip(src.tolist(), dst.tolist())))
    rng = np.random.default_rng(seed)
    for _ in range(80):
        alive = [v for v in range(30) if one.alive(v)]
        if len(alive) < 2:
            break
        x, y = (int(v) for v in rng.choice(alive, size=2, replace=False))
        got = one.contract_if_edge(x, y)
        if not mirror.has_edge(x, y):
            assert got is None
            continue
        others = nx.DiGraph(mirror)
        others.remove_edge(x, y)
        assert (got is None) == nx.has_path(others, x, y)  # another path: a cycle once merged
        assert got == two.contract_edge(x, y)
        if got is not None:
            drop = y if got == x else x
            mirror = nx.relabel_nodes(mirror, {drop: got}, copy=True)
            mirror.remove_edges_from(list(nx.selfloop_edges(mirror)))
        one.check_invariants()


@pytest.mark.parametrize("seed", range(3))
def test_descendant_marks_and_edge_sets_match_networkx(seed):
    src, dst, _ = shuffled_dag(35, seed)
    gc = GraphCycles.from_edges(35, src, dst)
    mirror = nx.DiGraph(list(zip(src.tolist(), dst.tolist())))
    for x, y in list(mirror.edges)[:10]:  # some contractions first
        if gc.alive(x) and gc.alive(y) and gc.has_edge(x, y):
            keep = gc.contract_edge(x, y)
            if keep is not None:
                drop = y if keep == x else x
                mirror = nx.relabel_nodes(mirror, {drop: keep}, copy=True)
                mirror.remove_edges_from(list(nx.selfloop_edges(mirror)))
    marks = {v: 1 << (v % 7) for v in mirror if v % 3}
    got = gc.descendant_marks(marks)
    assert set(got) == set(mirror.nodes)
    for v in mirror:
        want = 0
        for w in nx.descendants(mirror, v):
            want |= marks.get(w, 0)
        assert got[v] == want
        assert gc.out_set(v) == set(mirror.successors(v))
        assert gc.in_set(v) == set(mirror.predecessors(v))
