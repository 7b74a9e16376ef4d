"""CP-SAT for the ``latency`` objective: the least single-sample latency of a placement instance
over the placements contiguous for latency (definitions in :mod:`clusterkit.engines.latency`),
exact, with a proven bound; the throughput model's transfer terms
(:mod:`clusterkit.engines.cpsat.throughput`) with times added, as the paper's ``lip.py``.

- ``x[u][s]``: unit ``u`` (a must-link group, fused along cycles) on accelerator ``s``;
  ``h[u]``: on a CPU (any: CPUs are alike); exactly one each; host-only units on a CPU;
- ``r[u][s]``: ``u`` is at or after some unit of ``s`` (``r >= x``, and along every arc);
  contiguity: for an arc ``u -> w``, ``x[w][s] + r[u][s] - x[u][s] <= 1`` (no path leaves
  ``s`` and comes back), and accelerators in topological order (``x[u][t] + r[u][s] <= 1``
  for ``t < s``: no loss, they are interchangeable), so the contraction is a DAG;
- per accelerator a piece with start ``S[s]`` and finish ``F[s] >= S[s] + load(s)`` (the
  throughput model's load: latency plus the transfer literals ``out``/``in``); per node a
  finish ``L[v]``: ``L[v] >= F[s]`` when on ``s``, ``L[v] >= L[p] + cpuLatency(v)`` for each
  predecessor ``p`` when on a CPU; transfer precedence: ``S[s] >= L[p]`` for an edge ``p -> v``
  cut by ``v`` on ``s`` and ``p`` not (the edge's cut literals);
- minimize ``Z >= L[v]``.

Times are scaled to integers rounding down (so the model's latency is at most the true one and
its bound, scaled back, a proven lower bound); the answer's latency is recomputed exactly by
:func:`~clusterkit.engines.latency.latency_of`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from ortools.sat.python import cp_model

from clusterkit.constraints.core import Problem
from clusterkit.engines.activations import check_memory
from clusterkit.engines.cpsat.solve import (
    STATUS,
    Clock,
    SolverSettings,
    check_work_limit,
    clock_parameters,
)
from clusterkit.engines.cpsat.throughput import (
    SCALE_TOP,
    _transfer_terms,
    memory_units,
    solve_within_memory,
    warm_devices,
)
from clusterkit.engines.latency import (
    check_inference,
    feasible,
    latency_bound,
    latency_heuristic,
    latency_of,
    latency_partition,
    latency_schedule,
    unit_orders,
)
from clusterkit.engines.throughput import Units, build_units, instance_of
from clusterkit.errors import InfeasibleError, StrategyError
from clusterkit.io.placement_instance import HOST, PlacementInstance
from clusterkit.result.model import Partition


@dataclass
class LatencyModel:
    """The CP-SAT model and the handles the hint and the reading need."""

    m: cp_model.CpModel
    units: Units
    x: list[list[Any]]
    h: list[Any]
    r: list[list[Any]]
    z: Any
    scale: float


def build(inst: PlacementInstance) -> LatencyModel:
    """The model of the module docstring."""
    units = build_units(inst)
    k = inst.accelerators
    total = float(inst.acc_latency.sum() + inst.cpu_latency.sum() + 2 * inst.out_cost.sum())
    scale = SCALE_TOP / max(1e-30, total)
    top = int(SCALE_TOP * (k + 2)) + 1  # every path: each node once, each term twice per slot
    m = cp_model.CpModel()
    x = [[m.NewBoolVar(f"x{u}_{s}") for s in range(k)] for u in range(units.count)]
    h = [m.NewBoolVar(f"h{u}") if inst.cpus >= 1 else 0 for u in range(units.count)]
    for u, mem in enumerate(units.members):
        m.AddExactlyOne(x[u] + ([h[u]] if inst.cpus >= 1 else []))
        if not inst.supported[mem].all():
            for var in x[u]:
                m.Add(var == 0)
    r = _contiguity(m, units, x, k)
    size, limit = memory_units(inst, [np.asarray(mb, dtype=np.int64) for mb in units.members])
    for s in range(k):
        m.Add(sum(size[u] * x[u][s] for u in range(units.count)) <= limit)
    lm = LatencyModel(m, units, x, h, r, m.NewIntVar(0, top, "Z"), scale)
    _times(inst, lm, top)
    m.Minimize(lm.z)
    return lm


def _contiguity(m: cp_model.CpModel, units: Units, x: list[list[Any]], k: int
                ) -> list[list[Any]]:
    """``r`` and the contiguity and order constraints of the module docstring."""
    r = [[m.NewBoolVar(f"r{u}_{s}") for s in range(k)] for u in range(units.count)]
    for u in range(units.count):
        for s in range(k):
            m.AddImplication(x[u][s], r[u][s])
            for t in range(s):
                m.AddBoolOr([x[u][t].Not(), r[u][s].Not()])
            for w in units.succ[u]:
                m.AddImplication(r[u][s], r[w][s])
                m.Add(x[w][s] + r[u][s] - x[u][s] <= 1)
    return r


def _times(inst: PlacementInstance, lm: LatencyModel, top: int) -> None:
    """Pieces' start and finish, nodes' finish, the transfer terms and precedence."""
    m, x, h, units, scale = lm.m, lm.x, lm.h, lm.units, lm.scale
    k = inst.accelerators
    uo = units.unit_of.tolist()
    terms = _transfer_terms(inst, units, scale)
    acc = [int(inst.acc_latency[mem].sum() * scale) for mem in units.members]
    start = [m.NewIntVar(0, top, f"S{s}") for s in range(k)]
    fin = [m.NewIntVar(0, top, f"F{s}") for s in range(k)]
    for s in range(k):
        comm = []
        for t, (u, outs, c) in enumerate(terms):
            out, inn = m.NewBoolVar(f"o{t}_{s}"), m.NewBoolVar(f"i{t}_{s}")
            for w in outs:
                m.Add(out >= x[u][s] - x[w][s])
                m.Add(inn >= x[w][s] - x[u][s])
            comm.append(c * (out + inn))
        m.Add(fin[s] >= start[s] + sum(acc[u] * x[u][s] for u in range(units.count))
              + sum(comm))
    lat = [m.NewIntVar(0, top, f"L{v}") for v in range(inst.n)]
    cpu = [int(c * scale) for c in inst.cpu_latency.tolist()]
    for v in range(inst.n):
        u = uo[v]
        for s in range(k):
            m.Add(lat[v] >= fin[s]).OnlyEnforceIf(x[u][s])
        if inst.cpus >= 1:
            m.Add(lat[v] >= cpu[v]).OnlyEnforceIf(h[u])
        m.Add(lm.z >= lat[v])
    for p, v in zip(inst.edge_src.tolist(), inst.edge_dst.tolist()):
        if inst.cpus >= 1:
            m.Add(lat[v] >= lat[p] + cpu[v]).OnlyEnforceIf(h[uo[v]])
        if uo[p] == uo[v]:
            continue
        for s in range(k):
            m.Add(start[s] >= lat[p]).OnlyEnforceIf([x[uo[v]][s], x[uo[p]][s].Not()])


def add_hint(lm: LatencyModel, inst: PlacementInstance, device: np.ndarray) -> None:
    """Hint ``x``, ``h`` and ``r`` from a device per node."""
    m, units = lm.m, lm.units
    dev = [int(device[mem[0]]) for mem in units.members]
    k = inst.accelerators
    reach = [[dev[u] == s for s in range(k)] for u in range(units.count)]
    for u in unit_orders(inst, units)[0]:
        for w in units.succ[u]:
            reach[w] = [a or b for a, b in zip(reach[w], reach[u])]
    for u in range(units.count):
        if not isinstance(lm.h[u], int):
            m.AddHint(lm.h[u], int(dev[u] < 0))
        for s in range(k):
            m.AddHint(lm.x[u][s], int(dev[u] == s))
            m.AddHint(lm.r[u][s], int(reach[u][s]))


def read_devices(lm: LatencyModel, inst: PlacementInstance, solver: cp_model.CpSolver
                 ) -> np.ndarray:
    """Device per node of the solver's solution (CPU nodes on :data:`HOST`)."""
    device = np.full(inst.n, HOST, dtype=np.int64)
    for u, row in enumerate(lm.x):
        for s, var in enumerate(row):
            if solver.Value(var):
                device[lm.units.members[u]] = s
    return device


