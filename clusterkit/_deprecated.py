"""Old public names, kept for one release after a rename: each use still works and emits a
``DeprecationWarning`` that names the new name. Every alias of the package is made here:

- a moved module: :func:`moved_module`, the whole of the old module (its ``__getattr__``);
- a renamed module-level name: :func:`module_getattr` (a PEP 562 module ``__getattr__``);
- a renamed attribute of a class: :class:`renamed_attribute`;
- a renamed keyword argument: :func:`renamed_keywords`;
- an option that became keyword-only: :func:`keyword_only_after`.

One wording (:func:`warn_renamed`) names the new name and the release that removes the old one
(:data:`REMOVED_IN`). The old names are listed in the "Renamed" table of the changelog.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import operator
import warnings
from typing import Any, Callable, Mapping, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


#: the release that removes every alias made here (the changelog's "Renamed" section says so)
REMOVED_IN = "0.2.0"


def warn_renamed(old: str, new: str, stacklevel: int = 3) -> None:
    """Warn that ``old`` is deprecated in favour of ``new``: the one wording of every alias."""
    warnings.warn(f"{old} is deprecated, use {new} ({old} is removed in clusterkit "
                  f"{REMOVED_IN})", DeprecationWarning, stacklevel=stacklevel)


def moved_module(module: str, *homes: str,
                 renames: Mapping[str, str] | None = None) -> Callable[[str], Any]:
    """The ``__getattr__`` of a moved module's shim, the whole of the shim
    (``__getattr__ = moved_module(__name__, "new.home")``): every public name of the new
    ``homes`` (the first that has it; ``renames``: old -> new), each read with a warning that
    names its new home."""
    renames = dict(renames or {})

    def public(home: str) -> tuple[dict[str, Any], list[str]]:
        namespace = vars(importlib.import_module(home))
        return namespace, namespace.get("__all__", [k for k in namespace if k[0] != "_"])

    def __getattr__(name: str) -> Any:
        if name == "__all__":  # ``from old import *``: each name then warns as it is read
            return sorted({k for home in homes for k in public(home)[1]})
        new = renames.get(name, name)
        for home in homes:
            namespace, names = public(home)
            if new in names:
                warn_renamed(f"{module}.{name}", f"{home}.{new}")
                return namespace[new]
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__


def module_getattr(module: str, renames: Mapping[str, str], namespace: Mapping[str, Any],
                   fallback: Callable[[str], Any] | None = None,
                   stacklevel: int = 3) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``module``: an old name of ``renames`` (old -> new) gives
    ``namespace[new]`` with a warning; any other name goes to ``fallback`` (else
    ``AttributeError``). ``stacklevel`` points the warning at the caller (one more when another
    ``__getattr__`` calls this one)."""

    def __getattr__(name: str) -> Any:
        new = renames.get(name)
        if new is not None and new in namespace:
            warn_renamed(f"{module}.{name}", f"{module}.{new}", stacklevel)
            return namespace[new]
        if fallback is not None:
            return fallback(name)
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__


class renamed_attribute:  # noqa: N801 - used like ``property``
    """A class attribute kept under its old name: reading, writing or calling the old name on
    an instance works on the new one, with a warning. The new name may be a dotted path
    (``"limits.loosest_max"``: an attribute of an attribute)."""

    def __init__(self, new: str):
        self.new = new
        self.old = ""
        self.owner = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.old, self.owner = name, owner.__name__

    def _warn(self) -> None:
        warn_renamed(f"{self.owner}.{self.old}", f"{self.owner}.{self.new}", stacklevel=4)

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        if obj is None:  # on the class (help(), introspection): the new attribute, no warning
            return getattr(objtype, self.new, self)
        self._warn()
        return operator.attrgetter(self.new)(obj)

    def __set__(self, obj: Any, value: Any) -> None:
        self._warn()
        owner, _, name = self.new.rpartition(".")
        setattr(operator.attrgetter(owner)(obj) if owner else obj, name, value)


def renamed_keywords(**renames: str) -> Callable[[F], F]:
    """Decorator: each old keyword argument (``old="new"``) is passed on as the new one, with
    a warning; giving both is a ``TypeError``."""

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            for old, new in renames.items():
                if old in kwargs:
                    if new in kwargs:
                        raise TypeError(f"{func.__qualname__}() got both {old}= and {new}=")
                    warn_renamed(f"{func.__qualname__}({old}=...)", f"{new}=...")
                    kwargs[new] = kwargs.pop(old)
            return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]  # same signature, plus the old keywords

    return decorate


def keyword_only_after(n: int) -> Callable[[F], F]:
    """Decorator: every parameter after the first ``n`` is keyword-only in the signature
    (``inspect.signature``, help, docs); a call that still passes some of them positionally
    works, with a warning naming them."""

    def decorate(func: F) -> F:
        sig = inspect.signature(func)
        params = list(sig.parameters.values())
        if any(p.kind in (p.POSITIONAL_ONLY, p.VAR_POSITIONAL) for p in params[n:]):
            raise TypeError(f"keyword_only_after({n}): {func.__qualname__} has positional-only "
                            f"or *args parameters after the first {n}")
        names = [p.name for p in params[n:] if p.kind is p.POSITIONAL_OR_KEYWORD]
        params[n:] = [p.replace(kind=p.KEYWORD_ONLY) if p.kind is p.POSITIONAL_OR_KEYWORD else p
                      for p in params[n:]]

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            extra = len(args) - n
            if 0 < extra <= len(names):  # more: ``func`` refuses the call
                given = names[:extra]
                warn_renamed(f"{func.__qualname__}(..., {', '.join(given)})",
                             f"{func.__qualname__}(..., {', '.join(k + '=...' for k in given)})")
            return func(*args, **kwargs)

        wrapper.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]  # same call, options keyword-only

    return decorate
