"""Coalescing: stays valid, never raises cut_bytes or partitions, and leaves no pair of clusters
of one device that could still be merged (checked with Partition.validate as the oracle)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterkit import Partition, make_problem, run_strategy
from clusterkit.engines.coalesce import coalesce
from support.models import BUNDLED_MODELS
from support.problems import problems


def _merged(part: Partition, i: int, j: int) -> Partition:
    groups = [(c.device, c.nodes) for k, c in enumerate(part.clusters) if k not in (i, j)]
    groups.append((part.clusters[i].device, part.clusters[i].nodes + part.clusters[j].nodes))
    return Partition.from_clusters(part.problem, groups)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_nodes=9, max_devices=2, sizes=True),
       st.sampled_from(["singleton", "longest-path", "cycles"]))
def test_coalesce_is_valid_no_worse_and_maximal(problem, strategy):
    base = run_strategy(problem, strategy)
    out = coalesce(base)
    out.validate()
    before, after = base.metrics(), out.metrics()
    assert after["cut_bytes"] <= before["cut_bytes"]
    assert after["partitions"] <= before["partitions"]
    assert after["nodes_offloaded"] == before["nodes_offloaded"]
    again = coalesce(run_strategy(problem, strategy))
    assert [(c.device, c.nodes) for c in again.clusters] == \
        [(c.device, c.nodes) for c in out.clusters]
    acc = [k for k, c in enumerate(out.clusters) if c.device != problem.fallback]
    for x in acc:
        for y in acc:
            if x < y and out.clusters[x].device == out.clusters[y].device:
                assert not _merged(out, x, y).is_valid(), (x, y)


def test_coalesce_on_real_models_lowers_partitions_at_equal_or_lower_cut():
    for model, selector in [("bert_base", "npu=ops:MatMul,Add,Mul,Softmax"),
                            ("convnext_tiny", "ops:Conv,Add,Mul")]:
        problem = make_problem(BUNDLED_MODELS / f"{model}.onnx", [selector])
        base = run_strategy(problem, "singleton")
        out = run_strategy(problem, "singleton", coalesce_after=True)
        assert out.metrics()["partitions"] < base.metrics()["partitions"]
        assert out.metrics()["cut_bytes"] <= base.metrics()["cut_bytes"]
