"""Strategy ``hetero`` (OpenVINO HETERO): the seed's worked example, a brute-force re-implementation
of the seed's selection as oracle, manual affinity, constraints, determinism, large graphs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import clusterkit as ck
from clusterkit.cli import main as cli_main
from clusterkit.constraints.affinity import compute_affinity, parse_rule
from clusterkit.engines import hetero
from clusterkit.errors import ConstraintError
from clusterkit.result.reasons import Category
from support.partitions import named_clusters, timeless

# ---------------------------------------------------------------------- the seed's example
from support.problems import draw_letter_constraints, letter_dags
from support.seeds import descendants, seed_graph


def test_seed_example_library():
    problem = ck.make_problem(seed_graph(), ["first=ops:A", "second=ops:A,B"])
    part = ck.run_strategy(problem, "hetero").validate()
    assert named_clusters(part) == {("first", frozenset("3567")), ("first", frozenset("12")),
                                    ("second", frozenset("4"))}
    # selection order: the largest subgraph of the first round is kept first
    subs = hetero.subgraphs(problem)
    names = [(d, [problem.graph.nodes[v].name for v in vs]) for d, vs in subs]
    assert names == [("first", ["3", "5", "6", "7"]), ("first", ["1", "2"]), ("second", ["4"])]


def test_seed_example_trace_follows_the_notes():
    """Every step of the seed's walk-through, in order."""
    problem = ck.make_problem(seed_graph(), ["first=ops:A", "second=ops:A,B"])
    trace = ck.run_strategy(problem, "hetero", trace=True).info["trace"]
    first_round = [("root", "first", "1"), ("merge", "2"), ("merge", "3"), ("merge", "5"),
                   ("merge", "6"), ("merge", "7"), ("reject", "4"), ("rollback", "7"),
                   ("rollback", "6"), ("rollback", "5"), ("subgraph", ["1", "2", "3"]),
                   ("root", "first", "5"), ("merge", "6"), ("merge", "7"), ("merge", "3"),
                   ("merge", "2"), ("reject", "4"), ("rollback", "2"),
                   ("subgraph", ["3", "5", "6", "7"]), ("select", "first", ["3", "5", "6", "7"])]
    assert trace[:len(first_round)] == first_round
    rest = trace[len(first_round):]
    assert ("select", "first", ["1", "2"]) in rest
    assert rest[-1] == ("select", "second", ["4"])


def test_seed_example_cli(tmp_path, capsys):
    data = nx.node_link_data(seed_graph(), edges="edges")
    model = tmp_path / "seed.json"
    model.write_text(json.dumps(data))
    out = tmp_path / "out.json"
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    rc = cli_main(["partition", str(model), "--strategy", "hetero", "--selector", "first=ops:A",
                   "--selector", "second=ops:A,B", "--fallback", "cpu", "--json", str(out),
                   "--dump-dot", str(dumps)])
    assert rc == 0
    printed = capsys.readouterr().out
    assert re.search(r"^first +6 +0 +2 ", printed, re.M) and "fell back: none" in printed
    doc = json.loads(out.read_text())
    clusters = {(c["device"], tuple(c["nodes"])) for c in doc["clusters"]}
    # source positions: node "k" is position k-1
    assert clusters == {("first", (2, 4, 5, 6)), ("first", (0, 1)), ("second", (3,))}
    assert doc["placement"]["devices"]["first"]["nodes"] == 6
    assert doc["placement"]["fallen_back"] == []
    assert sorted(os.listdir(dumps)) == ["seed_affinity.dot", "seed_subgraphs.dot"]
    assert "affinity: second" in (dumps / "seed_affinity.dot").read_text()


