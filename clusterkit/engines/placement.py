"""Placement mode: every node picks one device, minimizing estimated time - OpenVINO HETERO's
automatic affinity, done optimally instead of greedily.

Each node runs on one of the devices that support it, or on the fallback (the host, which runs
anything). The objective is the total estimated compute time (per op type and device, see
:mod:`clusterkit.constraints.costs`) plus the transfer time of every tensor to every distinct
*device* that consumes it other than its producer's (graph inputs come from the host, graph
outputs go to it; constants are free). Together groups share a device. The model (CP-SAT, exact):

- ``y[v, d]``: node ``v`` on device ``d``; exactly one per node;
- ``u[t, b]``: some consumer of tensor ``t`` is on device ``b`` (``u >= y[c, b]`` for every
  consumer ``c``; 1 for the host when ``t`` is a graph output);
- ``w[t, a, b] >= y[p, a] + u[t, b] - 1`` for ``a != b``: the transfer of ``t`` from ``a`` to ``b``.

Minimizing ``sum compute * y + sum transfer * w`` makes every ``u`` and ``w`` tight, so the
optimum is the exact minimum of :func:`estimate` (times are rounded to nanoseconds in the model).

The ``placement`` strategy then clusters the placed nodes with the exact ``cpsat`` engine, each
node restricted to its chosen device (the fallback stays possible only where constraints such as
``min_size`` force it). Both solves count CP-SAT's deterministic seconds (see
:mod:`clusterkit.engines.cpsat.solve`), so the same input gives the same partition.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from numbers import Real
from typing import Any, Mapping

import numpy as np
from ortools.sat.python import cp_model

from clusterkit.constraints.core import Problem
from clusterkit.constraints.costs import CostModel
from clusterkit.constraints.objectives import ObjectiveSpec, parse_objective
from clusterkit.engines.cpsat.solve import STATUS, SolverSettings, solver_parameters
from clusterkit.errors import StrategyError
from clusterkit.passes.devices import priority_placement
from clusterkit.result.model import Partition

SCALE = 1e9  # model time unit: nanoseconds


@dataclass
class PlacementResult:
    """Device per node (index into ``problem.devices``, -1 = fallback) with the times (seconds)
    of the optimum, its proven lower bound and the greedy baselines."""

    devices: np.ndarray
    status: str
    objective: float | None
    bound: float | None
    compute: float
    transfer: float
    baselines: dict[str, float] = field(default_factory=dict)
    reason: str = ""
    info: dict[str, Any] = field(default_factory=dict)

    def device_names(self, problem: Problem) -> list[str]:
        return [problem.fallback if d < 0 else problem.devices[d] for d in self.devices.tolist()]


def _name(problem: Problem, d: int) -> str:
    return problem.fallback if d < 0 else problem.devices[d]


def estimate(problem: Problem, devices, costs: CostModel | Mapping | str | None = None,
             table: np.ndarray | None = None) -> dict[str, float]:
    """Estimated seconds of a placement (device index per node, -1 = fallback): ``compute``,
    ``transfer`` and their ``total``. Raises when a node is on a device that does not take it."""
    cm = CostModel.load(costs)
    g = problem.graph
    dev = np.asarray(devices, dtype=np.int64)
    if dev.shape != (g.n,):
        raise StrategyError(f"placement: expected {g.n} devices, got {dev.shape}")
    if table is None:
        table = cm.compute_table(problem)
    nd = len(problem.devices)
    rows = np.where(dev < 0, nd, dev)
    comp = table[rows, np.arange(g.n)] if g.n else np.zeros(0)
    bad = np.flatnonzero(~np.isfinite(comp))
    if len(bad):
        v = int(bad[0])
        raise StrategyError(f"placement: node {g.nodes[v].name!r} ({g.nodes[v].op_type}) is on "
                            f"device {_name(problem, int(dev[v]))!r}, which does not take it")
    transfer = 0.0
    for _, prod, cons, nbytes, out in _tensors(problem):
        a = -1 if prod < 0 else int(dev[prod])
        targets = {int(dev[c]) for c in cons}
        if out:
            targets.add(-1)
        for b in sorted(targets):
            if b != a:
                transfer += cm.transfer_time(_name(problem, a), _name(problem, b), nbytes)
    compute = float(comp.sum())
    return {"compute": compute, "transfer": transfer, "total": compute + transfer}


def _tensors(problem: Problem) -> list[tuple[int, int, list[int], int, bool]]:
    """(tensor index, producer or -1, consumers, bytes, is_output) of every non-constant
    tensor that is consumed or is a graph output."""
    tt = problem.graph.tensor_table
    cons: dict[int, list[int]] = {}
    for t, c in zip(tt.inc_tensor.tolist(), tt.inc_node.tolist()):
        cons.setdefault(t, []).append(c)
    out = []
    free = tt.free.tolist()
    prod = tt.producer.tolist()
    nbytes = tt.nbytes.tolist()
    is_out = tt.is_output.tolist()
    for t in range(len(tt.names)):
        if free[t]:
            continue
        cs = sorted(set(cons.get(t, [])))
        if prod[t] >= 0:
            cs = [c for c in cs if c != prod[t]]
        if not cs and not (is_out[t] and prod[t] >= 0):
            continue
        out.append((t, prod[t], cs, int(nbytes[t]), bool(is_out[t])))
    return out


def _options(problem: Problem, allow_fallback: bool) -> list[list[int]]:
    """Devices each node may use (-1 = fallback); a together group's members share theirs."""
    n = problem.n
    nd = len(problem.devices)
    opts = []
    for v in range(n):
        ds = [d for d in range(nd) if problem.supported[d, v]]
        if allow_fallback or not ds:
            ds.append(-1)
        opts.append(ds)
    for members in problem.groups:
        ids = members.tolist()
        common = [d for d in opts[ids[0]] if all(d in opts[v] for v in ids)]
        if not common:
            common = [-1]
        for v in ids:
            opts[v] = list(common)
    return opts


