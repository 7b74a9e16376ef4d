"""Strategy ``mxnet`` (MXNet PartitionGraph): the selector protocol, cycle shrinking with its
record, filter, create_subgraph_node rejection, priority order, a brute-force oracle, random
problems and determinism."""

from __future__ import annotations

import json
from collections import deque

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import clusterkit as ck
from clusterkit.engines import mxnet
from clusterkit.errors import ConstraintError, SelectorError
from clusterkit.result.reasons import Category
from clusterkit.selection.protocol import (
    ContainOpSelector,
    OpsProperty,
    SubgraphProperty,
    SubgraphSelector,
)
from support.partitions import named_clusters as names
from support.partitions import timeless
from support.problems import draw_letter_constraints, letter_dags
from support.seeds import descendants, seed_graph


def test_cycle_is_shrunk_and_recorded():
    problem = ck.make_problem(seed_graph(), ["acc=ops:A"])
    part = ck.run_strategy(problem, "mxnet").validate()
    assert names(part) == {("acc", frozenset("123")), ("acc", frozenset("567")),
                           ("cpu", frozenset("4"))}
    drops = part.info["mxnet"]["cycle_drops"]
    assert drops == [{"device": "acc", "seed": "1", "count": 1, "dropped": ["5"],
                      "why": drops[0]["why"]}]
    assert "path between two nodes" in drops[0]["why"]
    fell = {e["node"]: e["reason"] for e in part.placement()["fallen_back"]}
    assert fell == {"4": Category.OP_NOT_SUPPORTED}


class _Budget(SubgraphSelector):
    """Selects op A and takes at most three nodes per subgraph (state kept while growing)."""

    def __init__(self, log):
        self.log = log
        self.count = 0

    def select(self, node):
        ok = node.op_type == "A"
        self.count += ok
        return ok

    def _take(self):
        if self.count >= 3:
            return False
        self.count += 1
        return True

    def select_input(self, node, new_node):
        self.log.append(("input", node.name, new_node.name))
        return self._take()

    def select_output(self, node, new_node):
        self.log.append(("output", node.name, new_node.name))
        return self._take()

    def reset(self):
        self.count = 0


class _BudgetProp(SubgraphProperty):
    def __init__(self, log):
        super().__init__("acc")
        self.log = log

    def create_subgraph_selector(self):
        return _Budget(self.log)


def test_selector_protocol_breadth_first_and_stateful():
    g = nx.DiGraph()
    for i in range(5):
        g.add_node(f"n{i}", op="A")
    g.add_edges_from([("n0", "n2"), ("n1", "n2"), ("n2", "n3"), ("n2", "n4")])
    log: list = []
    problem = ck.make_problem(g, [_BudgetProp(log)])
    log.clear()                         # compiling the problem asked the selector too
    part = ck.run_strategy(problem, "mxnet").validate()
    assert names(part) == {("acc", frozenset({"n0", "n1", "n2"})), ("acc", frozenset({"n3"})),
                           ("acc", frozenset({"n4"}))}
    # breadth first from n0: its consumer n2, then n2's producers before its consumers
    assert log[:4] == [("output", "n0", "n2"), ("input", "n2", "n1"),
                       ("output", "n2", "n3"), ("output", "n2", "n4")]


class _FilterProp(OpsProperty):
    """Drops op B from every candidate set."""

    def create_subgraph_selector(self):
        sel = ContainOpSelector(self.op_types)
        sel.filter = lambda cands: [c for c in cands if c.op_type != "B"]
        return sel


def test_filter_and_convexity_after_filter():
    g = nx.DiGraph()
    for name, op in [("a", "A"), ("b", "B"), ("c", "A"), ("d", "A")]:
        g.add_node(name, op=op)
    g.add_edges_from([("a", "b"), ("b", "c"), ("a", "c"), ("c", "d")])
    problem = ck.make_problem(g, [_FilterProp(["A", "B"], device="acc")])
    part = ck.run_strategy(problem, "mxnet").validate()
    fell = {e["node"]: e for e in part.placement()["fallen_back"]}
    assert fell["b"]["reason"] == Category.SELECTOR_CONDITION
    # a -> b -> c with b dropped: a and c can no longer share a cluster
    a = part.assignment()
    idx = problem.graph.name_to_index
    assert a[idx["a"]] != a[idx["c"]]


