"""Strategy ``cpsat``: the exact optimum over all valid partitions, with OR-tools CP-SAT.

The optimum is *lexicographic* (:mod:`clusterkit.constraints.objectives`): first the fewest
fallback nodes, then the least ``w_cut * cut_bytes + w_partitions * partitions``. A run goes
through fixed phases of the ``clusterkit.engines.cpsat`` package, one module each: the warm
start (``warmstart``: the best heuristic by the same objective), the reductions (``reduce``:
independent components of super-nodes), the models (``build``), solving component by component
(``solve``: phase 1 minimizes the fallback nodes unless reduction R1 proves that set, phase 2 the
objective) and reading the result (``read``). Beyond a few hundred super-nodes with pair terms
(``method="auto"``), a large-neighbourhood search (``lns``) improves the warm start window by
window instead, with the bound of ``relax``.

The result is never worse than the warm start and carries in ``Partition.info``: ``status``
(``OPTIMAL``, ``FEASIBLE``, ``UNKNOWN`` - no solution in time, the warm start is returned - or,
for ``require_offload=True`` only, ``INFEASIBLE`` with a ``reason``), ``objective``, ``bound`` (a
proven lower bound of the objective among partitions with the optimal fallback count),
``fallback_nodes``, ``limit`` (the limit that stopped the search, if any), ``warm_start``,
``reductions``, ``method`` (``full`` or ``lns``) and with LNS ``lns`` (windows solved and
improved, rounds, why it stopped, the bounds); the same figures, typed, as
``Partition.solve_report``.
"""

from __future__ import annotations

import time
from typing import Any

from clusterkit._deprecated import module_getattr
from clusterkit.constraints.core import Problem
from clusterkit.constraints.objectives import ObjectiveSpec, integer_weights, parse_objective
from clusterkit.engines.cpsat.build import build_models
from clusterkit.engines.cpsat.diagnose import explain_infeasible, offload_contradiction
from clusterkit.engines.cpsat.hints import WarmHint, hint_assignment
from clusterkit.engines.cpsat.lns import METHODS, choose_method, lns_reductions, solve_lns
from clusterkit.engines.cpsat.read import (
    ComponentsOutcome,
    CpsatResult,
    SolveReport,
    accepted_result,
    infeasible_result,
    read_result,
)
from clusterkit.engines.cpsat.reduce import REDUCTIONS, Reduction, reduce_problem
from clusterkit.engines.cpsat.relax import cut_relaxation, partitions_bound
from clusterkit.engines.cpsat.solve import (
    Clock,
    SolverSettings,
    check_work_limit,
    solve_component,
    unsolved_component,
)
from clusterkit.engines.cpsat.throughput import run_throughput
from clusterkit.engines.cpsat.timing import (
    OVERHEAD,
    TIME_LIMIT,
    Phases,
    after_search_reserve,
)
from clusterkit.engines.cpsat.warmstart import WarmSpec
from clusterkit.engines.cpsat.warmstart import warm_start as warm_start_partition
from clusterkit.errors import InfeasibleError, StrategyError
from clusterkit.modes import Method, check_choice
from clusterkit.result.model import Partition

__all__ = ["OVERHEAD", "TIME_LIMIT", "CpsatResult", "SolveReport", "optimize", "run",
           "solve_components"]


