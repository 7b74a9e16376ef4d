"""How far a partition is from the optimum.

The optimum is the lexicographic one of the ``cpsat`` strategy: fewest fallback nodes first, then
the objective (``cut``, ``partitions`` or weights). :func:`optimality_gap` solves it (warm-started
from the partition itself, so the optimum found is never worse than the partition) or reuses a
result given with ``optimum=``, and reports the partition's excess over the best known optimum
and its gap to the proven lower bound.
"""

from __future__ import annotations

from typing import Any, Mapping

from clusterkit.constraints.objectives import parse_objective, partition_key
from clusterkit.errors import StrategyError
from clusterkit.result.model import Partition


def objective_value(partition: Partition, objective: str | Mapping[str, float] = "cut"
                    ) -> tuple[int, float]:
    """``(fallback nodes, objective)`` of a partition: the lexicographic key, smaller is
    better."""
    return parse_objective(objective).key(partition.metrics())


def optimum(problem, objective: str | Mapping[str, float] = "cut", time_limit: float = 60.0,
            workers: int = 2, seed: int = 0, warm_start: Any = True):
    """The cpsat result for ``problem`` (a :class:`~clusterkit.engines.cpsat.strategy.CpsatResult`),
    to share between several :func:`optimality_gap` calls."""
    from clusterkit.engines.cpsat.strategy import optimize

    return optimize(problem, objective, time_limit=time_limit, workers=workers, seed=seed,
                    warm_start=warm_start)


def optimality_gap(partition: Partition, objective: str | Mapping[str, float] = "cut",
                   time_limit: float = 60.0, workers: int = 2, seed: int = 0,
                   optimum: Any = None) -> dict[str, Any]:
    """The gap of ``partition`` to the optimum of its problem.

    ``optimum``: a ``CpsatResult`` (or a cpsat Partition) already solved for the same problem
    and objective; when None, one is solved here with ``time_limit``, warm-started from
    ``partition``. Returned keys: ``strategy``, ``objective`` (its label), ``value`` and
    ``fallback_nodes`` of the partition; ``optimum``/``optimum_fallback_nodes`` (best known),
    ``bound`` (proven lower bound of the objective at the optimal fallback count), ``status``
    (of the optimum: OPTIMAL means ``optimum == bound``), ``proven`` (bool), ``offload_gap``
    (extra fallback nodes of the partition), ``excess`` = value - optimum and ``excess_ratio``
    (over the optimum), ``gap`` = value - bound and ``gap_ratio`` (over the value, as MIP
    solvers report it). When the partition leaves more nodes on the fallback than the optimum it
    is worse whatever its objective: ``excess``/``gap`` are then None and ``offload_gap`` > 0.
    """
    from clusterkit.engines.cpsat.strategy import optimize

    w_cut, w_parts, label = parse_objective(objective)
    fb, value = partition_key(partition.metrics(), w_cut, w_parts)
    if optimum is None:
        optimum = optimize(partition.problem, objective, time_limit=time_limit,
                           workers=workers, seed=seed, warm_start=partition)
    report, best = _report_of(optimum)
    if report.objective_name not in ("", label):
        raise StrategyError(f"optimality_gap: the optimum was solved for "
                            f"{report.objective_name!r}, not {label!r}")
    if best is None:
        return {"strategy": partition.strategy, "objective": label, "value": value,
                "fallback_nodes": fb, "optimum": None, "optimum_fallback_nodes": None,
                "bound": None, "status": report.status, "proven": False,
                "offload_gap": None, "excess": None, "excess_ratio": None, "gap": None,
                "gap_ratio": None, "reason": report.reason}
    ofb, oval = partition_key(best.metrics(), w_cut, w_parts)
    status, bound = report.status, report.bound
    # the partition itself may beat a time-limited optimum: the best known is the smaller
    if (fb, value) < (ofb, oval):
        ofb, oval = fb, value
        status = "FEASIBLE" if status == "OPTIMAL" else status
    out: dict[str, Any] = {"strategy": partition.strategy, "objective": label, "value": value,
                           "fallback_nodes": fb, "optimum": oval, "optimum_fallback_nodes": ofb,
                           "bound": bound, "status": status, "proven": status == "OPTIMAL",
                           "offload_gap": fb - ofb}
    if fb > ofb:
        out.update({"excess": None, "excess_ratio": None, "gap": None, "gap_ratio": None})
        return out
    out.update(_excess(value, oval, bound))
    return out


def _report_of(optimum: Any) -> tuple[Any, Partition | None]:
    """The solve report and the best partition of a ``CpsatResult`` or a cpsat Partition."""
    from clusterkit.engines.cpsat.strategy import CpsatResult, SolveReport

    if isinstance(optimum, Partition):
        # a partition made elsewhere (coalesced, read from JSON) keeps only the info keys
        return optimum.solve_report or SolveReport.from_info(optimum.info), optimum
    if isinstance(optimum, CpsatResult):
        return optimum.report, optimum.partition
    raise TypeError(f"optimality_gap: optimum must be a CpsatResult or a Partition, got "
                    f"{type(optimum).__name__}")


def _excess(value: float, optimum: float, bound: float | None) -> dict[str, Any]:
    """``excess``/``excess_ratio`` over the best known and ``gap``/``gap_ratio`` over the
    bound (None without one) of a partition at the optimum's fallback count."""
    excess = value - optimum
    out: dict[str, Any] = {"excess": excess, "excess_ratio": excess / optimum if optimum else
                           (0.0 if excess == 0 else float("inf"))}
    if bound is None:
        out["gap"] = out["gap_ratio"] = None
    else:
        gap = max(0.0, value - bound)
        out["gap"] = gap
        out["gap_ratio"] = gap / value if value else 0.0
    return out


def format_gap(row: Mapping[str, Any]) -> str:
    """One line for people: ``cycles: cut 1,234 vs optimum 1,000 (+23.4%, OPTIMAL)``."""
    if row.get("optimum") is None:
        return f"{row['strategy']}: no optimum ({row.get('status')}: {row.get('reason', '')})"
    if row["offload_gap"]:
        return (f"{row['strategy']}: {row['offload_gap']} more fallback nodes than the optimum "
                f"({row['fallback_nodes']} vs {row['optimum_fallback_nodes']}, "
                f"{row['status']})")
    ratio = row["excess_ratio"]
    pct = "inf" if ratio == float("inf") else f"{100 * ratio:+.1f}%"
    return (f"{row['strategy']}: {row['objective']} {row['value']:,.0f} vs optimum "
            f"{row['optimum']:,.0f} ({pct}, {row['status']}"
            + (f", bound {row['bound']:,.0f})" if row['bound'] is not None else ")"))
