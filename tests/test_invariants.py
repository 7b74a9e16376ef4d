"""Every registered strategy (``clusterkit.strategy_names()``, so a new one is held to this the
day it registers) on random problems, checked by a checker written here from the problem's
plain description (``support.fuzz.Spec``), not by ``Partition.validate``:

- every node in exactly one cluster; an offloaded cluster's device takes every op in it;
- the graph of clusters is acyclic (networkx);
- never-together pairs apart, explicit cut edges cut, a value input's producer a constant or in
  another cluster, together groups whole, offloaded clusters within min/max size;
- no edge a selector refuses (``select_input``/``select_output`` False) inside a cluster of its
  device, and every cluster acceptable to its device (``unacceptable``, written from the spec:
  the device's ``max_nodes``/``min_nodes``, its ``create_subgraph_node`` rejections, and for a
  custom selector the count it keeps, ``filter`` and a growth over the edges it follows
  reaching every member); ``run_strategy`` splits what a strategy leaves unacceptable;
- the same problem built again gives the same clusters;
- on tiny graphs (4..6 nodes) no strategy offloads more nodes than the exhaustive optimum or,
  offloading as many, cuts fewer bytes (cut bytes computed here), and ``cpsat`` equals it.

Problems per run (seeded, so every run draws the same ones; ``support.fuzz`` says what they
cover): each heuristic strategy, and any newly registered one, 1,000 problems of 4..14 nodes plus
300 tiny ones, except ``auto``: 500 (its members are each held to the 1,000 here, and a run of
``auto`` costs about five of theirs: it runs them all, coalesces and polishes with CP-SAT);
``cpsat`` and ``placement`` (CP-SAT with a 2 s limit and one worker) 80 of 4..9 nodes plus 60
tiny ones. With today's six heuristics (singleton, cycles, longest-path, mxnet, hetero, auto)
that is 5 x 1,300 + 800 + 2 x 140 = 7,580 problems per run, and every fifth of the larger ones
is built and run a second time for determinism. (Until 2026-12 it was 2,000 per heuristic;
every failure the fuzzing found stays below as a fixed case.)
Failures found by the fuzzing stay below as fixed regression cases. The selector contract's
suite draws 150 problems per heuristic (25 per exact strategy) whose devices count, filter,
reject above a size or declare ``max_nodes``/``min_nodes`` (``support.fuzz.contract_spec``).
"""

from __future__ import annotations

import functools
import random

import networkx as nx
import pytest

from clusterkit import Partition, Problem, get_strategy, run_strategy, strategy_names
from clusterkit.engines import registered_specs
from clusterkit.testing.exhaustive import exhaustive_optimum
from support.fuzz import (
    FALLBACK,
    HOST,
    DeviceSpec,
    Spec,
    build_problem,
    constants,
    contract_spec,
    random_spec,
    spec_cut,
)

#: the exact strategies (``StrategySpec.exact``): fewer, smaller problems, against the optimum
EXACT = frozenset(spec.name for spec in registered_specs() if spec.exact)
EXACT_OPTIONS = {"time_limit": 2.0, "workers": 1}
PROBLEMS, EXACT_PROBLEMS = 1000, 80
#: strategies that run every other one: fewer problems of their own
COMPOSITE_PROBLEMS = {"auto": 500}
TINY, EXACT_TINY = 300, 60
CHUNKS = 4  # each heuristic's problems run as this many test cases


#: cpsat's determinism is checked on its work budget (CP-SAT's deterministic units); its
#: wall-clock limit only guards
CPSAT_OPTIONS = {"work_limit": 2.0, "time_limit": 60.0, "workers": 1}


def options(strategy: str) -> dict:
    if strategy == "cpsat":
        return dict(CPSAT_OPTIONS)
    return dict(EXACT_OPTIONS) if strategy in EXACT else {}


def cases() -> list[tuple[str, int]]:
    return [(s, 0) if s in EXACT else (s, k) for s in strategy_names()
            for k in (range(1) if s in EXACT else range(CHUNKS))]