def fastest_placement(problem: Problem, table: np.ndarray) -> np.ndarray:
    """Each node on its fastest device by compute time alone (transfers ignored)."""
    nd = len(problem.devices)
    best = np.argmin(table, axis=0).astype(np.int64) if problem.n else np.zeros(0, np.int64)
    best[best == nd] = -1
    for members in problem.groups:
        ids = members.tolist()
        rows = [d for d in range(nd + 1) if np.isfinite(table[d, ids]).all()]
        pick = min(rows, key=lambda d: (float(table[d, ids].sum()), d))
        best[ids] = -1 if pick == nd else pick
    return best


@dataclass
class _PlacementModel:
    """The CP-SAT model of a placement: ``y[v][d]`` per node and device (True when fixed),
    objective terms ``(nanoseconds, literal)`` and the constant part of the objective."""

    m: cp_model.CpModel
    y: list[dict[int, Any]]
    terms: list[tuple[int, Any]] = field(default_factory=list)
    const: int = 0


def place(problem: Problem, costs: CostModel | Mapping | str | None = None, *,
          time_limit: float = 60.0, workers: int = 2, seed: int = 0,
          allow_fallback: bool = True, log: bool = False) -> PlacementResult:
    """The placement of least estimated time (see the module docstring)."""
    start = time.perf_counter()
    settings = SolverSettings.checked("placement", time_limit, workers, seed, log)
    cm = CostModel.load(costs)
    table = cm.compute_table(problem)
    opts = _options(problem, allow_fallback)
    pm = _build(problem, cm, table, opts)
    baselines, hint = _baselines(problem, cm, table, opts, pm, allow_fallback)
    solver = solver_parameters(time_limit, settings)
    status = STATUS.get(solver.Solve(pm.m), "UNKNOWN")
    info = {"time_limit": time_limit, "workers": workers, "seed": seed,
            "allow_fallback": allow_fallback, "solver_seconds": solver.WallTime()}
    reason = ""
    if status in ("OPTIMAL", "FEASIBLE"):
        dev = np.asarray([next(d for d, lit in row.items()
                               if lit is True or solver.BooleanValue(lit)) for row in pm.y],
                         dtype=np.int64).reshape(problem.n)
        bound = (pm.const + solver.BestObjectiveBound()) / SCALE
    elif hint is not None:
        dev, bound = np.asarray(hint[1], dtype=np.int64), None
        reason = "no placement found within the time limit; returning the best baseline"
    else:  # pragma: no cover - every node has an option, so the model is always feasible
        raise StrategyError(f"placement: the solver returned {status}")
    est = estimate(problem, dev, cm, table)
    if hint is not None and hint[0] < est["total"]:
        dev = np.asarray(hint[1], dtype=np.int64)
        est = estimate(problem, dev, cm, table)
        reason = reason or "a baseline is better than the placement found in time"
    if bound is not None:
        bound = min(bound, est["total"])
    info["seconds"] = time.perf_counter() - start
    return PlacementResult(dev, status, est["total"], bound, est["compute"], est["transfer"],
                           baselines, reason, info)


