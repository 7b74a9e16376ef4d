"""The ``latency`` objective (issue #33 item 1): the evaluator against a latency worked out by
hand, cpsat's optimum against a brute force over every device assignment with an independent
longest path (networkx), auto's answer valid and never below it, and the command line."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from clusterkit.cli import main as cli
from clusterkit.engines.cpsat.latency import solve_latency
from clusterkit.engines.latency import latency_contiguous, latency_heuristic, latency_schedule
from clusterkit.io.placement_instance import instance_from_dict

ROOT = Path(__file__).resolve().parents[1]
SQUEEZENET = ROOT / "tests" / "data" / "models" / "squeezenet1_1.onnx"
PLATFORM = ROOT / "examples" / "platform.json"


def instance(cpu, acc, edges, cost, *, k=1, cpus=1, size=None, memory=1e9, supported=None):
    """A placement instance in the paper's format (``cost[u]``: u's transfer time)."""
    n = len(cpu)
    nodes = [{"id": v, "cpuLatency": cpu[v], "fpgaLatency": acc[v],
              "supportedOnFpga": 1 if supported is None else supported[v],
              "isBackwardNode": 0, "size": 0 if size is None else size[v]} for v in range(n)]
    return instance_from_dict({
        "maxFPGAs": k, "maxCPUs": cpus, "maxSizePerFPGA": memory, "nodes": nodes,
        "edges": [{"sourceId": a, "destId": b, "cost": cost[a]} for a, b in edges]})


# 0 -> 1 -> 3 -> 4 and 0 -> 2 -> 3
HAND = dict(cpu=[1.0, 4.0, 3.0, 5.0, 1.0], acc=[0.5, 1.0, 1.0, 1.0, 0.5],
            edges=[(0, 1), (0, 2), (1, 3), (2, 3), (3, 4)], cost=[0.2, 0.3, 0.4, 0.1, 0.0])


def test_the_evaluator_gives_the_latency_worked_out_by_hand():
    inst = instance(**HAND)
    # fpga0 = {1, 3}, the CPU runs 0, 2, 4:
    #   node 0 (cpu) finishes at 1; node 2 (cpu) at 1 + 3 = 4;
    #   the piece {1, 3} starts when 0 and 2 are done, at 4, and takes
    #   in: cost(0) + cost(2) = 0.6, compute: 1 + 1 = 2, out: cost(3) = 0.1 (3 -> 4 leaves;
    #   1's only consumer is inside), so it finishes at 4 + 2.7 = 6.7;
    #   node 4 (cpu) finishes at 6.7 + 1 = 7.7: the latency, along 0, 2, {1, 3}, 4.
    sched = latency_schedule(inst, [-1, 0, -1, 0, -1])
    assert sched.latency == pytest.approx(7.7)
    assert sched.critical == [0, 2, 3, 4] and sched.contiguous
    # all on the CPU: the longest path 0 -> 1 -> 3 -> 4 = 1 + 4 + 5 + 1 = 11
    assert latency_schedule(inst, [-1] * 5).latency == pytest.approx(11.0)
    # fpga0 = {1, 2, 4} leaves through 3 (cpu) and comes back to 4: not one piece
    assert not latency_contiguous(inst, [-1, 0, 0, -1, 0])


def test_a_transfer_between_two_accelerators_is_paid_by_both():
    inst = instance(**HAND, k=2)
    # fpga0 = {0, 1, 2}: starts at 0, compute 0.5 + 1 + 1 = 2.5, out: cost(1) + cost(2) = 0.7
    #   -> finishes at 3.2; fpga1 = {3, 4}: in cost(1) + cost(2) = 0.7, compute 1.5, no out
    #   -> 3.2 + 2.2 = 5.4
    assert latency_schedule(inst, [0, 0, 0, 1, 1]).latency == pytest.approx(5.4)


# ---------------------------------------------------------------- brute force
def brute_latency(inst, device):
    """Latency by an independent longest path: contract each accelerator's nodes, refuse a
    cycle (not one piece), weigh each block as the definition says."""
    n = inst.n
    edges = list(zip(inst.edge_src.tolist(), inst.edge_dst.tolist()))
    block = [("acc", device[v]) if device[v] >= 0 else ("cpu", v) for v in range(n)]
    g = nx.DiGraph()
    g.add_nodes_from(set(block))
    g.add_edges_from((block[a], block[b]) for a, b in edges if block[a] != block[b])
    if not nx.is_directed_acyclic_graph(g):
        return None
    time = {}
    for b in g.nodes:
        if b[0] == "cpu":
            time[b] = float(inst.cpu_latency[b[1]])
            continue
        inside = {v for v in range(n) if block[v] == b}
        senders = {a for a, c in edges if a not in inside and c in inside}
        leaving = {a for a, c in edges if a in inside and c not in inside}
        time[b] = (sum(inst.acc_latency[v] for v in inside)
                   + sum(inst.out_cost[v] for v in senders | leaving))
    finish = {}
    for b in nx.topological_sort(g):
        finish[b] = time[b] + max((finish[p] for p in g.predecessors(b)), default=0.0)
    return max(finish.values())


def brute_optimum(inst):
    best = float("inf")
    for dev in itertools.product(range(-1, inst.accelerators), repeat=inst.n):
        dev = np.array(dev)
        if (~inst.supported & (dev >= 0)).any():
            continue
        if any(inst.size[dev == d].sum() > inst.memory_limit for d in range(inst.accelerators)):
            continue
        got = brute_latency(inst, dev)
        if got is not None:
            best = min(best, got)
    return best


def random_instance(rng: random.Random):
    n, k = rng.randint(3, 7), rng.randint(1, 2)
    edges = sorted({(a, b) for b in range(1, n) for a in rng.sample(range(b), rng.randint(
        1, min(2, b)))})
    return instance([rng.choice([1, 2, 5, 9]) * 1.0 for _ in range(n)],
                    [rng.choice([0.5, 1, 3]) * 1.0 for _ in range(n)], edges,
                    [rng.choice([0, 0.5, 2, 4]) * 1.0 for _ in range(n)], k=k,
                    size=[rng.choice([0, 1, 2]) for _ in range(n)], memory=rng.choice([3, 9]),
                    supported=[int(rng.random() > 0.2) for _ in range(n)])


@pytest.mark.parametrize("seed", range(20))
def test_cpsat_equals_the_brute_force_and_auto_is_valid_and_not_below(seed):
    inst = random_instance(random.Random(seed))
    best = brute_optimum(inst)
    res = solve_latency(inst, time_limit=10)
    assert res.status == "OPTIMAL"
    assert brute_latency(inst, res.device) == pytest.approx(res.latency, rel=1e-9)
    assert res.latency == pytest.approx(best, rel=1e-6)
    assert res.bound <= res.latency + 1e-9
    dev = latency_heuristic(inst)
    got = brute_latency(inst, dev)
    assert got is not None and got >= best - 1e-9
    assert not (~inst.supported & (dev >= 0)).any()
    assert all(inst.size[dev == d].sum() <= inst.memory_limit for d in range(inst.accelerators))


# ---------------------------------------------------------------- the command line
@pytest.mark.parametrize("strategy", ["auto", "cpsat"])
def test_partition_a_model_for_latency(tmp_path, capsys, strategy):
    out = tmp_path / "p.json"
    limit = ["--time-limit", "2"] if strategy == "cpsat" else []
    assert cli(["partition", str(SQUEEZENET), "--platform", str(PLATFORM), "--objective",
                "latency", "--strategy", strategy, *limit, "--json", str(out)]) == 0
    text = capsys.readouterr().out
    line = next(x for x in text.splitlines() if x.startswith("latency: "))
    data = json.loads(out.read_text())
    fig = next(v["latency"] for v in _dicts(data) if isinstance(v.get("latency"), dict))
    assert f"{fig['latency']:.6g}" in line and " -> ".join(fig["critical_path"]) in line
    assert fig["status"] in ("OPTIMAL", "FEASIBLE") and fig["contiguous"]


def _dicts(data):
    """Every dict inside a JSON document."""
    if isinstance(data, dict):
        yield data
        for v in data.values():
            yield from _dicts(v)
    elif isinstance(data, list):
        for v in data:
            yield from _dicts(v)


@pytest.mark.parametrize("strategy", ["auto", "cpsat"])
def test_an_unknown_objective_is_one_line(capsys, strategy):
    assert cli(["partition", str(SQUEEZENET), "--platform", str(PLATFORM), "--objective",
                "speed", "--strategy", strategy]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "speed" in err
