"""The selector registry: ``--selector`` names → selector factories (each makes the device's
:class:`~clusterkit.selection.protocol.SubgraphProperty`, MXNet's name for a selector).

The selectors shipped in ``clusterkit.selectors`` are declared here once, by name with their
traits (:data:`SHIPPED_TRAITS`: the execution provider each mirrors, whether it is verified
against the real EP; its op table is its module's ``TABLE``), and imported on first use, so
this layer never imports the higher one; a shipped module that fails to import raises its own
ImportError instead of turning into "unknown selector". A factory's keyword parameters (other
than ``device``) are the selector's settings (:func:`selector_settings`), which a spec sets as
``NAME[key=value,...]``.
"""

from __future__ import annotations

import inspect
import sys
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

from clusterkit._deprecated import module_getattr
from clusterkit.errors import SelectorError
from clusterkit.registry import Registry
from clusterkit.selection.protocol import SubgraphProperty


@dataclass(frozen=True)
class SelectorEntry:
    """A property factory (called with ``device=`` when one is given), a one-line doc, and the
    selector's traits: ``ep``, the onnxruntime execution provider it mirrors (which sees the
    graph after onnxruntime's optimizations); ``table``, its op table in the ``data`` folder of
    ``clusterkit.selectors`` (the module's ``TABLE``); ``verified``, whether it is checked
    against that EP's real session (``tests/test_verify_eps.py``). A registered selector has
    none of them."""

    factory: Callable[..., SubgraphProperty]
    doc: str = ""
    ep: str | None = None
    table: str | None = None
    verified: bool = False


class SelectorTraits(NamedTuple):
    """A shipped selector's declared traits (its ``table`` is its module's ``TABLE``)."""

    ep: str | None = None
    verified: bool = False


#: the shipped selectors (modules of ``clusterkit.selectors``), each with its traits, once
SHIPPED_TRAITS: dict[str, SelectorTraits] = {
    "coreml": SelectorTraits("CoreMLExecutionProvider"),
    "nnapi": SelectorTraits("NnapiExecutionProvider"),
    "xnnpack": SelectorTraits("XnnpackExecutionProvider"),
    "qnn": SelectorTraits("QNNExecutionProvider", verified=True),
    "dnnl": SelectorTraits("DnnlExecutionProvider"),
    "tensorrt": SelectorTraits("TensorrtExecutionProvider"),
    "openvino_npu": SelectorTraits("OpenVINOExecutionProvider", verified=True),
}

#: shipped ``--selector`` names → ``module:factory`` in the ``clusterkit.selectors`` package
SHIPPED = {name: f"clusterkit.selectors.{name}:make_property" for name in SHIPPED_TRAITS}
_TRAITS_OF_TARGET = {SHIPPED[name]: traits for name, traits in SHIPPED_TRAITS.items()}


def _entry(factory: Any) -> SelectorEntry:
    """A loaded factory with its module's first docstring line as the description and, when it
    is a shipped one, its traits and its module's ``TABLE``."""
    module = sys.modules.get(getattr(factory, "__module__", None) or "")
    doc = getattr(module, "__doc__", None) or ""
    traits = _TRAITS_OF_TARGET.get(f"{getattr(module, '__name__', '')}:"
                                   f"{getattr(factory, '__name__', '')}")
    table = getattr(module, "TABLE", None) if traits else None
    return SelectorEntry(factory, (doc.strip().splitlines() or [""])[0],
                         (traits or SelectorTraits()).ep, table, bool(traits and traits.verified))


SELECTORS: Registry[SelectorEntry] = Registry("selector", SelectorError, SHIPPED, wrap=_entry,
                                               group="clusterkit.selectors")


def register_selector(name: str, factory: Callable[..., SubgraphProperty], doc: str = "", *,
                      replace: bool = False) -> None:
    """Register a selector factory (returning a ``SubgraphProperty``; called with ``device=``
    when one is given) under ``name``; a name in use needs ``replace=True``."""
    SELECTORS.register(name, SelectorEntry(factory, doc), replace=replace)


def registered_selectors() -> dict[str, str]:
    """Available names (shipped selectors included) → one-line descriptions."""
    return {name: SELECTORS.get(name).doc for name in sorted(SELECTORS.available())}


@dataclass(frozen=True)
class SelectorSetting:
    """One keyword parameter of a selector's factory: its name and default (``required``
    when it has none; ``default`` is then ``None``)."""

    name: str
    default: Any = None
    required: bool = False

    @property
    def type_name(self) -> str:
        """The value type a spec must give: the default's type (``str`` when unknown)."""
        return "str" if self.required or self.default is None else type(self.default).__name__


def selector_settings(name: str) -> list[SelectorSetting] | None:
    """The settings of selector ``name``: its factory's keyword parameters except ``device``,
    in signature order; ``None`` when the factory takes any keyword (``**kwargs``) or its
    signature cannot be read."""
    try:
        params = inspect.signature(SELECTORS.get(name).factory).parameters.values()
    except (TypeError, ValueError):
        return None
    out = []
    for p in params:
        if p.kind is p.VAR_KEYWORD:
            return None
        if p.name == "device" or p.kind in (p.VAR_POSITIONAL, p.POSITIONAL_ONLY):
            continue
        empty = p.default is p.empty
        out.append(SelectorSetting(p.name, None if empty else p.default, required=empty))
    return out


def get_selector(name: str, device: str | None = None,
                 settings: dict[str, Any] | None = None) -> SubgraphProperty:
    """The selector (a ``SubgraphProperty``) of a registered or shipped name, its factory called
    with ``settings`` as keywords (already converted: see
    :func:`clusterkit.selection.specs.parse_selector`)."""
    entry = SELECTORS.get(name)
    kwargs = dict(settings or {})
    if device:
        kwargs["device"] = device
    try:
        prop = entry.factory(**kwargs)
    except SelectorError:
        raise
    except (TypeError, ValueError) as exc:
        if not settings:
            raise
        raise SelectorError(f"selector {name!r} refused settings "
                            f"{', '.join(sorted(kwargs))}: {exc}") from exc
    if not isinstance(prop, SubgraphProperty):
        raise SelectorError(f"selector {name!r} did not build a SubgraphProperty")
    return prop


#: the old names (deprecated): "property" was the library's word for a selector
_RENAMED = {"register_property": "register_selector", "get_property": "get_selector",
            "registered_properties": "registered_selectors", "PROPERTIES": "SELECTORS"}
__getattr__ = module_getattr(__name__, _RENAMED, globals())