# ---------------------------------------------------------------------- the checker
def clusters_by_name(part: Partition) -> list[tuple[str, tuple[str, ...]]]:
    """(device, sorted node names) per cluster, in the partition's order."""
    names = [nd.name for nd in part.graph.nodes]
    return [(c.device, tuple(sorted(names[v] for v in c.nodes))) for c in part.clusters]


def check(spec: Spec, part: Partition, strategy: str) -> None:
    """Assert every invariant of ``part`` against ``spec``."""
    clusters = clusters_by_name(part)
    where: dict[str, int] = {}
    for k, (_, members) in enumerate(clusters):
        for v in members:
            assert v not in where, f"node {v!r} is in clusters {where[v]} and {k}"
            where[v] = k
    assert set(where) == set(spec.order), "nodes missing: %s" % (set(spec.order) - set(where))
    devices = {d.name: d for d in spec.devices}
    for device, members in clusters:
        if device == FALLBACK:
            continue
        d = devices[device]
        assert all(spec.ops[v] in d.ops for v in members), (device, members)
        assert spec.min_size <= len(members), (members, spec.min_size)
        assert spec.max_size is None or len(members) <= spec.max_size, (members, spec.max_size)
    quotient = nx.DiGraph()
    quotient.add_nodes_from(range(len(clusters)))
    quotient.add_edges_from((where[u], where[v]) for u, v in spec.edges if where[u] != where[v])
    assert nx.is_directed_acyclic_graph(quotient), f"cycle among clusters {nx.find_cycle(quotient)}"
    for a, b in spec.never:
        assert where[a] != where[b], f"never-together {a!r}, {b!r} share cluster {where[a]}"
    for u, v in spec.cut_edges:
        assert where[u] != where[v], f"cut edge {u!r} -> {v!r} inside cluster {where[u]}"
    if spec.value_inputs:
        const = constants(spec)
        for v in spec.order:
            if spec.ops[v] == "Reshape" and len(spec.preds[v]) > 1:
                u = spec.preds[v][1]
                assert u in const or where[u] != where[v], f"value input {u!r} -> {v!r} inside"
    for group in spec.together:
        assert len({where[v] for v in group}) == 1, f"together group {group} split"
    for u, v in spec.edges:
        device = clusters[where[u]][0]
        if where[u] == where[v] and device != FALLBACK:
            assert (u, v) not in devices[device].refused, f"{device} refuses {u!r} -> {v!r}"
    if strategy == "exhaustive":  # the oracle enumerates partitions without asking the device
        return
    for device, members in clusters:
        if device != FALLBACK:
            why = unacceptable(spec, devices[device], members)
            assert why is None, f"{device} does not accept {members}: {why}"


def unacceptable(spec: Spec, d: DeviceSpec, members: tuple[str, ...]) -> str | None:
    """Why device ``d`` would not accept a cluster of ``members`` (written from the spec, not
    with the library's definition): its own limits, its rejections, and for a custom selector
    what growing the cluster needs whatever the order: the count it keeps (``limit``), every
    member reached over inner edges it follows, and ``filter`` keeping them all."""
    size = len(members)
    if d.max_nodes is not None and size > d.max_nodes:
        return f"above max_nodes {d.max_nodes}"
    if d.min_nodes is not None and size < d.min_nodes:
        return f"below min_nodes {d.min_nodes}"
    if d.reject_above is not None and size > d.reject_above:
        return f"create_subgraph_node rejects more than {d.reject_above} nodes"
    if d.reject_with is not None and size >= 2 and d.reject_with in members:
        return f"create_subgraph_node rejects a subgraph holding {d.reject_with!r}"
    if d.plain:
        return None
    if d.limit is not None and size > d.limit:
        return f"the selector takes at most {d.limit} nodes per growth"
    if size >= 2 and set(members) & d.dropped:
        return "filter drops " + repr(sorted(set(members) & d.dropped))
    inner = nx.Graph()
    inner.add_nodes_from(members)
    inner.add_edges_from((u, v) for u, v in spec.edges if u in inner and v in inner
                         and (u, v) not in d.refused)
    if not nx.is_connected(inner):
        return "a growth over the edges the selector follows does not reach every member"
    return None


