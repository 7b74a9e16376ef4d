"""CP-SAT for the ``throughput`` objective: the least largest device load of a placement
instance (definitions in :mod:`clusterkit.engines.throughput`), exact, with a proven bound.

Phases as the rest of the package: build (slots, variables, loads), solve, read. Units (must-link
groups; for contiguous placements fused along cycles of the order) go to *slots*:

- non-contiguous: slot ``d < k`` is accelerator ``d``, slots ``k .. k+c-1`` the ``c =
  maxCPUs`` CPUs; ``x[u, s]`` booleans, one slot per unit;
- contiguous: ``k + c`` slots form the chain; ``y[u, s]`` = "unit ``u`` sits at slot
  ``s`` or later", monotone in ``s`` and along every order arc (so each slot is the difference of
  two ideals: the paper's contiguity), ``x[u, s] = y[u, s] - y[u, s+1]``; ``cpu[s]`` marks the
  ``c`` slots that are CPUs (each CPU a device of its own, as the paper's DP and IP).

A node ``v`` with consumers in other units pays its transfer cost on slot ``s`` as sender
(``out >= x[unit(v), s] - x[w, s]`` for each consumer unit ``w``) and as receiver (``in >= x[w,
s] - x[unit(v), s]``); nodes with the same unit and consumer units share one term. Minimizing
``T >= load(s)`` makes the terms tight. Times are scaled to integers rounding *down*, so every
model load is at most the true one and the solver's bound, scaled back, is a proven lower bound
of the true optimum (raised to :func:`~clusterkit.engines.throughput.latency_bound` when that
is higher); the answer's load is recomputed exactly by
:func:`~clusterkit.engines.throughput.device_loads`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from ortools.sat.python import cp_model

from clusterkit.constraints.core import Problem
from clusterkit.engines.activations import activation_cut, check_memory
from clusterkit.engines.cpsat.solve import (
    STATUS,
    Clock,
    SolverSettings,
    check_work_limit,
    clock_parameters,
)
from clusterkit.engines.throughput import (
    Units,
    build_units,
    device_chain,
    device_loads,
    device_slots,
    heuristic_placement,
    instance_of,
    latency_bound,
    partition_devices,
    placement_problems,
    to_partition,
)
from clusterkit.errors import InfeasibleError, StrategyError
from clusterkit.io.placement_instance import HOST, PlacementInstance, cpu_device
from clusterkit.result.model import Partition

#: the largest scaled load: coefficients are times * SCALE_TOP / (sum of all times)
SCALE_TOP = 1e9


@dataclass
class ThroughputResult:
    """Device per node (:data:`HOST` = -1), its true max load, the proven lower bound of the
    optimum, the solver status and the warm start's load; ``seconds`` of the whole run."""

    device: np.ndarray
    max_load: float
    bound: float
    status: str
    contiguous: bool
    warm_start: float | None
    seconds: float
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class ThroughputModel:
    """The CP-SAT model and the handles the hint and the reading need."""

    m: cp_model.CpModel
    units: Units
    x: list[list[Any]]
    cpu: list[Any]
    y: list[list[Any]] | None
    terms: list[tuple[int, tuple[int, ...], int]]
    out: list[list[Any]]
    inn: list[list[Any]]
    top: Any
    scale: float


def slot_count(inst: PlacementInstance) -> int:
    """Accelerators plus one slot per CPU the instance allows."""
    return inst.accelerators + max(inst.cpus, 0)


def build(inst: PlacementInstance, contiguous: bool) -> ThroughputModel:
    """The model of the module docstring."""
    units = build_units(inst, contiguous)
    scale = SCALE_TOP / max(1e-30, float(inst.acc_latency.sum() + inst.cpu_latency.sum()
                                         + 2 * inst.out_cost.sum()))
    m = cp_model.CpModel()
    nslot = slot_count(inst)
    x = [[m.NewBoolVar(f"x{u}_{s}") for s in range(nslot)] for u in range(units.count)]
    cpu = _cpu_slots(m, inst, nslot, contiguous)
    y = _chain(m, units, x, nslot) if contiguous else None
    if contiguous and inst.cpus > 1:
        _used_first(m, x, cpu)
    if not contiguous:
        for row in x:
            m.AddExactlyOne(row)
        k = inst.accelerators
        _order_interchangeable(m, x, list(range(k)))
        _order_interchangeable(m, x, list(range(k, nslot)))
    tm = ThroughputModel(m, units, x, cpu, y, _transfer_terms(inst, units, scale), [], [],
                         m.NewIntVar(0, int(SCALE_TOP) + 1, "T"), scale)
    _loads(inst, tm)
    m.Minimize(tm.top)
    return tm