class _Picky(OpsProperty):
    """Rejects every subgraph that contains node n1."""

    def create_subgraph_node(self, subgraph):
        if any(subgraph.graph.nodes[v].name == "n1" for v in subgraph.nodes):
            return None
        return super().create_subgraph_node(subgraph)


def test_rejected_subgraph_nodes_go_back_to_later_devices():
    g = nx.DiGraph()
    for i in range(4):
        g.add_node(f"n{i}", op="A")
    g.add_edges_from([("n0", "n1"), ("n1", "n2"), ("n2", "n3")])
    problem = ck.make_problem(g, [_Picky(["A"], device="first"), "second=ops:A"])
    part = ck.run_strategy(problem, "mxnet").validate()
    assert part.info["mxnet"]["rejected_subgraphs"] >= 1
    placed = dict(zip((nd.name for nd in problem.graph.nodes), part.device_of_nodes()))
    assert placed["n1"] == "second"
    # with no later device they fall back, with the reason recorded
    only = ck.make_problem(g, [_Picky(["A"], device="first")])
    part = ck.run_strategy(only, "mxnet").validate()
    fell = {e["node"]: e["reason"] for e in part.placement()["fallen_back"]}
    assert fell.get("n1") == Category.SUBGRAPH_REJECTED


def test_properties_apply_in_priority_order():
    problem = ck.make_problem(seed_graph(), ["low=ops:A", "high=ops:A,B"])
    first = ck.run_strategy(problem, "mxnet").validate()
    assert {d for d, _ in names(first)} == {"low", "high"}
    problem = ck.make_problem(seed_graph(), ["high=ops:A,B", "low=ops:A"])
    second = ck.run_strategy(problem, "mxnet").validate()
    assert names(second) == {("high", frozenset("1234567"))}


def test_misbehaving_create_subgraph_node_names_the_property():
    class Boom(OpsProperty):
        def create_subgraph_node(self, subgraph):
            raise RuntimeError("kaput")

    problem = ck.make_problem(seed_graph(), [Boom(["A"], device="acc")])
    try:
        ck.run_strategy(problem, "mxnet")
    except SelectorError as exc:
        assert "create_subgraph_node" in str(exc) and "kaput" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("expected a SelectorError")


# ---------------------------------------------------------------------- oracle
def naive_mxnet(problem: ck.Problem) -> list[tuple[str, list[int]]]:
    """The documented semantics with a full closure (stock selectors, no constraints): breadth
    first from each seed, a node that puts an outside node between two candidates dropped at
    once, last-in-first-out shrinking otherwise."""
    g = problem.graph
    n = g.n
    succ, pred = g.succ_lists, g.pred_lists
    reach = descendants(succ)
    taken: set[int] = set()
    out = []
    for d in range(len(problem.devices)):
        sup = problem.supported[d]
        for seed in range(n):
            if seed in taken or not sup[seed]:
                continue
            members, dropped = [seed], set()

            def outside(x, members=members, dropped=dropped, sup=sup, taken=taken):
                return x not in members and (x in dropped or not sup[x] or x in taken)

            def broken(members=members):
                return any(outside(x) and any(x in reach[a] for a in members)
                           and any(b in reach[x] for b in members) for x in range(n))

            queue = deque([seed])
            while queue:
                u = queue.popleft()
                if u not in members:
                    continue
                for w in pred[u] + succ[u]:
                    if u not in members:
                        break
                    if w in members or w in dropped or not sup[w] or w in taken:
                        continue
                    members.append(w)
                    queue.append(w)
                    while broken():
                        dropped.add(members.pop())
            taken |= set(members)
            out.append((problem.devices[d], sorted(members)))
    return out


DEVICE_SETS = [["x=ops:A,B", "y=ops:B,C"], ["x=ops:A", "y=ops:B", "z=ops:A,C"],
               ["x=ops:A,B,C"]]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(g=letter_dags(22), devs=st.sampled_from(DEVICE_SETS))
def test_subgraphs_match_brute_force_oracle(g, devs):
    problem = ck.make_problem(g, devs, constraints=ck.Constraints())
    got = [(d, list(v)) for d, v in mxnet.subgraphs(problem)]
    assert got == naive_mxnet(problem)


@st.composite
def scenarios(draw):
    g = draw(letter_dags(max_nodes=20))
    devs = draw(st.sampled_from(DEVICE_SETS))
    return g, devs, draw_letter_constraints(draw, g)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sc=scenarios())
