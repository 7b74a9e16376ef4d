"""Coalescing: stays valid, never raises cut_bytes or partitions, and leaves no pair of clusters
of one device that could still be merged (checked with Partition.validate as the oracle)."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from clusterkit import Partition, make_problem, run_strategy
from clusterkit.graph.graphcycles import GraphCycles
from clusterkit.passes.coalesce import _Reach, coalesce
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


@pytest.mark.parametrize("dense", [False, True])  # one bool per pair, or one bit
@settings(max_examples=80, deadline=None, database=None)
@given(st.integers(2, 9).flatmap(lambda n: st.tuples(
    st.just(n), st.sets(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=3 * n),
    st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=12))))
@example((6, {(1, 2), (4, 5)}, [(2, 4)]))  # 1 -> 2, 4 -> 5: merging 2 and 4 joins 1 to 5
def test_reach_bits_follow_merges_like_networkx(dense, case):
    n, pairs, merges = case
    edges = sorted((a, b) for a, b in pairs if a < b)
    gc = GraphCycles.from_edges(n, np.array([a for a, _ in edges], dtype=np.int64),
                                np.array([b for _, b in edges], dtype=np.int64))
    acc = [v for v in range(n) if v % 3]  # every third node plays a fallback cluster
    reach = _Reach(gc, acc, dense=dense)
    ref = nx.DiGraph(edges)
    ref.add_nodes_from(range(n))
    alive = set(acc)
    for x, y in merges:
        if x not in alive or y not in alive or x == y:
            continue
        related = nx.has_path(ref, x, y) or nx.has_path(ref, y, x)
        assert reach.related(x, y) == related
        if related:
            continue
        s = gc.merge(x, y)
        assert s is not None
        reach.merged(s, x, y)
        gone = y if s == x else x
        ref = nx.contracted_nodes(ref, s, gone, self_loops=False)
        alive.discard(gone)
    for x in alive:
        for y in alive:
            if x != y:
                assert reach.related(x, y) == (nx.has_path(ref, x, y) or nx.has_path(ref, y, x))



def _const_bytes(graph, nodes) -> int:
    consts = {t for v in nodes for t in graph.nodes[v].all_inputs()
              if graph.tensors[t].is_constant}
    return sum(graph.tensors[t].nbytes or 0 for t in consts)


def test_coalesce_keeps_the_const_bytes_limit():
    """Node lists are kept only under ``max_const_bytes``: merged clusters stay within it."""
    from clusterkit.constraints.core import Constraints
    limit = 2_000_000
    problem = make_problem(BUNDLED_MODELS / "resnet18.onnx", ["ops:Conv,Relu,Add,MaxPool"],
                           constraints=Constraints(max_const_bytes=limit))
    part = run_strategy(problem, "singleton")
    out = coalesce(part)
    out.validate()
    assert len(out.offloaded_clusters()) < len(part.offloaded_clusters())
    for c in out.offloaded_clusters():
        assert _const_bytes(problem.graph, c.nodes) <= limit or len(c.nodes) == 1
    free = coalesce(run_strategy(make_problem(BUNDLED_MODELS / "resnet18.onnx",
                                              ["ops:Conv,Relu,Add,MaxPool"]), "singleton"))
    assert max(_const_bytes(problem.graph, c.nodes) for c in free.offloaded_clusters()) > limit
