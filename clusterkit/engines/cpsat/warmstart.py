"""The warm start of the exact engine: the best heuristic partition by the same objective.

Every heuristic engine of the registry (or the one named, or a partition given) is run on the
problem, checked with :meth:`Partition.validate` and split where its devices do not accept a
cluster (:mod:`clusterkit.passes.acceptable`), as the front door does after any strategy; the
best by the lexicographic key of :mod:`clusterkit.constraints.objectives` becomes the solver's
hint and the floor of its result. With a clock, a heuristic is skipped (``tried`` says so)
when the longest one so far would end past :data:`WARM_SHARE` of the run's time limit.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from clusterkit.constraints.core import Problem
from clusterkit.constraints.objectives import Objective
from clusterkit.engines import get_strategy, strategy_specs
from clusterkit.engines.cpsat.timing import WARM_SHARE
from clusterkit.errors import StrategyError
from clusterkit.passes.acceptable import make_acceptable
from clusterkit.result.model import Partition

if TYPE_CHECKING:
    from clusterkit.engines.cpsat.solve import Clock

#: what ``tried`` says of a heuristic the clock left no time for
OUT_OF_TIME = "skipped: the time limit was reached"


def skipped() -> tuple[str, ...]:
    """Engines never used as a warm start: the exact ones (their spec's ``exact``), which would
    call the warm start again."""
    return tuple(spec.name for spec in strategy_specs() if spec.exact)


def __getattr__(name: str) -> Any:
    """``SKIP``: :func:`skipped` when read (the registry may have grown)."""
    if name == "SKIP":
        return skipped()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

WarmSpec = bool | str | Partition | None


def warm_start(problem: Problem, spec: WarmSpec, objective: Objective,
               clock: Clock | None = None) -> tuple[Partition | None, dict[str, Any]]:
    """The best valid and acceptable heuristic partition and what was tried. ``spec``: True
    (every registered heuristic), False/None (none), a strategy name, or a Partition;
    ``clock``: past its warm-start share, the heuristics not yet run are skipped."""
    if spec is False or spec is None:
        return None, {"strategy": None, "objective": None}
    if isinstance(spec, Partition):
        spec.validate()
        spec = make_acceptable(spec)
        fb, val = objective.key(spec.metrics())
        return spec, {"strategy": spec.strategy or "given", "objective": val,
                      "fallback_nodes": fb}
    names = _strategy_names(spec)
    best = None
    tried: dict[str, Any] = {}
    longest = 0.0  # wall seconds of the longest heuristic so far: what the next may take
    for name in names:
        if best is not None and clock is not None \
                and clock.elapsed() + longest >= WARM_SHARE * clock.limit:
            tried[name] = OUT_OF_TIME
            continue
        began = time.perf_counter()
        try:
            part = _run_heuristic(problem, name)
        except Exception as exc:  # another engine failing must not stop the exact one
            if isinstance(spec, str):
                raise
            tried[name] = f"failed: {exc}"
            continue
        longest = max(longest, time.perf_counter() - began)
        key = objective.key(part.metrics())
        tried[name] = {"objective": key[1], "fallback_nodes": key[0]}
        if best is None or key < best[0]:
            best = (key, name, part)
    if best is None:
        return None, {"strategy": None, "objective": None, "tried": tried}
    return best[2], {"strategy": best[1], "objective": best[0][1],
                     "fallback_nodes": best[0][0], "tried": tried}


def _strategy_names(spec: WarmSpec) -> list[str]:
    if isinstance(spec, str):
        return [spec]
    if spec is True:
        return [spec.name for spec in strategy_specs() if not spec.exact]
    raise StrategyError(f"cpsat: option warm_start must be True, False, a strategy name or a "
                        f"Partition, got {spec!r}")


#: options of a heuristic run as a warm start: ``auto`` without its CP-SAT polish, which the
#: search that follows does in the run's own time
WARM_OPTIONS: dict[str, dict[str, Any]] = {"auto": {"polish_limit": 0}}


def _run_heuristic(problem: Problem, name: str) -> Partition:
    """Run one registered engine with its default options (:data:`WARM_OPTIONS` for some) and
    check its result."""
    part = get_strategy(name)(problem, **WARM_OPTIONS.get(name, {})).derive(strategy=name)
    part.validate()
    return make_acceptable(part)