# ---------------------------------------------------------------------- oracle
def naive_hetero(problem: ck.Problem, affinity: list[int],
                 cons: ck.Constraints | None = None) -> list[tuple[str, list[int]]]:
    """The seed's algorithm written out with a full transitive closure (small graphs only):
    rounds of growth from every uncovered root, rollback while a rejected node lies on a path
    between two members, keep the largest; device by device. ``cons`` (cut edges, never
    pairs, ``max_size``; no together groups) rejects a node that would break one."""
    g = problem.graph
    index = {nd.name: i for i, nd in enumerate(g.nodes)}
    cuts = {frozenset((index[str(a)], index[str(b)])) for a, b in cons.cut_edges} if cons else set()
    never = {frozenset((index[str(a)], index[str(b)])) for a, b in cons.never_together} \
        if cons else set()
    max_size = cons.max_size if cons else None

    def fits(v: int, members: list[int]) -> bool:
        if max_size is not None and len(members) + 1 > max_size:
            return False
        return not any(frozenset((v, m)) in cuts or frozenset((v, m)) in never
                       for m in members)

    n = g.n
    succ, pred = g.succ_lists, g.pred_lists
    reach = descendants(succ)
    taken: set[int] = set()
    out = []

    def grow(d: int, root: int) -> list[int]:
        members, rejected, stack = [root], set(), []

        def push(x):
            stack.extend(w for w in reversed(pred[x]) if w not in members and w not in rejected)
            stack.extend(w for w in reversed(succ[x]) if w not in members and w not in rejected)

        def self_reference():
            return any(any(r in reach[a] for a in members) and any(b in reach[r] for b in members)
                       for r in rejected)

        push(root)
        while stack:
            v = stack.pop()
            if v in members or v in rejected:
                continue
            if not any(w in members for w in pred[v] + succ[v]):
                continue
            if affinity[v] == d and v not in taken and fits(v, members):
                members.append(v)
                push(v)
            else:
                rejected.add(v)
            while self_reference():
                rejected.add(members.pop())
        return members

    for d in range(len(problem.devices)):
        while True:
            roots = [v for v in range(n) if affinity[v] == d and v not in taken]
            if not roots:
                break
            covered: set[int] = set()
            subs = []
            for r in roots:
                if r not in covered:
                    s = grow(d, r)
                    subs.append(s)
                    covered |= set(s)
            best = max(subs, key=len)
            out.append((problem.devices[d], sorted(best)))
            taken |= set(best)
    return out


DEVICE_SETS = [["x=ops:A,B", "y=ops:B,C"], ["x=ops:A", "y=ops:B", "z=ops:A,C"],
               ["x=ops:A,B,C", "y=ops:C"]]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(g=letter_dags(24), devs=st.sampled_from(DEVICE_SETS))
def test_selection_matches_brute_force_oracle(g, devs):
    problem = ck.make_problem(g, devs, constraints=ck.Constraints())
    expected = naive_hetero(problem, problem.first_device.tolist())
    got = hetero.subgraphs(problem)
    assert sorted((d, tuple(v)) for d, v in got) == sorted((d, tuple(v)) for d, v in expected)


@st.composite
def cut_never_size(draw, g: nx.DiGraph) -> ck.Constraints:
    """Cut edges, never pairs and a size limit (no together groups) on a letter DAG."""
    nodes, edges = list(g.nodes), list(g.edges)
    cuts = draw(st.lists(st.sampled_from(edges), max_size=4, unique=True))
    pairs = st.tuples(st.sampled_from(nodes), st.sampled_from(nodes))
    never = [(a, b) for a, b in draw(st.lists(pairs, max_size=3)) if a != b]
    return ck.Constraints(cut_edges=cuts, never_together=never,
                          max_size=draw(st.one_of(st.none(), st.integers(2, 8))))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), devs=st.sampled_from(DEVICE_SETS))
def test_selection_under_constraints_matches_brute_force_oracle(data, devs):
    """Units a growth rejects for a constraint, later taken, do not change it: the reused
    growths give what re-running every round gives."""
    g = data.draw(letter_dags(24))
    cons = data.draw(cut_never_size(g))
    problem = ck.make_problem(g, devs, constraints=cons)
    expected = naive_hetero(problem, problem.first_device.tolist(), cons)
    got = hetero.subgraphs(problem)
    assert sorted((d, tuple(v)) for d, v in got) == sorted((d, tuple(v)) for d, v in expected)


# ---------------------------------------------------------------------- properties
@st.composite
def scenarios(draw):
    g = draw(letter_dags(max_nodes=20))
    devs = draw(st.sampled_from(DEVICE_SETS))
    names = [d.split("=")[0] for d in devs] + ["cpu"]
    nodes = list(g.nodes)
    rules = []
    for v in draw(st.lists(st.sampled_from(nodes), max_size=4, unique=True)):
        kind = draw(st.sampled_from(["attr", "name", "re", "range"]))
        dev = draw(st.sampled_from(names))
        if kind == "attr":
            g.nodes[v]["affinity"] = dev
        elif kind == "name":
            rules.append(f"{v}={dev}")
        elif kind == "re":
            rules.append(f"re:^{v}$={dev}")
        else:
            rules.append(f"{v}-{min(v + draw(st.integers(0, 2)), len(nodes) - 1)}={dev}")
    cons = draw_letter_constraints(draw, g)
    fill = draw(st.booleans())
    return g, devs, rules, cons, fill