def _build(problem: Problem, cm: CostModel, table: np.ndarray, opts: list[list[int]]
           ) -> _PlacementModel:
    """The model: one device per node, together groups on one device, compute and transfer
    terms."""
    nd = len(problem.devices)
    pm = _PlacementModel(cp_model.CpModel(), [])
    for v in range(problem.n):
        row = {d: True if len(opts[v]) == 1 else pm.m.NewBoolVar(f"y{v}_{d}") for d in opts[v]}
        if len(row) > 1:
            pm.m.AddExactlyOne(list(row.values()))
        pm.y.append(row)
        for d, lit in row.items():
            _add_term(pm, int(round(table[nd if d < 0 else d, v] * SCALE)), lit)
    for members in problem.groups:
        ids = members.tolist()
        for v in ids[1:]:
            for d in pm.y[ids[0]]:
                a, b = pm.y[ids[0]][d], pm.y[v][d]
                if a is not True and b is not True:
                    pm.m.Add(a == b)
    for tensor, prod, cons, nbytes, out in _tensors(problem):
        present = _consumer_devices(pm, tensor, cons, out)
        for a in ([-1] if prod < 0 else list(pm.y[prod])):
            ya = True if prod < 0 else pm.y[prod][a]
            for b, ub in present.items():
                c = 0 if a == b else int(round(cm.transfer_time(
                    _name(problem, a), _name(problem, b), nbytes) * SCALE))
                if not c:
                    continue
                if ya is True or ub is True:
                    _add_term(pm, c, ub if ya is True else ya)
                else:
                    w = pm.m.NewBoolVar(f"w{tensor}_{a}_{b}")
                    pm.m.AddBoolOr([w, ya.Not(), ub.Not()])  # type: ignore[union-attr]  # literals
                    pm.terms.append((c, w))
    pm.m.Minimize(sum(c * lit for c, lit in pm.terms))
    return pm


def _add_term(pm: _PlacementModel, coef: int, lit: Any) -> None:
    if lit is True:
        pm.const += coef
    elif coef:
        pm.terms.append((coef, lit))


def _consumer_devices(pm: _PlacementModel, tensor: int, cons: list[int], out: bool
                      ) -> dict[int, Any]:
    """Per device that may consume the tensor, a literal "some consumer is on it" (the host
    always, for a graph output)."""
    present: dict[int, Any] = {}
    for b in sorted({d for c in cons for d in pm.y[c]} | ({-1} if out else set())):
        lits = [pm.y[c][b] for c in cons if b in pm.y[c]]
        if (out and b == -1) or any(lit is True for lit in lits):
            present[b] = True
        elif len(lits) == 1:
            present[b] = lits[0]
        else:
            u = pm.m.NewBoolVar(f"u{tensor}_{b}")
            for lit in lits:
                pm.m.AddImplication(lit, u)
            present[b] = u
    return present


