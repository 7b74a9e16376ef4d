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