def _problem(g, devs, cons):
    try:
        return ck.make_problem(g, devs, constraints=cons)
    except ConstraintError:
        return None


def _strip(doc: dict) -> dict:
    return timeless(doc)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sc=scenarios())
def test_random_problems_validate_and_are_deterministic(sc):
    g, devs, rules, cons, fill = sc
    problem = _problem(g, devs, cons)
    assume(problem is not None)
    part = ck.run_strategy(problem, "hetero", affinity=rules, fill_affinity=fill)
    part.validate()
    again = ck.run_strategy(_problem(g, devs, cons), "hetero", affinity=rules, fill_affinity=fill)
    assert json.dumps(_strip(part.to_json())) == json.dumps(_strip(again.to_json()))
    # every node sits where its affinity sends it, or on the fallback
    aff = compute_affinity(problem, rules, fill=fill)
    placed = part.device_of_nodes()
    names = list(problem.devices)
    for v in range(problem.n):
        want = int(aff.device[v])
        if placed[v] != problem.fallback and not problem.groups:
            assert placed[v] == names[want], (v, placed[v], want)
    rep = part.placement()
    assert sum(e["nodes"] for e in rep["devices"].values()) == problem.n
    assert len(rep["fallen_back"]) == rep["devices"]["cpu"]["nodes"]


def test_manual_affinity_without_fill_sends_the_rest_to_the_fallback():
    problem = ck.make_problem(seed_graph(), ["first=ops:A", "second=ops:A,B"])
    part = ck.run_strategy(problem, "hetero", affinity=["re:^[67]$=second"])
    placed = dict(zip((nd.name for nd in problem.graph.nodes), part.device_of_nodes()))
    assert placed["6"] == placed["7"] == "second"
    assert all(placed[k] == "cpu" for k in "12345")
    reasons = {e["node"]: e["reason"] for e in part.placement()["fallen_back"]}
    assert set(reasons.values()) == {Category.MANUAL_AFFINITY}
    filled = ck.run_strategy(problem, "hetero", affinity=["re:^[67]$=second"],
                             fill_affinity=True)
    placed = dict(zip((nd.name for nd in problem.graph.nodes), filled.device_of_nodes()))
    assert placed["6"] == placed["7"] == "second"
    assert placed["4"] == "second" and all(placed[k] == "first" for k in "1235")
    assert filled.info["affinity"]["mode"] == "manual+fill"


def test_affinity_from_node_attributes_and_unsupported_device():
    g = seed_graph()
    g.nodes["4"]["affinity"] = "first"        # first does not support op B
    g.nodes["5"]["affinity"] = "SECOND"       # case-insensitive device names
    problem = ck.make_problem(g, ["first=ops:A", "second=ops:A,B"])
    part = ck.run_strategy(problem, "hetero", fill_affinity=True).validate()
    placed = dict(zip((nd.name for nd in problem.graph.nodes), part.device_of_nodes()))
    assert placed["4"] == "cpu" and placed["5"] == "second"
    why = {e["node"]: e for e in part.placement()["fallen_back"]}
    assert why["4"]["reason"] == Category.MANUAL_AFFINITY
    assert "does not support" in why["4"]["detail"]
    assert part.info["affinity"]["differs_from_placement"] == {"3": "first"}


def test_affinity_rules_parse_and_errors():
    assert parse_rule("conv1=gpu").kind == "name"
    r = parse_rule("re:^a=b$=npu")            # the device is after the last '='
    assert (r.kind, r.pattern, r.device) == ("regex", "^a=b$", "npu")
    r = parse_rule("3-5=cpu")
    assert (r.kind, r.lo, r.hi) == ("range", 3, 5)
    problem = ck.make_problem(seed_graph(), ["first=ops:A"])
    for bad, msg in [("nosuch=first", "no node named"), ("1=gpu", "unknown device"),
                     ("re:[=first", "bad regular expression"), ("re:zz=first", "matches no"),
                     ("5-9=first", "positions go from 0 to 6"), ("novalue", "is not NAME"),
                     ("4-2=first", "empty")]:
        with pytest.raises(ConstraintError, match=msg):
            compute_affinity(problem, [bad])


