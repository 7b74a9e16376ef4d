"""``auto`` with its default options is never worse than any of its members run on their own.

On real models above the growth members' old size limit (1,500 nodes), under the quality op
sets: every member of :data:`~clusterkit.engines.auto.MEMBERS` runs separately through the front
door, raw and coalesced, and its figures are counted here from its clusters, not read from
``auto``'s record.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

import clusterkit as ck
from clusterkit.engines.auto import GROWTH, MEMBERS
from clusterkit.testing.shapes import QUALITY_OP_SETS
from support.models import BUNDLED_MODELS, LIGHT_DIR
from support.problems import problems

MODELS = [BUNDLED_MODELS / "fasterrcnn_mobilenet_v3_large_320_fpn.onnx",
          LIGHT_DIR / "light_densenet121.onnx"]


def key(part: ck.Partition) -> tuple[int, int, int]:
    """(fallback nodes, cut_bytes, partitions), counted from the clusters themselves."""
    fallback = sum(len(c.nodes) for c in part.clusters if c.device == part.fallback)
    accelerated = sum(c.device != part.fallback for c in part.clusters)
    return fallback, int(part.metrics()["cut_bytes"]), accelerated


@pytest.fixture(scope="module", params=MODELS, ids=lambda p: p.stem)
def graph(request):
    return ck.load_graph(str(request.param))


@pytest.mark.parametrize("op_set", sorted(QUALITY_OP_SETS))
def test_auto_is_never_worse_than_a_member_run_alone(graph, op_set):
    problem = ck.make_problem(graph, QUALITY_OP_SETS[op_set])
    assert problem.n > 1500
    got = key(ck.run_strategy(problem, "auto"))
    for name, (strategy, options) in MEMBERS.items():
        for coalesce_after in (False, True):
            alone = ck.run_strategy(problem, strategy, coalesce_after=coalesce_after, **options)
            assert got <= key(alone), (name, coalesce_after)


def test_growth_members_run_above_the_old_limit_and_auto_beats_them_alone():
    """fasterrcnn (1,592 nodes) with the shipped ``qnn`` selector: no member reaches the lower
    bound, so every member runs, the growth ones included; none run alone does better (by the
    ranking ``auto`` reports: partitions before cut for a restrictive device)."""
    problem = ck.make_problem(MODELS[0], ["qnn"])
    part = ck.run_strategy(problem, "auto", selector="qnn")
    record = part.info["auto"]
    assert set(GROWTH) <= {m["name"] for m in record["members"]}
    order = (lambda k: k) if record["ranking"] == "cut" else (lambda k: (k[0], k[2], k[1]))
    for strategy, options in MEMBERS.values():
        alone = ck.run_strategy(problem, strategy, selector="qnn", **options)
        assert order(key(part)) <= order(key(alone)), strategy
    capped = ck.run_strategy(problem, "auto", growth_limit=1500, polish=0)
    assert not set(GROWTH) & {m["name"] for m in capped.info["auto"]["members"]}


@settings(max_examples=60, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(problem=problems())
def test_the_partition_returned_is_the_winners(problem):
    """The figures counted from the returned clusters are those recorded for the winner
    (the refinement and the CP-SAT polish included)."""
    part = ck.run_strategy(problem, "auto")
    record = part.info["auto"]
    won = [m for m in record["members"] if m["name"] == record["winner"]][-1]
    assert key(part) == (won["fallback_nodes"], won["cut_bytes"], won["partitions"])


def test_the_polish_returns_its_own_partition_when_it_wins(monkeypatch):
    """t5_small with the transformer op set, the refinement made a no-op: the CP-SAT polish
    lowers the cut of the ``cycles`` member, and the partition returned is the polished one."""
    from clusterkit.passes.manager import POST_PASSES

    monkeypatch.setitem(POST_PASSES, "refine", lambda part: part)
    problem = ck.make_problem(BUNDLED_MODELS / "t5_small.onnx", QUALITY_OP_SETS["transformer"])
    part = ck.run_strategy(problem, "auto", members=["cycles"], polish_limit=problem.n)
    record = {m["name"]: m for m in part.info["auto"]["members"]}
    assert part.info["auto"]["winner"] == "cpsat-polish"
    # the polish is a pipeline of its own (CP-SAT, then the devices' rejection), and the
    # front door's rejection follows; the member's passes stay with the member it replaced
    assert [s["name"] for s in part.info["pipeline"]] == ["reject_subgraphs"] * 2
    polished = record["cpsat-polish"]
    assert polished["cut_bytes"] < record["cycles"]["cut_bytes"]
    assert key(part) == (polished["fallback_nodes"], polished["cut_bytes"],
                         polished["partitions"])
