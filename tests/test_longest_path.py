"""The ``longest-path`` engine: the seed's examples, an independent longest-path oracle, property
tests over random DAG problems (constraints, together groups, constants, size limits, stateful
selectors), and both engines against exhaustive search on tiny graphs."""

from __future__ import annotations

import networkx as nx
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from clusterkit import (
    ConstraintError,
    Constraints,
    OpsProperty,
    SubgraphProperty,
    SubgraphSelector,
    from_networkx,
    run_strategy,
)
from clusterkit.testing.exhaustive import exhaustive_optimum
from support.partitions import clusters_of, names_of, run_checked
from support.problems import dags, fast, problems, rich_problems
from support.seeds import value_edge_problem

ENGINES = ("longest-path", "cycles")


def test_seed_graph0_longest_path():
    """graph0: B0 must know the values of A0 and A4 -> {A0,A1,A2}; A3, A4, B0, X0 alone."""
    p = value_edge_problem([("A0", "B0"), ("A4", "B0")])
    part = run_strategy(p, "longest-path", refine=False, join_siblings=False)
    assert names_of(part) == {frozenset({"A0", "A1", "A2"}), frozenset({"A3"}),
                              frozenset({"A4"}), frozenset({"B0"}), frozenset({"X0"})}
    for opts in ({"split_components": False}, {}):  # one level, one device (and X0's tensor)
        assert frozenset({"A3", "A4"}) in names_of(run_strategy(p, "longest-path", **opts))


def test_seed_graph1_longest_path():
    """graph1: only A0 -> B0 is constrained -> {A4, B0} share a level and a cluster."""
    part = run_strategy(value_edge_problem([("A0", "B0")]), "longest-path", join_siblings=False)
    assert names_of(part) == {frozenset({"A0", "A1", "A2"}), frozenset({"A3"}),
                              frozenset({"A4", "B0"}), frozenset({"X0"})}
    assert part.info["levels"] == 2  # the edge into the fallback node X0 need not climb
    joined = run_strategy(value_edge_problem([("A0", "B0")]), "longest-path")
    assert frozenset({"A3", "A4", "B0"}) in names_of(joined)  # A3, A4 both read X0


# ---------------------------------------------------------------------- the level oracle
@fast(120)
@given(problems(1, 12, 2, constraints=True))
def test_clusters_are_levels_of_longest_path(problem):
    """Without refinement, splitting, pairs and limits, two accelerator nodes share a cluster
    exactly when they have the same device and the same longest 0/1 path (networkx oracle; an
    edge into a later device or the fallback weighs 0)."""
    assume(len(problem.never_pairs) == 0)
    g = problem.graph
    dev = problem.first_device
    dag = nx.DiGraph()
    dag.add_nodes_from(range(g.n))
    for e, (u, v) in enumerate(zip(g.edge_src.tolist(), g.edge_dst.tolist())):
        inner = dev[u] >= 0 and dev[u] == dev[v] and bool(problem.contractible(dev[u])[e])
        cu, cv = (int(d) if d >= 0 else len(problem.devices) for d in (dev[u], dev[v]))
        forward = cu < cv or dev[u] < 0 and dev[v] < 0  # to a later device or the fallback
        dag.add_edge(u, v, w=0 if inner or forward else 1)
    level = {}
    for v in nx.topological_sort(dag):
        level[v] = max((level[u] + d["w"] for u, _, d in dag.in_edges(v, data=True)), default=0)
    part = run_strategy(problem, "longest-path", refine=False, split_components=False)
    a = part.assignment()
    acc = [v for v in range(g.n) if dev[v] >= 0]
    for u in acc:
        for v in acc:
            same = level[u] == level[v] and dev[u] == dev[v]
            assert (a[u] == a[v]) == same, (u, v, level[u], level[v])


# ---------------------------------------------------------------------- properties
@fast(300)
@given(rich_problems())
def test_longest_path_valid_and_deterministic(problem):
    part = run_checked(problem, "longest-path")
    if part is None:
        return
    again = run_strategy(problem, "longest-path")
    assert clusters_of(part) == clusters_of(again)
    for c in part.offloaded_clusters():  # limits hold (validate checks them too)
        assert len(c.nodes) >= problem.limits.loosest_min


@fast(100)
@given(rich_problems(2, 12, 2, groups=True))
def test_together_groups_stay_whole(problem):
    """Each group ends in one cluster (validate checks it) with both engines."""
    for engine in ENGINES:
        part = run_checked(problem, engine)
        if part is not None:
            a = part.assignment()
            assert all(len(set(a[grp].tolist())) == 1 for grp in problem.groups)


@fast(120)
@given(rich_problems(), st.booleans(), st.booleans(), st.booleans())
def test_longest_path_options_stay_valid(problem, split, siblings, refine):
    run_checked(problem, "longest-path", split_components=split, join_siblings=siblings,
                refine=refine, refine_rounds=3)


