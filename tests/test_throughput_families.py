"""The chain heuristic on small instances of the families it was never tuned on
(``benchmarks/throughput_families.py``: layered DAGs with skewed costs, ONNX models under a
device description, ResNet-34-like chains with host-only taps): its split is valid by a checker
written here, from the instance's arrays and the paper's words, and its reported max load is the
load recomputed here; and on tiny instances of the layered family, CP-SAT's contiguous optimum
equals a brute force over every placement. Quality ratios are the bench's
(``benchmarks/bench_throughput_families.py``), not asserted here."""

from __future__ import annotations

import importlib.util
import itertools
import random
import sys
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from clusterkit.engines.cpsat.throughput import solve_throughput
from clusterkit.engines.throughput import chain_heuristic
from clusterkit.io.loader import load_graph
from clusterkit.io.placement_instance import HOST, PlacementInstance

REPO = Path(__file__).resolve().parents[1]
SPEC = importlib.util.spec_from_file_location("throughput_families",
                                              REPO / "benchmarks" / "throughput_families.py")
assert SPEC is not None and SPEC.loader is not None
families = importlib.util.module_from_spec(SPEC)
sys.modules["throughput_families"] = families  # dataclasses look their module up
SPEC.loader.exec_module(families)
MODELS_DIR = REPO / "tests" / "data" / "models"


# ------------------------------------------------------------------ an independent checker
def loads_of(inst: PlacementInstance, device: list[int]) -> dict[int, float]:
    """Every device's load by the paper's words: an accelerator runs its nodes at fpgaLatency
    and pays a node's edge cost once when the node is on it and some consumer elsewhere, and
    once when the node is elsewhere and some consumer is on it; a CPU runs its nodes at
    cpuLatency and pays no transfers. Devices: 0..k-1 accelerators, -1-j CPU j."""
    consumers: dict[int, set[int]] = {}
    for u, v in zip(inst.edge_src.tolist(), inst.edge_dst.tolist()):
        consumers.setdefault(u, set()).add(v)
    used = set(device) | set(range(inst.accelerators))
    loads = {d: 0.0 for d in used}
    for v, d in enumerate(device):
        loads[d] += float(inst.cpu_latency[v] if d < 0 else inst.acc_latency[v])
    for u, cons in consumers.items():
        where = {device[c] for c in cons}
        cost = float(inst.out_cost[u])
        for d in loads:
            if d < 0:
                continue
            if (device[u] == d and where - {d}) or (device[u] != d and d in where):
                loads[d] += cost
    return loads


def problems(inst: PlacementInstance, device: list[int]) -> list[str]:
    """What makes a placement invalid: a node on no device, an unsupported node on an
    accelerator, an accelerator over its memory, a CPU the instance does not have."""
    out = []
    for v, d in enumerate(device):
        if not -max(inst.cpus, 1) <= d < inst.accelerators:
            out.append(f"node {v} on device {d}")
        elif d >= 0 and not inst.supported[v]:
            out.append(f"unsupported node {v} on accelerator {d}")
    for d in range(inst.accelerators):
        held = sum(float(inst.size[v]) for v, x in enumerate(device) if x == d)
        if held > inst.memory_limit * (1 + 1e-12):
            out.append(f"accelerator {d} holds {held} > {inst.memory_limit}")
    return out


def is_contiguous(inst: PlacementInstance, device: list[int]) -> bool:
    """The paper's contiguity for a forward graph without must-link groups: the devices can
    be put in a chain that every edge follows (each device's nodes the difference of two
    ideals), i.e. the graph of devices the edges induce has no cycle."""
    g = nx.DiGraph()
    g.add_nodes_from(set(device))
    g.add_edges_from((device[u], device[v]) for u, v in
                     zip(inst.edge_src.tolist(), inst.edge_dst.tolist())
                     if device[u] != device[v])
    return nx.is_directed_acyclic_graph(g)


