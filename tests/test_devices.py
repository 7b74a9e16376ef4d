"""Device choice (``devices="cost"``): among the devices that take a node, the one that lowers
the cut.

Random problems are plain specs (``support.fuzz``); the checker and both cut counts below are
written here from the spec, not read from the library: the *device cut* of a placement (a
tensor's bytes once per distinct device consuming it other than its producer's, the host for
the fallback, graph outputs to the host, constants free) and the partition's cut bytes. The
device choice is compared with brute force over every placement on tiny graphs.
"""

from __future__ import annotations

import itertools
import random
import re

import networkx as nx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import clusterkit as ck
from clusterkit.engines import strategy_specs
from clusterkit.errors import StrategyError
from clusterkit.passes.devices import choose_devices, device_labels
from clusterkit.testing.shapes import SELECTOR_SETS
from support.fuzz import FALLBACK, HOST, Spec, build_problem, constants, random_spec, spec_cut
from support.models import BUNDLED_MODELS

#: the strategies ``devices="cost"`` applies to: those that do not place devices themselves
HEURISTICS = tuple(spec.name for spec in strategy_specs() if not spec.places_devices)


def fast(n: int) -> settings:
    return settings(max_examples=n, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))


def multi_device_spec(seed: int, max_nodes: int, devices: int) -> Spec:
    """A random spec (``support.fuzz``) with exactly ``devices`` devices."""
    rng = random.Random(f"devices-{seed}")
    while True:
        spec = random_spec(rng, 4, max_nodes, max_devices=devices)
        if len(spec.devices) == devices:
            return spec


# ---------------------------------------------------------------------- counted here
def placements(spec: Spec):
    """Every placement that puts each supported node on a device taking it, a together group
    on one device taking all its members (or all on the host when none does)."""
    group_of = {v: k for k, grp in enumerate(spec.together) for v in grp}
    units = sorted({group_of.get(v, v) for v in spec.order}, key=str)
    members = {u: [v for v in spec.order if group_of.get(v, v) == u] for u in units}
    options = []
    for u in units:
        ok = [d.name for d in spec.devices if all(spec.ops[v] in d.ops for v in members[u])]
        options.append(ok or [HOST])
    for choice in itertools.product(*options):
        yield {v: dev for u, dev in zip(units, choice) for v in members[u]}


def spec_placement(problem: ck.Problem, labels) -> dict[str, object]:
    names = [nd.name for nd in problem.graph.nodes]
    return {names[v]: HOST if d < 0 else problem.devices[d] for v, d in enumerate(labels)}


def partition_units(part: ck.Partition) -> dict[str, object]:
    names = [nd.name for nd in part.graph.nodes]
    return {names[v]: HOST if c.device == FALLBACK else k
            for k, c in enumerate(part.clusters) for v in c.nodes}


def check(spec: Spec, part: ck.Partition) -> None:
    """Every invariant of ``part`` against the spec."""
    names = [nd.name for nd in part.graph.nodes]
    where: dict[str, int] = {}
    for k, c in enumerate(part.clusters):
        for v in c.nodes:
            assert names[v] not in where, f"node {names[v]!r} in two clusters"
            where[names[v]] = k
    assert set(where) == set(spec.order)
    devices = {d.name: d for d in spec.devices}
    for c in part.clusters:
        members = [names[v] for v in c.nodes]
        if c.device != FALLBACK:
            assert all(spec.ops[v] in devices[c.device].ops for v in members), (c.device, members)
            assert spec.min_size <= len(members)
            assert spec.max_size is None or len(members) <= spec.max_size
    q = nx.DiGraph()
    q.add_nodes_from(range(len(part.clusters)))
    q.add_edges_from((where[u], where[v]) for u, v in spec.edges if where[u] != where[v])
    assert nx.is_directed_acyclic_graph(q)
    assert all(where[a] != where[b] for a, b in spec.never)
    assert all(where[u] != where[v] for u, v in spec.cut_edges)
    const = constants(spec)
    if spec.value_inputs:
        for v in spec.order:
            if spec.ops[v] == "Reshape" and len(spec.preds[v]) > 1:
                u = spec.preds[v][1]
                assert u in const or where[u] != where[v]
    assert all(len({where[v] for v in grp}) == 1 for grp in spec.together)
    for u, v in spec.edges:
        dev = part.clusters[where[u]].device
        if where[u] == where[v] and dev != FALLBACK:
            assert (u, v) not in devices[dev].refused