@fast(100)
@given(problems(1, 12, 2, constraints=True))
def test_refinement_never_raises_cut_bytes(problem):
    plain = run_strategy(problem, "longest-path", refine=False)
    refined = run_strategy(problem, "longest-path")
    assert refined.metrics()["cut_bytes"] <= plain.metrics()["cut_bytes"]
    assert refined.metrics()["fallback_nodes"] == plain.metrics()["fallback_nodes"]


def test_non_adjacent_never_pair_is_split():
    """Two independent nodes on one level: the pair gets a virtual edge and other levels."""
    g = nx.DiGraph()
    for v, op in enumerate(["Conv", "Relu", "Relu", "Add"]):
        g.add_node(v, op=op)
    g.add_edges_from([(0, 1), (0, 2), (1, 3), (2, 3)], bytes=8)
    graph = from_networkx(g)
    prop = [OpsProperty(["Conv", "Relu", "Add"], device="acc")]
    free = run_strategy(Constraints().compile(graph, prop), "longest-path")
    assert len(free.clusters) == 1
    p = Constraints(never_together=[("1", "2")]).compile(graph, prop)
    part = run_strategy(p, "longest-path")
    a = part.assignment()
    assert a[1] != a[2]
    assert part.info["never_virtual_edges"] == 1


def test_together_groups_dependent_on_each_other_are_refused():
    """{a, d} and {b, c} with a -> b and c -> d: each is convex, but no partition keeps both."""
    g = nx.DiGraph()
    for v in "abcd":
        g.add_node(v, op="Relu")
    g.add_edges_from([("a", "b"), ("c", "d")], bytes=8)
    with pytest.raises(ConstraintError, match="together group"):
        Constraints(together=[["a", "d"], ["b", "c"]]).compile(
            from_networkx(g), [OpsProperty(["Relu"], device="acc")])


# ---------------------------------------------------------------------- size limits
@fast(80)
@given(rich_problems(2, 12, 2), st.integers(1, 3))
def test_max_size_is_never_exceeded(problem, cap):
    """Tighten max_size to ``cap`` (when the groups allow): still valid, no cluster above it."""
    if any(len(grp) > cap for grp in problem.groups):
        return
    problem = problem.with_limits(max_size=cap, min_size=1)
    for engine in ENGINES:
        part = run_checked(problem, engine)
        if part is not None:
            assert max((len(c.nodes) for c in part.offloaded_clusters()), default=0) <= cap


# ---------------------------------------------------------------------- stateful selectors
class _CountingSelector(SubgraphSelector):
    """At most ``limit`` nodes per growing cluster, counted in select_input/select_output;
    ``filter`` drops every Add (so clusters get re-split)."""

    def __init__(self, ops, limit):
        self.ops, self.limit, self.count = set(ops), limit, 0

    def select(self, node):
        if node.op_type not in self.ops:
            return False
        if self.count == 0:
            self.count = 1
        return True

    def select_input(self, node, new_node):
        return self._grow(new_node)

    def select_output(self, node, new_node):
        return self._grow(new_node)

    def _grow(self, new_node):
        if new_node.op_type not in self.ops or self.count >= self.limit:
            return False
        self.count += 1
        return True

    def filter(self, candidates):
        return [c for c in candidates if c.op_type != "Add"]


class _CountingProperty(SubgraphProperty):
    def __init__(self, limit):
        super().__init__("acc")
        self.limit = limit

    def create_subgraph_selector(self):
        return _CountingSelector(["Conv", "Relu", "Add", "MatMul"], self.limit)


@fast(80)
@given(dags(1, 10), st.integers(1, 3))
def test_stateful_selector_and_filter(g, limit):
    """Every engine asks a fresh selector per growing cluster: no offloaded cluster is larger
    than the selector's limit, the filter's drops (Add) sit on the fallback, result valid."""
    problem = Constraints().compile(from_networkx(g), [_CountingProperty(limit)])
    for engine in ENGINES:
        part = run_strategy(problem, engine)
        for c in part.offloaded_clusters():
            assert len(c.nodes) <= limit
            assert all(problem.graph.nodes[v].op_type != "Add" for v in c.nodes)


# ---------------------------------------------------------------------- against exhaustive search
@fast(45)
@given(st.one_of(problems(2, 6, 2, sizes=True), problems(2, 7, 1, sizes=True)))
def test_engines_never_beat_exhaustive_optimum(problem):
    """Each engine's partition is valid and no better than the exhaustive optimum, which ranks
    fewest fallback nodes first and then cut_bytes."""
    opt = exhaustive_optimum(problem, "cut")
    for engine in ENGINES:
        m = run_strategy(problem, engine).metrics()
        assert (m["fallback_nodes"], m["cut_bytes"]) >= (opt.fallback_nodes, opt.value)
