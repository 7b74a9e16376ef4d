"""Level merging (passes/horizontal.py) and level-bounded contraction (cycles ``levels``):
checked against an independent checker of the partition rules and, on tiny graphs, against the
brute-force fewest partitions."""

from __future__ import annotations

import itertools

import networkx as nx
from hypothesis import given
from hypothesis import strategies as st

from clusterkit import Partition, make_problem, run_strategy
from clusterkit.graph.fast import graph_from_dag
from clusterkit.passes.coalesce import coalesce
from clusterkit.passes.horizontal import merge_levels
from clusterkit.testing.synthetic import LONG_EDGE_SUPPORTED, long_edge_dag
from support.problems import fast, problems, rich_problems


def check(part: Partition, base: Partition) -> None:
    """Independent of the engines: every node keeps its device, one device per cluster, the
    constraints hold, the cluster graph is acyclic, and neither cut nor partitions rose."""
    p, g = part.problem, part.problem.graph
    where = {v: (k, c.device) for k, c in enumerate(part.clusters) for v in c.nodes}
    before = {v: c.device for c in base.clusters for v in c.nodes}
    assert sorted(where) == list(range(g.n))
    assert all(where[v][1] == before[v] for v in range(g.n))
    for c in part.clusters:
        if c.device == p.fallback:
            continue
        d = p.devices.index(c.device)
        assert all(p.supported[d, v] for v in c.nodes)
        assert p.limits.loosest_max is None or len(c.nodes) <= p.limits.loosest_max
    for u, v in p.never_pairs.tolist():
        assert where[u][0] != where[v][0]
    q = nx.DiGraph()
    q.add_nodes_from(range(len(part.clusters)))
    for e, (u, v) in enumerate(zip(g.edge_src.tolist(), g.edge_dst.tolist())):
        cu, cv = where[u][0], where[v][0]
        if cu == cv:
            assert not p.must_cut[e]
            if part.clusters[cu].device != p.fallback:
                assert p.edge_ok[p.devices.index(part.clusters[cu].device), e]
        else:
            q.add_edge(cu, cv)
    assert nx.is_directed_acyclic_graph(q)
    m, m0 = part.metrics(), base.metrics()
    assert m["cut_bytes"] <= m0["cut_bytes"]
    assert m["partitions"] <= m0["partitions"]


@fast(120)
@given(rich_problems(max_nodes=10), st.sampled_from(["singleton", "cycles", "longest-path"]))
def test_level_merging_is_valid_and_no_worse(problem, strategy):
    base = run_strategy(problem, strategy)
    check(merge_levels(base), base)
    check(coalesce(base), base)


def _fewest_partitions(problem) -> int:
    """Brute force: the fewest offloaded clusters over every grouping of the accelerator
    nodes (one device, no limits) whose cluster graph is acyclic."""
    single = run_strategy(problem, "singleton")
    acc = [c.nodes[0] for c in single.offloaded_clusters()]
    g = problem.graph
    best = len(acc)
    for labels in _set_partitions(len(acc)):
        if max(labels, default=-1) + 1 >= best:
            continue
        label = {v: i for i, v in enumerate(range(g.n))}  # fallback nodes: their own
        for v, lab in zip(acc, labels):
            label[v] = g.n + lab
        q = nx.DiGraph()
        q.add_nodes_from(set(label.values()))
        q.add_edges_from((label[u], label[v]) for u, v in
                         zip(g.edge_src.tolist(), g.edge_dst.tolist()) if label[u] != label[v])
        if nx.is_directed_acyclic_graph(q):
            best = max(labels) + 1
    return best


def _set_partitions(n: int):
    """Restricted growth strings: every partition of ``n`` items once."""
    def grow(prefix: list[int], top: int):
        if len(prefix) == n:
            yield list(prefix)
            return
        for lab in range(top + 2):
            yield from grow(prefix + [lab], max(top, lab))
    yield from grow([], -1)


@fast(60)
@given(problems(max_nodes=8, max_devices=1, constraints=False))
def test_level_merging_of_singletons_is_the_fewest_partitions(problem):
    single = run_strategy(problem, "singleton")
    out = merge_levels(single)
    check(out, single)
    assert out.metrics()["partitions"] == _fewest_partitions(problem)