def test_constraints_are_honoured_during_growth():
    g = nx.DiGraph()
    for i in range(8):
        g.add_node(f"n{i}", op="A")
    g.add_edges_from((f"n{i}", f"n{i + 1}") for i in range(7))
    cons = ck.Constraints(cut_edges=[("n2", "n3")], never_together=[("n4", "n6")], max_size=3,
                          together=[["n0", "n1"]])
    problem = ck.make_problem(g, ["acc=ops:A"], constraints=cons)
    part = ck.run_strategy(problem, "hetero").validate()
    sets = sorted(sorted(problem.graph.nodes[v].name for v in c.nodes) for c in part.clusters)
    assert sets == [["n0", "n1", "n2"], ["n3", "n4", "n5"], ["n6", "n7"]]


def test_together_group_with_mixed_affinities_goes_to_one_device():
    g = seed_graph()
    cons = ck.Constraints(together=[["6", "7"]])
    problem = ck.make_problem(g, ["first=ops:A", "second=ops:A,B"], constraints=cons)
    part = ck.run_strategy(problem, "hetero", affinity=["7=second"], fill_affinity=True)
    part.validate()
    placed = dict(zip((nd.name for nd in problem.graph.nodes), part.device_of_nodes()))
    assert placed["6"] == placed["7"] == "second"


def mutual_graph() -> nx.DiGraph:
    """Two convex groups of nodes, each depending on the other through one edge."""
    g = nx.DiGraph()
    for name in ["a1", "b1", "a3", "b3", "a2", "b2"]:
        g.add_node(name, op=name[0].upper())
    g.add_edges_from([("a1", "a2"), ("a3", "a2"), ("b1", "b2"), ("b3", "b2"), ("a1", "b3"),
                      ("b1", "a3")])
    return g


def test_clusters_depending_on_each_other_are_split():
    problem = ck.make_problem(mutual_graph(), ["x=ops:A", "y=ops:B"])
    subs = {(d, frozenset(problem.graph.nodes[v].name for v in vs))
            for d, vs in hetero.subgraphs(problem)}
    assert subs == {("x", frozenset({"a1", "a2", "a3"})), ("y", frozenset({"b1", "b2", "b3"}))}
    part = ck.run_strategy(problem, "hetero").validate()
    assert part.info["hetero"]["clusters_split_for_cycles"] == 1
    # the cluster formed later (device y) is the one split
    assert named_clusters(part) == {("x", frozenset({"a1", "a2", "a3"})),
                                    ("y", frozenset({"b1"})), ("y", frozenset({"b2", "b3"}))}


def test_large_random_graph_runs_without_closure():
    from clusterkit.graph.fast import graph_from_dag
    from clusterkit.testing.synthetic import random_dag

    dag = random_dag(10000, seed=3)
    problem = ck.make_problem(graph_from_dag(dag), ["npu=ops:Conv,Relu,Add",
                                                   "gpu=ops:MatMul,Mul,Conv"])
    part = ck.run_strategy(problem, "hetero")     # validated by run_strategy
    assert part.metrics()["nodes_offloaded"] == int((np.asarray(dag.ops) != "Unsupported").sum())


@pytest.mark.parametrize("strategy", ["hetero", "mxnet"])
def test_same_partition_under_another_hash_seed(tmp_path, resnet18_path, strategy):
    outs = []
    for seed in ("0", "12345"):
        out = tmp_path / f"r{seed}.json"
        env = dict(os.environ, PYTHONHASHSEED=seed)
        subprocess.run([sys.executable, "-m", "clusterkit", "partition", str(resnet18_path),
                        "--strategy", strategy, "--selector", "npu=ops:Conv,Relu",
                        "--selector", "gpu=ops:Add,Conv", "--min-size", "2", "--json", str(out)],
                       check=True, capture_output=True, cwd=tmp_path, env=env)
        outs.append(_strip(json.loads(out.read_text())))
    assert outs[0] == outs[1]


