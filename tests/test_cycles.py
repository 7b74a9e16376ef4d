"""The ``cycles`` engine (GraphCycles edge contraction): the seed's walk-through, validity and
determinism on random problems, maximality (every refused contraction really breaks the
partition), options, and the explanations of split edges."""

from __future__ import annotations

import networkx as nx
from hypothesis import given
from hypothesis import strategies as st

from clusterkit import (
    Constraints,
    ContainOpSelector,
    OpsProperty,
    Partition,
    SubgraphProperty,
    from_networkx,
    run_strategy,
)
from clusterkit.analysis.explain import explain, explain_edge
from support.partitions import clusters_of, names_of, run_checked
from support.problems import fast, problems, rich_problems
from support.seeds import value_edge_problem


# ---------------------------------------------------------------------- the seed's walk-through
def test_seed_graph0_cycles():
    """graph0 (A0 -> B0 and A4 -> B0 constrained): one cluster {A0, A1, A2}; A3, A4, B0 alone."""
    part = run_strategy(value_edge_problem([("A0", "B0"), ("A4", "B0")]), "cycles")
    assert names_of(part) == {frozenset({"A0", "A1", "A2"}), frozenset({"A3"}),
                              frozenset({"A4"}), frozenset({"B0"}), frozenset({"X0"})}
    assert part.info["dummy_nodes"] == 2  # the seed's A0B0 and A4B0


def test_seed_graph1_cycles():
    """graph1 (only A0 -> B0 constrained): A4 and B0 contract; A3 stays alone."""
    part = run_strategy(value_edge_problem([("A0", "B0")]), "cycles")
    assert names_of(part) == {frozenset({"A0", "A1", "A2"}), frozenset({"A3"}),
                              frozenset({"A4", "B0"}), frozenset({"X0"})}
    merged = run_strategy(value_edge_problem([("A0", "B0")]), "cycles", merge_non_adjacent=True)
    assert frozenset({"A3", "A4", "B0"}) in names_of(merged)  # A3 joins: no path between them


def test_seed_contraction_refused_through_unsupported_node():
    """Without constraints on B0: once {A0, A1, A2} is formed, contracting A0 -> B0 would close
    the cycle A2 -> X0 -> A4 -> B0 and is refused; B0 joins A4 instead, and explain() names
    the path through the outside node X0."""
    part = run_strategy(value_edge_problem([]), "cycles")
    assert names_of(part) == {frozenset({"A0", "A1", "A2"}), frozenset({"A3"}),
                              frozenset({"A4", "B0"}), frozenset({"X0"})}
    assert part.info["refused_cycle"] == 1
    why = explain_edge(part, "A0", "B0")
    assert "would close a cycle" in why and "outside node 'X0'" in why, why


# ---------------------------------------------------------------------- properties
@fast(300)
@given(rich_problems())
def test_cycles_valid_and_deterministic(problem):
    part = run_checked(problem, "cycles")
    if part is None:
        return
    assert clusters_of(part) == clusters_of(run_strategy(problem, "cycles"))


@fast(120)
@given(rich_problems(), st.booleans(), st.sampled_from([None, 1, 3]), st.integers(1, 3))
def test_cycles_options_stay_valid(problem, merge, span, passes):
    run_checked(problem, "cycles", merge_non_adjacent=merge, far_span=span, far_budget=2,
                passes=passes, window=None if span is None else 2)


def _merged(part: Partition, i: int, j: int) -> Partition:
    clusters = [(c.device, c.nodes) for k, c in enumerate(part.clusters) if k not in (i, j)]
    clusters.append((part.clusters[i].device, part.clusters[i].nodes + part.clusters[j].nodes))
    return Partition.from_clusters(part.problem, clusters)


@fast(150)
@given(problems(1, 12, 2, constraints=True))
def test_every_refused_contraction_breaks_the_partition(problem):
    """Exact mode (no far-edge budget, passes until nothing changes): for every contractible
    edge left between two clusters, merging those clusters gives an invalid partition (a cycle
    or a constraint); so the engine refused only what it had to."""
    part = run_strategy(problem, "cycles", far_span=None, passes=50)
    a = part.assignment()
    g = problem.graph
    dev = problem.first_device
    for e, (u, v) in enumerate(zip(g.edge_src.tolist(), g.edge_dst.tolist())):
        if a[u] == a[v] or dev[u] < 0 or dev[u] != dev[v]:
            continue
        if not problem.contractible(int(dev[u]))[e]:
            continue
        assert not _merged(part, int(a[u]), int(a[v])).is_valid(), (u, v)


@fast(60)
@given(problems(2, 10, 1, constraints=True))
def test_merge_non_adjacent_never_adds_partitions(problem):
    plain = run_strategy(problem, "cycles").metrics()
    merged = run_strategy(problem, "cycles", merge_non_adjacent=True).metrics()
    assert merged["partitions"] <= plain["partitions"]
    assert merged["fallback_nodes"] == plain["fallback_nodes"]


