"""Strategy registry. A strategy is a function ``run(problem, **options) -> Partition`` with a
:class:`~clusterkit.engines.spec.StrategySpec` saying where it belongs.

Built-in strategies are declared here once, by spec, and their modules imported lazily. Every
list of strategies (``compare``'s default, ``auto``'s members, the self-placing ones, the
command line's option flags) is read from these specs.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from clusterkit.engines.spec import OptionFlag, StrategySpec, as_spec
from clusterkit.errors import StrategyError
from clusterkit.registry import Registry

_SOLVER_FLAGS = (
    OptionFlag("objective", "cut, partitions, or W1*cut+W2*partitions style weights as "
               "'cut=1,partitions=1000'; throughput (placement instances: the least largest "
               "device load; auto gives the fast answer, cpsat the optimum); latency "
               "(placement instances: the least single-sample latency)"),
    OptionFlag("time_limit", "seconds", type=float),
    OptionFlag("workers", "solver workers", type=int),
    OptionFlag("seed", "random seed", type=int),
)
_CPSAT_FLAGS = (
    _SOLVER_FLAGS[0],
    OptionFlag("time_limit", "wall-clock seconds the whole run keeps, warm start and splits "
               "included, within 3 s more (default 60; compare and report give cpsat 10; "
               "placement: deterministic seconds)", type=float, metavar="SECONDS"),
    OptionFlag("work_limit", "a budget of CP-SAT's deterministic work units for the search "
               "(default none): the same answer on any machine when it, not --time-limit, "
               "stops the search", type=float, metavar="UNITS"),
    *_SOLVER_FLAGS[2:],
)
_HETERO_FLAGS = (
    OptionFlag("affinity", "manual affinity NAME=DEVICE, re:REGEX=DEVICE or I-J=DEVICE",
               kind="many", metavar="RULE"),
    OptionFlag("fill_affinity", "with manual affinities, place the other nodes automatically",
               kind="switch"),
)

#: the built-in strategies, in the order they are listed (and ``auto``'s members are ranked)
SHIPPED: tuple[StrategySpec, ...] = (
    StrategySpec("singleton", "clusterkit.engines.singleton:run",
                 "each node its own cluster (the baseline)"),
    StrategySpec("cycles", "clusterkit.engines.cycles:run",
                 "contract edges while no cycle forms", in_portfolio=True,
                 variants=(("cycles+merge_non_adjacent", {"merge_non_adjacent": True}),
                           ("cycles+levels", {"levels": True}))),
    StrategySpec("longest-path", "clusterkit.engines.longest_path:run",
                 "clusters by longest-path level and device", in_portfolio=True),
    StrategySpec("mxnet", "clusterkit.engines.mxnet:run",
                 "MXNet's subgraph growth from seeds", in_portfolio=True, growth=True),
    StrategySpec("hetero", "clusterkit.engines.hetero:run",
                 "OpenVINO HETERO's affinity and growth", in_portfolio=True, growth=True,
                 flags=_HETERO_FLAGS),
    StrategySpec("cpsat", "clusterkit.engines.cpsat.strategy:run",
                 "CP-SAT: the optimum by an objective, or a bound", places_devices=True,
                 exact=True, flags=_CPSAT_FLAGS),
    StrategySpec("placement", "clusterkit.engines.placement:run",
                 "CP-SAT placement by a cost model", places_devices=True, clusters=False,
                 exact=True, flags=_SOLVER_FLAGS),
    StrategySpec("auto", "clusterkit.engines.auto:run",
                 "the best of a portfolio of the heuristics, refined"),
)

STRATEGIES: Registry[StrategySpec] = Registry(
    "strategy", StrategyError, {spec.name: spec for spec in SHIPPED}, wrap=as_spec,
    group="clusterkit.strategies")


def register_strategy(name: str, func: Callable | StrategySpec, *, replace: bool = False,
                      **spec: Any) -> None:
    """Register a strategy under ``name`` (a name in use needs ``replace=True``): a function,
    with the :class:`StrategySpec` fields as keywords (``places_devices``, ``clusters``,
    ``in_portfolio``, ...; the defaults: a clustering strategy that only ``--strategy`` and
    ``compare`` run; a function replacing a strategy keeps its spec's), or a whole spec."""
    STRATEGIES.register(name, _entry(name, func, replace, spec), replace=replace)


def _entry(name: str, func: Callable | StrategySpec, replace: bool,
           fields: dict[str, Any]) -> StrategySpec:
    """The spec to register: ``func`` itself when a spec; else a spec with ``fields``, which
    for a function replacing a strategy start from the replaced one's (it keeps its place)."""
    if isinstance(func, StrategySpec):
        return func.named(name)
    if replace and name in STRATEGIES:
        return dataclasses.replace(strategy_spec(name), run=func, **fields)
    return StrategySpec(name, func, **fields)


def strategy_spec(name: str) -> StrategySpec:
    """The spec of strategy ``name`` (an unknown name is a :class:`StrategyError`)."""
    return STRATEGIES.get(name).named(name)


def registered_specs() -> list[StrategySpec]:
    """The spec of every registered strategy, in registry order, without importing a shipped
    strategy's module (one may be absent from this build: :func:`strategy_specs` leaves it
    out)."""
    return [strategy_spec(name) for name in STRATEGIES.names()]


def strategy_specs() -> list[StrategySpec]:
    """The spec of every strategy that can be run, in :func:`strategy_names` order."""
    return [strategy_spec(name) for name in strategy_names()]


def strategy_names() -> list[str]:
    """Every strategy that can be run, built-in ones first."""
    out = []
    for name in STRATEGIES.available():
        try:
            strategy_spec(name).function()
        except StrategyError:  # its module is absent from this build
            continue
        out.append(name)
    return out


def get_strategy(name: str) -> Callable:
    """The strategy function for ``name``."""
    return strategy_spec(name).function()


__all__ = ["STRATEGIES", "SHIPPED", "OptionFlag", "StrategySpec", "get_strategy",
           "register_strategy", "registered_specs", "strategy_names", "strategy_spec",
           "strategy_specs"]