def _cpu_slots(m: cp_model.CpModel, inst: PlacementInstance, nslot: int, contiguous: bool
               ) -> list[Any]:
    """``cpu[s]``: slot ``s`` is a CPU (constants for non-contiguous models)."""
    if inst.cpus < 1:
        return [0] * nslot
    if not contiguous:
        return [0] * inst.accelerators + [1] * inst.cpus
    cpu = [m.NewBoolVar(f"cpu{s}") for s in range(nslot)]
    m.Add(sum(cpu) == inst.cpus)
    return cpu


def _used_first(m: cp_model.CpModel, x: list[list[Any]], cpu: list[Any]) -> None:
    """Symmetry breaking of a chain's idle slots: the busy slots come first, and among the idle
    ones the CPUs first (an idle slot's place and kind change no load)."""
    nslot = len(cpu)
    used = [m.NewBoolVar(f"used{s}") for s in range(nslot)]
    for s in range(nslot):
        m.AddBoolOr([row[s] for row in x]).OnlyEnforceIf(used[s])
        for row in x:
            m.AddImplication(row[s], used[s])
        if s:
            m.AddImplication(used[s], used[s - 1])
            if not isinstance(cpu[s], int):
                m.AddImplication(cpu[s], cpu[s - 1]).OnlyEnforceIf(used[s - 1].Not())


def _chain(m: cp_model.CpModel, units: Units, x: list[list[Any]], nslot: int
           ) -> list[list[Any]]:
    """``y[u][s]`` (``s = 0..nslot``, constants at both ends) tied to ``x`` and the order."""
    y = [[1] + [m.NewBoolVar(f"y{u}_{s}") for s in range(1, nslot)] + [0]
         for u in range(units.count)]
    for u in range(units.count):
        for s in range(1, nslot):
            if s > 1:
                m.AddImplication(y[u][s], y[u][s - 1])
            for w in units.succ[u]:
                m.AddImplication(y[u][s], y[w][s])
        for s in range(nslot):
            m.Add(x[u][s] == y[u][s] - y[u][s + 1])
    return y


def _order_interchangeable(m: cp_model.CpModel, x: list[list[Any]], cols: list[int]) -> None:
    """Symmetry breaking of interchangeable devices (the slots ``cols``, all accelerators or
    all CPUs): a unit may open slot ``cols[i]``, ``i > 0``, only when some lower unit is on
    ``cols[i - 1]`` (``seen[i]``: some unit so far is)."""
    seen: list[Any] = [0] * len(cols)
    for u, row in enumerate(x):
        for i in range(1, len(cols)):
            if isinstance(seen[i - 1], int):
                m.Add(row[cols[i]] == 0)
            else:
                m.AddImplication(row[cols[i]], seen[i - 1])
        nxt = []
        for i, s in enumerate(cols):
            b = m.NewBoolVar(f"seen{u}_{s}")
            m.AddBoolOr([row[s]] + ([] if isinstance(seen[i], int) else [seen[i]])
                        ).OnlyEnforceIf(b)
            m.AddImplication(row[s], b)
            if not isinstance(seen[i], int):
                m.AddImplication(seen[i], b)
            nxt.append(b)
        seen = nxt


def _transfer_terms(inst: PlacementInstance, units: Units, scale: float
                    ) -> list[tuple[int, tuple[int, ...], int]]:
    """(unit, consumer units, scaled cost) per class of nodes paying alike, costs summed."""
    acc: dict[tuple[int, tuple[int, ...]], float] = {}
    uo = units.unit_of.tolist()
    for v, outs in enumerate(units.out_units):
        if outs and inst.out_cost[v] > 0:
            key = (uo[v], tuple(outs))
            acc[key] = acc.get(key, 0.0) + float(inst.out_cost[v])
    return [(u, outs, int(c * scale)) for (u, outs), c in sorted(acc.items())
            if int(c * scale) > 0]


#: the weights' unit in CP-SAT when an instance's sizes or limit are fractional: a millionth
MEMORY_SCALE = 10**6


def memory_units(inst: PlacementInstance, members: list[np.ndarray]) -> tuple[list[int], int]:
    """Each group's weights and the accelerator's limit as CP-SAT integers: as given when all
    are whole numbers, else in millionths (groups rounded up, the limit down: never looser
    than the instance). An instance too large for 64-bit sums is one line."""
    sizes = [float(inst.size[i].sum()) for i in members]
    limit = float(inst.memory_limit)
    whole = all(float(v).is_integer() for v in [*sizes, limit])
    scale = 1 if whole else MEMORY_SCALE
    if (sum(sizes) + limit) * scale >= 2.0**62:
        raise StrategyError(f"cpsat: instance {inst.name!r}: weights of {sum(sizes):g} with "
                            f"fractional sizes exceed CP-SAT's 64-bit integers at 1e-6 "
                            f"resolution; give sizes in whole units")
    return [math.ceil(v * scale) for v in sizes], math.floor(limit * scale)


