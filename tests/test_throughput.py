"""Throughput placement of the NeurIPS 2020 instances: our load equals the paper's definition
(recomputed here from sets, and by hand on small cases), CP-SAT's optimum equals brute force over
every assignment of tiny instances (contiguous and not), the heuristic's answers are feasible
chains, and the CLI writes a split file that scores as its partition JSON says."""

from __future__ import annotations

import itertools
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterkit.engines.cpsat.throughput import solve_throughput
from clusterkit.engines.throughput import (
    Chain,
    build_units,
    chain_heuristic,
    cpu_side_keys,
    device_loads,
    latency_bound,
    placement_problems,
)
from clusterkit.errors import ModelLoadError
from clusterkit.graph.algorithms import strong_components
from clusterkit.io.placement_instance import HOST, instance_from_dict, read_instance, write_split

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "benchmarks" / "data" / "placement"
BERT = DATA / "LayerGraphs" / "bert24_inference.json"
BERT_TRAIN = DATA / "LayerGraphs" / "bert24_training.json"


# ------------------------------------------------------------------ an independent checker
def reference_loads(doc: dict, split: dict[int, int]) -> dict[int, float]:
    """Every device's load by the paper's words, from the JSON document and a device per node
    id (-1 the CPU): an accelerator pays its nodes' fpgaLatency, plus each node's edge cost
    once when the node is on it and some consumer elsewhere, and once when the node is
    elsewhere and some consumer is on it; the CPU pays its nodes' cpuLatency only."""
    nodes = {nd["id"]: nd for nd in doc["nodes"]}
    cost = {e["sourceId"]: e["cost"] for e in doc["edges"]}
    consumers: dict[int, set[int]] = {}
    for e in doc["edges"]:
        consumers.setdefault(e["sourceId"], set()).add(e["destId"])
    loads: dict[int, float] = {}
    for dev in set(split.values()) | set(range(doc["maxFPGAs"])):
        if dev == -1:
            loads[dev] = sum(nodes[v]["cpuLatency"] for v in nodes if split[v] == -1)
            continue
        total = sum(nodes[v]["fpgaLatency"] for v in nodes if split[v] == dev)
        for u, cons in consumers.items():
            where = {split[c] for c in cons}
            if split[u] == dev and where - {dev}:
                total += cost[u]
            if split[u] != dev and dev in where:
                total += cost[u]
        loads[dev] = total
    return loads


def node(i: int, acc: float, cpu: float, size: float = 1.0, color: int | None = None,
         backward: int = 0, supported: int = 1) -> dict:
    out = {"id": i, "supportedOnFpga": supported, "cpuLatency": cpu, "fpgaLatency": acc,
           "size": size, "isBackwardNode": backward}
    if color is not None:
        out["colorClass"] = color
    return out


def doc_of(nodes: list[dict], edges: list[tuple[int, int, float]], k: int = 2,
           memory: float = 100.0, cpus: int = 1) -> dict:
    return {"maxFPGAs": k, "maxCPUs": cpus, "maxSizePerFPGA": memory, "nodes": nodes,
            "edges": [{"sourceId": a, "destId": b, "cost": c} for a, b, c in edges]}


def devices_of(inst, split: dict[int, int]) -> np.ndarray:
    return np.array([split[int(i)] for i in inst.ids], dtype=np.int64)


# ------------------------------------------------------------------ the load definition
def test_loads_by_hand() -> None:
    """A node with two consumers on one other device pays once there, and once at home; a
    consumer on the CPU makes the sender pay but the CPU pays nothing."""
    doc = doc_of([node(10, 1.0, 10.0), node(11, 2.0, 20.0), node(12, 3.0, 30.0),
                  node(13, 4.0, 40.0)],
                 [(10, 11, 0.5), (10, 12, 0.5), (11, 13, 0.25), (12, 13, 0.125)])
    inst = instance_from_dict(doc)
    # 10 on fpga0; 11, 12 on fpga1; 13 on the CPU
    loads = device_loads(inst, devices_of(inst, {10: 0, 11: 1, 12: 1, 13: HOST}))
    assert loads.tolist() == [1.0 + 0.5, 2.0 + 3.0 + 0.5 + 0.25 + 0.125, 40.0]
    # everything on fpga1 but 12 on fpga0: 10 pays (12 elsewhere), fpga0 receives 10, sends 12
    loads = device_loads(inst, devices_of(inst, {10: 1, 11: 1, 12: 0, 13: 1}))
    assert loads.tolist() == [3.0 + 0.5 + 0.125, 1.0 + 2.0 + 4.0 + 0.5 + 0.125, 0.0]


