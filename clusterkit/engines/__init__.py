"""Strategy registry. A strategy is a function ``run(problem, **options) -> Partition``.

Built-in strategies are declared by name and imported lazily from their own modules.
"""

from __future__ import annotations

from typing import Callable

from clusterkit.errors import StrategyError
from clusterkit.registry import Registry

STRATEGIES: Registry[Callable] = Registry("strategy", StrategyError, {
    "singleton": "clusterkit.engines.singleton:run",
    "cycles": "clusterkit.engines.cycles:run",
    "longest-path": "clusterkit.engines.longest_path:run",
    "mxnet": "clusterkit.engines.mxnet:run",
    "hetero": "clusterkit.engines.hetero:run",
    "cpsat": "clusterkit.engines.cpsat.strategy:run",
    "placement": "clusterkit.engines.placement:run",
    "auto": "clusterkit.engines.auto:run",
}, group="clusterkit.strategies")


def register_strategy(name: str, func: Callable, *, replace: bool = False) -> None:
    """Register a strategy function under ``name`` (a name in use needs ``replace=True``)."""
    STRATEGIES.register(name, func, replace=replace)


def strategy_names() -> list[str]:
    """Every strategy that can be run, built-in ones first."""
    return STRATEGIES.available()


def get_strategy(name: str) -> Callable:
    """The strategy function for ``name``."""
    return STRATEGIES.get(name)
