"""Strategy registry. A strategy is a function ``run(problem, **options) -> Partition``.

Built-in strategies are imported lazily, by name, from their own modules.
"""

from __future__ import annotations

import importlib
from typing import Callable

from clusterkit.errors import StrategyError

_BUILTIN = {
    "singleton": "clusterkit.engines.singleton:run",
    "cycles": "clusterkit.engines.cycles:run",
    "longest-path": "clusterkit.engines.longest_path:run",
    "mxnet": "clusterkit.engines.mxnet:run",
    "hetero": "clusterkit.engines.hetero:run",
    "cpsat": "clusterkit.engines.cpsat.strategy:run",
    "placement": "clusterkit.engines.placement:run",
}
_CUSTOM: dict[str, Callable] = {}


def register_strategy(name: str, func: Callable) -> None:
    """Register a strategy function under ``name``."""
    _CUSTOM[name] = func


def strategy_names() -> list[str]:
    """Every strategy that can be run, built-in ones first."""
    names = []
    for name, target in _BUILTIN.items():
        try:
            get_strategy(name)
        except StrategyError:
            continue
        names.append(name)
    return names + sorted(_CUSTOM)


def get_strategy(name: str) -> Callable:
    """The strategy function for ``name``."""
    if name in _CUSTOM:
        return _CUSTOM[name]
    target = _BUILTIN.get(name)
    if target is None:
        known = ", ".join(list(_BUILTIN) + sorted(_CUSTOM))
        raise StrategyError(f"unknown strategy {name!r} (known: {known})")
    module, func = target.split(":")
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name == module:
            raise StrategyError(f"strategy {name!r} is not available in this build") from exc
        raise
    return getattr(mod, func)
