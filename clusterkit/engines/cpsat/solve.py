"""Solve: CP-SAT parameters, the time budget shared by the components, hints, and the two-phase
solve of one component with its status.

Phase 1 minimizes the fallback nodes (skipped when the reductions fixed the fallback set), phase
2 keeps that count and minimizes the objective. A component solved without a solution in time keeps
its hint when there is one (status FEASIBLE, its proven bound); the result records which limit
stopped a search.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

from ortools.sat.python import cp_model

from clusterkit.engines.cpsat.build import ClusterModel, read_component
from clusterkit.engines.cpsat.hints import WarmHint, component_hint
from clusterkit.errors import StrategyError

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

    @classmethod
    def checked(cls, engine: str, time_limit: Any, workers: Any, seed: Any, log: bool = False,
                deterministic: bool = True) -> "SolverSettings":
        """The settings of ``engine``'s options; a bad one is a :class:`StrategyError` naming
        it (``time_limit`` is only checked here)."""
        if isinstance(time_limit, bool) or not isinstance(time_limit, Real) \
                or not time_limit > 0:  # type: ignore[operator]  # a Real compares with 0
            raise StrategyError(f"{engine}: option time_limit must be > 0, got {time_limit!r}")
        if isinstance(workers, bool) or not isinstance(workers, Integral) or workers < 0:
            raise StrategyError(f"{engine}: option workers must be an integer >= 0, got "
                                f"{workers!r}")
        if isinstance(seed, bool) or not isinstance(seed, Integral):
            raise StrategyError(f"{engine}: option seed must be an integer, got {seed!r}")
        return cls(int(workers), int(seed), bool(log), bool(deterministic))


def check_work_limit(engine: str, work_limit: Any) -> float | None:
    """``work_limit`` as a float (None: none); a bad one is a :class:`StrategyError` naming
    it."""
    if work_limit is None:
        return None
    if isinstance(work_limit, bool) or not isinstance(work_limit, Real) \
            or not work_limit > 0:  # type: ignore[operator]  # a Real compares with 0
        raise StrategyError(f"{engine}: option work_limit must be > 0 deterministic units, got "
                            f"{work_limit!r}")
    return float(work_limit)


@dataclass
class ComponentSolution:
    """Ranks and devices (-1: fallback) per super-node of a component, with the solver's figures;
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


#: Without a clock, a search is bounded by CP-SAT's deterministic time (the same count of
#: deterministic seconds as the budget); the wall clock only guards against a runaway, at this
#: multiple of the budget plus a margin (the placement engine's solves, ``auto``'s polish).
WALL_SAFETY = 10.0
WALL_MARGIN = 30.0


class Clock:
    """The budget of one run, passed down to every step: a wall-clock deadline ``time_limit``
    seconds after the run started, which always holds, and with ``work_limit`` a budget of
    CP-SAT's deterministic units spent by the solves (the same input then gives the same answer,
    unless the deadline stops a search first: ``kind`` says which limit stops one now).
    ``reserve`` wall seconds before the deadline are kept for the steps after the search."""

    def __init__(self, time_limit: float, deterministic: bool = True,
                 work_limit: float | None = None, start: float | None = None):
        self.limit = float(time_limit)
        self.work_limit = None if work_limit is None else float(work_limit)
        self.deterministic = deterministic
        self.start = time.perf_counter() if start is None else start
        self.spent = 0.0
        self.reserve = 0.0

    def elapsed(self) -> float:
        """Wall-clock seconds since the run started."""
        return time.perf_counter() - self.start

    def used(self) -> float:
        """What the budget has used: work units with a work limit, else wall seconds."""
        return self.spent if self.work_limit is not None else self.elapsed()

    def left(self) -> float:
        """What is left for the search in the budget's units (none once the deadline, less the
        reserve, is reached)."""
        wall = self.wall_left()
        if wall <= 0:
            return 0.0
        return self.work_limit - self.spent if self.work_limit is not None else wall

    def wall_left(self) -> float:
        """Wall-clock seconds left for the search: before the deadline less the reserve."""
        return self.limit - self.reserve - self.elapsed()

    def share(self, fraction: float) -> "Clock":
        """A clock for a part of the run: ``fraction`` of what is left of each limit."""
        sub = Clock(self.elapsed() + fraction * max(0.0, self.wall_left()), self.deterministic,
                    None if self.work_limit is None
                    else self.spent + fraction * max(0.0, self.work_limit - self.spent),
                    self.start)
        sub.spent = self.spent
        return sub

    def absorb(self, sub: "Clock") -> None:
        """Take over what a clock of :meth:`share` spent."""
        self.spent = max(self.spent, sub.spent)

    def charge(self, solver: cp_model.CpSolver) -> None:
        """Account for one finished solve."""
        self.spent += _deterministic_seconds(solver)

    def charge_overhead(self, seconds: float) -> None:
        """Account for work outside the solver (work units, counted as given; the wall clock
        counts itself)."""
        if self.work_limit is not None:
            self.spent += seconds

    @property
    def kind(self) -> str:
        """The limit that stops a search now: ``deterministic_time`` (the work limit) or
        ``wall_time``."""
        if self.work_limit is not None and self.wall_left() > 0:
            return "deterministic_time"
        return "wall_time"


def _deterministic_seconds(solver: cp_model.CpSolver) -> float:
    try:
        return float(solver.deterministic_time)
    except RuntimeError:  # no response to read (a solve that never ran)
        return 0.0


