"""Solve: CP-SAT parameters, the time budget shared by the parts, hints, and the two-phase
solve of one part with its status.

Phase 1 minimizes the fallback nodes (skipped when the reductions fixed the fallback set), phase
2 keeps that count and minimizes the objective. A part solved without a solution in time keeps
its hint when there is one (status FEASIBLE, its proven bound); the result records which limit
stopped a search.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ortools.sat.python import cp_model

from clusterkit.engines.cpsat.build import ClusterModel
from clusterkit.engines.cpsat.hints import WarmHint, part_hint
from clusterkit.engines.cpsat.read import read_part

STATUS = {cp_model.OPTIMAL: "OPTIMAL", cp_model.FEASIBLE: "FEASIBLE",
          cp_model.INFEASIBLE: "INFEASIBLE", cp_model.MODEL_INVALID: "MODEL_INVALID",
          cp_model.UNKNOWN: "UNKNOWN"}

#: Statuses of a search that ran to its end (no limit stopped it).
FINISHED = ("OPTIMAL", "INFEASIBLE", "MODEL_INVALID")

#: CP-SAT subsolvers interleaved (deterministically) on the workers: the core-based lower bound
#: search proves these models fastest; the two searches find solutions.
SUBSOLVERS = ("core", "default_lp", "no_lp")


@dataclass(frozen=True)
class SolverSettings:
    """The CP-SAT options of every solve of one run."""

    workers: int = 2
    seed: int = 0
    log: bool = False
    deterministic: bool = True


@dataclass
class PartSolution:
    """Ranks and devices (-1: fallback) per super-node of a part, with the solver's figures;
    ``limit`` names the limit that stopped a search (None: none did); ``from_hint`` when the
    assignment is a hint the solver did not improve in time."""

    rank: dict[int, int]
    device: dict[int, int]
    status: str
    objective: float | None
    bound: float | None
    wall: float
    limit: str | None = None
    from_hint: bool = False


class Clock:
    """The time budget of one run: wall-clock seconds since the run started."""

    def __init__(self, time_limit: float):
        self.limit = float(time_limit)
        self.start = time.perf_counter()

    def used(self) -> float:
        return time.perf_counter() - self.start

    def left(self) -> float:
        return self.limit - self.used()

    def charge(self, solver: cp_model.CpSolver) -> None:
        """Account for one finished solve (the wall clock does so by itself)."""

    @property
    def kind(self) -> str:
        return "wall_time"


def solver_parameters(budget: float, settings: SolverSettings) -> cp_model.CpSolver:
    """A CP-SAT solver limited to ``budget`` seconds with the run's settings."""
    solver = cp_model.CpSolver()
    prm = solver.parameters
    prm.max_time_in_seconds = max(0.01, float(budget))
    if settings.workers:
        prm.num_workers = settings.workers
    prm.random_seed = int(settings.seed)
    prm.log_search_progress = bool(settings.log)
    if settings.deterministic:
        prm.interleave_search = True
        prm.interleave_batch_size = 1
        prm.subsolvers.extend(SUBSOLVERS)
    return solver


def stop_limit(status: str, clock: Clock) -> str | None:
    """The limit that stopped a search with ``status`` (None when it ran to its end)."""
    return None if status in FINISHED else clock.kind


def _run(model: ClusterModel, budget: float, settings: SolverSettings, clock: Clock
         ) -> tuple[cp_model.CpSolver, str]:
    solver = solver_parameters(budget, settings)
    code = solver.Solve(model.m)
    clock.charge(solver)
    return solver, STATUS.get(code, "UNKNOWN")


def solve_part(model: ClusterModel, src: WarmHint | None, budget: float, fixed: bool,
               settings: SolverSettings, clock: Clock) -> tuple[PartSolution, dict[str, Any]]:
    """Solve one part: phase 1 (fewest fallback nodes) unless the fallback set is ``fixed``,
    then phase 2 (the objective). Statuses combine: OPTIMAL only if both phases are."""
    mark = clock.used()
    hint = part_hint(model, src)
    phase1: dict[str, Any] = {}
    status1 = "OPTIMAL"
    if model.fb_terms and not fixed:
        if hint is not None:
            model.hint(*hint)
        model.m.Minimize(model.offload_expr())
        solver, status1 = _run(model, budget / 2, settings, clock)
        phase1 = {"status": status1, "seconds": solver.WallTime()}
        if status1 not in ("OPTIMAL", "FEASIBLE"):
            return PartSolution({}, {}, status1, None, None, solver.WallTime(),
                                stop_limit(status1, clock)), phase1
        best = int(round(solver.ObjectiveValue()))
        phase1.update({"fallback_nodes": best, "bound": solver.BestObjectiveBound()})
        hint = read_part(model, solver)
        model.m.Add(model.offload_expr() <= best)
    if hint is not None:
        model.hint(*hint)
    model.m.Minimize(model.objective_expr())
    solver, status = _run(model, max(0.01, budget - (clock.used() - mark)), settings, clock)
    limit = stop_limit(status1, clock) or stop_limit(status, clock)
    if status == "UNKNOWN" and hint is not None:
        # no solution in time, but the hint is one: keep it, with the proven bound
        return PartSolution(hint[0], hint[1], "FEASIBLE", model.value(model.evaluate(*hint)),
                            solver.BestObjectiveBound(), solver.WallTime(), limit,
                            True), phase1
    if status not in ("OPTIMAL", "FEASIBLE"):
        return PartSolution({}, {}, status, None, None, solver.WallTime(), limit), phase1
    rank, device = read_part(model, solver)
    if status == "OPTIMAL" and status1 != "OPTIMAL":
        status = "FEASIBLE"
    return PartSolution(rank, device, status, solver.ObjectiveValue(),
                        solver.BestObjectiveBound(), solver.WallTime(), limit), phase1


def unsolved_part(model: ClusterModel, src: WarmHint | None, clock: Clock) -> PartSolution:
    """A part the time limit left no time for: its best hint when there is one (with the
    trivial bound 0, as every objective term is non-negative), else UNKNOWN."""
    hint = part_hint(model, src)
    if hint is None:
        return PartSolution({}, {}, "UNKNOWN", None, None, 0.0, clock.kind)
    return PartSolution(hint[0], hint[1], "FEASIBLE", model.value(model.evaluate(*hint)), 0.0,
                        0.0, clock.kind, True)
