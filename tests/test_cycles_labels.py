"""The union-find roots read in numpy (graph/algorithms.roots, used for the cycles labels)
against UnionFind.find, and the cluster order the cycles partitions record against the rule
that every edge between clusters goes forward."""

from __future__ import annotations

import random

import pytest

import clusterkit as ck
from clusterkit.graph.algorithms import UnionFind, roots
from support.models import BUNDLED_MODELS


@pytest.mark.parametrize("seed", range(5))
def test_roots_match_find(seed):
    rng = random.Random(seed)
    n = rng.randint(1, 300)
    uf = UnionFind(n)
    for _ in range(rng.randint(0, 2 * n)):
        a, b = uf.find(rng.randrange(n)), uf.find(rng.randrange(n))
        if a != b:  # link keeps either root, as the contraction's survivor does
            keep, gone = (a, b) if rng.random() < 0.5 else (b, a)
            uf.link(keep, gone)
    want = [uf.find(v) for v in range(n)]
    assert roots(list(uf.parent)).tolist() == want
    chain = list(range(n))  # one long chain: the deepest tree
    for v in range(1, n):
        chain[v] = v - 1
    assert roots(chain).tolist() == [0] * n


@pytest.mark.parametrize("selector", ["coreml", "tensorrt", "ops:Conv,Relu"])
def test_cycles_partitions_keep_a_topological_cluster_order(selector):
    problem = ck.make_problem(BUNDLED_MODELS / "resnet18.onnx", selector)
    for strategy, opts in (("cycles", {}), ("cycles", {"merge_non_adjacent": True}),
                           ("cycles", {"levels": True})):
        part = ck.run_strategy(problem, strategy, validate=False, **opts)
        where = part.assignment()
        g = problem.graph
        order = part.cluster_order()
        pos = {c: i for i, c in enumerate(order)}
        assert sorted(order) == list(range(len(part.clusters)))
        for u, v in zip(g.edge_src.tolist(), g.edge_dst.tolist()):
            if where[u] != where[v]:
                assert pos[int(where[u])] < pos[int(where[v])]


@pytest.mark.parametrize("selector", ["coreml", "tensorrt"])
def test_levels_from_a_copied_start_equal_a_fresh_run(selector):
    from clusterkit.engines.cycles import run, run_both

    problem = ck.make_problem(BUNDLED_MODELS / "resnet18.onnx", selector)
    plain, merged, later = run_both(problem, then_levels=True)
    for got, want in ((plain, run(problem)), (merged, run(problem, merge_non_adjacent=True)),
                      (later(), run(problem, levels=True))):
        assert got.assignment().tolist() == want.assignment().tolist()
        assert got.device_indices().tolist() == want.device_indices().tolist()
        assert got.info == want.info


@pytest.mark.parametrize("selector", ["coreml", "tensorrt"])
def test_then_levels_without_the_pair_equal_fresh_runs(selector):
    from clusterkit.engines.cycles import run, run_then_levels

    problem = ck.make_problem(BUNDLED_MODELS / "resnet18.onnx", selector)
    plain, later = run_then_levels(problem)
    for got, want in ((plain, run(problem)), (later(), run(problem, levels=True))):
        assert got.assignment().tolist() == want.assignment().tolist()
        assert got.device_indices().tolist() == want.device_indices().tolist()
        assert got.info == want.info


def test_graphcycles_copy_is_independent():
    from clusterkit.graph.graphcycles import GraphCycles, OneSidedGraphCycles

    src, dst = [0, 1, 2, 3, 0, 2], [1, 2, 3, 4, 5, 5]
    for cls in (GraphCycles, OneSidedGraphCycles):
        g = cls.from_edges(6, src, dst)
        g.contract_edge(3, 4)
        c, fresh = g.copy(), cls.from_edges(6, src, dst)
        fresh.contract_edge(3, 4)
        got = [(h.contract_edge(0, 1), h.merge(5, 3 if h.alive(3) else 4), h.merge(0, 2))
               for h in (c, fresh)]  # the same steps on the copy and on a graph built again
        assert got[0] == got[1] and got[0][0] is not None and got[0][2] is None
        assert [c.alive(v) for v in range(6)] == [fresh.alive(v) for v in range(6)]
        assert c.topological_order() == fresh.topological_order()
        live = [v for v in range(6) if c.alive(v)]
        assert [c.successors(v) for v in live] == [fresh.successors(v) for v in live]
        c.check_invariants()
        g.check_invariants()  # the original is untouched
        assert g.alive(0) and g.alive(1) and g.successors(0) == [1, 5]


def test_union_find_from_an_identity_at_hand_shares_its_ints_and_refuses_another():
    from clusterkit.errors import GraphError

    ids = list(range(500))
    shared, fresh = UnionFind(500, identity=ids), UnionFind(500)
    assert shared.parent == fresh.parent and shared.parent is not ids
    assert all(a is b for a, b in zip(shared.parent, ids))  # the same int objects
    for x, y in [(3, 400), (400, 7), (8, 9)]:
        assert shared.union(x, y) == fresh.union(x, y)
    assert [shared.find(v) for v in range(500)] == [fresh.find(v) for v in range(500)]
    for bad in (list(range(499)), list(range(1, 501))):
        with pytest.raises(GraphError):
            UnionFind(500, identity=bad)