def random_doc(rng: random.Random, n: int, k: int, colors: bool = True) -> dict:
    """A random DAG instance on ``n`` nodes (edges forward in id order)."""
    nodes = [node(i, rng.choice([1.0, 2.0, 3.5]), rng.choice([4.0, 9.0, 30.0]),
                  size=rng.choice([1.0, 2.0]),
                  color=(rng.randrange(n) if colors and rng.random() < 0.3 else None),
                  supported=int(rng.random() > 0.1)) for i in range(n)]
    cost = {i: rng.choice([0.0, 0.5, 1.0, 2.5]) for i in range(n)}
    edges = [(a, b, cost[a]) for a in range(n) for b in range(a + 1, n) if rng.random() < 0.4]
    return doc_of(nodes, edges, k=k, memory=rng.choice([3.0, 5.0, 100.0]))


@pytest.mark.parametrize("seed", range(30))
def test_loads_match_the_definition(seed: int) -> None:
    rng = random.Random(seed)
    doc = random_doc(rng, rng.randrange(2, 12), rng.randrange(1, 4))
    inst = instance_from_dict(doc)
    split = {nd["id"]: rng.randrange(-1, doc["maxFPGAs"]) for nd in doc["nodes"]}
    ref = reference_loads(doc, split)
    ours = device_loads(inst, devices_of(inst, split))
    for dev, value in ref.items():
        assert ours[dev if dev >= 0 else doc["maxFPGAs"]] == pytest.approx(value, abs=1e-12)


def test_loads_of_a_real_split_match() -> None:
    doc = json.loads(BERT_TRAIN.read_text())
    inst = read_instance(BERT_TRAIN)
    rng = random.Random(3)
    color_dev: dict[int, int] = {}
    split = {nd["id"]: color_dev.setdefault(nd["colorClass"], rng.randrange(-1, 6))
             for nd in doc["nodes"]}
    ref = reference_loads(doc, split)
    ours = device_loads(inst, devices_of(inst, split))
    assert [ours[d] for d in range(6)] + [ours[6]] == pytest.approx(
        [ref[d] for d in range(6)] + [ref.get(-1, 0.0)])


# ------------------------------------------------------------------ brute force
def feasible(doc: dict, split: dict[int, int]) -> bool:
    nodes = doc["nodes"]
    for nd in nodes:
        if split[nd["id"]] != -1 and not nd["supportedOnFpga"]:
            return False
    by_color: dict = {}
    for nd in nodes:
        if "colorClass" in nd and by_color.setdefault(nd["colorClass"], split[nd["id"]]) \
                != split[nd["id"]]:
            return False
    for d in range(doc["maxFPGAs"]):
        if sum(nd["size"] for nd in nodes if split[nd["id"]] == d) > doc["maxSizePerFPGA"]:
            return False
    return True


def is_chain(doc: dict, split: dict[int, int]) -> bool:
    """Some order of the used devices has every edge going forward or staying (forward-only
    instances: the order arcs are the edges)."""
    used = sorted(set(split.values()))
    arcs = {(split[e["sourceId"]], split[e["destId"]]) for e in doc["edges"]}
    return any(all(perm.index(a) <= perm.index(b) for a, b in arcs)
               for perm in itertools.permutations(used))


def brute_force(doc: dict, contiguous: bool) -> float:
    ids = [nd["id"] for nd in doc["nodes"]]
    best = float("inf")
    for devs in itertools.product(range(-1, doc["maxFPGAs"]), repeat=len(ids)):
        split = dict(zip(ids, devs))
        if not feasible(doc, split) or (contiguous and not is_chain(doc, split)):
            continue
        best = min(best, max(reference_loads(doc, split).values()))
    return best


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("contiguous", [True, False])
def test_cpsat_equals_brute_force(seed: int, contiguous: bool) -> None:
    rng = random.Random(100 + seed)
    doc = random_doc(rng, rng.randrange(3, 7), 2)
    inst = instance_from_dict(doc)
    want = brute_force(doc, contiguous)
    res = solve_throughput(inst, contiguous=contiguous, time_limit=10.0, workers=1)
    assert res.status == "OPTIMAL"
    assert not placement_problems(inst, res.device)
    split = dict(zip(inst.ids.tolist(), res.device.tolist()))
    assert max(reference_loads(doc, split).values()) == pytest.approx(want, rel=1e-6)
    assert res.max_load == pytest.approx(want, rel=1e-6)
    assert res.bound <= want * (1 + 1e-9) and res.bound >= want * (1 - 1e-6)
    assert latency_bound(inst) <= want * (1 + 1e-9)
    if contiguous:
        assert is_chain(doc, split)


