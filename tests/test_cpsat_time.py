"""cpsat keeps its time and says its status (issue #32, items 1 and 2).

``time_limit`` is wall-clock seconds for the whole run (warm start, reductions, search, the
acceptance split after it) within ``OVERHEAD`` more; ``work_limit`` is the reproducible budget in
CP-SAT's deterministic units. The wall-time asserts are generous (three times the limit plus the
stated overhead) so that a loaded two-core machine does not fail them; the exact figures are in
``benchmarks/bench_cpsat_wall.py``'s table. Before this change the hard problem below with
``time_limit=2`` returned after 50 s (the wall guard at 10 x limit + 30 s).
"""

from __future__ import annotations

import random
import re
import time

import networkx as nx
import pytest

import clusterkit as ck
from clusterkit import Constraints, OpsProperty, from_networkx
from clusterkit.analysis.compare import compare, format_table
from clusterkit.cli import main
from clusterkit.engines.cpsat.strategy import OVERHEAD, TIME_LIMIT
from clusterkit.engines.cpsat.strategy import optimize as solve
from clusterkit.testing.synthetic import random_dag, to_node_link
from support.examples import TinyNpuSelector
from support.models import BUNDLED_MODELS, LIGHT_DIR

RESNET18 = BUNDLED_MODELS / "resnet18.onnx"
INCEPTION = LIGHT_DIR / "light_inception_v1.onnx"
CNN_OPS = ["Conv", "Relu", "Add", "MaxPool", "AveragePool", "Concat", "LRN",
           "GlobalAveragePool", "Flatten", "Gemm", "Dropout", "Softmax"]


def hard_problem(properties=None) -> ck.Problem:
    """The issue's case: a random 118-node DAG, two devices, clusters of 2 to 3 nodes, six
    never-together pairs; CP-SAT proves nothing on it in a minute."""
    graph = from_networkx(nx.node_link_graph(to_node_link(random_dag(118, seed=7)),
                                             edges="edges"))
    rng = random.Random(3)
    pairs = [tuple(rng.sample(range(118), 2)) for _ in range(6)]
    return Constraints(min_size=2, max_size=3, never_together=pairs).compile(
        graph, properties or [OpsProperty(["Conv", "Relu", "Add", "MatMul"], device="npu"),
                              OpsProperty(["Conv", "Mul", "Add"], device="gpu")])


class RejectAbove(OpsProperty):
    """A compiler that refuses subgraphs of more than ``limit`` nodes."""

    def __init__(self, ops, limit: int, device: str = "npu"):
        super().__init__(ops, device=device)
        self.limit = limit

    def create_subgraph_node(self, subgraph):
        return None if len(subgraph.nodes) > self.limit else super().create_subgraph_node(
            subgraph)


class CountingProperty(ck.SubgraphProperty):
    """The example's stateful selector (a cluster grows to at most ``limit`` nodes)."""

    def __init__(self, limit, device="npu"):
        super().__init__(device)
        self.limit = limit

    def create_subgraph_selector(self):
        return TinyNpuSelector(self.limit)


def timed(fn, *args, **kw):
    start = time.perf_counter()
    out = fn(*args, **kw)
    return out, time.perf_counter() - start


def generous(limit: float) -> float:
    """What a wall-time assert allows on a loaded machine: three times limit plus overhead."""
    return 3 * (limit + OVERHEAD)


# ------------------------------------------------------------------------- the wall limit
@pytest.mark.parametrize("make", [
    lambda: None,
    lambda: [RejectAbove(["Conv", "Relu", "Add", "MatMul"], 2, "npu"),
             OpsProperty(["Conv", "Mul", "Add"], device="gpu")],
    lambda: [CountingProperty(2, "npu"),
             OpsProperty(["Conv", "Mul", "Add"], device="gpu")],
], ids=["plain", "rejecting", "stateful"])
def test_a_two_second_limit_returns_within_it_on_a_problem_it_cannot_prove(make):
    problem = hard_problem(make())
    res, wall = timed(solve, problem, "cut", time_limit=2, workers=1)
    assert wall < generous(2), (wall, res.info["phases"])
    assert res.status != "OPTIMAL" and res.info["limit"] == "wall_time"
    assert res.info["time_limit"] == 2 and res.info["wall_seconds"] <= wall
    res.partition.validate()


def test_the_limit_covers_the_warm_start_and_the_acceptance_split_on_googlenet():
    """GoogLeNet (216 nodes) with a compiler refusing more than 40 nodes: the whole front-door
    call, split included, keeps the limit, and every cluster is one the compiler takes."""
    problem = ck.make_problem(INCEPTION, [RejectAbove(CNN_OPS, 40)])
    part, wall = timed(ck.run_strategy, problem, "cpsat", time_limit=2)
    assert wall < generous(2), (wall, part.info["phases"])
    assert set(part.info["phases"]) == {"warm_start", "reductions", "search", "read",
                                        "acceptance"}
    assert all(len(c.nodes) <= 40 for c in part.offloaded_clusters())


def test_the_default_limit_is_60_wall_seconds_and_is_stated():
    assert TIME_LIMIT == 60.0
    part = ck.run_strategy(ck.make_problem(RESNET18, ["ops:Conv,Relu"]), "cpsat")
    assert part.info["time_limit"] == 60.0 and part.info["work_limit"] is None