def test_largest_tensor_contracts_first():
    """x feeds y (1000 bytes) and z (10 bytes); y and z may never share a cluster, so x can
    join only one of them: the larger tensor is contracted first and stays inside."""
    g = nx.DiGraph()
    for v in "xyz":
        g.add_node(v, op="Relu")
    g.add_edge("x", "z", bytes=10)
    g.add_edge("x", "y", bytes=1000)
    p = Constraints(never_together=[("y", "z")]).compile(from_networkx(g),
                                                         [OpsProperty(["Relu"], device="acc")])
    part = run_strategy(p, "cycles")
    assert names_of(part) == {frozenset({"x", "y"}), frozenset({"z"})}
    assert part.info["refused_never"] == 1


# ---------------------------------------------------------------------- explanations
@fast(80)
@given(problems(2, 10, 2, constraints=True), st.sampled_from(["cycles", "longest-path"]))
def test_explain_covers_every_split_supported_edge(problem, engine):
    """One line per edge between two supported nodes in different clusters, each naming its
    two nodes; the 'would close a cycle' reason shows a real path through an outside node."""
    part = run_strategy(problem, engine)
    lines = explain(part)
    g = problem.graph
    a = part.assignment()
    sup = problem.any_supported
    split = [(u, v) for u, v in zip(g.edge_src.tolist(), g.edge_dst.tolist())
             if a[u] != a[v] and sup[u] and sup[v]]
    assert len(lines) == len(split)
    for (u, v), line in zip(split, lines):
        assert line.startswith(f"{g.nodes[u].name} ({g.nodes[u].op_type}) -> "
                               f"{g.nodes[v].name} ({g.nodes[v].op_type}): ")
        if "would close a cycle" in line:
            path = line.split("the path ")[1].split(" leaves")[0]
            hops = [int(x.strip("'")) for x in path.split(" -> ")]
            nx_g = nx.DiGraph(list(zip(g.edge_src.tolist(), g.edge_dst.tolist())))
            assert all(nx_g.has_edge(x, y) for x, y in zip(hops, hops[1:]))
            assert a[hops[0]] == a[u] and a[hops[-1]] == a[v]
            assert all(a[x] not in (a[u], a[v]) for x in hops[1:-1])


def test_explain_names_constraints():
    p = value_edge_problem([("A0", "B0"), ("A4", "B0")])
    lines = explain(run_strategy(p, "cycles"))
    assert any(line.startswith("A4 (Op) -> B0 (Op): the edge is a required cut") for line in lines)
    g = nx.DiGraph()
    g.add_node("x", op="Relu")
    g.add_node("y", op="Relu")
    g.add_edge("x", "y", bytes=4)
    p = Constraints(never_together=[("x", "y")]).compile(from_networkx(g),
                                                         [OpsProperty(["Relu"], device="acc")])
    assert "never-together" in explain(run_strategy(p, "longest-path"))[0]
    p = Constraints(max_size=1).compile(from_networkx(g), [OpsProperty(["Relu"], device="acc")])
    assert "max_size 1" in explain(run_strategy(p, "cycles"))[0]
    p = Constraints(min_size=3).compile(from_networkx(g), [OpsProperty(["Relu"], device="acc")])
    part = run_strategy(p, "cycles")
    assert part.metrics()["fallback_nodes"] == 2
    assert explain(part) == ["x (Relu) -> y (Relu): 'x' is on the fallback 'cpu' although 'acc' "
                             "takes it (its cluster was below min_size); 'y' is on the fallback "
                             "'cpu' although 'acc' takes it (its cluster was below min_size)"]


class _DropRelu(SubgraphProperty):
    """Takes Conv and Relu; its selector's filter drops Relu from every finished cluster."""

    def create_subgraph_selector(self):
        class Sel(ContainOpSelector):
            def filter(self, candidates):
                return [c for c in candidates if c.op_type != "Relu"]

        return Sel(["Conv", "Relu"])


def test_filter_drop_resplits_non_convex_cluster():
    """Conv -> Relu -> Conv is one cluster until the filter drops the Relu; {Conv, Conv} would
    be left with a path through the fallback Relu, so each engine re-splits it."""
    g = nx.DiGraph()
    for v, op in enumerate(["Conv", "Relu", "Conv", "Conv"]):
        g.add_node(v, op=op)
    g.add_edges_from([(0, 1), (1, 2), (0, 3)], bytes=32)
    p = Constraints().compile(from_networkx(g), [_DropRelu("acc")])
    for engine in ("cycles", "longest-path"):
        part = run_strategy(p, engine)
        assert part.info["filtered_nodes"] == 1
        assert names_of(part) == {frozenset({"0", "3"}), frozenset({"1"}), frozenset({"2"})}
        assert part.clusters[part.assignment()[1]].device == "cpu"