def test_a_better_non_contiguous_warm_start_is_kept_and_called_so() -> None:
    """1 -> 2 -> 3, one accelerator: 1 and 3 are fast there, 2 on the CPU. Accelerator {1, 3}
    and the CPU {2} (max load 2) leave and re-enter the accelerator; every contiguous split
    costs more. cpsat keeps the better warm start, says it is not contiguous, gives the
    contiguous optimum beside it, and a bound that holds for every placement."""
    doc = doc_of([node(1, 1.0, 10.0), node(2, 10.0, 1.0), node(3, 1.0, 10.0)],
                 [(1, 2, 0.0), (2, 3, 0.0)], k=1)
    inst = instance_from_dict(doc)
    warm = devices_of(inst, {1: 0, 2: HOST, 3: 0})
    res = solve_throughput(inst, contiguous=True, time_limit=10.0, workers=1, warm=warm)
    assert res.device.tolist() == warm.tolist() and res.max_load == pytest.approx(2.0)
    assert not res.contiguous
    assert res.info["contiguous_optimum"] == pytest.approx(brute_force(doc, True))
    assert brute_force(doc, True) > 2.0
    assert res.bound <= brute_force(doc, False) * (1 + 1e-9)


def test_fractional_sizes_fill_the_memory_exactly() -> None:
    """Two nodes of 0.6 each fit a limit of 1.2 together (rounded up to whole units they
    would not): cpsat puts both on the accelerator, load 2, not one on the slow CPU."""
    doc = doc_of([node(1, 1.0, 10.0, size=0.6), node(2, 1.0, 10.0, size=0.6)], [(1, 2, 0.0)],
                 k=1, memory=1.2)
    want = brute_force(doc, True)
    assert want == pytest.approx(2.0)
    res = solve_throughput(instance_from_dict(doc), time_limit=10.0, workers=1,
                           warm=np.array([0, HOST]))
    assert res.max_load == pytest.approx(want) and res.status == "OPTIMAL"


# ------------------------------------------------------------------ heuristic and real data
def test_heuristic_is_a_feasible_chain_within_the_bound() -> None:
    doc = json.loads(BERT.read_text())
    inst = read_instance(BERT)
    res = chain_heuristic(inst)
    split = dict(zip(inst.ids.tolist(), res.device.tolist()))
    assert feasible(doc, split) and is_chain(doc, split)
    assert res.max_load == pytest.approx(max(reference_loads(doc, split).values()))
    exact = solve_throughput(inst, contiguous=True, time_limit=20.0, workers=1)
    assert exact.status == "OPTIMAL"
    assert exact.bound <= exact.max_load <= res.max_load * (1 + 1e-12)


def test_training_units_keep_backward_nodes_with_their_class() -> None:
    inst = read_instance(BERT_TRAIN)
    units = build_units(inst)
    for members in units.members:
        assert len({int(inst.color[v]) for v in members}) >= 1
    assert all(units.unit_of[v] == units.unit_of[w] for v in range(inst.n)
               for w in range(inst.n) if inst.color[v] == inst.color[w])


def test_reader_names_the_faulty_node() -> None:
    doc = doc_of([node(1, 1, 1), node(2, 1, 1), node(3, 1, 1)], [(1, 2, 0.5), (1, 3, 0.7)])
    with pytest.raises(ModelLoadError, match="node 1 has two different"):
        instance_from_dict(doc, where="x.json")
    with pytest.raises(ModelLoadError, match="maxFPGAs"):
        instance_from_dict({"nodes": []}, where="x.json")


