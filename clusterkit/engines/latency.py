"""The ``latency`` objective of a placement instance: the single-sample latency of Tarnawski et
al.'s latency IP and evaluator (``latency-ip/lip.py``, ``latency-greedy/greedy.cpp
computeLatency``), and the fast heuristic ``auto`` gives for it.

**Latency.** Each accelerator's nodes form *pieces*; a piece runs as one call: it starts when
every node outside it with a consumer in it has finished, then takes the transfer cost of each
such node (once per node), the accelerator latency of its nodes and the transfer cost of each of
its nodes with a consumer outside it (once per node); all its nodes finish together at its end.
A CPU node (every CPU alike: the paper's IP ignores ``maxCPUs``, as many cores as the graph is
wide) starts when all its predecessors have finished and takes its CPU latency, paying no
transfers. The latency is the largest finish time: the longest path through the graph with
every accelerator's pieces contracted. A placement is *contiguous* for latency (the paper's
latency contiguity, ``MAX_SUBGRAPHS_PER_FPGA = 1``) when that contraction, one piece per
accelerator, leaves a DAG: no path leaves an accelerator and comes back, directly or through
another accelerator; CPU nodes may sit anywhere. A non-contiguous accelerator is split into
pieces by the most times a path enters it (``greedy.cpp``'s ``reworkSplitIntoContiguous``),
each piece a call of its own, as that evaluator does.

**Heuristic** (:func:`latency_heuristic`): the all-CPU placement, the throughput heuristic's
answer (up to :data:`CHAIN_UNITS` units), and a greedy fill of the accelerators along each unit
order (the paper's latency baseline, kept contiguous), each made contiguous; the best by
latency, then a local search moving whole pieces to the CPU, boundary units to a neighbour's
device and the fastest CPU units to an idle accelerator while the latency drops. Each
evaluation is ``O(n + m)``; the search makes at most ``min(MAX_EVALS, EVAL_BUDGET / (n + m))``
of them, so ``O(EVAL_BUDGET)`` steps beyond the candidates (about 1 s at 2,000 nodes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from clusterkit.constraints.core import Problem
from clusterkit.engines.activations import activation_problems, check_memory, repair_activations
from clusterkit.engines.throughput import (
    Units,
    build_units,
    device_names,
    heuristic_placement,
    instance_of,
    ordered,
    placement_problems,
    to_partition,
    unit_costs,
    unit_depths,
)
from clusterkit.errors import CycleError, StrategyError
from clusterkit.graph.algorithms import topological_order
from clusterkit.io.placement_instance import HOST, PlacementInstance
from clusterkit.result.model import Partition

#: the local search's evaluations times (nodes + edges): about this many edge visits in all
EVAL_BUDGET = 2_000_000
#: ... and at most this many evaluations on any graph
MAX_EVALS = 3000
#: the local search tries this many CPU units on an idle accelerator
SEEDS = 16
#: the throughput heuristic's answer is a candidate up to this many units (it takes seconds
#: beyond)
CHAIN_UNITS = 1000


@dataclass
class LatencySchedule:
    """The single-sample schedule of a placement: the ``latency``, each node's ``finish``,
    each node's ``block`` (a CPU node alone, or its accelerator piece), the ``critical`` path
    (node indices, source to sink: each the predecessor that finished last) and whether every
    accelerator is one piece (``contiguous``)."""

    latency: float
    finish: np.ndarray
    block: np.ndarray
    critical: list[int]
    contiguous: bool


def check_inference(inst: PlacementInstance) -> None:
    """The latency objective is the paper's for inference graphs: refuse backward nodes."""
    if inst.backward.any():
        v = int(np.flatnonzero(inst.backward)[0])
        raise StrategyError(f"objective latency: instance {inst.name!r} has backward node "
                            f"{inst.ids[v]} (latency is for inference graphs only)")


def _blocks(inst: PlacementInstance, dev: np.ndarray, split: bool) -> np.ndarray:
    """Block per node: CPU node ``v`` is block ``v``; accelerator ``d``'s nodes block
    ``n + d`` (``split`` False) or ``n + d * n + level`` (the most entries into ``d`` along a
    path to the node, ``greedy.cpp``'s pieces)."""
    n = inst.n
    block = np.arange(n, dtype=np.int64)
    on = dev >= 0
    if not split:
        block[on] = n + dev[on]
        return block
    order = topological_order(n, inst.edge_src, inst.edge_dst)
    preds = _preds(inst)
    for d in sorted(set(dev[on].tolist())):
        level = [0] * n
        for v in order:
            inside = dev[v] == d
            best = 1 if inside else 0
            for u in preds[v]:
                best = max(best, level[u] + int(inside and dev[u] != d))
            level[v] = best
        mine = np.flatnonzero(dev == d)
        block[mine] = n + d * n + np.asarray(level, dtype=np.int64)[mine]
    return block