def run(problem: Problem, *, objective: ObjectiveSpec = "cut", time_limit: float = TIME_LIMIT,
        workers: int = 2, seed: int = 0, warm_start: WarmSpec = True,
        reduce: bool | tuple[str, ...] = True, require_offload: bool = False,
        deterministic: bool = True, log: bool = False, coalesce: bool = True,
        method: Method = "auto", window: int | None = None, contiguous: bool = True,
        work_limit: float | None = None, accept: bool = True) -> Partition:
    """Optimal partition (see the module docstring). ``time_limit``: wall-clock seconds the
    whole run keeps (warm start, reductions, search, reading and the acceptance split; at most
    :data:`OVERHEAD` more: the result's ``wall_seconds``), default 60; ``work_limit``: a budget
    of CP-SAT's deterministic work units for the searches (None: none), which makes a run that
    a limit stops reproducible as long as ``time_limit`` does not stop it first (the result's
    ``limit`` says which limit stopped it, if any); ``warm_start``: True (best heuristic),
    False, a strategy name or a Partition; ``reduce``: True, False or reduction names;
    ``require_offload``: every node some device takes must be offloaded (may be infeasible);
    ``deterministic``: interleave the CP-SAT workers so that a search that finishes, or that
    ``work_limit`` stops, gives the same partition for the same input (False: let them race,
    sometimes faster); ``coalesce``: merge clusters of one device while valid after
    solving (never raises the objective: see :mod:`clusterkit.passes.coalesce`; it breaks
    ties of equal cut towards fewer partitions); ``method``: ``full`` (one exact model per
    component), ``lns`` (large-neighbourhood search from the warm start, see
    :mod:`clusterkit.engines.cpsat.lns`; FEASIBLE with a relaxation bound unless that bound
    meets the objective) or ``auto`` (the full model when its largest component is small enough to
    prove, LNS beyond); ``window``: super-nodes of LNS's first window (None: its default);
    ``accept``: split the answer where a device refuses a cluster, in the run's time (False:
    the model's answer, which the front door then splits). Raises
    :class:`~clusterkit.errors.InfeasibleError` (``status``, ``reason``, ``report``)
    when it finds no partition.

    ``objective="throughput"`` (a placement instance only: :mod:`.throughput`) minimizes the
    largest device load instead, ``contiguous`` (default) as the paper's chains or not;
    ``objective="latency"`` the single-sample latency (:mod:`.latency`)."""
    if objective == "latency":
        from clusterkit.engines.cpsat.latency import run_latency  # on use only

        return run_latency(problem, contiguous=contiguous, time_limit=time_limit,
                           workers=workers, seed=seed, warm_start=warm_start,
                           deterministic=deterministic, log=log, work_limit=work_limit)
    if objective == "throughput":
        return run_throughput(problem, contiguous=contiguous, time_limit=time_limit,
                              workers=workers, seed=seed, warm_start=warm_start,
                              deterministic=deterministic, log=log, work_limit=work_limit)
    if contiguous is not True:
        raise StrategyError("cpsat: option contiguous applies to objective=throughput "
                          "and latency only")
    res = optimize(problem, objective, time_limit=time_limit, workers=workers, seed=seed,
                   warm_start=warm_start, reduce=reduce, require_offload=require_offload,
                   deterministic=deterministic, log=log, coalesce=coalesce, method=method,
                   window=window, work_limit=work_limit, accept=accept)
    if res.partition is None:
        raise InfeasibleError(f"cpsat: {res.status}: {res.reason}", res.status, res.reason,
                              res.report)
    return res.partition


def optimize(problem: Problem, objective: ObjectiveSpec = "cut", *,
             time_limit: float = TIME_LIMIT, workers: int = 2, seed: int = 0,
             warm_start: WarmSpec = True, reduce: bool | tuple[str, ...] = True,
             require_offload: bool = False, deterministic: bool = True, log: bool = False,
             coalesce: bool = True, method: Method = "auto", window: int | None = None,
             work_limit: float | None = None, accept: bool = True) -> CpsatResult:
    """Solve (options as :func:`run`); never raises for infeasibility (the status says it).
    The result's partition is acceptable to its devices (:mod:`clusterkit.passes.acceptable`)
    unless ``accept`` is False;
    ``info["phases"]`` holds the wall seconds of each step."""
    start = time.perf_counter()
    obj = parse_objective(objective)
    settings = _check_options(time_limit, workers, seed, reduce, deterministic, log)
    _check_method(method, window)
    clock = Clock(float(time_limit), settings.deterministic,
                  check_work_limit("cpsat", work_limit), start)
    phases = Phases(clock)
    warm, warm_info = warm_start_partition(problem, warm_start, obj, clock)
    phases.mark("warm_start")
    info: dict[str, Any] = {"warm_start": warm_info, "phases": phases.seconds}
    if require_offload:
        reason = offload_contradiction(problem)
        if reason:
            return infeasible_result(reason, obj, dict(info, reductions={}), start)
    red = reduce_problem(problem, w_parts=obj.w_parts, enable=reduce,
                         require_offload=require_offload)
    phases.mark("reductions")
    clock.reserve = after_search_reserve(clock)
    ic, ip, scale = integer_weights(obj.w_cut, obj.w_parts)
    info["method"] = choose_method(method, problem, red, ip)
    if clock.left() <= 0:  # the warm start and the reductions used the time up
        outcome = ComponentsOutcome(statuses=["UNKNOWN"], limit="wall_time")
        info["search"] = "skipped: the time limit was reached before the search"
    elif info["method"] == "lns":
        red, outcome, info["lns"] = _run_lns(problem, (ic, ip), warm, settings, clock, window,
                                             reduce, require_offload)
    else:
        outcome = solve_components(red, ic, ip, hint_assignment(red.graph, warm), settings, clock)
    phases.mark("search")
    info["reductions"] = red.stats
    if outcome.failed:
        why = explain_infeasible(problem, red) if require_offload else ""
        return infeasible_result(why or outcome.failed, obj, info, start)
    info.update({"weights": {"cut": obj.w_cut, "partitions": obj.w_parts},
                 "time_limit": float(time_limit), "work_limit": clock.work_limit,
                 "workers": settings.workers, "seed": settings.seed})
    coalesce = coalesce and clock.elapsed() < clock.limit  # an improvement: in time only
    res = read_result(problem, red, outcome, obj, scale, warm, info, coalesce, start)
    if info["method"] == "lns":  # LNS never builds the whole model
        res.info.pop("model_objective", None)
    phases.mark("read")
    if accept:
        res = accepted_result(res, warm, obj)
    phases.mark("acceptance")
    res.info["wall_seconds"] = clock.elapsed()
    return res


