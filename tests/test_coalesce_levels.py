"""Refitting to node levels (horizontal.fit_levels, the last step of coalesce), checked against
a validity checker written here (networkx) and, on tiny graphs, a brute force over every grouping
of the accelerator nodes."""

from __future__ import annotations

import networkx as nx
from hypothesis import given
from hypothesis import strategies as st
from test_auto import set_partitions

from clusterkit import Constraints, OpsProperty, Partition, run_strategy
from clusterkit.graph.fast import graph_from_dag
from clusterkit.passes.coalesce import coalesce
from clusterkit.passes.horizontal import fit_levels
from clusterkit.testing.synthetic import LONG_EDGE_SUPPORTED, long_edge_dag
from support.problems import fast, problems


def _valid(problem, groups: list[tuple[int, list[int]]]) -> bool:
    """Independent check of (device index or -1, nodes) groups: each node once, accelerator
    groups supported and free of cut, refused and never-together pairs, acyclic quotient."""
    g = problem.graph
    owner = [-1] * g.n
    for k, (_, nodes) in enumerate(groups):
        for v in nodes:
            if owner[v] != -1:
                return False
            owner[v] = k
    if -1 in owner:
        return False
    edges = list(zip(g.edge_src.tolist(), g.edge_dst.tolist()))
    for d, nodes in groups:
        if d < 0:
            continue
        inside = set(nodes)
        if not all(problem.supported[d, v] for v in nodes):
            return False
        for e, (u, v) in enumerate(edges):
            if u in inside and v in inside and (problem.must_cut[e] or not problem.edge_ok[d, e]):
                return False
        if any(u in inside and v in inside for u, v in problem.never_pairs.tolist()):
            return False
    q = nx.DiGraph()
    q.add_nodes_from(range(len(groups)))
    q.add_edges_from((owner[u], owner[v]) for u, v in edges if owner[u] != owner[v])
    return nx.is_directed_acyclic_graph(q)


def _groups(part: Partition) -> list[tuple[int, list[int]]]:
    p = part.problem
    return [(p.device_index(c.device) if c.device != p.fallback else -1, list(c.nodes))
            for c in part.clusters]


@fast(150)
@given(problems(max_nodes=10, max_devices=2), st.sampled_from(["singleton", "longest-path",
                                                               "cycles", "mxnet"]),
       st.floats(0, 0.5))
def test_fit_and_coalesce_are_valid_and_never_worse(problem, strategy, slack):
    base = run_strategy(problem, strategy)
    fb, cut, parts = base.figures()
    for out, budget in ((coalesce(base), cut), (coalesce(base, pair_limit=0), cut),
                        (fit_levels(base), cut),
                        (fit_levels(base, slack), cut * (1 + slack))):
        assert _valid(problem, _groups(out))
        f = out.figures()
        assert f[0] == fb and f[1] <= budget and f[2] <= parts
        assert (f[2], f[1]) <= (parts, cut)
    assert base.figures() == (fb, cut, parts)  # the input is left as it was


def _fewest(problem, base: Partition) -> int:
    """The fewest partitions of the base partition's accelerator nodes (one device), by trying
    every grouping of them."""
    acc = sorted(v for c in base.offloaded_clusters() for v in c.nodes)
    host = [(-1, list(c.nodes)) for c in base.clusters if c.device == problem.fallback]
    return min(len(set(labels.values())) for labels in set_partitions(acc)
               if _valid(problem, host + [(0, [v for v in acc if labels[v] == k])
                                          for k in set(labels.values())]))


@fast(120)
@given(problems(max_nodes=9, max_devices=1, constraints=False),
       st.sampled_from(["singleton", "cycles", "mxnet"]))
def test_fit_without_cut_budget_reaches_the_fewest_partitions(problem, strategy):
    base = run_strategy(problem, strategy)
    if len(base.offloaded_clusters()) > 7:
        return
    out = fit_levels(base, slack=float("inf"))
    assert _valid(problem, _groups(out))
    assert out.figures()[0] == base.figures()[0]
    assert out.figures()[2] == (_fewest(problem, base) if base.offloaded_clusters() else 0)


def test_coalesce_reaches_the_node_level_count_on_a_long_edge_dag():
    """On this graph the refit lowers both figures; the count it reaches is the heaviest path
    of fallback-to-accelerator edges in the node graph plus one (computed here)."""
    dag = long_edge_dag(400, 3)
    graph = graph_from_dag(dag)
    problem = Constraints().compile(graph, [OpsProperty(list(LONG_EDGE_SUPPORTED), "acc")])
    base = coalesce(run_strategy(problem, "cycles"), levels=False)
    out = coalesce(run_strategy(problem, "cycles"))
    assert _valid(problem, _groups(out))
    acc = problem.supported[0]
    d = nx.DiGraph()
    d.add_nodes_from(range(graph.n))
    for u, v in zip(graph.edge_src.tolist(), graph.edge_dst.tolist()):
        d.add_edge(u, v, w=int(not acc[u] and acc[v]))
    assert out.figures()[2] == nx.dag_longest_path_length(d, weight="w") + 1
    assert out.figures()[1] <= base.figures()[1] and out.figures()[2] < base.figures()[2]


@fast(100)
@given(problems(max_nodes=10, max_devices=2), st.sampled_from(["singleton", "longest-path",
                                                               "cycles"]))
def test_shared_node_levels_give_the_separate_refits(problem, strategy):
    """The refits of a partition and of its pair merges with the node levels read once (and
    kept in a memo across calls) are the ones each gets alone."""
    from clusterkit.passes.coalesce import _pairs
    from clusterkit.passes.horizontal import refits

    base = run_strategy(problem, strategy)
    merged = _pairs(base, 64)
    memo: dict = {}
    for _ in range(2):  # the second call reads the memo
        both = refits(merged, base, memo)
        for (figures, make), alone in zip(both, (fit_levels(merged), fit_levels(base))):
            got = make()
            assert _groups(got) == _groups(alone)
            assert figures == got.figures()[1:]  # the figures given are the built refit's


def test_a_reached_floor_leaves_out_the_refits_above_the_pair_limit():
    """Above ``pair_limit`` clusters, a level merging that reaches ``floor`` partitions is the
    answer (the refits are not tried); a floor it does not reach changes nothing."""
    from clusterkit.passes.horizontal import merge_levels

    graph = graph_from_dag(long_edge_dag(400, 3))
    problem = Constraints().compile(graph, [OpsProperty(list(LONG_EDGE_SUPPORTED), "acc")])
    raw = run_strategy(problem, "cycles")
    full = coalesce(raw, pair_limit=10)
    merged = merge_levels(raw)
    assert full.figures() < merged.figures()  # on this graph the refit gains
    at_floor = coalesce(raw, pair_limit=10, floor=merged.figures()[2])
    assert _groups(at_floor) == _groups(merged) and _valid(problem, _groups(at_floor))
    below = coalesce(raw, pair_limit=10, floor=merged.figures()[2] - 1)
    assert _groups(below) == _groups(full)
    assert _groups(coalesce(raw, floor=10**9)) == _groups(coalesce(raw))  # under the limit