def test_random_problems_validate_and_are_deterministic(sc):
    g, devs, cons = sc
    try:
        problem = ck.make_problem(g, devs, constraints=cons)
    except ConstraintError:
        assume(False)
    part = ck.run_strategy(problem, "mxnet")
    part.validate()
    again = ck.run_strategy(ck.make_problem(g, devs, constraints=cons), "mxnet")
    a, b = timeless(part.to_json()), timeless(again.to_json())
    assert json.dumps(a) == json.dumps(b)
    if cons.min_size == 1:
        # every node some device supports is placed (dropped nodes seed later subgraphs)
        placed = np.asarray([d != problem.fallback for d in part.device_of_nodes()])
        assert (placed == problem.any_supported).all()


def test_subgraphs_depending_on_each_other_are_split():
    g = nx.DiGraph()
    for name in ["a1", "b1", "a3", "b3", "a2", "b2"]:
        g.add_node(name, op=name[0].upper())
    g.add_edges_from([("a1", "a2"), ("a3", "a2"), ("b1", "b2"), ("b3", "b2"), ("a1", "b3"),
                      ("b1", "a3")])
    problem = ck.make_problem(g, ["x=ops:A", "y=ops:B"])
    assert [(d, len(v)) for d, v in mxnet.subgraphs(problem)] == [("x", 3), ("y", 3)]
    part = ck.run_strategy(problem, "mxnet").validate()
    assert part.info["mxnet"]["clusters_split_for_cycles"] == 1
    assert names(part) == {("x", frozenset({"a1", "a2", "a3"})), ("y", frozenset({"b1"})),
                           ("y", frozenset({"b2", "b3"}))}


def test_large_random_graph():
    from clusterkit.graph.fast import graph_from_dag
    from clusterkit.testing.synthetic import random_dag

    dag = random_dag(10000, seed=4)
    problem = ck.make_problem(graph_from_dag(dag), ["npu=ops:Conv,Relu,Add",
                                                   "gpu=ops:MatMul,Mul,Conv"])
    part = ck.run_strategy(problem, "mxnet")
    assert part.metrics()["nodes_offloaded"] == int((np.asarray(dag.ops) != "Unsupported").sum())
    assert part.info["mxnet"]["nodes_dropped_for_cycles"] > 0
    cycle = [e for e in part.placement()["fallen_back"] if e["reason"] == Category.CYCLE]
    assert cycle == []        # dropped nodes always end in a later subgraph at min_size 1


class _Accepting(OpsProperty):
    """The stock answers, but through overridden ``create_subgraph_node`` and ``filter``
    (the strategy cannot skip building the subgraph or calling the filter)."""

    def __init__(self, ops, device, seen):
        super().__init__(ops, device=device)
        self.seen = seen

    def create_subgraph_node(self, subgraph):
        self.seen.append(list(subgraph.nodes))
        return super().create_subgraph_node(subgraph)

    def create_subgraph_selector(self):
        sel = super().create_subgraph_selector()
        sel.filter = lambda cands: list(cands)
        return sel


@pytest.mark.parametrize("seed", range(6))
def test_stock_shortcuts_change_nothing(seed):
    """A property with the stock ``create_subgraph_node`` and ``filter`` gives the same
    subgraphs as one that overrides both with the same answers; the override sees every
    subgraph (an instance-level override included)."""
    from clusterkit.graph.fast import graph_from_dag
    from clusterkit.testing.synthetic import random_dag

    g = graph_from_dag(random_dag(400, seed=seed))
    stock = ck.make_problem(g, ["npu=ops:Conv,Relu,Add", "gpu=ops:MatMul,Mul,Conv"])
    seen: list[list[int]] = []
    props = [_Accepting(["Conv", "Relu", "Add"], "npu", seen),
             _Accepting(["MatMul", "Mul", "Conv"], "gpu", seen)]
    props[1].create_subgraph_node = lambda sub: seen.append(["x"] + list(sub.nodes)) or 1
    custom = ck.make_problem(g, props)
    want = mxnet.subgraphs(stock)
    assert mxnet.subgraphs(custom) == want
    assert [v for v in seen if v[0] != "x"] == [nodes for d, nodes in want if d == "npu"]
    assert [v[1:] for v in seen if v[0] == "x"] == [nodes for d, nodes in want if d == "gpu"]