def cut_bytes(spec: Spec, part: Partition) -> int:
    """Bytes crossing between units: each offloaded cluster, and one host unit for every
    fallback node; graph inputs come from the host, graph outputs go to it, constants are free."""
    unit: dict[str, object] = {}
    for k, (device, members) in enumerate(clusters_by_name(part)):
        for v in members:
            unit[v] = HOST if device == FALLBACK else k
    return spec_cut(spec, unit)


def key(spec: Spec, part: Partition) -> tuple[int, int]:
    """(nodes left on the fallback, cut bytes): what the exhaustive optimum minimizes."""
    fallback = sum(len(m) for d, m in clusters_by_name(part) if d == FALLBACK)
    return fallback, cut_bytes(spec, part)


# ---------------------------------------------------------------------- the suites
@functools.lru_cache(maxsize=None)
def drawn(kind: str, seed: int) -> tuple[Spec, Problem]:
    """Problem ``seed`` of a kind (``invariants``: 4..14 nodes, ``exact``: 4..9, ``tiny``: 4..6),
    drawn and compiled once per process and shared by every strategy."""
    max_nodes = {"invariants": 14, "exact": 9, "tiny": 6}[kind]
    spec = random_spec(random.Random(f"{kind}-{seed}"), 4, max_nodes)
    return spec, build_problem(spec)


@functools.lru_cache(maxsize=None)
def optimum(seed: int) -> tuple[int, int]:
    """The exhaustive optimum of tiny problem ``seed`` as (fallback nodes, cut bytes), its
    partition checked here and its cut recomputed here."""
    spec, problem = drawn("tiny", seed)
    best = exhaustive_optimum(problem, "cut")
    check(spec, best.partition, "exhaustive")
    found = key(spec, best.partition)
    assert found == (best.fallback_nodes, best.value), (seed, spec)
    return found


def run_checked(spec: Spec, problem: Problem, strategy: str, seed: int) -> Partition:
    part = run_strategy(problem, strategy, **options(strategy))
    try:
        check(spec, part, strategy)
    except AssertionError as exc:
        raise AssertionError(f"{strategy} on problem seed {seed}: {exc}\n{spec}") from None
    return part


@pytest.mark.slow
@pytest.mark.parametrize("strategy, chunk", cases())
def test_invariants_on_random_problems(strategy, chunk):
    kind = "exact" if strategy in EXACT else "invariants"
    count = EXACT_PROBLEMS if strategy in EXACT else \
        COMPOSITE_PROBLEMS.get(strategy, PROBLEMS) // CHUNKS
    for seed in range(chunk * count, (chunk + 1) * count):
        spec, problem = drawn(kind, seed)
        part = run_checked(spec, problem, strategy, seed)
        if seed % 5 == 0:
            again = run_strategy(build_problem(spec), strategy, **options(strategy))
            assert clusters_by_name(again) == clusters_by_name(part), \
                f"{strategy} is not deterministic on problem seed {seed}"


@pytest.mark.slow
@pytest.mark.parametrize("strategy", strategy_names())
def test_no_strategy_beats_the_exhaustive_optimum(strategy):
    for seed in range(EXACT_TINY if strategy in EXACT else TINY):
        spec, problem = drawn("tiny", seed)
        best = optimum(seed)
        found = key(spec, run_checked(spec, problem, strategy, seed))
        assert found >= best, f"{strategy} beats the exhaustive optimum on seed {seed}: {spec}"
        if strategy == "cpsat":  # the model's answer, before the rejection split
            raw = get_strategy(strategy)(problem, accept=False, **options(strategy))
            assert key(spec, raw) == best, f"cpsat misses the optimum on seed {seed}: {spec}"


# ---------------------------------------------------------------------- regression cases
def refused_group() -> Spec:
    """a -> b must stay together, and the only device refuses to follow a -> b: the group
    can only sit on the fallback."""
    npu = DeviceSpec("npu", frozenset({"Relu"}), plain=False, refused=frozenset({("a", "b")}))
    return Spec(order=["b", "a"], ops={"a": "Relu", "b": "Relu"}, preds={"a": [], "b": ["a"]},
                nbytes={"a": 64, "b": 64}, devices=[npu], together=[["a", "b"]])