def _preds(inst: PlacementInstance) -> list[list[int]]:
    preds: list[list[int]] = [[] for _ in range(inst.n)]
    for a, b in zip(inst.edge_src.tolist(), inst.edge_dst.tolist()):
        preds[b].append(a)
    return preds


def latency_schedule(inst: PlacementInstance, device: Sequence[int] | np.ndarray
                     ) -> LatencySchedule:
    """The schedule of the module docstring for ``device`` (one per node: ``0..k-1`` an
    accelerator, negative a CPU)."""
    dev = np.asarray(device, dtype=np.int64)
    try:
        return _schedule(inst, dev, _blocks(inst, dev, split=False), True)
    except CycleError:
        return _schedule(inst, dev, _blocks(inst, dev, split=True), False)


def _schedule(inst: PlacementInstance, dev: np.ndarray, block: np.ndarray,
              contiguous: bool) -> LatencySchedule:
    """Longest path over the blocks in a topological order (raises CycleError without one)."""
    n = inst.n
    ids, blk = np.unique(block, return_inverse=True)
    nb = len(ids)
    src, dst = inst.edge_src, inst.edge_dst
    cross = blk[src] != blk[dst]
    order = topological_order(nb, blk[src[cross]], blk[dst[cross]])
    time = _block_times(inst, dev, blk, nb, cross)
    into: list[list[int]] = [[] for _ in range(nb)]
    for a, b in zip(src[cross].tolist(), blk[dst[cross]].tolist()):
        into[b].append(a)
    fin_b = [0.0] * nb
    last = [-1] * nb  # the input node that finished last
    for b in order:
        start, arg = 0.0, -1
        for u in into[b]:
            f = fin_b[blk[u]]
            if arg < 0 or f > start:
                start, arg = f, u
        fin_b[b], last[b] = start + time[b], arg
    finish = np.asarray(fin_b)[blk] if n else np.zeros(0)
    if not n:
        return LatencySchedule(0.0, finish, block, [], True)
    end = int(np.argmax(finish))
    path = [end]
    while last[blk[path[-1]]] >= 0:
        path.append(last[blk[path[-1]]])
    return LatencySchedule(float(finish[end]), finish, block, path[::-1], contiguous)


