"""The warm start of the exact engine: the best heuristic partition by the same objective.

Every heuristic engine of the registry (or the one named, or a partition given) is run on the
problem and checked with :meth:`Partition.validate`; the best by the lexicographic key of
:mod:`clusterkit.constraints.objectives` becomes the solver's hint and the floor of its result.
"""

from __future__ import annotations

from typing import Any

from clusterkit.constraints.core import Problem
from clusterkit.constraints.objectives import Objective
from clusterkit.engines import get_strategy, strategy_specs
from clusterkit.errors import StrategyError
from clusterkit.result.model import Partition


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


def warm_start(problem: Problem, spec: WarmSpec, objective: Objective
               ) -> tuple[Partition | None, dict[str, Any]]:
    """The best valid heuristic partition and what was tried. ``spec``: True (every registered
    heuristic), False/None (none), a strategy name, or a Partition."""
    if spec is False or spec is None:
        return None, {"strategy": None, "objective": None}
    if isinstance(spec, Partition):
        spec.validate()
        fb, val = objective.key(spec.metrics())
        return spec, {"strategy": spec.strategy or "given", "objective": val,
                      "fallback_nodes": fb}
    names = _strategy_names(spec)
    best = None
    tried: dict[str, Any] = {}
    for name in names:
        try:
            part = _run_heuristic(problem, name)
        except Exception as exc:  # another engine failing must not stop the exact one
            if isinstance(spec, str):
                raise
            tried[name] = f"failed: {exc}"
            continue
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


def _run_heuristic(problem: Problem, name: str) -> Partition:
    """Run one registered engine with its default options and check its result."""
    part = get_strategy(name)(problem)
    part.strategy = name
    part.validate()
    return part