def solve_components(red: Reduction, w_cut: int, w_parts: int, src: WarmHint | None,
                settings: SolverSettings, clock: Clock) -> ComponentsOutcome:
    """Build and solve every component, smallest first, sharing the clock's budget; stops at the
    first infeasible component (``failed`` says which)."""
    models = build_models(red, w_cut, w_parts)
    outcome = ComponentsOutcome()
    remaining = sum(len(p) for p in red.components if len(p) > 1) or 1
    for i in sorted(range(len(red.components)), key=lambda i: (len(red.components[i]), i)):
        model, size = models[i], len(red.components[i])
        outcome.const += model.const
        if model.trivial:  # no component or a lone super-node with its device fixed
            for s in model.component:
                outcome.rank[s] = 0
                outcome.device[s] = next(iter(model.x[s])) if model.x[s] else -1
            outcome.statuses.append("OPTIMAL")
            continue
        left = clock.left()
        # small components come first and usually finish in milliseconds; a floor keeps a tiny
        # share from starving one, and what they leave goes to the larger components
        budget = min(left, max(min(2.0, left), left * size / remaining))
        remaining -= size
        if budget <= 0.005:  # out of time: the component keeps its hint, bound 0
            sol = unsolved_component(model, src, clock)
        else:
            sol, phase1 = solve_component(model, src, budget, red.fixed_offload, settings, clock)
            outcome.phase1 = phase1 or outcome.phase1
        if sol.status in ("INFEASIBLE", "MODEL_INVALID"):
            outcome.failed = f"the model of {size} super-nodes is {sol.status}"
            return outcome
        outcome.add(sol)
        if sol.status == "UNKNOWN":
            break
    return outcome


#: Share of the time limit LNS runs for when the cut relaxation can bound the objective (the
#: relaxation gets the rest).
LNS_SHARE = 0.7


def _run_lns(problem: Problem, weights: tuple[int, int], warm: Partition | None,
             settings: SolverSettings, clock: Clock, window: int | None,
             reduce: bool | tuple[str, ...], require_offload: bool
             ) -> tuple[Reduction, ComponentsOutcome, dict[str, Any]]:
    """LNS from the warm start (:mod:`clusterkit.engines.cpsat.lns`), then the bound: the
    larger of the relaxation of :mod:`clusterkit.engines.cpsat.relax` and, when it applies,
    the cut relaxation solved by the full model in the time left."""
    ic, ip = weights
    red = reduce_problem(problem, w_parts=ip, enable=lns_reductions(reduce),
                         require_offload=require_offload)
    relaxed = cut_relaxation(problem) if ic else None
    share = LNS_SHARE if relaxed is not None else 1.0
    sub = clock.share(share)
    outcome, stats = solve_lns(problem, red, ic, ip, warm, settings, sub, window)
    clock.absorb(sub)
    if relaxed is not None and clock.left() > 0 and stats.get("stop") != "bound reached":
        rred = reduce_problem(relaxed, w_parts=0, enable=reduce, require_offload=require_offload)
        cut = solve_components(rred, 1, 0, None, settings, clock)
        if not cut.failed and (rred.fixed_offload or cut.phase1.get("status") == "OPTIMAL"):
            value = cut.const + cut.bound
            stats["cut_relaxation_bound"] = value
            outcome.bound = max(outcome.bound, ic * value + ip * partitions_bound(red.graph))
    return red, outcome, stats


def _check_method(method: Any, window: Any) -> None:
    """A bad ``method`` or ``window`` is a :class:`StrategyError` naming it."""
    check_choice("cpsat: option method", method, METHODS)
    if window is not None and (isinstance(window, bool) or not isinstance(window, int)
                               or window < 2):
        raise StrategyError(f"cpsat: option window must be an integer >= 2, got {window!r}")


def _check_options(time_limit: Any, workers: Any, seed: Any, reduce: Any, deterministic: bool,
                   log: bool) -> SolverSettings:
    """The solver settings; a bad option is a :class:`StrategyError` naming it."""
    if not isinstance(reduce, bool):
        unknown = [reduce] if isinstance(reduce, str) else sorted(set(reduce) - set(REDUCTIONS))
        if unknown:
            raise StrategyError(f"cpsat: option reduce has unknown reduction {unknown[0]!r} "
                                f"(known: {', '.join(REDUCTIONS)})")
    return SolverSettings.checked("cpsat", time_limit, workers, seed, log, deterministic)


__getattr__ = module_getattr(__name__, {"solve_parts": "solve_components"}, globals())