def test_cli_writes_a_split_that_scores_as_reported(tmp_path: Path) -> None:
    split_path, json_path = tmp_path / "split.json", tmp_path / "part.json"
    cmd = [sys.executable, "-m", "clusterkit", "partition", str(BERT), "--strategy", "cpsat",
           "--option", "objective=throughput", "--option", "workers=1",
           "--split", str(split_path), "--json", str(json_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    split_doc = json.loads(split_path.read_text())
    doc = json.loads(BERT.read_text())
    split = {v: d for d, m in enumerate(split_doc["fpgas"]) for v in m["nodes"]}
    split.update({v: -1 for m in split_doc["cpus"] for v in m["nodes"]})
    assert sorted(split) == sorted(nd["id"] for nd in doc["nodes"])
    fig = json.loads(json_path.read_text())["throughput"]
    assert fig["status"] == "OPTIMAL" and fig["contiguous"] is True
    assert fig["max_load"] == pytest.approx(max(reference_loads(doc, split).values()))
    assert fig["bound"] <= fig["max_load"]
    assert "max load" in proc.stdout


def test_auto_gives_the_heuristic_and_node_link_json_is_not_an_instance(tmp_path: Path) -> None:
    from clusterkit.api import run_strategy
    from clusterkit.engines.throughput import instance_problem
    from clusterkit.io.loader import load_graph
    from clusterkit.io.placement_instance import is_instance

    problem = instance_problem(load_graph(BERT))
    part = run_strategy(problem, "auto")
    fig = part.info["throughput"]
    assert fig["method"] == "chain_heuristic"
    assert sorted(fig["loads"]) == sorted([f"fpga{d}" for d in range(6)] + ["cpu"])
    assert fig["max_load"] == max(fig["loads"].values())
    assert fig["loads"][fig["bottleneck"]] == fig["max_load"]
    assert not is_instance({"nodes": [], "links": [], "directed": True})


@pytest.mark.skipif(not (os.environ.get("DNN_PARTITIONING") and shutil.which("g++")),
                    reason="set DNN_PARTITIONING to a checkout of msr-fiddle/dnn-partitioning")
def test_the_papers_evaluator_scores_our_splits_as_we_do(tmp_path: Path) -> None:
    """Optional cross-check against the paper's own ``dp.exe -expert`` (compiled here)."""
    src = Path(os.environ["DNN_PARTITIONING"]) / "throughput-dp" / "dp.cpp"
    exe = tmp_path / "dp.exe"
    subprocess.run(["g++", "-O2", "-o", str(exe), str(src)], check=True, timeout=300)
    for path in (BERT, BERT_TRAIN):
        inst = read_instance(path)
        rng = random.Random(7)
        color_dev: dict[int, int] = {}
        device = np.array([color_dev.setdefault(int(c), rng.randrange(-1, 6))
                           for c in inst.color], dtype=np.int64)
        split = tmp_path / "split.json"
        write_split(split, inst, device)
        with open(path, "rb") as fh:
            err = subprocess.run([str(exe), "-expert", str(split)], stdin=fh, timeout=120,
                                 capture_output=True, text=True).stderr
        theirs = float(err.rsplit("max-load of the split:", 1)[1].split()[0])
        assert theirs == pytest.approx(float(device_loads(inst, device).max()), rel=1e-5)


def test_no_feasible_placement_is_an_error_naming_the_instance() -> None:
    from clusterkit.errors import InfeasibleError, StrategyError

    doc = doc_of([node(1, 1.0, 5.0, size=4.0), node(2, 1.0, 5.0, size=4.0)], [(1, 2, 1.0)],
                 k=1, memory=3.0, cpus=0)
    inst = instance_from_dict(doc, name="tight")
    with pytest.raises(InfeasibleError, match="'tight'.*no placement") as err:
        solve_throughput(inst, time_limit=5.0, workers=1)
    assert err.value.status == "INFEASIBLE" and err.value.reason.startswith("no placement")
    with pytest.raises(StrategyError, match="maxSizePerFPGA"):
        chain_heuristic(inst)
    doc["maxCPUs"] = 1  # the host takes what no accelerator can hold
    res = solve_throughput(instance_from_dict(doc), time_limit=5.0, workers=1)
    assert res.status == "OPTIMAL" and res.max_load == pytest.approx(10.0)


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 12).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.tuples(st.integers(0, max(n - 1, 0)), st.integers(0, max(n - 1, 0))),
                         max_size=30 if n else 0))))
def test_strong_components_match_networkx(case):
    """The units' strongly connected components: the same sets as networkx finds, numbered in
    order of their smallest node."""
    n, arcs = case
    a = np.asarray(arcs, dtype=np.int64).reshape(-1, 2)
    got = strong_components(n, a[:, 0], a[:, 1]).tolist()
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from(arcs)
    expected = [0] * n
    for number, comp in enumerate(sorted(sorted(c) for c in nx.strongly_connected_components(g))):
        for v in comp:
            expected[v] = number
    assert got == expected


def test_cpu_side_keys_put_the_units_to_trade_next_to_the_other_kind() -> None:
    """Chain accelerator, CPU, accelerator: in the first order, the first segment's units
    fall in CPU/accelerator ratio toward the CPU after it and the last segment's rise from
    the CPU before it; the second moves only units of the better half (the CPU's worst,
    the accelerators' best) and only into a segment of the other kind."""
    rng = random.Random(3)
    seg = [rng.randrange(3) for _ in range(60)]
    ratio = [rng.uniform(0.1, 10) for _ in seg]
    chain = Chain(0.0, seg, [0, -1, 1], list(range(60)))
    plain, moved = cpu_side_keys(chain, ratio, [0] * 60, random.Random(0))
    ranked = sorted(range(60), key=lambda u: plain[u])
    for s, sign in ((0, -1), (2, 1)):
        got = [ratio[u] for u in ranked if seg[u] == s]
        assert got == sorted(got, key=lambda x: sign * x)
    mid = [float(np.median([r for r, t in zip(ratio, seg) if t == s])) for s in range(3)]
    for u, (s, key) in enumerate(zip(seg, moved)):
        if key[0] != s:
            assert (key[0] == 1) != (s == 1)
            assert ratio[u] > mid[s] if s == 1 else ratio[u] < mid[s]
    assert any(key[0] != s for s, key in zip(seg, moved))
    assert cpu_side_keys(Chain(0.0, seg, [0, 1, 2], []), ratio, [0] * 60, rng) == []