@pytest.mark.parametrize("strategy", strategy_names())
def test_together_group_with_a_refused_edge_goes_to_the_fallback(strategy):
    """Found by the fuzzing (singleton put the group on the device that refuses its edge)."""
    spec = refused_group()
    part = run_checked(spec, build_problem(spec), strategy, -1)
    assert clusters_by_name(part) == [(FALLBACK, ("a", "b"))]


# ---------------------------------------------------------------------- the checker itself
def chain() -> Spec:
    """a -> b -> c, all Relu, on one npu that refuses b -> c; a -> b must be cut."""
    npu = DeviceSpec("npu", frozenset({"Relu"}), plain=False, refused=frozenset({("b", "c")}))
    return Spec(order=["a", "b", "c"], ops=dict.fromkeys("abc", "Relu"),
                preds={"a": [], "b": ["a"], "c": ["b"]}, nbytes=dict.fromkeys("abc", 16),
                devices=[npu], cut_edges=[("a", "b")])


@pytest.mark.parametrize("labels, devices, why", [
    ([0, 0, 1], [0, 0, 0], "cut edge"),
    ([0, 1, 1], [0, 0, 0], "refuses"),
    ([0, 1, 0], [0, -1, 0], "cycle"),
    ([0, 1, 2], [0, 0, -1], None),
])
def test_checker_refuses_broken_partitions(labels, devices, why):
    """The checker is only as good as what it catches: broken partitions fail it."""
    spec = chain()
    problem = build_problem(spec)
    order = [problem.graph.nodes[v].name for v in range(problem.n)]
    assert order == ["a", "b", "c"]
    part = Partition.from_assignment(problem, labels, devices, strategy="by-hand")
    if why is None:
        check(spec, part, "by-hand")
    else:
        with pytest.raises(AssertionError, match=why):
            check(spec, part, "by-hand")


# ---------------------------------------------------------------------- the selector contract
CONTRACT, EXACT_CONTRACT = 150, 25


@functools.lru_cache(maxsize=None)
def contract_drawn(seed: int, exact: bool) -> tuple[Spec, Problem]:
    """Problem ``seed`` whose devices count, filter, reject above a size or declare limits
    (``support.fuzz.contract_spec``), 4..14 nodes (4..9 for the exact strategies)."""
    spec = contract_spec(random.Random(f"contract-{seed}"), 4, 9 if exact else 14)
    return spec, build_problem(spec)


@pytest.mark.parametrize("strategy", strategy_names())
def test_every_strategy_returns_only_acceptable_clusters(strategy):
    """Stateful (counting), filtering, rejecting and limit-declaring devices: every cluster of
    every strategy is one its device accepts (``unacceptable`` above), with every invariant."""
    exact = strategy in EXACT
    for seed in range(EXACT_CONTRACT if exact else CONTRACT):
        spec, problem = contract_drawn(seed, exact)
        run_checked(spec, problem, strategy, seed)


def test_checker_refuses_clusters_a_device_would_not_accept():
    """a -> b -> c on a device counting at most 2 nodes per growth: one 3-node cluster is
    refused by the checker, as is a cluster the device's max_nodes forbids."""
    counting = DeviceSpec("npu", frozenset({"Relu"}), plain=False, limit=2)
    spec = Spec(order=["a", "b", "c"], ops=dict.fromkeys("abc", "Relu"),
                preds={"a": [], "b": ["a"], "c": ["b"]}, nbytes=dict.fromkeys("abc", 16),
                devices=[counting])
    part = Partition.from_assignment(build_problem(spec), [0, 0, 0], [0, 0, 0])
    with pytest.raises(AssertionError, match="at most 2 nodes per growth"):
        check(spec, part, "by-hand")
    spec.devices = [DeviceSpec("npu", frozenset({"Relu"}), max_nodes=2)]
    part = Partition.from_assignment(build_problem(spec), [0, 0, 1], [0, 0, 0])
    check(spec, part, "by-hand")
    part = Partition.from_assignment(build_problem(spec), [0, 0, 0], [0, 0, 0])
    with pytest.raises(AssertionError, match="above max_nodes 2"):
        check(spec, part, "by-hand")