def _loads(inst: PlacementInstance, tm: ThroughputModel) -> None:
    """Transfer variables, the load of every slot bounded by ``T``, memory and host-only."""
    m, x, units, scale = tm.m, tm.x, tm.units, tm.scale
    nslot = len(tm.cpu)
    mem = [np.asarray(mb, dtype=np.int64) for mb in units.members]
    acc = [int(inst.acc_latency[i].sum() * scale) for i in mem]
    cpu_lat = [int(inst.cpu_latency[i].sum() * scale) for i in mem]
    size, limit = memory_units(inst, mem)
    host_only = [bool((~inst.supported[i]).any()) for i in mem]
    for s in range(nslot):
        out = [m.NewBoolVar(f"o{t}_{s}") for t in range(len(tm.terms))]
        inn = [m.NewBoolVar(f"i{t}_{s}") for t in range(len(tm.terms))]
        for t, (u, outs, _) in enumerate(tm.terms):
            for w in outs:
                m.Add(out[t] >= x[u][s] - x[w][s])
                m.Add(inn[t] >= x[w][s] - x[u][s])
        tm.out.append(out)
        tm.inn.append(inn)
        comm = sum(c * (out[t] + inn[t]) for t, (_, _, c) in enumerate(tm.terms))
        acc_load = sum(acc[u] * x[u][s] for u in range(units.count)) + comm
        host_load = sum(cpu_lat[u] * x[u][s] for u in range(units.count))
        _when(m, tm.top >= acc_load, tm.cpu[s], False)
        _when(m, tm.top >= host_load, tm.cpu[s], True)
        _when(m, sum(size[u] * x[u][s] for u in range(units.count))
              <= limit, tm.cpu[s], False)
        for u in range(units.count):
            if host_only[u]:
                if isinstance(tm.cpu[s], int):
                    if not tm.cpu[s]:
                        m.Add(x[u][s] == 0)
                else:
                    m.AddImplication(x[u][s], tm.cpu[s])


def _when(m: cp_model.CpModel, ct: Any, cpu: Any, host: bool) -> None:
    """Add ``ct`` for a slot that is the host (``host``) or an accelerator (not ``host``)."""
    if isinstance(cpu, int):
        if bool(cpu) == host:
            m.Add(ct)
        return
    m.Add(ct).OnlyEnforceIf(cpu if host else cpu.Not())


def chain_slots(inst: PlacementInstance, units: Units, device: np.ndarray,
                contiguous: bool) -> tuple[list[int], list[int]] | None:
    """Slot per unit for ``device`` (one device per node) and the slots that are CPUs: the
    device's place in the chain (accelerators and CPUs ordered by the order arcs) when
    ``contiguous`` - None when they form no chain - else the device itself, accelerators and
    CPUs each renumbered by their first unit (the symmetry breaking's order)."""
    k, nslot = inst.accelerators, slot_count(inst)
    first = [int(mb[0]) for mb in units.members]
    dev = device_slots(inst, device[first]).tolist()
    if not contiguous:
        pos: dict[int, int] = {}
        for group, base in ((range(k), 0), (range(k, nslot), k)):
            seen = list(dict.fromkeys(d for d in dev if d in group))
            seen += [d for d in group if d not in seen]
            pos.update({d: base + i for i, d in enumerate(seen)})
        return ([pos[d] for d in dev], list(range(k, nslot))) if len(pos) == nslot else None
    chain = device_chain(units, dev)
    if chain is None:
        return None
    idle = [d for d in range(nslot) if d not in chain]
    if inst.cpus > 1:  # idle CPUs first (:func:`_used_first`)
        idle.sort(key=lambda d: d < k)
    full = chain + idle
    if len(full) != nslot:
        return None
    at = {d: i for i, d in enumerate(full)}
    return [at[d] for d in dev], [i for i, d in enumerate(full) if d >= k]


