"""cpsat's large-neighbourhood search (``method="lns"``) and its relaxation bound: valid
partitions under every objective and size limit (an independent checker), never worse than
the warm start, bounds never above the brute-force optimum, OPTIMAL only when it is the
optimum, the window model charging exactly what a window changes, the automatic choice of
method, determinism."""

from __future__ import annotations

import networkx as nx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterkit import Constraints, StrategyError, make_problem
from clusterkit.constraints.limits import cluster_const_bytes
from clusterkit.constraints.objectives import integer_weights, objective_weights
from clusterkit.engines.cpsat import lns
from clusterkit.engines.cpsat.hints import topological_ranks
from clusterkit.engines.cpsat.reduce import reachability, reduce_problem
from clusterkit.engines.cpsat.relax import lower_bound
from clusterkit.engines.cpsat.strategy import optimize as solve
from clusterkit.graph.fast import graph_from_dag
from clusterkit.testing.exhaustive import enumerate_valid, exhaustive_optimum, partition_objective
from clusterkit.testing.synthetic import LONG_EDGE_SUPPORTED, long_edge_dag
from support.problems import problems

OBJECTIVES = ["cut", "partitions", {"cut": 1, "partitions": 5000}]
FAST = settings(deadline=None, database=None, suppress_health_check=list(HealthCheck))


def check_valid(problem, part) -> None:
    """An independent check of a partition against the problem's rules (networkx only)."""
    g = problem.graph
    label, device = {}, {}
    for i, c in enumerate(part.clusters):
        d = -1 if c.device == problem.fallback else problem.device_index(c.device)
        for v in c.nodes:
            assert v not in label, f"node {v} in two clusters"
            label[v], device[v] = i, d
    assert len(label) == problem.n
    sizes: dict[int, int] = {}
    for v in range(problem.n):
        if device[v] >= 0:
            assert problem.supported[device[v], v], f"node {v} on a device that refuses it"
            sizes[label[v]] = sizes.get(label[v], 0) + 1
    for c, size in sizes.items():
        assert size >= problem.limits.loosest_min
        assert problem.limits.loosest_max is None or size <= problem.limits.loosest_max
        if problem.limits.loosest_bytes is not None:
            members = [v for v in range(problem.n) if label[v] == c]
            assert cluster_const_bytes(g, members) <= problem.limits.loosest_bytes
    q = nx.DiGraph()
    q.add_nodes_from(set(label.values()))
    for e, (u, v) in enumerate(zip(g.edge_src.tolist(), g.edge_dst.tolist())):
        if label[u] != label[v]:
            q.add_edge(label[u], label[v])
        else:
            assert not problem.must_cut[e]
            assert device[u] < 0 or problem.edge_ok[device[u], e]
    assert nx.is_directed_acyclic_graph(q), "the clusters form a cycle"
    for a, b in problem.never_pairs.tolist():
        assert label[a] != label[b]
    for members in problem.groups:
        assert len({label[v] for v in members.tolist()}) == 1


def assignment(problem, part):
    a = part.assignment()
    devs = [-1 if c.device == problem.fallback else problem.device_index(c.device)
            for c in part.clusters]
    return a, [devs[int(x)] for x in a]


def checked_lns(problem, objective, time_limit=2.0, **kw):
    res = solve(problem, objective, time_limit=time_limit, workers=1, method="lns", **kw)
    assert res.info["method"] == "lns"
    assert res.status in ("OPTIMAL", "FEASIBLE"), res.info
    check_valid(problem, res.partition)
    w_cut, w_parts = objective_weights(objective)
    labels, devices = assignment(problem, res.partition)
    value = partition_objective(problem, labels, devices, w_cut, w_parts)
    assert res.objective == pytest.approx(value)
    assert res.fallback_nodes == sum(d < 0 for d in devices)
    warm = res.info["warm_start"]
    if warm["objective"] is not None:
        assert (res.fallback_nodes, res.objective) <= (warm["fallback_nodes"],
                                                        warm["objective"])
    assert res.bound <= res.objective + 1e-9
    # the search itself never ends worse than where it started
    assert "warm start is better" not in res.reason
    return res


@pytest.mark.parametrize("objective", OBJECTIVES, ids=["cut", "partitions", "weighted"])
@settings(FAST, max_examples=12)
@given(problem=problems(2, 7, 2, sizes=True), window=st.integers(2, 5),
       warm=st.sampled_from([True, "singleton", False]))
def test_lns_is_valid_honest_and_optimal_only_at_the_optimum(objective, problem, window, warm):
    res = checked_lns(problem, objective, window=window, warm_start=warm)
    ex = exhaustive_optimum(problem, objective)
    assert (res.fallback_nodes, res.objective) >= (ex.fallback_nodes, ex.value)
    if res.fallback_nodes == ex.fallback_nodes:
        assert res.bound <= ex.value + 1e-9
    if res.status == "OPTIMAL":
        assert (res.fallback_nodes, res.objective) == (ex.fallback_nodes, pytest.approx(ex.value))


@pytest.mark.parametrize("objective", OBJECTIVES, ids=["cut", "partitions", "weighted"])
@settings(FAST, max_examples=15)
@given(problem=problems(1, 7, 2, sizes=True))
def test_relaxation_bound_never_exceeds_the_brute_force_optimum(objective, problem):
    ex = exhaustive_optimum(problem, objective)
    w_cut, w_parts = objective_weights(objective)
    ic, ip, scale = integer_weights(w_cut, w_parts)
    for reduce in (True, ("fix", "constants", "host")):
        red = reduce_problem(problem, w_parts=w_parts, enable=reduce)
        assert lower_bound(red.graph, ic, ip) / scale <= ex.value + 1e-9


