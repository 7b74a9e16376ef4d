"""Strategy ``auto``: never worse than any member, deterministic, and it says who won.

The figures each member reaches are measured here by running that member through the front door
on its own (and coalescing it, as ``auto`` does), not read from ``auto``'s own record.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

import clusterkit as ck
from clusterkit.engines.auto import MEMBERS
from clusterkit.testing.shapes import SELECTOR_SETS
from support.models import BUNDLED_MODELS, LIGHT_DIR
from support.problems import problems

FAST = settings(max_examples=150, deadline=None, database=None,
                suppress_health_check=list(HealthCheck))


def key(part: ck.Partition) -> tuple[int, int, int]:
    """(fallback nodes, cut_bytes, partitions), counted from the clusters themselves."""
    m = part.metrics()
    fallback = sum(len(c.nodes) for c in part.clusters if c.device == part.fallback)
    return fallback, int(m["cut_bytes"]), sum(c.device != part.fallback for c in part.clusters)


def member_keys(problem: ck.Problem, names) -> dict[str, tuple[int, int, int]]:
    out = {}
    for name in names:
        strategy, options = MEMBERS[name]
        out[name] = key(ck.run_strategy(problem, strategy, coalesce_after=True, **options))
    return out


@FAST
@given(problem=problems())
def test_auto_is_never_worse_than_a_member_on_random_problems(problem):
    part = ck.run_strategy(problem, "auto", devices="priority")
    got = key(part)
    members = member_keys(problem, MEMBERS)
    assert got == min(members.values())
    assert part.info["auto"]["winner"] in MEMBERS
    again = ck.run_strategy(problem, "auto", devices="priority")
    assert again.to_json()["clusters"] == part.to_json()["clusters"]
    # the default also tries the cut-lowering device choice: never worse than priority alone
    assert key(ck.run_strategy(problem, "auto")) <= got


@pytest.mark.parametrize("model, selectors", [
    (LIGHT_DIR / "light_inception_v2.onnx", SELECTOR_SETS["cnn"]),
    (BUNDLED_MODELS / "bert_base.onnx", SELECTOR_SETS["wide"]),
    (BUNDLED_MODELS / "resnet18.onnx", SELECTOR_SETS["two"]),
], ids=lambda x: getattr(x, "stem", None) or "sel")
def test_auto_on_real_models_is_the_best_member_and_records_them(model, selectors):
    problem = ck.make_problem(model, selectors)
    part = ck.run_strategy(problem, "auto", devices="priority")
    members = member_keys(problem, MEMBERS)
    assert key(part) == min(members.values())
    record = part.info["auto"]
    assert [m["name"] for m in record["members"]] == list(MEMBERS)
    for m in record["members"]:
        assert (m["fallback_nodes"], m["cut_bytes"], m["partitions"]) == members[m["name"]]
    assert members[record["winner"]] == key(part)
    assert part.strategy == "auto" and part.to_json()["auto"]["winner"] == record["winner"]


def test_growth_members_only_on_small_graphs_and_unknown_members_refused():
    problem = ck.make_problem(BUNDLED_MODELS / "resnet18.onnx", "ops:Conv,Relu,Add")
    names = [m["name"] for m in ck.run_strategy(problem, "auto", growth_limit=10)
             .info["auto"]["members"]]
    assert "mxnet" not in names and "hetero" not in names and "cycles" in names
    only = ck.run_strategy(problem, "auto", members=["longest-path"])
    assert only.info["auto"]["winner"] == "longest-path"
    with pytest.raises(ck.StrategyError, match="nosuch"):
        ck.run_strategy(problem, "auto", members=["nosuch"])


def test_auto_is_the_default_strategy(tmp_path):
    from clusterkit.cli import main
    out = tmp_path / "p.json"
    assert main(["partition", str(BUNDLED_MODELS / "squeezenet1_1.onnx"), "--selector",
                 "ops:Conv,Relu", "--json", str(out)]) == 0
    import json
    assert json.loads(out.read_text())["strategy"] == "auto"
    assert ck.partition(BUNDLED_MODELS / "squeezenet1_1.onnx", "ops:Conv,Relu").strategy == "auto"
