"""What clusterkit knows about a strategy: one :class:`StrategySpec`, registered once.

The spec is the single place that says where a strategy belongs: the front door reads
``places_devices`` (``devices="cost"`` leaves such a strategy be), ``compare`` and ``report`` run
the ``clusters`` ones by default (the ``exact`` ones last), ``auto`` runs the ``in_portfolio``
ones as members, CP-SAT's warm start tries every strategy that is not ``exact``, and the command
line gives each of its ``flags`` a flag of its own.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from clusterkit.errors import StrategyError
from clusterkit.registry import load_target

#: how an option flag takes its value
FLAG_KINDS = ("value", "many", "switch")


@dataclass(frozen=True)
class OptionFlag:
    """A keyword option of a strategy with a command-line flag of its own (``--NAME`` with
    dashes). ``kind``: ``"value"`` (one value of ``type``), ``"many"`` (repeatable, a list) or
    ``"switch"`` (present: True); ``type`` converts a value. Every other option still works as
    ``--option KEY=VALUE``."""

    name: str
    help: str
    kind: str = "value"
    type: Callable[[str], Any] = str
    metavar: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in FLAG_KINDS:
            raise StrategyError(f"option flag {self.name!r}: kind must be one of "
                                f"{', '.join(FLAG_KINDS)}, got {self.kind!r}")

    @property
    def flag(self) -> str:
        """The command-line flag, e.g. ``--time-limit``."""
        return "--" + self.name.replace("_", "-")


@dataclass(frozen=True)
class StrategySpec:
    """One strategy: its name, its function (or ``"module:attribute"``, imported on first use)
    and where it belongs.

    - ``places_devices``: it chooses each node's device by its own objective;
    - ``clusters``: it answers the clustering question (``compare`` runs it by default);
    - ``exact``: an exact solver (never a warm start of one; ``compare`` runs it last);
    - ``in_portfolio``: ``auto`` runs it as a member, with each of ``variants`` (member name,
      options) after the plain run; ``growth``: only on graphs up to ``auto``'s growth limit;
    - ``flags``: its options that have a command-line flag of their own;
    - ``summary``: one line for listings."""

    name: str
    run: Callable[..., Any] | str
    summary: str = ""
    places_devices: bool = False
    clusters: bool = True
    exact: bool = False
    in_portfolio: bool = False
    variants: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    growth: bool = False
    flags: tuple[OptionFlag, ...] = ()

    def __post_init__(self) -> None:
        if (self.variants or self.growth) and not self.in_portfolio:
            raise StrategyError(f"strategy {self.name!r}: variants and growth are auto's "
                                "portfolio settings; they need in_portfolio=True")

    def function(self) -> Callable[..., Any]:
        """The strategy's function (a declared ``"module:attribute"`` imported once)."""
        if not isinstance(self.run, str):
            return self.run
        if self.run not in _LOADED:
            _LOADED[self.run] = load_target(self.run, f"strategy {self.name!r}", StrategyError)
        return _LOADED[self.run]

    def members(self) -> list[tuple[str, tuple[str, dict[str, Any]]]]:
        """Its ``auto`` members: (member name, (strategy, options)), the plain run first; none
        unless ``in_portfolio``."""
        if not self.in_portfolio:
            return []
        runs: list[tuple[str, dict[str, Any]]] = [(self.name, {})]
        runs += [(member, dict(opts)) for member, opts in self.variants]
        return [(member, (self.name, opts)) for member, opts in runs]

    def named(self, name: str) -> StrategySpec:
        """This spec under ``name`` (a plug-in's entry-point name is its name)."""
        return self if self.name == name else dataclasses.replace(self, name=name)


#: ``"module:attribute"`` → the imported function
_LOADED: dict[str, Callable[..., Any]] = {}


def as_spec(entry: object) -> StrategySpec:
    """A registry entry as a spec: a spec stays, a function gets the defaults (named later)."""
    if isinstance(entry, StrategySpec):
        return entry
    return StrategySpec("", entry)  # type: ignore[arg-type]  # any object; called when run