# ---------------------------------------------------------------------- the device choice
@fast(120)
@given(seed=st.integers(0, 10**6), devices=st.sampled_from([2, 2, 3]))
def test_the_narrowed_problem_keeps_one_supporting_device_per_node(seed, devices):
    spec = multi_device_spec(seed, 12, devices)
    problem = build_problem(spec)
    narrowed = choose_devices(problem, "cost")
    sup, nar = problem.supported, narrowed.supported
    assert not (nar & ~sup).any(), "a node is on a device that does not take it"
    assert (nar.sum(axis=0) <= 1).all()
    for grp in problem.groups:
        common = sup[:, grp].all(axis=1)
        rows = {tuple(nar[:, v]) for v in grp.tolist()}
        assert len(rows) == 1, "a together group is split over devices"
        assert nar[:, grp[0]].any() == common.any()
    alone = problem.group_of < 0
    assert (nar.any(axis=0)[alone] == sup.any(axis=0)[alone]).all(), "a node lost its support"
    for field in ("must_cut", "never_pairs", "edge_ok", "group_of"):
        assert (getattr(narrowed, field) == getattr(problem, field)).all()
    assert (choose_devices(build_problem(spec), "cost").supported == nar).all()


@fast(150)
@given(seed=st.integers(0, 10**6), devices=st.sampled_from([2, 2, 2, 3]))
def test_the_cost_choice_against_brute_force(seed, devices):
    """Two devices: the exact minimum of the device cut; three: between the minimum and the
    priority choice, and no placement one expansion move away (each node keeps its device or
    goes to one device ``a``) is better."""
    spec = multi_device_spec(seed, 8 if devices == 2 else 7, devices)
    problem = build_problem(spec)
    chosen = spec_placement(problem, device_labels(problem, "cost"))
    cost = spec_cut(spec, chosen)
    priority = spec_cut(spec, spec_placement(problem, device_labels(problem, "priority")))
    every = list(placements(spec))
    best = min(spec_cut(spec, p) for p in every)
    assert best <= cost <= priority
    if devices == 2:
        assert cost == best, f"not the minimum on {spec}"
    for d in spec.devices:
        for p in every:
            if all(p[v] in (chosen[v], d.name) for v in spec.order):
                assert spec_cut(spec, p) >= cost, f"a move to {d.name} improves on {spec}"


def test_priority_choice_is_the_first_device_that_takes_a_node():
    spec = multi_device_spec(7, 12, 3)
    problem = build_problem(spec)
    labels = device_labels(problem, "priority")
    for v, node in enumerate(problem.graph.nodes):
        if problem.group_of[v] >= 0:
            continue
        takers = [d for d, dev in enumerate(spec.devices) if node.op_type in dev.ops]
        assert labels[v] == (takers[0] if takers else -1)


# ---------------------------------------------------------------------- the front door
def fallback_nodes(part: ck.Partition) -> int:
    return sum(len(c.nodes) for c in part.clusters if c.device == FALLBACK)


