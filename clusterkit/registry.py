"""One shape for every registry of named plug-ins (strategies, selectors, backends).

A :class:`Registry` maps lowercase names to entries. Entries shipped with clusterkit are declared
as ``"module:attribute"`` strings and imported on first use (or as entries that import what they
need themselves, such as a strategy's spec), so a lower layer can name a higher
one's modules without importing them; entries added at run time are registered as objects.
A duplicate name is refused unless ``replace=True``. A shipped module that is absent gives the
registry's error ("not available in this build"); any other import failure inside it propagates
unchanged, so its real message is never hidden behind "unknown name".

Third-party packages add entries through an entry-point ``group`` (``clusterkit.selectors``,
``clusterkit.strategies``): each entry point's name is the plug-in's name and its value a
``"module:attribute"`` loaded like a shipped one. A plug-in never replaces a shipped or registered
name: a clash is an error naming the distribution.
"""

from __future__ import annotations

import importlib
from importlib import metadata
from typing import Any, Callable, Generic, Mapping, TypeVar

from clusterkit.errors import ClusterkitError

T = TypeVar("T")


class Registry(Generic[T]):
    """Names → entries of one kind (``kind`` names it in messages, e.g. ``"strategy"``).

    ``shipped`` maps names to ``"module:attribute"`` or to entries; ``wrap`` turns a loaded
    attribute into an entry (default: the attribute itself); ``error`` is the exception class
    raised."""

    def __init__(self, kind: str, error: type[ClusterkitError],
                 shipped: Mapping[str, str | T] | None = None,
                 wrap: Callable[[object], T] | None = None, group: str | None = None):
        self.kind = kind
        self.error = error
        self.shipped = dict(shipped or {})
        self.group = group
        self._plugins: dict[str, tuple[str, str]] | None = None
        self._wrap = wrap
        self._loaded: dict[str, T] = {}
        self._custom: dict[str, T] = {}

    def register(self, name: str, entry: T, *, replace: bool = False) -> None:
        """Add ``entry`` under ``name``; a name already in use needs ``replace=True``."""
        if (name in self or name in self.plugins()) and not replace:
            raise self.error(f"{self.kind} {name!r} is already registered "
                             "(pass replace=True to replace it)")
        self._custom[name] = entry

    def unregister(self, name: str) -> None:
        """Remove an entry added with :meth:`register` (shipped entries stay)."""
        self._custom.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self._custom or name in self.shipped

    def names(self) -> list[str]:
        """Every name: shipped ones in declared order, then the registered and plug-in ones
        sorted."""
        extra = set(self._custom) | set(self.plugins())
        return list(self.shipped) + sorted(n for n in extra if n not in self.shipped)

    def plugins(self) -> dict[str, tuple[str, str]]:
        """Plug-in name → (``"module:attribute"``, distribution) from the entry-point group,
        read once."""
        if self._plugins is None:
            self._plugins = {}
            found = metadata.entry_points(group=self.group) if self.group else ()
            for ep in sorted(found, key=lambda e: (e.name, e.value)):
                dist = getattr(ep.dist, "name", None) or "an unknown distribution"
                if ep.name in self.shipped or ep.name in self._custom:
                    raise self.error(f"{self.kind} plug-in {ep.name!r} from {dist} uses the "
                                     f"name of a {self.kind} clusterkit already has")
                if ep.name in self._plugins:
                    raise self.error(f"{self.kind} plug-in {ep.name!r} is declared twice "
                                     f"({self._plugins[ep.name][1]} and {dist})")
                self._plugins[ep.name] = (ep.value, dist)
        return self._plugins

    def available(self) -> list[str]:
        """:meth:`names` without the shipped entries whose module is absent from this build."""
        out = []
        for name in self.names():
            try:
                self.get(name)
            except self.error:
                continue
            out.append(name)
        return out

    def get(self, name: str) -> T:
        """The entry for ``name``, importing a shipped one on first use."""
        if name in self._custom:
            return self._custom[name]
        if name in self._loaded:
            return self._loaded[name]
        target = self.shipped.get(name)
        if target is not None and not isinstance(target, str):
            return target  # declared as an entry: nothing to import
        if target is None and name in self.plugins():
            target = self.plugins()[name][0]
        if target is None:
            known = ", ".join(self.names()) or "none"
            raise self.error(f"unknown {self.kind} {name!r} (known: {known})")
        entry = self._load(name, target)
        self._loaded[name] = entry
        return entry

    def _load(self, name: str, target: str) -> T:
        obj = load_target(target, f"{self.kind} {name!r}", self.error)
        return self._wrap(obj) if self._wrap else obj


def load_target(target: str, what: str, error: type[ClusterkitError]) -> Any:
    """The attribute ``"module:attribute"`` names. A module that is absent is ``error`` ("``what``
    is not available in this build"); a module it imports that fails propagates unchanged."""
    module, _, attr = target.partition(":")
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if not (exc.name and (module == exc.name or module.startswith(exc.name + "."))):
            raise  # a module the shipped one imports is broken: its own message tells why
        raise error(f"{what} is not available in this build (no module {module!r})") from exc
    return getattr(mod, attr)