def ordered(inst: PlacementInstance, device: np.ndarray) -> np.ndarray:
    """``device`` with the accelerators renumbered in a topological order of their pieces
    (the model's order; interchangeable accelerators, the same latency)."""
    sched = latency_schedule(inst, device)
    first: dict[int, float] = {}
    for v in np.argsort(sched.finish, kind="stable").tolist():
        d = int(device[v])
        if d >= 0 and d not in first:
            first[d] = len(first)
    out = device.copy()
    for d, i in first.items():
        out[device == d] = int(i)
    return out


@dataclass
class LatencyResult:
    """Device per node, its true latency, the proven bound, the status, the warm start's
    latency and the run's seconds."""

    device: np.ndarray
    latency: float
    bound: float
    status: str
    warm_start: float | None
    seconds: float
    info: dict[str, Any]


def solve_latency(inst: PlacementInstance, *, time_limit: float = 60.0, workers: int = 2,
                  seed: int = 0, deterministic: bool = True, log: bool = False,
                  warm: np.ndarray | None = None, work_limit: float | None = None
                  ) -> LatencyResult:
    """The exact ``latency`` optimum (the module docstring), warm-started from ``warm`` or
    :func:`~clusterkit.engines.latency.latency_heuristic`; never worse than the warm start.
    ``time_limit``: wall-clock seconds; ``work_limit``: CP-SAT's deterministic units too."""
    began = time.perf_counter()
    settings = SolverSettings.checked("cpsat", time_limit, workers, seed, log, deterministic)
    check_inference(inst)
    check_memory(inst)
    warm = _feasible_warm(inst, warm)
    lm = build(inst)
    if warm is not None:
        add_hint(lm, inst, ordered(inst, warm))
    clock = Clock(float(time_limit), settings.deterministic, check_work_limit("cpsat", work_limit))
    solver = clock_parameters(work_limit if work_limit is not None else time_limit, settings,
                              clock)
    code, got, cuts = solve_within_memory(inst, lm.m, solver, clock,
                                          lambda: read_devices(lm, inst, solver),
                                          lambda nodes: add_cut(lm, nodes))
    device, best = warm, latency_of(inst, warm) if warm is not None else math.inf
    warm_lat = best if warm is not None else None
    if got is None and code in (cp_model.OPTIMAL, cp_model.UNKNOWN) and warm is not None:
        code = cp_model.FEASIBLE  # cut short, or no better answer found: the warm start's
    if got is not None and latency_of(inst, got) < best:
        device, best = got, latency_of(inst, got)
    if device is None:
        why = "no placement found that keeps colorClass, maxSizePerFPGA and host-only nodes"
        raise InfeasibleError(f"cpsat: instance {inst.name!r}: {STATUS[code]}: {why}",
                              STATUS[code], why)
    bound = max(solver.BestObjectiveBound() / lm.scale, latency_bound(inst))
    info = {"units": lm.units.count, "wall": solver.WallTime(),
            "deterministic_time": solver.deterministic_time, "hinted": warm is not None,
            "activation_cuts": cuts}
    return LatencyResult(device, best, min(bound, best), STATUS[code], warm_lat,
                         time.perf_counter() - began, info)


