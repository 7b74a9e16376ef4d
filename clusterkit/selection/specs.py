"""Parse ``--selector`` specs into SubgraphProperty objects.

A spec is one of:

- ``[DEVICE=]ops:OP,OP,...`` — a ContainOpSelector (device ``acc`` when none is named);
- ``[DEVICE=]PATH.py`` — a Python file defining a SubgraphProperty (a module attribute
  ``PROPERTY``, a function ``make_property()``, or exactly one SubgraphProperty subclass);
- ``[DEVICE=]NAME`` — a shipped or registered selector (``coreml``, ``tensorrt``, ...).
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import re

from clusterkit.errors import SelectorError
from clusterkit.selection.protocol import OpsProperty, SubgraphProperty
from clusterkit.selection.registry import get_property

_DEVICE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")


def parse_selector(spec: str) -> SubgraphProperty:
    """One spec → a property."""
    spec = spec.strip()
    if not spec:
        raise SelectorError("empty selector spec")
    device = None
    head, sep, rest = spec.partition("=")
    if sep and _DEVICE.match(head) and not os.path.exists(spec):
        device, spec = head, rest
    if spec.startswith("ops:"):
        ops = [o.strip() for o in spec[4:].split(",") if o.strip()]
        if not ops:
            raise SelectorError(f"selector spec {spec!r} lists no op types")
        return OpsProperty(ops, device=device or "acc")
    if spec.endswith(".py") or os.sep in spec:
        prop = _load_file(spec)
        if device:
            prop.device = device
        return prop
    return get_property(spec, device=device)


def parse_selectors(specs: list[str]) -> list[SubgraphProperty]:
    """Several specs (priority order); device names must be distinct."""
    props = [parse_selector(s) for s in specs]
    seen: dict[str, str] = {}
    for spec, prop in zip(specs, props):
        if prop.device in seen:
            raise SelectorError(f"selectors {seen[prop.device]!r} and {spec!r} both use device "
                                f"{prop.device!r}; name one, e.g. gpu={spec}")
        seen[prop.device] = spec
    return props


def _load_file(path: str) -> SubgraphProperty:
    if not os.path.isfile(path):
        raise SelectorError(f"selector file {path!r} does not exist")
    name = "clusterkit_user_selector_" + re.sub(r"\W", "_", os.path.abspath(path))
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise SelectorError(f"cannot import selector file {path!r}")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise SelectorError(f"selector file {path!r} failed to import: {exc!r}") from exc
    prop = getattr(module, "PROPERTY", None)
    if prop is None and callable(getattr(module, "make_property", None)):
        prop = module.make_property()
    if prop is None:
        classes = [c for _, c in inspect.getmembers(module, inspect.isclass)
                   if issubclass(c, SubgraphProperty) and c.__module__ == module.__name__]
        if len(classes) != 1:
            raise SelectorError(f"selector file {path!r} must define PROPERTY, make_property() or"
                                f" exactly one SubgraphProperty subclass (found {len(classes)})")
        prop = classes[0]()
    if not isinstance(prop, SubgraphProperty):
        raise SelectorError(f"selector file {path!r}: PROPERTY is not a SubgraphProperty")
    return prop