def test_time_limit_default_in_help_and_docs(capsys):
    with pytest.raises(SystemExit):
        main(["partition", "-h"])
    out = " ".join(capsys.readouterr().out.split())
    assert re.search(r"--time-limit SECONDS cpsat: wall-clock seconds .*default 60", out), out
    assert "--work-limit UNITS" in out
    readme = " ".join((BUNDLED_MODELS.parents[2] / "docs" / "reliability.md").read_text().split())
    assert re.search(r"--time-limit SECONDS.{0,200}wall-clock.{0,200}\(default 60", readme)


# ------------------------------------------------------------------------- the work limit
def test_a_work_limit_stop_is_reproducible_and_named():
    problem = hard_problem()
    runs = [solve(problem, "cut", work_limit=0.2, workers=2, warm_start="cycles")
            for _ in range(2)]
    for res in runs:
        assert res.info["limit"] == "deterministic_time" and res.info["work_limit"] == 0.2
    a, b = ([sorted((c.device, c.nodes) for c in r.partition.clusters) for r in runs])
    assert a == b


def test_a_bad_work_limit_names_the_option():
    with pytest.raises(ck.StrategyError, match="work_limit"):
        solve(hard_problem(), "cut", work_limit=0)


# ------------------------------------------------------------------------- status and bound
def test_partition_prints_status_and_bound(tmp_path, capsys):
    assert main(["partition", str(RESNET18), "--strategy", "cpsat", "--selector",
                 "ops:Conv,Relu,Add,MaxPool", "--time-limit", "20"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^cpsat: OPTIMAL; .* s of a 20 s wall limit$", out, re.M), out


def test_a_feasible_status_gives_the_gap_to_its_bound():
    from clusterkit.engines.cpsat.read import status_line

    line = status_line({"status": "FEASIBLE", "objective": 200.0, "bound": 150.0,
                        "time_limit": 5.0, "wall_seconds": 5.2})
    assert line == "FEASIBLE (gap <= 25.0% to bound 150); 5.2 s of a 5 s wall limit"
    assert status_line({"status": "UNKNOWN"}) == "UNKNOWN"


def test_the_acceptance_split_says_the_optimum_was_for_the_relaxed_problem():
    """ResNet-18 under a compiler that takes at most 5 nodes: the model does not know that
    verdict, so its optimum is split after the solve; the result is acceptable, says the
    model's status was for the relaxed problem, and never claims OPTIMAL above its bound."""
    problem = ck.make_problem(RESNET18, [RejectAbove(["Conv", "Relu", "Add", "MaxPool"], 5)])
    res = solve(problem, "cut", time_limit=20)
    assert all(len(c.nodes) <= 5 for c in res.partition.offloaded_clusters())
    assert res.info["relaxed_status"] == "OPTIMAL" and "relaxed problem" in res.reason
    assert res.status == "FEASIBLE" or res.objective == res.bound
    if res.bound is not None:
        assert res.bound <= res.objective
    assert res.partition.metrics()["cut_bytes"] == res.objective


def test_compare_measures_gaps_against_the_bound_when_cpsat_is_not_proven():
    """ResNet-18 under a compiler that takes at most 5 nodes (the issue's case: cpsat's optimum
    split afterwards): the gap column is against the proven bound (never the unproven answer),
    cpsat starts from the best heuristic and is never worse than it, and the table says so."""
    problem = ck.make_problem(RESNET18, [RejectAbove(["Conv", "Relu", "Add", "MaxPool"], 5)])
    res = compare(problem.graph, list(problem.properties), ["cycles", "auto", "cpsat"],
                  problem.constraints)
    rows = {r.strategy: r for r in res.rows}
    cp = rows["cpsat"]
    bound = cp.info["bound"]
    assert cp.status == "FEASIBLE" and cp.info["relaxed_status"] == "OPTIMAL" and bound > 0
    for r in res.rows:
        assert r.gap_to == "bound"
        assert r.gap == pytest.approx((r.cut_bytes - bound) / bound)
    best = min(("cycles", "auto"), key=lambda s: res.partitions[s].figures())
    assert cp.info["warm_start"] == best
    assert res.partitions["cpsat"].figures()[:2] <= res.partitions[best].figures()[:2]
    text = format_table(res)
    assert "gap vs bound" in text and "gap vs cpsat" not in text
    assert re.search(rf"^cpsat: FEASIBLE \(gap <= [0-9.]+% to bound {bound:,.6g}\); OPTIMAL for "
                     rf"the relaxed problem.*; started from {best}; .* of a 10 s wall limit$",
                     text, re.M), text


def test_compare_gives_cpsat_ten_wall_seconds_by_default(capsys):
    assert main(["compare", str(RESNET18), "--selector", "ops:Conv,Relu",
                 "--strategies", "cycles,cpsat"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^cpsat: OPTIMAL.* of a 10 s wall limit$", out, re.M), out


def test_a_limit_the_warm_start_uses_up_skips_the_rest_and_says_so():
    """GoogLeNet with a 1 ms limit: one heuristic runs, the others and the search are skipped
    and say so; the answer is that heuristic's, acceptable, UNKNOWN."""
    from clusterkit.engines.cpsat.warmstart import OUT_OF_TIME

    problem = ck.make_problem(INCEPTION, [RejectAbove(CNN_OPS, 40)])
    res, wall = timed(solve, problem, "cut", time_limit=1e-3)
    assert wall < generous(1e-3)
    tried = res.info["warm_start"]["tried"]
    assert OUT_OF_TIME in tried.values() and len(tried) > 1
    assert res.info["search"].startswith("skipped") and res.status == "UNKNOWN"
    assert res.info["limit"] == "wall_time"
    assert all(len(c.nodes) <= 40 for c in res.partition.offloaded_clusters())
    res.partition.validate()