def solver_parameters(budget: float, settings: SolverSettings, wall: float = math.inf
                      ) -> cp_model.CpSolver:
    """A CP-SAT solver with the run's settings, limited to ``budget`` seconds: deterministic
    ones with ``settings.deterministic`` (and wall-clock ones up to the safety multiple, at most
    ``wall``), else wall-clock ones."""
    solver = _solver(settings)
    budget = max(0.01, float(budget))
    if settings.deterministic:
        solver.parameters.max_deterministic_time = budget
        solver.parameters.max_time_in_seconds = max(0.01, min(WALL_SAFETY * budget + WALL_MARGIN,
                                                              wall))
    else:
        solver.parameters.max_time_in_seconds = budget
    return solver


def clock_parameters(budget: float, settings: SolverSettings, clock: Clock) -> cp_model.CpSolver:
    """A CP-SAT solver for one search of a run with ``clock``: ``budget`` work units (with a
    work limit; the deadline's wall seconds at most) or wall seconds (without)."""
    solver = _solver(settings)
    wall = max(0.01, clock.wall_left())
    budget = max(0.01, float(budget))
    if clock.work_limit is not None:
        solver.parameters.max_deterministic_time = budget
        solver.parameters.max_time_in_seconds = wall
    else:
        solver.parameters.max_time_in_seconds = min(budget, wall)
    return solver


def _solver(settings: SolverSettings) -> cp_model.CpSolver:
    """A CP-SAT solver with the settings but no limit: workers interleaved deterministically
    with ``settings.deterministic``."""
    solver = cp_model.CpSolver()
    prm = solver.parameters
    if settings.deterministic:
        prm.interleave_search = True
        prm.interleave_batch_size = 1
        prm.subsolvers.extend(SUBSOLVERS)
    if settings.workers:
        prm.num_workers = settings.workers
    prm.random_seed = int(settings.seed)
    prm.log_search_progress = bool(settings.log)
    return solver


def stop_limit(status: str, solver: cp_model.CpSolver, clock: Clock) -> str | None:
    """The limit that stopped a search with ``status`` (None when it ran to its end): the wall
    clock when the solve used up its wall-clock seconds, else the clock's own kind."""
    if status in FINISHED:
        return None
    if clock.work_limit is None or \
            solver.WallTime() >= 0.999 * solver.parameters.max_time_in_seconds:
        return "wall_time"
    return clock.kind


def _run(model: ClusterModel, budget: float, settings: SolverSettings, clock: Clock
         ) -> tuple[cp_model.CpSolver, str]:
    solver = clock_parameters(budget, settings, clock)
    code = solver.Solve(model.m)
    clock.charge(solver)
    return solver, STATUS.get(code, "UNKNOWN")


def solve_component(model: ClusterModel, src: WarmHint | None, budget: float, fixed: bool,
               settings: SolverSettings, clock: Clock) -> tuple[ComponentSolution, dict[str, Any]]:
    """Solve one component: phase 1 (fewest fallback nodes) unless the fallback set is ``fixed``,
    then phase 2 (the objective). Statuses combine: OPTIMAL only if both phases are."""
    mark = clock.used()
    hint = component_hint(model, src)
    phase1: dict[str, Any] = {}
    status1, limit1 = "OPTIMAL", None
    if model.fb_terms and not fixed:
        if hint is not None:
            model.hint(*hint)
        model.m.Minimize(model.offload_expr())
        solver, status1 = _run(model, budget / 2, settings, clock)
        phase1 = {"status": status1, "seconds": solver.WallTime()}
        if status1 not in ("OPTIMAL", "FEASIBLE"):
            return ComponentSolution({}, {}, status1, None, None, solver.WallTime(),
                                stop_limit(status1, solver, clock)), phase1
        limit1 = stop_limit(status1, solver, clock)
        best = int(round(solver.ObjectiveValue()))
        phase1.update({"fallback_nodes": best, "bound": solver.BestObjectiveBound()})
        hint = read_component(model, solver)
        model.m.Add(model.offload_expr() <= best)
    if hint is not None:
        model.hint(*hint)
    model.m.Minimize(model.objective_expr())
    solver, status = _run(model, max(0.01, budget - (clock.used() - mark)), settings, clock)
    limit = limit1 or stop_limit(status, solver, clock)
    if status == "UNKNOWN" and hint is not None:
        # no solution in time, but the hint is one: keep it, with the proven bound
        return ComponentSolution(hint[0], hint[1], "FEASIBLE", model.value(model.evaluate(*hint)),
                            solver.BestObjectiveBound(), solver.WallTime(), limit,
                            True), phase1
    if status not in ("OPTIMAL", "FEASIBLE"):
        return ComponentSolution({}, {}, status, None, None, solver.WallTime(), limit), phase1
    rank, device = read_component(model, solver)
    if status == "OPTIMAL" and status1 != "OPTIMAL":
        status = "FEASIBLE"
    return ComponentSolution(rank, device, status, solver.ObjectiveValue(),
                        solver.BestObjectiveBound(), solver.WallTime(), limit), phase1


def unsolved_component(model: ClusterModel, src: WarmHint | None, clock: Clock
                       ) -> ComponentSolution:
    """A component the time limit left no time for: its best hint when there is one (with the
    trivial bound 0, as every objective term is non-negative), else UNKNOWN."""
    hint = component_hint(model, src)
    if hint is None:
        return ComponentSolution({}, {}, "UNKNOWN", None, None, 0.0, clock.kind)
    return ComponentSolution(hint[0], hint[1], "FEASIBLE", model.value(model.evaluate(*hint)), 0.0,
                        0.0, clock.kind, True)
