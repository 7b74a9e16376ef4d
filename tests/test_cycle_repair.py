"""break_cycles against a networkx checker: random DAGs with random convex clusters whose cluster
graph has cycles; the repaired clusters must have an acyclic quotient, each lie inside one input
cluster with its device, and clusters on no cycle must stay as they were."""

from __future__ import annotations

import random

import networkx as nx
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import clusterkit as ck
from clusterkit.engines import cycle_repair, mxnet
from clusterkit.engines.cycle_repair import break_cycles
from clusterkit.engines.growth import GrowingCluster
from clusterkit.engines.super_nodes import SuperNodeGraph
from clusterkit.graph.fast import graph_from_dag
from clusterkit.graph.graphcycles import GraphCycles, OneSidedGraphCycles
from clusterkit.testing.synthetic import LONG_EDGE_SUPPORTED, long_edge_dag


def convex(dag: nx.DiGraph, members: set[int]) -> bool:
    """No node outside ``members`` lies on a path between two members."""
    below = set().union(*(nx.descendants(dag, v) for v in members))
    above = set().union(*(nx.ancestors(dag, v) for v in members))
    return below & above <= members


def cluster_graph(dag: nx.DiGraph, label: dict[int, object]) -> nx.DiGraph:
    q = nx.DiGraph()
    q.add_nodes_from(set(label.values()))
    q.add_edges_from((label[u], label[v]) for u, v in dag.edges if label[u] != label[v])
    return q


def labels(dag: nx.DiGraph, pieces: list[GrowingCluster]) -> dict[int, object]:
    label: dict[int, object] = {v: ("unit", v) for v in dag}
    for i, p in enumerate(pieces):
        for u in p.super_nodes:
            label[u] = ("piece", i)
    return label