def add_hint(tm: ThroughputModel, slots: list[int], cpu_slots: list[int]) -> None:
    """Hint every variable from a slot per unit (``cpu_slots``: the slots that are CPUs)."""
    m = tm.m
    m.ClearHints()
    for u, s0 in enumerate(slots):
        for s, var in enumerate(tm.x[u]):
            m.AddHint(var, int(s == s0))
        if tm.y is not None:
            for s in range(1, len(tm.x[u])):
                m.AddHint(tm.y[u][s], int(s0 >= s))
    for s, c in enumerate(tm.cpu):
        if not isinstance(c, int):
            m.AddHint(c, int(s in cpu_slots))
    for s in range(len(tm.out)):
        for t, (u, outs, _) in enumerate(tm.terms):
            here = slots[u] == s
            m.AddHint(tm.out[s][t], int(here and any(slots[w] != s for w in outs)))
            m.AddHint(tm.inn[s][t], int(not here and any(slots[w] == s for w in outs)))


def read_slots(tm: ThroughputModel, solver: cp_model.CpSolver) -> tuple[list[int], list[int]]:
    """Slot per unit and the slots that are CPUs of the solver's solution."""
    slots = [next(s for s, var in enumerate(row) if solver.Value(var)) for row in tm.x]
    cpus = [s for s, c in enumerate(tm.cpu) if (c if isinstance(c, int) else solver.Value(c))]
    return slots, cpus


def slots_to_devices(inst: PlacementInstance, units: Units, slots: list[int],
                     cpu_slots: list[int]) -> np.ndarray:
    """Device per node: the CPU slots are the CPUs and the others the accelerators, each
    numbered in slot order."""
    acc = [s for s in range(slot_count(inst)) if s not in cpu_slots]
    dev_of_slot = {s: i for i, s in enumerate(acc)}
    dev_of_slot.update({s: cpu_device(j) for j, s in enumerate(cpu_slots)})
    device = np.empty(inst.n, dtype=np.int64)
    for u, s in enumerate(slots):
        device[units.members[u]] = dev_of_slot[s]
    return device


def solve_throughput(inst: PlacementInstance, *, contiguous: bool = True,
                     time_limit: float = 60.0, workers: int = 2, seed: int = 0,
                     deterministic: bool = True, log: bool = False,
                     warm: np.ndarray | None = None, work_limit: float | None = None
                     ) -> ThroughputResult:
    """The exact ``throughput`` optimum (see the module docstring), warm-started from
    ``warm`` (a device per node) or else :func:`heuristic_placement`; never worse than the warm
    start. ``time_limit``: wall-clock seconds of the whole run, the warm start's heuristic
    and the model's build included (the search gets what is left, at least 0.01 s);
    ``work_limit``: CP-SAT's deterministic units as well (the answer reproducible unless the
    wall limit stops it)."""
    start = time.perf_counter()
    settings = SolverSettings.checked("cpsat", time_limit, workers, seed, log, deterministic)
    check_memory(inst)
    warm = _feasible_warm(inst, warm)
    tm = build(inst, contiguous)
    slots = chain_slots(inst, tm.units, warm, contiguous) if warm is not None else None
    if slots is not None:
        add_hint(tm, *slots)
    clock = Clock(float(time_limit), settings.deterministic, check_work_limit("cpsat", work_limit),
                  start=start)
    solver = clock_parameters(work_limit if work_limit is not None else time_limit, settings,
                              clock)
    code, got, cuts = solve_within_memory(
        inst, tm.m, solver, clock,
        lambda: slots_to_devices(inst, tm.units, *read_slots(tm, solver)),
        lambda nodes: add_cut(tm, nodes))
    device = warm
    load = float(device_loads(inst, warm).max()) if warm is not None else math.inf
    warm_load = load if warm is not None else None
    if got is None and code == cp_model.OPTIMAL:  # cut short: the optimum is not proven
        code = cp_model.FEASIBLE
    if got is not None:  # the model's answer, unless the warm start is strictly better
        got_load = float(device_loads(inst, got).max())
        if got_load < load or (slots is None and math.isclose(got_load, load, rel_tol=1e-9)):
            device, load = got, got_load
    # a warm start that forms no chain is a non-contiguous answer, whatever was asked
    asked, contiguous = contiguous, contiguous and (device is got or slots is not None)
    if device is None:
        why = "no placement found that keeps colorClass, maxSizePerFPGA and host-only nodes"
        raise InfeasibleError(f"cpsat: instance {inst.name!r}: {STATUS[code]}: {why}",
                              STATUS[code], why)
    bound = max(solver.BestObjectiveBound() / tm.scale, latency_bound(inst))
    info = {"slots": slot_count(inst), "units": tm.units.count, "terms": len(tm.terms),
            "wall": solver.WallTime(), "deterministic_time": solver.deterministic_time,
            "hinted": slots is not None, "activation_cuts": cuts}
    if got is not None and asked and not contiguous:  # the model bounds only
        info["contiguous_optimum"] = got_load  # contiguous placements, not the warm start
        bound = latency_bound(inst)
    return ThroughputResult(device, load, min(bound, load), STATUS[code], contiguous,
                            warm_load, time.perf_counter() - start, info)