def add_cut(lm: LatencyModel, nodes: list[int]) -> None:
    """The units of ``nodes`` are not all on one accelerator."""
    units = sorted({int(lm.units.unit_of[v]) for v in nodes})
    for s in range(len(lm.x[units[0]])):  # every accelerator
        lm.m.Add(sum(lm.x[u][s] for u in units) <= len(units) - 1)


def _feasible_warm(inst: PlacementInstance, warm: np.ndarray | None) -> np.ndarray | None:
    """``warm`` (else the latency heuristic's answer) when feasible for latency."""
    if warm is None:
        try:
            warm = latency_heuristic(inst)
        except StrategyError:
            return None
    warm = np.where(warm < 0, HOST, warm)
    return warm if feasible(inst, warm) else None


def run_latency(problem: Problem, *, contiguous: bool = True, time_limit: float = 60.0,
                workers: int = 2, seed: int = 0, warm_start: Any = True,
                deterministic: bool = True, log: bool = False,
                work_limit: float | None = None) -> Partition:
    """``cpsat`` with ``objective="latency"``: :func:`solve_latency` as a partition with the
    ``throughput`` block (every load) and the ``latency`` block (status, bound, critical path).
    ``warm_start``: True (the latency heuristic), False (all on the CPU) or a Partition."""
    inst = instance_of(problem)
    if inst is None:
        raise StrategyError("cpsat: objective latency needs a placement instance (a "
                            "maxFPGAs/nodes/edges .json file, or a model with --platform)")
    if contiguous is not True:
        raise StrategyError("cpsat: objective latency takes contiguous placements only "
                            "(each accelerator one piece)")
    warm = warm_devices(inst, warm_start, "latency")
    res = solve_latency(inst, time_limit=time_limit, workers=workers, seed=seed,
                        deterministic=deterministic, log=log, warm=warm, work_limit=work_limit)
    figures = {"objective": "latency", "method": "cpsat", "status": res.status,
               "bound": res.bound, "warm_start": res.warm_start,
               "solve_seconds": res.seconds, **res.info}
    return latency_partition(problem, inst, res.device, figures)