def make_case(seed: int) -> tuple[nx.DiGraph, list[GrowingCluster]]:
    """A random DAG on units 0..n-1 (ids topological) and convex clusters grown greedily in a
    random node order, each node joining a random cluster when that keeps it convex."""
    rng = random.Random(seed)
    n = rng.randint(4, 22)
    dag = nx.DiGraph()
    dag.add_nodes_from(range(n))
    for j in range(n):
        for i in range(j):
            if rng.random() < (0.35 if j - i < 4 else 0.06):
                dag.add_edge(i, j)
    k = rng.randint(1, max(1, n // 3))
    sets: list[set[int]] = [set() for _ in range(k)]
    for v in rng.sample(range(n), n):
        c = rng.randrange(k + 1)
        if c < k and convex(dag, sets[c] | {v}):
            sets[c].add(v)
    devices = [rng.randrange(2) for _ in range(k)]
    return dag, [GrowingCluster(d, sorted(s)) for d, s in zip(devices, sets) if s]


def unit_graph(dag: nx.DiGraph) -> SuperNodeGraph:
    g = nx.DiGraph()
    g.add_nodes_from((f"v{i:02d}" for i in dag), op="Relu")
    g.add_edges_from((f"v{u:02d}", f"v{v:02d}") for u, v in dag.edges)
    ug = SuperNodeGraph(ck.make_problem(g, ["npu=ops:Relu", "gpu=ops:Relu"]))
    assert ug.n == dag.number_of_nodes()
    assert sorted(zip(ug.esrc.tolist(), ug.edst.tolist())) == sorted(dag.edges)
    return ug


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_break_cycles_leaves_an_acyclic_cluster_graph(seed):
    dag, pieces = make_case(seed)
    before = cluster_graph(dag, labels(dag, pieces))
    on_cycle = {i for comp in nx.strongly_connected_components(before) if len(comp) > 1
                for kind, i in comp if kind == "piece"}
    out, split = break_cycles(unit_graph(dag), pieces)
    assert nx.is_directed_acyclic_graph(cluster_graph(dag, labels(dag, out)))
    # the same units, each in one output piece inside one input piece with its device
    owner = {u: i for i, p in enumerate(pieces) for u in p.super_nodes}
    assert sorted(u for p in out for u in p.super_nodes) == sorted(owner)
    parts: dict[int, list[GrowingCluster]] = {}
    for p in out:
        homes = {owner[u] for u in p.super_nodes}
        assert len(homes) == 1
        home = homes.pop()
        assert p.device == pieces[home].device
        parts.setdefault(home, []).append(p)
    for i, p in enumerate(pieces):
        if i not in on_cycle:
            assert [q.super_nodes for q in parts[i]] == [p.super_nodes]
        if len(parts[i]) > 1:   # rebuilt pieces grow along their own edges
            for q in parts[i]:
                assert nx.is_weakly_connected(dag.subgraph(q.super_nodes)), q.super_nodes
    assert split == sum(len(v) > 1 for v in parts.values())
    if on_cycle:
        assert split >= 1


def test_cases_include_cycles():
    """The generator does produce cluster graphs with cycles (else the test above is idle)."""
    cyclic = 0
    for seed in range(200):
        dag, pieces = make_case(seed)
        cyclic += not nx.is_directed_acyclic_graph(cluster_graph(dag, labels(dag, pieces)))
    assert cyclic >= 20


def test_same_pieces_as_pearce_kelly_on_long_edges(monkeypatch):
    """The one-sided order repair gives the pieces the two-sided Pearce–Kelly repair gives."""
    graph = graph_from_dag(long_edge_dag(3000, seed=1))
    problem = ck.make_problem(graph, ["ops:" + ",".join(LONG_EDGE_SUPPORTED)])
    passes = mxnet._partition_graph(problem)
    fast, split = break_cycles(passes.contracted, list(passes.pieces))
    assert split > 0
    monkeypatch.setattr(cycle_repair, "OneSidedGraphCycles", GraphCycles)
    slow, split_slow = break_cycles(passes.contracted, list(passes.pieces))
    assert split == split_slow
    assert [(p.device, p.super_nodes) for p in fast] == [(p.device, p.super_nodes) for p in slow]


def contract_groups_oracle(dag: nx.DiGraph, nodes: list[int]) -> tuple[list[int], nx.DiGraph]:
    """What contract_groups should answer, by contracting with networkx and testing for
    cycles; the nodes of the quotient returned keep the name of their group's first node."""
    q, heads, group = nx.DiGraph(dag), [], []
    for x in nodes:
        for j, h in enumerate(heads):
            if q.has_edge(h, x) or q.has_edge(x, h):
                merged = nx.contracted_nodes(q, h, x, self_loops=False)
                if nx.is_directed_acyclic_graph(merged):
                    q = merged
                    group.append(j)
                    break
        else:
            group.append(len(heads))
            heads.append(x)
    return group, q


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_contract_groups_against_networkx(seed):
    """contract_groups of both classes, built from adjacency lists (ids in no topological
    order) or from edge arrays, against contractions checked by networkx."""
    rng = random.Random(seed)
    n = rng.randint(2, 16)
    perm = rng.sample(range(n), n)      # node perm[i] is i-th in a topological order
    dag = nx.DiGraph()
    dag.add_nodes_from(range(n))
    for j in range(n):
        for i in range(j):
            if rng.random() < (0.45 if j - i < 3 else 0.1):
                dag.add_edge(perm[i], perm[j])
    nodes = rng.sample(range(n), rng.randint(1, n))
    want, quotient = contract_groups_oracle(dag, nodes)
    succ = [list(dag.successors(v)) for v in range(n)]
    pred = [list(dag.predecessors(v)) for v in range(n)]
    rank = [perm.index(v) for v in range(n)]
    src = np.array([u for u, _ in dag.edges], dtype=np.int64)
    dst = np.array([v for _, v in dag.edges], dtype=np.int64)
    builds = [OneSidedGraphCycles.from_adjacency(succ, pred, rank),
              GraphCycles.from_adjacency(succ, pred, rank),
              OneSidedGraphCycles.from_edges(n, src, dst)]
    heads = {}
    for x, j in zip(nodes, want):
        heads.setdefault(j, x)
    label = {v: v for v in range(n)}    # each node -> its group's name in the oracle
    for x, j in zip(nodes, want):
        label[x] = heads[j]
    for gc in builds:
        assert gc.contract_groups(nodes) == want
        gc.check_invariants()
        alive = [v for v in range(n) if gc.alive(v)]
        assert sorted(label[v] for v in alive) == sorted(quotient.nodes)
        got = {(label[v], label[w]) for v in alive for w in gc.successors(v)}
        assert got == set(quotient.edges)
        pos = {v: i for i, v in enumerate(gc.topological_order())}
        assert all(pos[v] < pos[w] for v in alive for w in gc.successors(v))


def test_contract_groups_with_keys_respaced(monkeypatch):
    """The same answers when the order keys start packed, so that moving nodes keeps running
    out of room and respacing them."""
    from clusterkit.graph import graphcycles

    monkeypatch.setattr(graphcycles, "_KEY_RANGE", 1)
    for seed in range(150):
        test_contract_groups_against_networkx.hypothesis.inner_test(seed)