def model_instances() -> list[PlacementInstance]:
    """Two small bundled models under every device description of the bench."""
    out = []
    for name in ("resnet18", "squeezenet1_1"):
        graph = load_graph(str(MODELS_DIR / f"{name}.onnx"))
        for d in families.DEVICES:
            out.append(families.model_instance(graph, d))
    return out


CASES = ([families.layered_dag(seed, n) for seed, n in
          zip(range(8), (30, 40, 50, 60, 70, 80, 90, 120))]
         + [families.vision_chain(seed) for seed in range(4)] + model_instances())


@pytest.mark.parametrize("inst", CASES, ids=lambda i: i.name)
def test_the_heuristic_gives_a_valid_split_with_its_true_load(inst: PlacementInstance) -> None:
    res = chain_heuristic(inst)
    device = res.device.tolist()
    assert len(device) == inst.n
    assert problems(inst, device) == []
    assert res.max_load == pytest.approx(max(loads_of(inst, device).values()), rel=1e-9)
    assert res.contiguous == is_contiguous(inst, device)
    if res.contiguous or not (~inst.supported).any():  # only host-only units leave the chain
        assert is_contiguous(inst, device)


def test_the_families_are_deterministic() -> None:
    a, b = families.layered_dag(7, 120), families.layered_dag(7, 120)
    assert a.name == b.name and (a.acc_latency == b.acc_latency).all()
    assert (a.edge_src == b.edge_src).all() and a.memory_limit == b.memory_limit
    assert chain_heuristic(a).device.tolist() == chain_heuristic(b).device.tolist()


# ------------------------------------------------------------------ tiny: CP-SAT vs brute force
def brute_force(inst: PlacementInstance) -> float:
    """The least max load over every assignment of the nodes to the devices that is valid and
    contiguous (:func:`problems`, :func:`is_contiguous`)."""
    devices = list(range(inst.accelerators)) + [-1 - j for j in range(inst.cpus)]
    best = float("inf")
    for assign in itertools.product(devices, repeat=inst.n):
        device = list(assign)
        if problems(inst, device) or not is_contiguous(inst, device):
            continue
        best = min(best, max(loads_of(inst, device).values()))
    return best


@pytest.mark.parametrize("seed", range(10))
def test_cpsat_equals_brute_force_on_tiny_layered_dags(seed: int) -> None:
    rng = random.Random(seed)
    cpus = 2 if seed % 5 == 4 else 1
    n = 6 if cpus == 2 else rng.randrange(5, 9)
    inst = families.layered_dag(1000 + seed, n, accelerators=2, cpus=cpus)
    want = brute_force(inst)
    res = solve_throughput(inst, contiguous=True, time_limit=10.0, workers=1,
                           warm=np.full(inst.n, HOST, dtype=np.int64))
    assert res.status == "OPTIMAL"
    device = res.device.tolist()
    assert problems(inst, device) == [] and is_contiguous(inst, device)
    assert max(loads_of(inst, device).values()) == pytest.approx(want, rel=1e-6)


def test_the_heuristic_trades_the_units_that_run_best_on_the_cpu() -> None:
    """On an accelerator-heavy layered DAG (some nodes 0.3x as fast on the CPU) the CPU must
    take the nodes it runs best, scattered over the accelerators' layers: the heuristic's
    split is valid and scores as reported by the checker here, and it is within the bench's
    5% of CP-SAT's contiguous answer in 10 s (started from the all-CPU split, as the bench
    does for a split that is not contiguous)."""
    inst = families.layered_dag(101, 80)
    heur = chain_heuristic(inst)
    device = heur.device.tolist()
    assert problems(inst, device) == []
    assert max(loads_of(inst, device).values()) == pytest.approx(heur.max_load, rel=1e-9)
    warm = heur.device if heur.contiguous else np.full(inst.n, HOST, dtype=np.int64)
    exact = solve_throughput(inst, contiguous=True, time_limit=10.0, workers=2, warm=warm)
    assert heur.max_load <= 1.05 * exact.max_load