def solve_within_memory(inst: PlacementInstance, model: cp_model.CpModel,
                        solver: cp_model.CpSolver, clock: Clock,
                        read: Callable[[], np.ndarray],
                        cut: Callable[[list[int]], None]) -> tuple[int, np.ndarray | None, int]:
    """Solve ``model``; while its answer (``read``: the device per node of the solver's
    solution) puts an accelerator over its activation limit, add that accelerator's
    :func:`~clusterkit.engines.activations.activation_cut` (``cut``: those nodes share no
    accelerator) and solve again, within the clock's wall time. Returns the last status, the
    answer within memory (None: none found) and the number of cuts. The throughput and the
    latency model both solve this way."""
    cuts = 0
    while True:
        code = solver.Solve(model)
        if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return code, None, cuts
        got = read()
        over = [c for d in range(inst.accelerators)
                if (c := activation_cut(inst, got, d)) is not None]
        if not over:
            return code, got, cuts
        if clock.wall_left() <= 0.01:
            return code, None, cuts
        for nodes in over:
            cut(nodes)
            cuts += 1
        solver.parameters.max_time_in_seconds = max(0.01, clock.wall_left())


def add_cut(tm: ThroughputModel, nodes: list[int]) -> None:
    """The units of ``nodes`` are not all on one accelerator slot."""
    units = sorted({int(tm.units.unit_of[v]) for v in nodes})
    for s, is_cpu in enumerate(tm.cpu):
        if isinstance(is_cpu, int) and is_cpu:
            continue  # a CPU slot holds anything
        ct = tm.m.Add(sum(tm.x[u][s] for u in units) <= len(units) - 1)
        if not isinstance(is_cpu, int):
            ct.OnlyEnforceIf(is_cpu.Not())


def _feasible_warm(inst: PlacementInstance, warm: np.ndarray | None) -> np.ndarray | None:
    """``warm`` (else the heuristic's answer, within memory) when it is a feasible placement."""
    if warm is None:
        try:
            warm = heuristic_placement(inst).device
        except StrategyError:  # no chain fits memory: the solver starts cold
            return None
    return None if placement_problems(inst, warm) else warm


def run_throughput(problem: Problem, *, contiguous: bool = True, time_limit: float = 60.0,
                   workers: int = 2, seed: int = 0, warm_start: Any = True,
                   deterministic: bool = True, log: bool = False,
                   work_limit: float | None = None) -> Partition:
    """``cpsat`` with ``objective="throughput"``: :func:`solve_throughput` as a partition whose
    ``info["throughput"]`` holds the status, the bound, the warm start and every load.
    ``warm_start``: True (the chain heuristic), False (the all-host placement) or a
    Partition of the same instance."""
    inst = instance_of(problem)
    if inst is None:
        raise StrategyError("cpsat: objective throughput needs a placement instance (a "
                            "maxFPGAs/nodes/edges .json file)")
    if not isinstance(contiguous, bool):
        raise StrategyError(f"cpsat: option contiguous must be true or false, got "
                            f"{contiguous!r}")
    warm = warm_devices(inst, warm_start, "throughput")
    res = solve_throughput(inst, contiguous=contiguous, time_limit=time_limit, workers=workers,
                           seed=seed, deterministic=deterministic, log=log, warm=warm,
                           work_limit=work_limit)
    figures = {"objective": "throughput", "method": "cpsat", "status": res.status,
               "contiguous": res.contiguous, "bound": res.bound, "warm_start": res.warm_start,
               "solve_seconds": res.seconds, **res.info}
    return to_partition(problem, inst, res.device, figures)


def warm_devices(inst: PlacementInstance, warm_start: Any, objective: str
                 ) -> np.ndarray | None:
    """The device per node a ``warm_start`` option names: None for True (the strategy's own
    heuristic), all on the CPU for False (None without a CPU), a Partition's devices."""
    if isinstance(warm_start, Partition):
        return partition_devices(warm_start, inst)
    if warm_start is False:
        return np.full(inst.n, HOST, dtype=np.int64) if inst.cpus >= 1 else None
    if warm_start is not True:
        raise StrategyError(f"cpsat: objective={objective} takes warm_start true, false or a "
                            f"partition, got {warm_start!r}")
    return None
