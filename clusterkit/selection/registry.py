"""The selector registry: ``--selector`` names → property factories.

The selectors shipped in ``clusterkit.selectors`` are declared here by name and module path and
imported on first use, so this layer never imports the higher one; a shipped module that fails
to import raises its own ImportError instead of turning into "unknown selector".
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Callable

from clusterkit.errors import SelectorError
from clusterkit.registry import Registry
from clusterkit.selection.protocol import SubgraphProperty


@dataclass(frozen=True)
class SelectorEntry:
    """A property factory (called with ``device=`` when one is given) and a one-line doc."""

    factory: Callable[..., SubgraphProperty]
    doc: str = ""


#: shipped ``--selector`` names → ``module:factory`` in the ``clusterkit.selectors`` package
SHIPPED = {name: f"clusterkit.selectors.{name}:make_property"
           for name in ("coreml", "nnapi", "xnnpack", "qnn", "dnnl", "tensorrt", "openvino_npu")}


def _entry(factory: Any) -> SelectorEntry:
    """A shipped factory with its module's first docstring line as the description."""
    doc = getattr(sys.modules.get(factory.__module__), "__doc__", None) or ""
    return SelectorEntry(factory, (doc.strip().splitlines() or [""])[0])


PROPERTIES: Registry[SelectorEntry] = Registry("selector", SelectorError, SHIPPED, wrap=_entry)


def register_property(name: str, factory: Callable[..., SubgraphProperty], doc: str = "", *,
                      replace: bool = False) -> None:
    """Register a property factory under ``name`` (called with ``device=`` when one is given);
    a name in use needs ``replace=True``."""
    PROPERTIES.register(name, SelectorEntry(factory, doc), replace=replace)


def registered_properties() -> dict[str, str]:
    """Available names (shipped selectors included) → one-line descriptions."""
    return {name: PROPERTIES.get(name).doc for name in sorted(PROPERTIES.available())}


def get_property(name: str, device: str | None = None) -> SubgraphProperty:
    """A property by registered or shipped name."""
    entry = PROPERTIES.get(name)
    prop = entry.factory(device=device) if device else entry.factory()
    if not isinstance(prop, SubgraphProperty):
        raise SelectorError(f"selector {name!r} did not build a SubgraphProperty")
    return prop