@fast(50)
@given(seed=st.integers(0, 10**6), devices=st.sampled_from([2, 3]))
def test_cost_partitions_are_valid_and_never_worse_than_priority(seed, devices):
    """Each heuristic and ``auto``: never more fallback nodes, and with as many never a larger
    cut (the order ``auto`` and cpsat's ``cut`` objective use)."""
    spec = multi_device_spec(seed, 14, devices)
    problem = build_problem(spec)
    for strategy in HEURISTICS:
        by_priority = ck.run_strategy(problem, strategy, devices="priority")
        by_cost = ck.run_strategy(problem, strategy, devices="cost")
        check(spec, by_cost)
        got = fallback_nodes(by_cost), spec_cut(spec, partition_units(by_cost))
        base = fallback_nodes(by_priority), spec_cut(spec, partition_units(by_priority))
        assert got <= base, f"{strategy}: cost {got} > priority {base} on {spec}"
        again = ck.run_strategy(build_problem(spec), strategy, devices="cost")
        assert [c.nodes for c in again.clusters] == [c.nodes for c in by_cost.clusters]


def test_bert_base_with_two_devices_cost_beats_priority():
    problem = ck.make_problem(BUNDLED_MODELS / "bert_base.onnx", SELECTOR_SETS["two"])
    for strategy in ("cycles", "auto"):
        opts = {"polish": 0} if strategy == "auto" else {}  # cpsat chooses devices itself
        by_priority = ck.run_strategy(problem, strategy, devices="priority", **opts)
        by_cost = ck.run_strategy(problem, strategy, devices="cost", **opts)
        p, c = by_priority.metrics(), by_cost.metrics()
        assert c["fallback_nodes"] == p["fallback_nodes"]
        assert c["cut_bytes"] * 10 < p["cut_bytes"], (strategy, c["cut_bytes"], p["cut_bytes"])
        # the gpu takes every op the npu takes here: the gpu alone is a placement to match
        gpu_only = ck.make_problem(problem.graph, SELECTOR_SETS["two"][1:])
        assert c["cut_bytes"] <= ck.run_strategy(gpu_only, strategy, **opts).metrics()["cut_bytes"]
    members = [m["name"] for m in by_cost.info["auto"]["members"]]
    assert any(name.endswith("@cost") for name in members)
    assert by_cost.info["auto"]["winner"].endswith("@cost")


def test_cost_choice_is_recorded_and_exact_strategies_are_left_alone():
    problem = ck.make_problem(BUNDLED_MODELS / "resnet18.onnx", SELECTOR_SETS["two"])
    part = ck.run_strategy(problem, "cycles", devices="cost")
    record = part.info["devices"]
    assert record["chosen"] in ("cost", "priority")
    assert part.metrics()["cut_bytes"] == record[record["chosen"] + "_cut_bytes"]
    assert part.metrics()["cut_bytes"] <= ck.run_strategy(problem, "cycles").metrics()["cut_bytes"]
    one = ck.make_problem(BUNDLED_MODELS / "resnet18.onnx", SELECTOR_SETS["cnn"])
    assert choose_devices(one, "cost") is one
    assert "devices" not in ck.run_strategy(one, "cycles", devices="cost").info


def test_an_unknown_mode_is_an_error_naming_the_choices():
    problem = ck.make_problem(BUNDLED_MODELS / "resnet18.onnx", SELECTOR_SETS["two"])
    for call in (lambda: ck.run_strategy(problem, "cycles", devices="fastest"),
                 lambda: choose_devices(problem, "fastest"),
                 lambda: ck.run_strategy(problem, "auto", devices="fastest")):
        with pytest.raises(StrategyError, match="priority, cost.*'fastest'"):
            call()


def test_cli_devices_flag(capsys):
    from clusterkit.cli import main

    model = str(BUNDLED_MODELS / "bert_base.onnx")
    sel = sum((["--selector", s] for s in SELECTOR_SETS["two"]), [])
    cuts = {}
    for mode in ("priority", "cost"):
        assert main(["partition", model, *sel, "--strategy", "cycles", "--devices", mode]) == 0
        line = capsys.readouterr().out.splitlines()[0]
        cuts[mode] = int(re.search(r"cut_bytes (?:≥ )?([\d,]+)", line).group(1).replace(",", ""))
    assert cuts["cost"] * 10 < cuts["priority"]
    assert main(["compare", model, *sel, "--devices", "fastest"]) == 2