def _block_times(inst: PlacementInstance, dev: np.ndarray, blk: np.ndarray, nb: int,
                 cross: np.ndarray) -> np.ndarray:
    """Per block: a CPU node's CPU latency; a piece's transfers in, latency and transfers
    out (each node's cost once per piece)."""
    on = dev >= 0
    lat = np.where(on, inst.acc_latency, inst.cpu_latency)
    time = np.bincount(blk, weights=lat, minlength=nb)
    src, dst = inst.edge_src[cross], inst.edge_dst[cross]
    to_acc = on[dst]
    pairs = np.unique(src[to_acc] * nb + blk[dst[to_acc]])
    time += np.bincount(pairs % nb, weights=inst.out_cost[pairs // nb], minlength=nb)
    senders = np.unique(src[on[src]])
    time += np.bincount(blk[senders], weights=inst.out_cost[senders], minlength=nb)
    return time


def latency_of(inst: PlacementInstance, device: Sequence[int] | np.ndarray) -> float:
    """The single-sample latency of ``device`` (:func:`latency_schedule`)."""
    return latency_schedule(inst, device).latency


def latency_contiguous(inst: PlacementInstance, device: Sequence[int] | np.ndarray) -> bool:
    """Every accelerator one piece: contracting each accelerator's nodes leaves a DAG."""
    dev = np.asarray(device, dtype=np.int64)
    try:
        _schedule(inst, dev, _blocks(inst, dev, split=False), True)
    except CycleError:
        return False
    return True


def critical_devices(inst: PlacementInstance, sched: LatencySchedule,
                     device: np.ndarray) -> list[str]:
    """The devices along the critical path, consecutive repeats merged (every CPU ``cpu``)."""
    names = device_names(inst)
    out: list[str] = []
    for v in sched.critical:
        d = int(device[v])
        name = names[d] if d >= 0 else "cpu"
        if not out or out[-1] != name:
            out.append(name)
    return out


def latency_bound(inst: PlacementInstance) -> float:
    """A lower bound of every placement's latency: the longest path with each node at its
    faster device (the CPU's where unsupported), transfers ignored."""
    fast = np.where(inst.supported & (inst.accelerators > 0),
                    np.minimum(inst.acc_latency, inst.cpu_latency), inst.cpu_latency)
    if inst.cpus < 1:
        fast = np.where(inst.supported, inst.acc_latency, fast)
    finish = fast.astype(float).copy()
    preds = _preds(inst)
    for v in topological_order(inst.n, inst.edge_src, inst.edge_dst):
        if preds[v]:
            finish[v] = fast[v] + max(finish[u] for u in preds[v])
    return float(finish.max(initial=0.0))


def latency_figures(inst: PlacementInstance, device: np.ndarray, figures: dict[str, Any]
                    ) -> dict[str, Any]:
    """The JSON ``latency`` block: ``figures`` (method, status, bound...) with the latency,
    the critical path's devices and node ids, and whether every accelerator is one piece."""
    sched = latency_schedule(inst, device)
    return {**figures, "latency": sched.latency,
            "critical_path": critical_devices(inst, sched, device),
            "critical_nodes": [int(inst.ids[v]) for v in sched.critical],
            "contiguous": sched.contiguous}


def latency_partition(problem: Problem, inst: PlacementInstance, device: np.ndarray,
                      figures: dict[str, Any]) -> Partition:
    """:func:`~clusterkit.engines.throughput.to_partition` (the ``throughput`` block with
    every load, ``objective`` latency, no max-load bound) plus the ``latency`` block."""
    fig = latency_figures(inst, device, figures)
    part = to_partition(problem, inst, device,
                        {**figures, "contiguous": fig["contiguous"], "bound": None})
    return part.derive(info={"latency": fig})


# ---------------------------------------------------------------- the heuristic
def feasible(inst: PlacementInstance, device: np.ndarray) -> bool:
    """Within memory, host-only nodes on a CPU, groups whole, and contiguous for latency."""
    return not placement_problems(inst, device) and latency_contiguous(inst, device)


def greedy_fill(inst: PlacementInstance, units: Units, order: Sequence[int],
                faster_only: bool) -> np.ndarray:
    """The paper's latency baseline, kept contiguous: units in ``order`` fill accelerator 0,
    then 1, ...; a unit stays on the CPU when it is host-only (or, ``faster_only``, no faster
    on an accelerator); the next accelerator opens when memory is full or when a path from the
    current accelerator through a CPU node reaches the unit (it would come back)."""
    device = np.full(inst.n, HOST, dtype=np.int64)
    preds: list[list[int]] = [[] for _ in range(units.count)]
    for a, succ in enumerate(units.succ):
        for b in succ:
            preds[b].append(a)
    mem = [np.asarray(m, dtype=np.int64) for m in units.members]
    acc = 0
    used = 0.0
    tainted = [False] * units.count  # reached from ``acc`` through a node not on it
    on = [False] * units.count
    for u in order:
        m = mem[u]
        size = float(inst.size[m].sum())
        ok = bool(inst.supported[m].all()) and size <= inst.memory_limit
        if faster_only:
            ok = ok and float(inst.acc_latency[m].sum()) < float(inst.cpu_latency[m].sum())
        blocked = any(tainted[p] for p in preds[u])
        if ok and acc < inst.accelerators and (blocked or used + size > inst.memory_limit):
            if used > 0:
                acc, used = acc + 1, 0.0
                tainted, on = [False] * units.count, [False] * units.count
                blocked = False
        if ok and acc < inst.accelerators and not blocked:
            device[m] = acc
            used += size
            on[u] = True
        else:
            tainted[u] = blocked or any(on[p] for p in preds[u])
    return device


def make_contiguous(inst: PlacementInstance, device: np.ndarray) -> np.ndarray:
    """``device`` with every accelerator one piece: an accelerator's pieces but the one of
    most accelerator time go to the CPU, and (pieces of several accelerators in a cycle) the
    accelerator of least time, until the contraction is a DAG; then groups off an accelerator
    over its activation limit (:func:`~clusterkit.engines.activations.repair_activations`)."""
    dev = np.where(device < 0, HOST, device)
    if activation_problems(inst, dev) and inst.cpus >= 1:
        fixed = repair_activations(inst, dev)
        dev = np.where(fixed < 0, HOST, fixed)
    while inst.cpus >= 1 and not latency_contiguous(inst, dev):
        block = _blocks(inst, dev, split=True)
        moved = False
        for d in sorted(set(dev[dev >= 0].tolist())):
            mine = np.flatnonzero(dev == d)
            pieces = sorted(set(block[mine].tolist()))
            if len(pieces) > 1:
                time = [float(inst.acc_latency[mine[block[mine] == p]].sum()) for p in pieces]
                keep = pieces[int(np.argmax(time))]
                dev[mine[block[mine] != keep]] = HOST
                moved = True
        if not moved:
            busy = sorted(set(dev[dev >= 0].tolist()))
            least = min(busy, key=lambda d: float(inst.acc_latency[dev == d].sum()))
            dev[dev == least] = HOST
    return dev


def candidates(inst: PlacementInstance, units: Units) -> list[np.ndarray]:
    """The starting placements of the heuristic (made contiguous; feasible or not)."""
    return [make_contiguous(inst, d) for d in _starts(inst, units)]


def unit_orders(inst: PlacementInstance, units: Units) -> list[list[int]]:
    """Topological orders of the unit DAG the greedy fills follow: by smallest first member
    (the file's order where it is topological) and by level (as soon as possible), the first
    two of the chain heuristic's :func:`~clusterkit.engines.throughput.start_orders`."""
    costs = unit_costs(inst, units)
    level, _ = unit_depths(units, costs)
    first = [m[0] for m in units.members]
    by_first = ordered(units, costs, first)
    by_level = ordered(units, costs, list(zip(level, first)))
    return [by_first] if by_level == by_first else [by_first, by_level]


def _starts(inst: PlacementInstance, units: Units) -> list[np.ndarray]:
    """The all-CPU placement, the throughput heuristic's and the greedy fills."""
    out = []
    if inst.cpus >= 1:
        out.append(np.full(inst.n, HOST, dtype=np.int64))
    try:
        if units.count <= CHAIN_UNITS:
            chain = heuristic_placement(inst).device
            out.append(np.where(chain < 0, HOST, chain))
    except StrategyError:  # memory admits no chain: the other candidates
        pass
    for order in unit_orders(inst, units):
        for faster in (False, True):
            out.append(greedy_fill(inst, units, order, faster))
    return out


def latency_heuristic(inst: PlacementInstance) -> np.ndarray:
    """The heuristic of the module docstring: a feasible device per node (CPU nodes on
    :data:`HOST`); raises :class:`StrategyError` when no candidate is feasible."""
    check_inference(inst)
    units = build_units(inst)
    found = [d for d in candidates(inst, units) if feasible(inst, d)]
    if not found:
        raise StrategyError(f"auto: instance {inst.name!r}: no feasible latency placement "
                            "found; try --strategy cpsat --objective latency")
    scored = [(latency_of(inst, d), i) for i, d in enumerate(found)]
    best = found[min(scored)[1]]
    return improve(inst, units, best)


def improve(inst: PlacementInstance, units: Units, device: np.ndarray) -> np.ndarray:
    """Local search: for each unit next to another device (a CPU unit next to an
    accelerator, or an accelerator unit with a neighbour elsewhere), and for each whole
    accelerator, try it on the neighbour's accelerator or on the CPU; keep the first move
    that lowers the latency and stays feasible, until none does or the budget is spent."""
    evals = min(MAX_EVALS, max(20, EVAL_BUDGET // max(1, inst.n + len(inst.edge_src))))
    best = latency_of(inst, device)
    improved = True
    while improved and evals > 0:
        improved = False
        for nodes, to in _moves(inst, units, device):
            if evals <= 0:
                break
            trial = device.copy()
            trial[nodes] = to
            evals -= 1
            got = latency_of(inst, trial)
            if got < best - 1e-12 * max(1.0, best) and feasible(inst, trial):
                device, best, improved = trial, got, True
                break
    return device


def _moves(inst: PlacementInstance, units: Units, device: np.ndarray
           ) -> list[tuple[np.ndarray, int]]:
    """Whole accelerators to the CPU, boundary units to a neighbour's device, then the
    :data:`SEEDS` CPU units that an accelerator runs fastest (by time saved) to an idle one."""
    moves: list[tuple[np.ndarray, int]] = []
    busy = sorted(set(device[device >= 0].tolist()))
    for d in busy:
        moves.append((np.flatnonzero(device == d), HOST))
    seen = set()
    for a, succ in enumerate(units.succ):
        for b in succ:
            da, db = int(device[units.members[a][0]]), int(device[units.members[b][0]])
            if da == db:
                continue
            for u, to in ((a, db), (b, da)):
                if (u, to) not in seen:
                    seen.add((u, to))
                    moves.append((np.asarray(units.members[u], dtype=np.int64), to))
    idle = [d for d in range(inst.accelerators) if d not in busy]
    if idle:
        gain = [(float((inst.acc_latency[m] - inst.cpu_latency[m]).sum()), u)
                for u, m in enumerate(units.members)
                if device[m[0]] < 0 and inst.supported[m].all()]
        for _, u in sorted(gain)[:SEEDS]:
            moves.append((np.asarray(units.members[u], dtype=np.int64), idle[0]))
    return moves


def run_latency_heuristic(problem: Problem) -> Partition:
    """``auto --objective latency`` on a placement instance: :func:`latency_heuristic`."""
    inst = instance_of(problem)
    if inst is None:
        raise StrategyError("auto: objective latency needs a placement instance (a "
                            "maxFPGAs/nodes/edges .json file, or a model with --platform)")
    check_memory(inst)
    device = latency_heuristic(inst)
    figures = {"objective": "latency", "method": "latency_heuristic", "status": "FEASIBLE",
               "bound": None}
    return latency_partition(problem, inst, device, figures)
