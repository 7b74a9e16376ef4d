"""Strategy ``auto``: never worse than any member, deterministic, and it says who won.

The figures each member reaches are measured here by running that member through the front door
on its own (and coalescing it, as ``auto`` does), not read from ``auto``'s own record.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

import clusterkit as ck
from clusterkit.engines.auto import MEMBERS, POLISH_LIMIT
from clusterkit.engines.cycles import run_both
from clusterkit.engines.level_bound import figures_lower_bound
from clusterkit.testing.shapes import QUALITY_OP_SETS, SELECTOR_SETS
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
    part = ck.run_strategy(problem, "auto", devices="priority", polish=0)
    got = key(part)
    members = member_keys(problem, MEMBERS)
    assert got == min(members.values())
    assert part.info["auto"]["winner"] in MEMBERS
    again = ck.run_strategy(problem, "auto", devices="priority", polish=0)
    assert again.to_json()["clusters"] == part.to_json()["clusters"]
    # the default also tries the cut-lowering device choice and the CP-SAT polish: never worse
    default = ck.run_strategy(problem, "auto")
    assert key(default) <= got
    assert ck.run_strategy(problem, "auto").to_json()["clusters"] == default.to_json()["clusters"]


@pytest.mark.parametrize("model, selectors", [
    (LIGHT_DIR / "light_inception_v2.onnx", SELECTOR_SETS["cnn"]),
    (BUNDLED_MODELS / "bert_base.onnx", SELECTOR_SETS["wide"]),
    (BUNDLED_MODELS / "resnet18.onnx", SELECTOR_SETS["two"]),
], ids=lambda x: getattr(x, "stem", None) or "sel")
def test_auto_on_real_models_is_the_best_member_and_records_them(model, selectors):
    problem = ck.make_problem(model, selectors)
    part = ck.run_strategy(problem, "auto", devices="priority", polish=0)
    members = member_keys(problem, MEMBERS)
    assert key(part) == min(members.values())
    record = part.info["auto"]
    names = [m["name"] for m in record["members"]]
    assert names == list(MEMBERS)[:len(names)]
    if len(names) < len(MEMBERS):  # it stops only at the lower bound, which no member beats
        assert key(part) == tuple(record["lower_bound"])
    for m in record["members"]:
        assert (m["fallback_nodes"], m["cut_bytes"], m["partitions"]) == members[m["name"]]
    assert members[record["winner"]] == key(part)
    assert part.strategy == "auto" and part.to_json()["auto"]["winner"] == record["winner"]


def test_growth_members_only_on_small_graphs_and_unknown_members_refused():
    problem = ck.make_problem(BUNDLED_MODELS / "resnet18.onnx", "ops:Conv,Relu,Add")
    names = [m["name"] for m in ck.run_strategy(problem, "auto", growth_limit=10)
             .info["auto"]["members"]]
    assert "mxnet" not in names and "hetero" not in names and "cycles" in names
    assert ck.run_strategy(problem, "auto", growth_limit=10).info["auto"][
        "skipped_for_size"] == ["mxnet", "hetero"]  # what the size left out, said
    only = ck.run_strategy(problem, "auto", members=["longest-path"])
    assert only.info["auto"]["winner"] == "longest-path"
    with pytest.raises(ck.StrategyError, match="nosuch"):
        ck.run_strategy(problem, "auto", members=["nosuch"])


def test_scale_limit_leaves_out_the_scale_members_and_says_so():
    from clusterkit.engines.auto import SCALE_SKIPPED
    from clusterkit.graph.fast import graph_from_dag
    from clusterkit.testing.synthetic import LONG_EDGE_SUPPORTED, long_edge_dag

    graph = graph_from_dag(long_edge_dag(3000, seed=1))  # no member reaches the bound
    problem = ck.make_problem(graph, "ops:" + ",".join(LONG_EDGE_SUPPORTED))
    full = ck.run_strategy(problem, "auto", polish=0, growth_limit=10)
    # under the default scale limit: only the growth members, left out by growth_limit
    assert full.info["auto"]["skipped_for_size"] == ["mxnet", "hetero"]
    small = ck.run_strategy(problem, "auto", polish=0, scale_limit=10, growth_limit=10)
    record = small.info["auto"]
    assert set(SCALE_SKIPPED) == {"cycles+merge_non_adjacent", "cycles", "longest-path"}
    assert record["skipped_for_size"] == ["cycles", "cycles+merge_non_adjacent",
                                          "longest-path", "mxnet", "hetero"]
    assert [m["name"] for m in record["members"]] == ["cycles+levels"]
    assert key(small) == member_keys(problem, ["cycles+levels"])["cycles+levels"]
    named = ck.run_strategy(problem, "auto", polish=0, scale_limit=10,
                            members=["cycles+merge_non_adjacent"], growth_limit=10)
    assert "skipped_for_size" not in named.info["auto"]
    assert named.info["auto"]["winner"] == "cycles+merge_non_adjacent"


@pytest.mark.parametrize("levels_at_once", [False, True])
def test_named_members_above_the_scale_limit_share_one_graph(levels_at_once, monkeypatch):
    """``cycles`` and ``cycles+levels`` named above the scale limit: one graph (the levels
    contraction at once, as on large graphs, or when its turn comes), each as run alone."""
    import clusterkit.engines.auto as auto_module
    from clusterkit.graph.fast import graph_from_dag
    from clusterkit.testing.synthetic import LONG_EDGE_SUPPORTED, long_edge_dag

    graph = graph_from_dag(long_edge_dag(3000, seed=1))
    problem = ck.make_problem(graph, "ops:" + ",".join(LONG_EDGE_SUPPORTED))
    if levels_at_once:
        monkeypatch.setattr(auto_module, "SCALE_LIMIT", 10)
    names = ["cycles", "cycles+levels", "longest-path"]
    part = ck.run_strategy(problem, "auto", polish=0, scale_limit=10, members=names)
    record = part.info["auto"]
    assert [m["name"] for m in record["members"]] == names
    ran = member_keys(problem, names)
    assert key(part) == min(ran.values())  # the best of the members that ran
    for m in record["members"]:  # cycles and cycles+levels from one graph, as run alone
        assert (m["fallback_nodes"], m["cut_bytes"], m["partitions"]) == ran[m["name"]]


def test_auto_is_the_default_strategy(tmp_path):
    from clusterkit.cli import main
    out = tmp_path / "p.json"
    assert main(["partition", str(BUNDLED_MODELS / "squeezenet1_1.onnx"), "--selector",
                 "ops:Conv,Relu", "--json", str(out)]) == 0
    import json
    assert json.loads(out.read_text())["strategy"] == "auto"
    assert ck.partition(BUNDLED_MODELS / "squeezenet1_1.onnx", "ops:Conv,Relu").strategy == "auto"


def set_partitions(items: list[int]):
    """Every way to split ``items`` into blocks (as a label per item)."""
    if not items:
        yield {}
        return
    first, rest = items[0], items[1:]
    for labels in set_partitions(rest):
        used = sorted(set(labels.values()))
        for lab in used + [max(used, default=-1) + 1]:
            yield {**labels, first: lab}


@settings(max_examples=60, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(problem=problems(max_nodes=6, max_devices=1))
def test_lower_bound_holds_for_every_valid_partition_by_brute_force(problem):
    """Every valid partition with the fewest fallback nodes reaches at least the bound's cut
    and partitions; none has fewer fallback nodes."""
    bound = figures_lower_bound(problem)
    n = problem.graph.n
    on = [v for v in range(n) if problem.supported[0][v]]
    assert bound[0] == n - len(on)
    for labels in set_partitions(on):
        lab = [labels.get(v, -1) for v in range(n)]
        part = ck.Partition.from_assignment(problem, lab, [0 if v in labels else -1
                                                           for v in range(n)])
        if part.is_valid():
            got = key(part)
            assert got[0] == bound[0] and got[1] >= bound[1] and got[2] >= bound[2]


def test_auto_stops_at_the_lower_bound_and_shares_one_contraction():
    problem = ck.make_problem(BUNDLED_MODELS / "resnet18.onnx", ["ops:Conv,Relu,Add,MaxPool"])
    part = ck.run_strategy(problem, "auto", devices="priority")
    record = part.info["auto"]
    names = [m["name"] for m in record["members"]]
    assert names == list(MEMBERS)[:len(names)]
    bound = tuple(figures_lower_bound(problem))
    assert record["at_lower_bound"] == (key(part) == bound)
    if len(names) < len(MEMBERS):  # stopped early: only because nothing can beat the bound
        assert key(part) == bound
    assert min(member_keys(problem, MEMBERS).values()) == key(part)
    two = ck.make_problem(BUNDLED_MODELS / "resnet18.onnx", ["npu=ops:Conv", "gpu=ops:Relu,Add"])
    assert figures_lower_bound(two) is None  # one device only
    plain, merged = run_both(problem)
    for got, options in ((plain, {}), (merged, {"merge_non_adjacent": True})):
        alone = ck.run_strategy(problem, "cycles", **options)
        assert got.to_json()["clusters"] == alone.to_json()["clusters"]


@settings(max_examples=60, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(problem=problems())
def test_prefer_partitions_ranks_partitions_before_cut(problem):
    part = ck.run_strategy(problem, "auto", devices="priority", prefer="partitions")
    members = member_keys(problem, MEMBERS)
    got = key(part)
    assert (got[0], got[2], got[1]) == min((f, p, c) for f, c, p in members.values())


def test_prefer_is_checked_and_the_torch_drop_in_prefers_partitions():
    problem = ck.make_problem(BUNDLED_MODELS / "resnet18.onnx", ["ops:Conv,Relu"])
    with pytest.raises(ck.errors.StrategyError, match="prefer"):
        ck.run_strategy(problem, "auto", prefer="speed")
    pytest.importorskip("torch")
    from clusterkit.testing.synthetic import LONG_EDGE_SUPPORTED, long_edge_dag
    from clusterkit.torch import CapabilityBasedPartitioner
    from clusterkit.torch.synthetic import graph_module_from_dag, synthetic_support

    gm = graph_module_from_dag(long_edge_dag(150, 0))
    drop_in = CapabilityBasedPartitioner(gm, synthetic_support(LONG_EDGE_SUPPORTED))
    drop_in.propose_partitions()
    inner = drop_in.last_partition
    again = ck.run_strategy(inner.problem, "auto", prefer="partitions")
    assert again.to_json()["clusters"] == inner.to_json()["clusters"]


def test_polish_runs_cpsat_up_to_its_node_limit_and_is_never_worse():
    """t5_small with the transformer op set is above the default ``polish_limit``: no CP-SAT
    member; with a higher limit the CP-SAT polish runs after the refinement and keeps the
    better of the two (the CP-SAT optimum bounds both from below)."""
    problem = ck.make_problem(BUNDLED_MODELS / "t5_small.onnx", QUALITY_OP_SETS["transformer"])
    optimum = ck.run_strategy(problem, "cpsat", objective="cut", time_limit=30)
    assert optimum.solve_report.status == "OPTIMAL"
    default = ck.run_strategy(problem, "auto")
    assert problem.n > POLISH_LIMIT
    assert "cpsat-polish" not in [m["name"] for m in default.info["auto"]["members"]]
    part = ck.run_strategy(problem, "auto", polish_limit=problem.n)
    record = {m["name"]: m for m in part.info["auto"]["members"]}
    assert "cpsat-polish" in record and "refine" in record
    assert key(part) <= key(default)
    assert key(part)[1] >= int(optimum.metrics()["cut_bytes"])
    assert key(part)[1] == min(record["refine"]["cut_bytes"], record["cpsat-polish"]["cut_bytes"])


def test_polish_option_is_checked():
    problem = ck.make_problem(BUNDLED_MODELS / "resnet18.onnx", SELECTOR_SETS["two"])
    with pytest.raises(ck.StrategyError, match="polish"):
        ck.run_strategy(problem, "auto", polish=-1)


class _NoSmall(ck.OpsProperty):
    """Takes Conv and Relu but rejects a subgraph of at most two nodes; keeps a count of the
    questions it was asked, per node set (state that a cache must not change the answer of)."""

    def __init__(self):
        super().__init__(["Conv", "Relu"])
        self.asked: dict[tuple[int, ...], int] = {}

    def rejects(self, subgraph) -> bool:
        return len(subgraph) <= 2

    def create_subgraph_node(self, subgraph):
        key = tuple(subgraph.nodes)
        self.asked[key] = self.asked.get(key, 0) + 1
        return None if self.rejects(subgraph) else super().create_subgraph_node(subgraph)


def test_rejecting_property_asked_once_per_cluster_and_same_figures():
    """``auto`` asks a rejecting property once per distinct cluster, and each member's figures
    equal those of the member run alone through the front door with a fresh property."""
    model = BUNDLED_MODELS / "resnet18.onnx"
    prop = _NoSmall()
    problem = ck.make_problem(model, [prop])
    names = ["cycles", "cycles+merge_non_adjacent", "cycles+levels", "longest-path"]
    part = ck.run_strategy(problem, "auto", members=names, polish=0)
    rejected = [k for k in prop.asked if len(k) <= 2]
    assert rejected, "the model has no cluster the property rejects: the test checks nothing"
    # once per member run, plus the front door's check of the result
    assert max(prop.asked.values()) <= 2
    for c in part.clusters:
        if c.device != part.fallback:
            assert len(c.nodes) > 2
    fresh = ck.make_problem(model, [_NoSmall()])
    alone = member_keys(fresh, names)
    got = {m["name"]: (m["fallback_nodes"], m["cut_bytes"], m["partitions"])
           for m in part.info["auto"]["members"]}
    assert got == alone
