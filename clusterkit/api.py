"""The library's front door: load, compile constraints, run a strategy, validate."""

from __future__ import annotations

import inspect
import time
from typing import Any, Iterable

from clusterkit.constraints.core import Constraints, Problem
from clusterkit.errors import StrategyError
from clusterkit.graph.core import Graph
from clusterkit.io.loader import load_graph
from clusterkit.result import Partition
from clusterkit.selection.protocol import SubgraphProperty
from clusterkit.selection.specs import parse_selectors
from clusterkit.engines import get_strategy


def make_problem(model: Any, selectors: Iterable[str | SubgraphProperty],
                 constraints: Constraints | None = None, fallback: str = "cpu") -> Problem:
    """Load ``model`` and compile ``constraints`` (default: :meth:`Constraints.default`) with
    the devices of ``selectors`` (specs or properties, priority order)."""
    graph: Graph = load_graph(model)
    selectors = list(selectors)
    specs = [s for s in selectors if isinstance(s, str)]
    parsed = iter(parse_selectors(specs)) if specs else iter(())
    props = [next(parsed) if isinstance(s, str) else s for s in selectors]
    cons = Constraints.default() if constraints is None else constraints
    return cons.compile(graph, props, fallback=fallback)


def run_strategy(problem: Problem, strategy: str, selector: str = "", validate: bool = True,
                 coalesce: bool = False, **options: Any) -> Partition:
    """Run ``strategy`` on a compiled problem; the result is timed and (by default) validated.
    With ``coalesce``, clusters of one device are then merged while the partition stays valid
    (:mod:`clusterkit.engines.coalesce`: never raises cut_bytes or partitions).
    Unknown options are an error naming the strategy."""
    func = get_strategy(strategy)
    params = inspect.signature(func).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        unknown = sorted(set(options) - set(params))
        if unknown:
            allowed = ", ".join(k for k in params if k != "problem") or "none"
            raise StrategyError(f"strategy {strategy!r} has no option {unknown[0]!r} "
                                f"(options: {allowed})")
    start = time.perf_counter()
    result = func(problem, **options)
    if coalesce:
        from clusterkit.engines.coalesce import coalesce as coalesce_clusters

        result = coalesce_clusters(result)
    result.seconds = time.perf_counter() - start
    result.strategy = strategy
    if selector:
        result.selector = selector
    elif not result.selector:
        result.selector = ";".join(repr(p) for p in problem.properties)
    if validate:
        result.validate()
    return result


def partition(model: Any, selectors: Iterable[str | SubgraphProperty], strategy: str = "cycles",
              constraints: Constraints | None = None, fallback: str = "cpu",
              **options: Any) -> Partition:
    """Partition ``model`` (path, ModelProto, networkx DiGraph or Graph) for the devices of
    ``selectors`` with ``strategy``; returns a validated :class:`Partition`."""
    selectors = list(selectors)
    problem = make_problem(model, selectors, constraints, fallback)
    label = " ".join(s if isinstance(s, str) else repr(s) for s in selectors)
    return run_strategy(problem, strategy, selector=label, **options)