def _same_outside(problem, ref, other, inside: set[int]) -> bool:
    """Does ``other`` equal ``ref`` outside ``inside``, with no cluster crossing its border?"""
    (la, da), (lb, db) = ref, other
    out = [v for v in range(problem.n) if v not in inside]
    if any(da[v] != db[v] for v in out):
        return False
    if any(lb[u] == lb[v] for u in inside for v in out):
        return False
    return all((la[u] == la[v]) == (lb[u] == lb[v]) for u in out for v in out)


@settings(FAST, max_examples=20)
@given(problem=problems(3, 7, 2), data=st.data())
def test_window_model_charges_exactly_what_the_window_changes(problem, data):
    """For every valid partition that differs from a reference one only inside a window (a
    run of whole clusters in a topological order), the true objective and fallback count
    minus the window model's are one constant: the model ranks the window's choices exactly."""
    red = reduce_problem(problem, w_parts=1, enable=())  # the fallback set is free
    sg = red.graph
    every = list(enumerate_valid(problem))
    labels, devices = every[data.draw(st.integers(0, len(every) - 1))]
    first = [sg.members[s][0] for s in range(sg.size)]
    state = lns.State([int(labels[v]) for v in first], [int(devices[v]) for v in first],
                      problem.n + 1)
    clusters = lns.cluster_order(sg, state)
    i = data.draw(st.integers(0, len(clusters) - 1))
    j = data.draw(st.integers(i, len(clusters) - 1))
    part = sorted(s for c in clusters[i:j + 1] for s in c)
    inside = {v for s in part for v in sg.members[s]}
    model = lns.window_model(sg, reachability(sg), lns.terms_by_super_node(sg), state, part,
                             (1, 1000))
    diffs = set()
    for lab, dev in every:
        if not _same_outside(problem, (labels, devices), (lab, dev), inside):
            continue
        cluster = {s: int(lab[sg.members[s][0]]) if dev[sg.members[s][0]] >= 0 else -1 - s
                   for s in part}
        rank = topological_ranks(model, cluster)
        device = {s: int(dev[sg.members[s][0]]) for s in part}
        assert rank is not None and model.in_domain(rank, device)
        vals = model.evaluate(rank, device) if not model.trivial else {}
        value = model.value(vals) if vals else 0
        offload = model.value(vals, "offload") if vals else 0
        true = partition_objective(problem, lab, dev, 1, 1000)
        diffs.add((int((dev < 0).sum()) - offload, true - value - model.const))
    assert len(diffs) == 1


def synthetic_problem(n: int, seed: int, **cons):
    graph = graph_from_dag(long_edge_dag(n, seed=seed))
    return make_problem(graph, ["npu=ops:" + ",".join(LONG_EDGE_SUPPORTED)],
                        constraints=Constraints.default(**cons) if cons else None)


@pytest.mark.parametrize("objective,cons", [("partitions", {}), ("cut", {"max_size": 6}),
                                            ({"cut": 1, "partitions": 10 ** 6}, {})],
                         ids=["partitions", "cut-max-size", "weighted"])
def test_lns_improves_a_poor_start_on_a_synthetic_graph(objective, cons):
    problem = synthetic_problem(50, 3, **cons)
    res = checked_lns(problem, objective, 0.3, warm_start="singleton", window=8)
    warm = res.info["warm_start"]
    assert res.objective < warm["objective"]
    assert res.info["lns"]["improved"] + res.info["lns"]["merged"] > 0


def test_lns_is_deterministic():
    problem = synthetic_problem(60, 5, max_size=8)
    runs = [solve(problem, "partitions", work_limit=0.3, method="lns", window=8, seed=3,
                  warm_start="cycles")
            for _ in range(2)]
    names = [sorted(sorted(c.nodes) for c in r.partition.clusters) for r in runs]
    assert names[0] == names[1]
    assert runs[0].info["lns"] == runs[1].info["lns"]


def test_auto_method_full_when_small_lns_beyond(monkeypatch):
    problem = synthetic_problem(30, 2)
    small = solve(problem, "partitions", time_limit=2, warm_start="cycles")
    assert small.info["method"] == "full"
    assert "lns" not in small.info
    monkeypatch.setattr(lns, "PAIR_LIMIT", 5)
    big = solve(problem, "partitions", time_limit=0.3, warm_start="cycles")
    assert big.info["method"] == "lns"
    check_valid(problem, big.partition)
    assert big.bound <= small.objective + 1e-9  # the proven optimum bounds every bound
    assert big.objective >= small.objective
    forced = solve(problem, "partitions", time_limit=0.3, warm_start="cycles", method="full")
    assert forced.info["method"] == "full"


@pytest.mark.parametrize("options,name", [({"method": "fast"}, "method"),
                                          ({"window": 1}, "window"),
                                          ({"window": True}, "window")])
def test_bad_lns_options_name_the_option(options, name):
    problem = synthetic_problem(20, 0)
    with pytest.raises(StrategyError, match=f"option {name}"):
        solve(problem, "partitions", time_limit=1, **options)