def _baselines(problem: Problem, cm: CostModel, table: np.ndarray, opts: list[list[int]],
               pm: _PlacementModel, allow_fallback: bool
               ) -> tuple[dict[str, float], tuple[float, np.ndarray] | None]:
    """The greedy baselines' times and the best of them, hinted to the model."""
    priority = priority_placement(problem)
    if not allow_fallback:
        priority = np.asarray([d if d in opts[v] else opts[v][0]
                               for v, d in enumerate(priority.tolist())], dtype=np.int64)
    baselines: dict[str, float] = {}
    hint = None
    for label, dev in (("priority", priority), ("fastest", fastest_placement(problem, table))):
        if all(int(dev[v]) in pm.y[v] for v in range(problem.n)):
            baselines[label] = estimate(problem, dev, cm, table)["total"]
            if hint is None or baselines[label] < hint[0]:
                hint = (baselines[label], dev)
    if hint is not None:
        for v in range(problem.n):
            for d, lit in pm.y[v].items():
                if lit is not True:
                    pm.m.AddHint(lit, int(d == int(hint[1][v])))
    return baselines, hint


def run(problem: Problem, *, costs: CostModel | Mapping | str | None = None,
        objective: ObjectiveSpec = "cut", time_limit: float = 60.0, workers: int = 2,
        seed: int = 0, allow_fallback: bool = True, cluster_share: float = 0.5) -> Partition:
    """Strategy ``placement``: the optimal placement, then the optimal clustering (``cpsat``,
    ``objective``) with each node kept on its placed device. ``cluster_share`` of the time limit
    goes to the clustering (deterministic seconds, as ``cpsat`` counts them), the rest to the
    placement. The partition's ``solve_report`` is the placement's (objective in seconds)."""
    from clusterkit.engines.cpsat.solve import WALL_MARGIN, WALL_SAFETY
    from clusterkit.engines.cpsat.strategy import SolveReport, optimize

    obj = parse_objective(objective)
    SolverSettings.checked("placement", time_limit, workers, seed)
    if isinstance(cluster_share, bool) or not isinstance(cluster_share, Real) \
            or not 0 < cluster_share < 1:
        raise StrategyError(f"placement: option cluster_share must be in (0, 1), got "
                            f"{cluster_share!r}")
    cm = CostModel.load(costs)
    res = place(problem, cm, time_limit=time_limit * (1 - cluster_share), workers=workers,
                seed=seed, allow_fallback=allow_fallback)
    nd = len(problem.devices)
    mask = np.zeros((nd, problem.n), dtype=bool)
    for d in range(nd):
        mask[d] = res.devices == d
    restricted = dataclasses.replace(problem, supported=mask)
    work = time_limit * cluster_share  # deterministic seconds: the same answer on any machine
    clustered = optimize(restricted, obj.label, work_limit=work, accept=False,  # the front
                         time_limit=WALL_SAFETY * work + WALL_MARGIN,  # door's split follows
                         workers=workers, seed=seed)
    if clustered.partition is None:  # pragma: no cover - clustering with a fallback is feasible
        raise StrategyError(f"placement: clustering failed: {clustered.reason}")
    final_dev = np.full(problem.n, -1, dtype=np.int64)
    for c in clustered.partition.clusters:
        final_dev[list(c.nodes)] = problem.device_index(c.device)
    report = SolveReport(res.status, res.objective, res.bound,
                         None if res.status == "OPTIMAL" else "deterministic_time", None,
                         "time", res.reason)
    rep = clustered.report
    info = {"status": res.status, "objective": res.objective, "bound": res.bound,
            "compute_seconds": res.compute, "transfer_seconds": res.transfer,
            "baselines": res.baselines,
            "partition_seconds": estimate(problem, final_dev, cm)["total"],
            "solver_placement": {"devices": {_name(problem, d): int((res.devices == d).sum())
                                      for d in list(range(nd)) + [-1]},
                          **res.info},
            "clustering": {"objective_name": rep.objective_name, "status": rep.status,
                           "objective": rep.objective, "bound": rep.bound,
                           "fallback_nodes": rep.fallback_nodes,
                           "reductions": clustered.info.get("reductions", {})}}
    if res.reason:
        info["reason"] = res.reason
    return clustered.partition.derive(problem=problem, info=info, keep_info=False,
                                      solve_report=report)
