"""The exact ``cpsat`` strategy: equal to exhaustive search on small graphs (every objective,
with and without reductions), never worse than a heuristic, proven OPTIMAL on real models,
infeasibility as a status, the reductions, the gap, the CLI."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterkit import (
    Constraints,
    InfeasibleError,
    OpsProperty,
    StrategyError,
    from_networkx,
    load_graph,
    make_problem,
    run_strategy,
    strategy_names,
    strategy_spec,
)
from clusterkit.analysis.gap import format_gap, objective_value, optimality_gap, optimum
from clusterkit.constraints.objectives import parse_objective
from clusterkit.engines.cpsat.reduce import reachability, reduce_problem
from clusterkit.engines.cpsat.strategy import optimize as solve
from clusterkit.graph.core import Graph
from clusterkit.testing.exhaustive import exhaustive_optimum
from clusterkit.testing.shapes import SELECTOR_SETS
from support.models import ALL_MODELS
from support.problems import onnxish_problems, problems

SELECTORS = SELECTOR_SETS
OBJECTIVES = ["cut", "partitions", {"cut": 1, "partitions": 100}]
HEURISTICS = [n for n in strategy_names() if not strategy_spec(n).exact]
FAST = settings(deadline=None, database=None, suppress_health_check=list(HealthCheck))


def fast(n: int) -> settings:
    return settings(FAST, max_examples=n)

_GRAPHS: dict[str, Graph] = {}


def model_graph(stem: str) -> Graph:
    """Each real model loaded once per module."""
    if stem not in _GRAPHS:
        path = next(p for p in ALL_MODELS if p.stem == stem)
        _GRAPHS[stem] = load_graph(str(path))
    return _GRAPHS[stem]


def key(part, objective):
    return objective_value(part, objective)


def check_exact(problem, objective, **kw):
    """cpsat == exhaustive optimum (lexicographic), proven, with a consistent model."""
    ex = exhaustive_optimum(problem, objective)
    res = solve(problem, objective, time_limit=20, workers=1, **kw)
    assert res.status == "OPTIMAL", res.info
    res.partition.validate()
    assert (res.fallback_nodes, res.objective) == (ex.fallback_nodes, ex.value)
    assert key(res.partition, objective) == (ex.fallback_nodes, ex.value)
    assert res.bound == pytest.approx(res.objective)
    # the model's own objective (constants + solver terms) equals the metric
    assert res.info["model_objective"] == pytest.approx(res.objective)
    return res


# ----------------------------------------------------------------------------- exhaustive
@pytest.mark.parametrize("objective", OBJECTIVES, ids=["cut", "partitions", "weighted"])
@fast(40)
@given(problem=problems(1, 8, 1), reduce=st.booleans())
def test_equals_exhaustive_one_device(objective, problem, reduce):
    check_exact(problem, objective, reduce=reduce, warm_start=reduce)


@pytest.mark.parametrize("objective", OBJECTIVES, ids=["cut", "partitions", "weighted"])
@fast(40)
@given(problem=problems(1, 7, 2), reduce=st.booleans())
def test_equals_exhaustive_two_devices(objective, problem, reduce):
    check_exact(problem, objective, reduce=reduce, warm_start=not reduce)


@pytest.mark.parametrize("objective", ["cut", "partitions"])
@fast(25)
@given(problem=problems(2, 7, 2, sizes=True), reduce=st.booleans())
def test_equals_exhaustive_with_size_limits(objective, problem, reduce):
    check_exact(problem, objective, reduce=reduce)


@pytest.mark.parametrize("objective", OBJECTIVES, ids=["cut", "partitions", "weighted"])
@fast(40)
@given(problem=onnxish_problems(), reduce=st.booleans())
def test_equals_exhaustive_with_inputs_constants_outputs(objective, problem, reduce):
    check_exact(problem, objective, reduce=reduce)


# ----------------------------------------------------------------------------- heuristics
@fast(20)
@given(problem=problems(6, 14, 2))
def test_never_worse_than_any_heuristic(problem):
    res = solve(problem, "cut", time_limit=20, workers=1, warm_start=False)
    assert res.status == "OPTIMAL"
    for name in HEURISTICS:
        heur = run_strategy(problem, name)
        assert key(res.partition, "cut") <= key(heur, "cut"), name


@fast(12)
@given(problem=problems(8, 14, 2), objective=st.sampled_from(["cut", "partitions"]))
def test_reductions_do_not_change_the_optimum(problem, objective):
    """Beyond exhaustive sizes: all reductions on, each alone, and none agree."""
    full = solve(problem, objective, time_limit=20, workers=1, reduce=True)
    none = solve(problem, objective, time_limit=20, workers=1, reduce=False, warm_start=False)
    assert full.status == none.status == "OPTIMAL"
    assert (full.fallback_nodes, full.objective) == (none.fallback_nodes, none.objective)
    for only in (("fix", "leaves"), ("fix", "roots"), ("fix", "chains"), ("fix", "split")):
        one = solve(problem, objective, time_limit=20, workers=1, reduce=only,
                    warm_start=False)
        assert (one.fallback_nodes, one.objective) == (full.fallback_nodes, full.objective)


def test_warm_start_is_the_best_heuristic_and_never_beaten_by_it():
    problem = make_problem(model_graph("resnet18"), SELECTORS["two"])
    res = solve(problem, "cut", time_limit=30)
    ws = res.info["warm_start"]
    tried = {k: v for k, v in ws["tried"].items() if isinstance(v, dict)}
    assert ws["strategy"] in tried and "singleton" in tried
    best = min((v["fallback_nodes"], v["objective"]) for v in tried.values())
    assert (ws["fallback_nodes"], ws["objective"]) == best
    assert (res.fallback_nodes, res.objective) <= best
    for name in HEURISTICS:
        assert key(res.partition, "cut") <= key(run_strategy(problem, name), "cut")


# ----------------------------------------------------------------------------- real models
REAL = [("resnet18", "wide"), ("resnet18", "two"), ("squeezenet1_1", "cnn"),
        ("mobilenet_v2", "two"), ("light_bvlc_alexnet", "two"),
        ("whisper_tiny_encoder", "wide"), ("gpt2_dynamo", "two")]


@pytest.mark.parametrize("stem,sel", REAL, ids=[f"{m}-{s}" for m, s in REAL])
def test_real_models_proven_optimal_for_cut(stem, sel):
    problem = make_problem(model_graph(stem), SELECTORS[sel])
    part = run_strategy(problem, "cpsat", time_limit=30, workers=2)  # validates
    info = part.info
    assert info["status"] == "OPTIMAL", info
    assert info["bound"] == info["objective"] == part.metrics()["cut_bytes"]
    assert info["objective"] <= info["warm_start"]["objective"]
    assert info["model_objective"] == info["objective"]
    red = info["reductions"]
    assert red["super_nodes"] < problem.n
    assert red["constants_detached"] == int(problem.graph.is_constant_node.sum())


@pytest.mark.parametrize("stem,sel", [("resnet18", "two"), ("light_bvlc_alexnet", "two"),
                                      ("whisper_tiny_encoder", "wide")])
def test_real_models_same_optimum_without_reductions(stem, sel):
    problem = make_problem(model_graph(stem), SELECTORS[sel])
    reduced = solve(problem, "cut", time_limit=30)
    raw = solve(problem, "cut", time_limit=30, reduce=False, warm_start=False)
    assert reduced.status == raw.status == "OPTIMAL"
    assert (reduced.fallback_nodes, reduced.objective) == (raw.fallback_nodes, raw.objective)


def test_same_input_same_partition():
    problem = make_problem(model_graph("squeezenet1_1"), SELECTORS["two"])
    runs = [run_strategy(problem, "cpsat", time_limit=30) for _ in range(2)]
    assert [(c.device, c.nodes) for c in runs[0].clusters] == \
        [(c.device, c.nodes) for c in runs[1].clusters]


def test_partitions_objective_on_a_real_model():
    problem = make_problem(model_graph("resnet18"), SELECTORS["wide"])
    res = solve(problem, "partitions", time_limit=30)
    assert res.status == "OPTIMAL"
    assert res.objective == res.partition.metrics()["partitions"] == res.bound
    for name in HEURISTICS:
        assert key(res.partition, "partitions") <= key(run_strategy(problem, name),
                                                       "partitions")


# ----------------------------------------------------------------------------- reductions
def test_reduction_statistics_on_resnet18():
    problem = make_problem(model_graph("resnet18"), SELECTORS["cnn"])
    red = reduce_problem(problem)
    st_ = red.stats
    assert st_["fixed_offload"]
    assert st_["constants_detached"] == int(problem.graph.is_constant_node.sum())
    assert st_["merged_chains"] + st_["merged_leaves"] + st_["merged_roots"] > 0
    assert st_["components"] == st_["parts"] > 1
    none = reduce_problem(problem, enable=False)
    assert none.graph.size == problem.n and len(none.components) == 1


def test_parts_form_a_dag_and_clusters_stay_inside_parts():
    problem = make_problem(model_graph("resnet18"), SELECTORS["two"])
    red = reduce_problem(problem)
    sg = red.graph
    part_of = {s: i for i, p in enumerate(red.components) for s in p}
    import networkx as nx

    q = nx.DiGraph()
    q.add_nodes_from(range(len(red.components)))
    q.add_edges_from((part_of[a], part_of[b]) for (a, b) in sg.edges
                     if part_of[a] != part_of[b])
    assert nx.is_directed_acyclic_graph(q)
    part = run_strategy(problem, "cpsat", time_limit=30)
    for c in part.offloaded_clusters():
        supers = {int(sg.node_super[v]) for v in c.nodes}
        assert -1 not in supers or len(c.nodes) == 1
        assert len({part_of[s] for s in supers if s >= 0}) == 1


def test_blocked_paths_are_found():
    # a -> b -> c and a -> c, with b on the host: a and c can never share a cluster
    import networkx as nx

    g = nx.DiGraph()
    g.add_nodes_from([(0, {"op": "Conv"}), (1, {"op": "Unsupported"}), (2, {"op": "Conv"})])
    g.add_edges_from([(0, 1), (1, 2), (0, 2)])
    problem = Constraints().compile(from_networkx(g), [OpsProperty(["Conv"])])
    red = reduce_problem(problem, enable=False)
    _, blocked = reachability(red.graph)
    a, c = (int(red.graph.node_super[v]) for v in (0, 2))
    assert (blocked[a] >> c) & 1
    res = solve(problem, "cut", time_limit=10, warm_start=False)
    assert res.status == "OPTIMAL" and res.partition.metrics()["partitions"] == 2


def test_build_solve_read_run_alone():
    """The phases one by one: a model per part, each solved, the assignment read back into a
    partition that Partition.validate accepts and that offloads both Convs."""
    from clusterkit.engines.cpsat.build import build_models
    from clusterkit.engines.cpsat.read import ComponentsOutcome, assemble
    from clusterkit.engines.cpsat.solve import Clock, SolverSettings, solve_component

    problem = _chain_problem()
    red = reduce_problem(problem, enable=False)
    clock, outcome = Clock(10.0), ComponentsOutcome()
    for model in build_models(red, 1, 0):
        sol, _ = solve_component(model, None, 5.0, red.fixed_offload, SolverSettings(workers=1),
                            clock)
        assert sol.status == "OPTIMAL" and sol.limit is None
        outcome.add(sol)
    part = assemble(problem, red, outcome.rank, outcome.device)
    part.validate()
    assert sorted(v for c in part.offloaded_clusters() for v in c.nodes) == [0, 2]


# ----------------------------------------------------------------------------- infeasible
def _chain_problem(**cons):
    import networkx as nx

    g = nx.DiGraph()
    for v, op in enumerate(["Conv", "Unsupported", "Conv"]):
        g.add_node(v, op=op)
    g.add_edges_from([(0, 1), (1, 2)])
    return Constraints(**cons).compile(from_networkx(g), [OpsProperty(["Conv"])])


def test_infeasible_is_a_status_with_a_reason():
    problem = _chain_problem(min_size=2)
    res = solve(problem, "cut", time_limit=10, require_offload=True)
    assert res.status == "INFEASIBLE" and res.partition is None
    # each Conv alone is a contradiction (its only neighbour is on the host): the reason names
    # one of them and the limit at fault
    assert ("'0' (Conv)" in res.reason or "'2' (Conv)" in res.reason) \
        and "min_size 2" in res.reason
    with pytest.raises(InfeasibleError) as exc:
        run_strategy(problem, "cpsat", require_offload=True, time_limit=10)
    err = exc.value
    assert isinstance(err, StrategyError) and str(err) == f"cpsat: INFEASIBLE: {err.reason}"
    assert err.status == err.report.status == "INFEASIBLE"
    assert "cannot all be offloaded" in err.reason
    again = pickle.loads(pickle.dumps(err))  # a worker process raises it, the parent reads it
    assert (type(again), str(again), again.status, again.reason) == (
        InfeasibleError, str(err), err.status, err.reason)
    # without the requirement the same input is feasible: both Convs stay on the host
    res = solve(problem, "cut", time_limit=10)
    assert res.status == "OPTIMAL" and res.fallback_nodes == 3


def test_infeasible_together_group():
    import networkx as nx

    g = nx.DiGraph()
    g.add_nodes_from([(0, {"op": "Conv"}), (1, {"op": "Relu"})])
    g.add_edge(0, 1)

    class Picky(OpsProperty):
        def create_subgraph_selector(self):
            from clusterkit.selection.protocol import ContainOpSelector

            class S(ContainOpSelector):
                def select_output(self, node, new_node):
                    return False

            return S(self.op_types)

    problem = Constraints(together=[[0, 1]]).compile(from_networkx(g),
                                                     [Picky(["Conv", "Relu"])])
    res = solve(problem, "cut", time_limit=10, require_offload=True)
    assert res.status == "INFEASIBLE" and "together group 0" in res.reason
    ok = solve(problem, "cut", time_limit=10)
    assert ok.status == "OPTIMAL" and ok.fallback_nodes == 2


@fast(25)
@given(problem=problems(2, 7, 1, sizes=True))
def test_require_offload_matches_exhaustive(problem):
    """INFEASIBLE exactly when no valid partition offloads every supported node."""
    ex = exhaustive_optimum(problem, "cut")
    unsupported = int((~problem.any_supported).sum())
    res = solve(problem, "cut", time_limit=10, workers=1, require_offload=True)
    if ex.fallback_nodes > unsupported:
        assert res.status == "INFEASIBLE" and res.reason
    else:
        assert res.status == "OPTIMAL" and res.objective == ex.value


# ----------------------------------------------------------------------------- time limits
def test_no_solution_in_time_returns_the_warm_start(monkeypatch):
    problem = make_problem(model_graph("resnet18"), SELECTORS["two"])
    from ortools.sat.python import cp_model

    monkeypatch.setattr(cp_model.CpSolver, "Solve", lambda self, m, *a, **k: cp_model.UNKNOWN)
    monkeypatch.setattr(cp_model.CpSolver, "BestObjectiveBound", lambda self: 0.0)
    monkeypatch.setattr(cp_model.CpSolver, "WallTime", lambda self: 0.0)
    res = solve(problem, "cut", time_limit=5)
    check_fallback_result(res)


def test_no_time_left_keeps_the_hints():
    problem = make_problem(model_graph("squeezenet1_1"), SELECTORS["two"])
    check_fallback_result(solve(problem, "cut", time_limit=1e-3))


def check_fallback_result(res):
    """Without solver answers the result is a checked hint or the warm start: valid, never
    worse than the warm start, and OPTIMAL only when the trivial bounds already meet it."""
    res.partition.validate()
    warm = res.info["warm_start"]
    assert (res.fallback_nodes, res.objective) <= (warm["fallback_nodes"], warm["objective"])
    assert res.status in ("OPTIMAL", "FEASIBLE", "UNKNOWN")
    if res.status == "OPTIMAL":
        assert res.bound == res.objective
    elif res.bound is not None:
        assert res.bound < res.objective


def test_deterministic_time_limit_gives_the_same_partition():
    """A search cut short by its work limit ends the same way every time: ``work_limit``
    counts CP-SAT's deterministic units (the wall-clock ``time_limit``, 60 s, never decides
    here)."""
    import networkx as nx

    from clusterkit.testing.synthetic import random_dag, to_node_link

    dag = random_dag(150, seed=1)
    graph = from_networkx(nx.node_link_graph(to_node_link(dag), edges="edges"))
    problem = Constraints(max_size=8).compile(graph, [
        OpsProperty(["Conv", "Relu", "Add", "MatMul"], device="npu"),
        OpsProperty(["Conv", "Mul", "Add"], device="gpu")])
    runs = [solve(problem, "cut", work_limit=0.2, workers=1) for _ in range(3)]
    for res in runs:
        assert res.status == "FEASIBLE" and res.info["limit"] == "deterministic_time", res.info
        res.partition.validate()
    clusters = [sorted((c.device, c.nodes) for c in res.partition.clusters) for res in runs]
    assert clusters[0] == clusters[1] == clusters[2]


def test_the_typed_report_matches_the_partition_and_its_json_keys():
    part = run_strategy(_chain_problem(), "cpsat", time_limit=10)
    rep = part.solve_report
    m = part.metrics()
    assert rep.status == "OPTIMAL" and rep.proven and rep.limit is None
    assert (rep.fallback_nodes, rep.objective, rep.bound) == (m["fallback_nodes"],
                                                              m["cut_bytes"], m["cut_bytes"])
    data = part.to_json()
    assert (data["status"], data["objective"], data["bound"], data["fallback_nodes"],
            data["limit"], data["objective_name"]) == (rep.status, rep.objective, rep.bound,
                                                       rep.fallback_nodes, None, "cut")


# ----------------------------------------------------------------------------- options
def test_parse_objective():
    assert parse_objective("cut")[:2] == (1.0, 0.0)
    assert parse_objective("partitions")[:2] == (0.0, 1.0)
    assert parse_objective("cut=1,partitions=1000")[:2] == (1.0, 1000.0)
    assert parse_objective("2*cut+3*partitions")[:2] == (2.0, 3.0)
    assert parse_objective({"cut": 0.5})[:2] == (0.5, 0.0)
    for bad in ("bytes", "cut=x", "cut=-1", ""):
        with pytest.raises(StrategyError):
            parse_objective(bad)
    with pytest.raises(StrategyError, match="time_limit"):
        solve(_chain_problem(), time_limit=0)
    with pytest.raises(StrategyError, match="no option 'colour'"):
        run_strategy(_chain_problem(), "cpsat", colour=1)


def test_bad_options_are_errors_naming_the_option():
    problem = _chain_problem()
    bad = [("cpsat", {"workers": -1}, "workers"), ("cpsat", {"seed": "x"}, "seed"),
           ("cpsat", {"reduce": ["fix", "nope"]}, "reduce"), ("cpsat", {"warm_start": 3},
                                                             "warm_start"),
           ("placement", {"cluster_share": 1.5}, "cluster_share"),
           ("placement", {"time_limit": -1}, "time_limit")]
    for strategy, opts, name in bad:
        with pytest.raises(StrategyError, match=f"option {name}"):
            run_strategy(problem, strategy, **opts)
    from clusterkit.engines.cpsat.strategy import run

    with pytest.raises(TypeError):
        run(problem, "cut")  # options are keyword-only


def test_fractional_weights_are_exact():
    problem = make_problem(model_graph("resnet18"), SELECTORS["cnn"])
    res = solve(problem, {"cut": 0.5, "partitions": 1000.25}, time_limit=30)
    m = res.partition.metrics()
    assert res.status == "OPTIMAL"
    assert res.objective == pytest.approx(0.5 * m["cut_bytes"] + 1000.25 * m["partitions"])
    assert res.bound == pytest.approx(res.objective)


def test_cli_objective_weights(tmp_path):
    from clusterkit.cli import main

    out = tmp_path / "p.json"
    path = next(p for p in ALL_MODELS if p.stem == "resnet18")
    rc = main(["partition", str(path), "--strategy", "cpsat", "--selector", SELECTORS["wide"][0],
               "--objective", "cut=1,partitions=1000", "--time-limit", "20", "--workers", "2",
               "--seed", "3", "--json", str(out)])
    assert rc == 0
    data = json.loads(out.read_text())
    assert data["status"] == "OPTIMAL" and data["weights"] == {"cut": 1.0, "partitions": 1000.0}
    assert data["objective"] == data["metrics"]["cut_bytes"] + 1000 * data["metrics"]["partitions"]
    assert data["seed"] == 3 and set(data["reductions"]) >= {"super_nodes", "parts"}


# ----------------------------------------------------------------------------- gap
def test_gap_of_heuristics():
    problem = make_problem(model_graph("resnet18"), SELECTORS["two"])
    best = optimum(problem, "cut", time_limit=30)
    assert best.status == "OPTIMAL"
    rows = {name: optimality_gap(run_strategy(problem, name), "cut", optimum=best)
            for name in HEURISTICS}
    for name, row in rows.items():
        assert row["proven"] and row["offload_gap"] == 0
        assert row["excess"] >= 0 and row["gap"] == row["excess"]
        assert row["value"] == row["optimum"] + row["excess"]
        assert name in format_gap(row)
    assert rows["singleton"]["excess"] > 0
    own = optimality_gap(best.partition, "cut", optimum=best)
    assert own["excess"] == 0 and own["gap"] == 0 and own["gap_ratio"] == 0
    # solved on demand, warm-started from the partition itself
    alone = optimality_gap(run_strategy(problem, "singleton"), "cut", time_limit=30)
    assert alone["optimum"] == best.objective and alone["status"] == "OPTIMAL"


def test_gap_when_more_nodes_stay_on_the_host():
    problem = _chain_problem()
    from clusterkit.result.model import Partition

    host_only = Partition.from_assignment(problem, np.arange(3), np.full(3, -1))
    row = optimality_gap(host_only, "cut", time_limit=10)
    assert row["offload_gap"] == 2 and row["excess"] is None
    assert "more fallback nodes" in format_gap(row)


@pytest.mark.parametrize("objective", ["cut", "partitions"])
@fast(25)
@given(problem=problems(2, 7, 2), caps=st.tuples(st.integers(1, 3), st.integers(1, 3)),
       least=st.integers(1, 2), reduce=st.booleans())
def test_equals_exhaustive_with_each_device_its_own_limits(objective, problem, caps, least,
                                                           reduce):
    """Each device its own ``max_nodes`` (and the second a ``min_nodes``): the exhaustive
    search checks every block against its device's limits, and cpsat reaches its optimum."""
    props = problem.properties
    for prop, cap in zip(props, caps):
        prop.max_nodes = cap
    props[-1].min_nodes = min(least, props[-1].max_nodes)
    res = check_exact(problem.constraints.compile(problem.graph, props), objective,
                      reduce=reduce)
    for c in res.partition.offloaded_clusters():  # read from the clusters themselves
        d = [p.device for p in props].index(c.device)
        assert (props[d].min_nodes or 1) <= len(c.nodes) <= caps[d], (c.device, c.nodes)