def rerun_every_round(problem: ck.Problem) -> list[tuple[str, list[int]]]:
    """The selection with nothing reused: every round grows afresh from every uncovered root
    (the engine's own single growth, checked against the brute force above on small graphs)
    and keeps the first largest."""
    from clusterkit.engines.super_nodes import SuperNodeGraph

    ug = SuperNodeGraph(problem)
    aff = compute_affinity(problem, [], fill=False)
    unit_aff, _ = hetero._super_node_affinity(problem, ug, aff)
    sel = hetero._Selector(problem, ug, unit_aff, False)
    out = []
    for d, name in enumerate(problem.devices):
        while True:
            covered: set[int] = set()
            subs = []
            for r in ug.order:
                if unit_aff[r] == d and not sel.taken[r] and r not in covered:
                    g = sel._grow(d, r)
                    subs.append(g)
                    covered.update(g.members)
            if not subs:
                break
            best = max(subs, key=lambda g: g.size)
            sel._finalize(d, best)
            out.append((name, ug.nodes_of(sel.pieces[-1].super_nodes)))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_reused_growths_give_what_rerunning_every_round_gives(seed):
    """Long-edge DAGs roll back often: growths kept across rounds (a unit taken that the
    growth rejected at first sight, or added and at once rolled back alone with no effect)
    must select exactly what growing afresh every round selects."""
    from clusterkit.graph.fast import graph_from_dag
    from clusterkit.testing.synthetic import LONG_EDGE_SUPPORTED, long_edge_dag

    dag = long_edge_dag(400, seed=seed)
    problem = ck.make_problem(graph_from_dag(dag), ["ops:" + ",".join(LONG_EDGE_SUPPORTED)])
    got = [(d, sorted(v)) for d, v in hetero.subgraphs(problem)]
    assert got == [(d, sorted(v)) for d, v in rerun_every_round(problem)]


@pytest.mark.parametrize("seed", range(3))
def test_replayed_growths_on_random_dags_give_what_rerunning_every_round_gives(seed):
    """A growth invalidated by a taken unit is replayed without checks up to its first step
    that accepted a unit taken since; growing afresh every round must select the same."""
    from clusterkit.graph.fast import graph_from_dag
    from clusterkit.testing.synthetic import random_dag

    dag = random_dag(500, locality=0.7, seed=seed)
    problem = ck.make_problem(graph_from_dag(dag), ["npu=ops:Conv,Relu,Add",
                                                   "gpu=ops:MatMul,Mul,Conv"])
    got = [(d, sorted(v)) for d, v in hetero.subgraphs(problem)]
    assert got == [(d, sorted(v)) for d, v in rerun_every_round(problem)]


def test_trace_does_not_change_the_selection():
    """With ``trace`` nothing is replayed (every step is recorded): same clusters."""
    from clusterkit.graph.fast import graph_from_dag
    from clusterkit.testing.synthetic import LONG_EDGE_SUPPORTED, long_edge_dag

    problem = ck.make_problem(graph_from_dag(long_edge_dag(800, seed=7)),
                              ["ops:" + ",".join(LONG_EDGE_SUPPORTED)])
    plain = ck.run_strategy(problem, "hetero")
    traced = ck.run_strategy(problem, "hetero", trace=True)
    assert [(c.device, sorted(c.nodes)) for c in plain.clusters] == \
        [(c.device, sorted(c.nodes)) for c in traced.clusters]
    assert plain.info["hetero"] == traced.info["hetero"]


@pytest.mark.parametrize("seed", range(3))
def test_replayed_growths_under_size_and_never_limits_give_what_rerunning_gives(seed):
    """With size and never-together limits a regrowth also rebuilds their bookkeeping before
    its first changed step; growing afresh every round must select the same."""
    from clusterkit.graph.fast import graph_from_dag
    from clusterkit.testing.synthetic import LONG_EDGE_SUPPORTED, long_edge_dag

    graph = graph_from_dag(long_edge_dag(400, seed=seed))
    rng = np.random.default_rng(seed)
    names = [nd.name for nd in graph.nodes]
    pairs = [(names[a], names[b]) for a, b in rng.integers(0, graph.n, size=(30, 2)) if a != b]
    cons = ck.Constraints.default(max_size=9, never_together=pairs)
    problem = ck.make_problem(graph, ["ops:" + ",".join(LONG_EDGE_SUPPORTED)], constraints=cons)
    assert not hetero._Selector(problem, hetero.SuperNodeGraph(problem), [0], False).plain
    got = [(d, sorted(v)) for d, v in hetero.subgraphs(problem)]
    assert got == [(d, sorted(v)) for d, v in rerun_every_round(problem)]