@fast(80)
@given(rich_problems(max_nodes=10))
def test_cycles_levels_is_valid_and_keeps_the_level_bound(problem):
    part = run_strategy(problem, "cycles", levels=True)  # run_strategy validates
    merged = merge_levels(part)
    check(merged, part)
    if not problem.limits.bounded \
            and not len(problem.never_pairs) and len(problem.devices) == 1:
        assert merged.metrics()["partitions"] <= part.info["level_bound"] + 1


def test_levels_on_a_long_edge_dag_needs_fewer_partitions_at_lower_cut():
    dag = long_edge_dag(600, seed=1)
    problem = make_problem(graph_from_dag(dag), ["ops:" + ",".join(LONG_EDGE_SUPPORTED)])
    plain = coalesce(run_strategy(problem, "cycles"), levels=False)
    levels = merge_levels(run_strategy(problem, "cycles", levels=True))
    check(levels, run_strategy(problem, "singleton"))
    assert levels.metrics()["partitions"] < plain.metrics()["partitions"]
    assert levels.metrics()["cut_bytes"] <= plain.metrics()["cut_bytes"]


def test_set_partitions_enumerates_bell_numbers():
    assert [sum(1 for _ in _set_partitions(n)) for n in range(6)] == [1, 1, 2, 5, 15, 52]
    assert len({tuple(x) for x in _set_partitions(4)}) == 15
    assert list(itertools.islice(_set_partitions(2), 2)) == [[0, 0], [0, 1]]


def test_node_paths_with_folded_fallback_chains_match_the_full_graph():
    """The refit's heaviest paths, with fallback chains folded, against heaviest_paths on the
    whole node graph: equal on every node that is not folded, and the same longest path."""
    import numpy as np

    from clusterkit.graph.algorithms import heaviest_paths
    from clusterkit.passes.horizontal import _node_paths
    from clusterkit.testing.synthetic import random_dag

    for seed in range(4):
        g = graph_from_dag(random_dag(300, mean_out_degree=1.5, seed=seed), name=f"r{seed}")
        rng = np.random.default_rng(seed)
        fallback = rng.random(g.n) < 0.6
        src, dst = g.edge_src, g.edge_dst
        w = ((rng.random(len(src)) < 0.4) & ~fallback[dst]).astype(np.int64)  # 0 into fallback
        succ = [dst[src == x].tolist() for x in range(g.n)]
        wts = [w[src == x].tolist() for x in range(g.n)]
        head, tail = heaviest_paths(range(g.n), succ, wts)
        got_head, got_tail = _node_paths(g, w, fallback)
        outdeg = np.bincount(src, minlength=g.n)
        only = {x: succ[x][0] for x in range(g.n) if outdeg[x] == 1}
        folded = {x for x, y in only.items() if fallback[x] and fallback[y]}
        assert folded  # the case is exercised
        for x in range(g.n):
            if x not in folded:
                assert (got_head[x], got_tail[x]) == (head[x], tail[x])
        assert max(got_head) == max(head)


@fast(120)
@given(problems(max_nodes=10, max_devices=2, constraints=False),
       st.sampled_from(["singleton", "cycles", "longest-path"]))
def test_bins_without_limits_group_each_device_and_level(problem, strategy) -> None:
    """Without limits every (device, level) of the offloaded clusters is one label, that of
    its first cluster in topological order, and each fallback cluster keeps its own: checked
    against a grouping written here, for both level readings."""
    from clusterkit.passes.horizontal import _Levels

    part = run_strategy(problem, strategy, coalesce_after=False, validate=False)
    if len(part.clusters) < 2:
        return
    lv = _Levels(part)
    assert lv.free
    for levels in lv.levels():
        got = lv.bins(levels)
        first: dict[tuple[int, int], int] = {}
        want = list(range(lv.k))
        for c in lv.order:
            if lv.dev[c] >= 0:
                want[c] = first.setdefault((lv.dev[c], levels[c]), c)
        if want == list(range(lv.k)):
            assert got is None
        else:
            assert got == want
