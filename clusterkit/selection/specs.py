"""Parse ``--selector`` specs into SubgraphProperty objects.

A spec is one of:

- ``[DEVICE=]ops:OP,OP,...`` — a ContainOpSelector (device ``acc`` when none is named); op
  types are separated by ``,`` and take no settings; :func:`check_op_types` refuses one that is
  neither an ONNX operator nor an op type of the model;
- ``[DEVICE=]PATH.py`` — a Python file defining a SubgraphProperty (a module attribute
  ``PROPERTY``, a function ``make_property()``, or exactly one SubgraphProperty subclass);
- ``[DEVICE=]ep:EPNAME[option=value,...]`` — an installed plugin execution provider's own answer
  (:mod:`clusterkit.selection.ep_property`), its provider options as settings;
- ``[DEVICE=]NAME`` — a shipped or registered selector (``coreml``, ``tensorrt``, ...);
- ``[DEVICE=]NAME[key=value,...]`` — the same with settings: the factory's keyword parameters
  (values read as the default's type: int, float, ``true``/``false``, text, or a tuple written
  ``2.49`` or ``A|B``), plus ``exclude=OP|OP`` (never take these op types) and ``include=OP|OP``
  (take only these) for every selector, e.g. ``npu=tensorrt[exclude=Softmax|TopK]``, and the
  device's limits ``max_nodes``, ``min_nodes``, ``max_const_bytes`` (integers, e.g.
  ``qnn[max_nodes=64]``). A value may be quoted (``'...'`` or ``"..."``) to hold commas or
  brackets. A Python file spec takes ``exclude``/``include`` and the limits too.
"""

from __future__ import annotations

import difflib
import functools
import importlib.util
import inspect
import os
import re
from typing import Any, Iterable

from clusterkit.errors import SelectorError
from clusterkit.selection.ep_property import EpProperty
from clusterkit.selection.protocol import (
    LIMIT_SETTINGS,
    OpsProperty,
    SubgraphProperty,
    set_device_limits,
)
from clusterkit.selection.registry import SelectorSetting, get_selector, selector_settings
from clusterkit.selection.restrict import OpFilter, OpFilterProperty

_DEVICE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")
#: the settings every selector takes (see :mod:`clusterkit.selection.restrict`)
GENERIC_SETTINGS = {"exclude": "never take these op types",
                    "include": "take only these op types"}
#: every setting any selector takes: the op filters and the device's limits
_EVERY_SELECTOR = {**GENERIC_SETTINGS, **LIMIT_SETTINGS}


def parse_selector(spec: str) -> SubgraphProperty:
    """One spec → a property."""
    spec = spec.strip()
    if not spec:
        raise SelectorError("empty selector spec")
    device, body = split_device(spec)
    if body.startswith("ops:"):
        return OpsProperty(ops_of_spec(body, spec), device=device or "acc")
    if body.startswith("ep:"):
        name, raw = split_settings(body[3:])
        options = {k: v for k, v in raw if k not in _EVERY_SELECTOR}
        prop = _restricted(EpProperty(name, options, device), _op_filter(spec, raw, None))
        return _with_limits(prop, name, raw)
    name, raw = (body, []) if os.path.exists(body) else split_settings(body)
    if name.endswith(".py") or os.sep in name:
        prop = _load_file(name)
        if device:
            prop.device = device
        return _with_limits(_restricted(prop, _op_filter(name, raw, [])), name, raw)
    known = selector_settings(name)
    ops = _op_filter(name, raw, known)
    settings = {k: convert_setting(name, k, v, known) for k, v in raw
                if k not in _EVERY_SELECTOR}
    prop = _restricted(get_selector(name, device=device, settings=settings), ops)
    return _with_limits(prop, name, raw)


def _with_limits(prop: SubgraphProperty, name: str,
                 raw: list[tuple[str, str]]) -> SubgraphProperty:
    """``prop`` with the limit settings of a spec (:data:`LIMIT_SETTINGS`) set and checked."""
    limits = {}
    for key, text in raw:
        if key in LIMIT_SETTINGS:
            try:
                limits[key] = int(text)
            except ValueError:
                raise SelectorError(f"selector {name!r}: setting {key} takes an integer, got "
                                    f"{text!r}") from None
    return set_device_limits(prop, **limits) if limits else prop


def split_device(spec: str) -> tuple[str | None, str]:
    """``DEVICE=REST`` → ``(DEVICE, REST)``; ``(None, spec)`` when no device is named (a path
    that exists is never split)."""
    head, sep, rest = spec.partition("=")
    if sep and _DEVICE.match(head) and not os.path.exists(spec):
        return head, rest
    return None, spec


def ops_of_spec(spec: str, label: str | None = None) -> list[str]:
    """The op types of an ``ops:A,B`` spec, in order. Settings (``ops:A[key=value]``), a
    separator other than ``,`` and an empty list are :class:`SelectorError` naming ``label``
    (the spec as written, device included; ``spec`` by default)."""
    label = spec if label is None else label
    if "[" in spec or "]" in spec:
        _, raw = split_settings(spec)
        key = raw[0][0] if raw else "[]"
        raise SelectorError(f"selector spec {label!r}: an ops: spec has no setting {key!r} (it "
                            "takes only the op types: ops:OP,OP)")
    ops = [o.strip() for o in spec[4:].split(",") if o.strip()]
    if not ops:
        raise SelectorError(f"selector spec {label!r} lists no op types")
    for op in ops:
        bad = next((ch for ch in op if not (ch.isalnum() or ch in "_.:-")), None)
        if bad is not None:
            fixed = "ops:" + ",".join(o.strip() for o in re.split(r"[;|/\s]+", spec[4:])
                                      if o.strip())
            raise SelectorError(f"selector spec {label!r}: {bad!r} in op type {op!r}; op types "
                                f"are separated by ',' (e.g. {fixed})")
    return ops


def check_op_types(specs: list[str], model_ops: Iterable[str]) -> None:
    """Refuse an op type of an ``ops:`` spec that is neither an ONNX operator (any registered
    domain) nor one of ``model_ops``; the error suggests the closest known name."""
    model = sorted(set(model_ops))
    known = onnx_op_types() | set(model)
    for spec in specs:
        _, body = split_device(spec.strip())
        if not body.startswith("ops:"):
            continue
        for op in ops_of_spec(body):
            if op not in known:
                raise SelectorError(f"unknown op type {op!r} in ops: spec" + _suggest(
                    op, model + sorted(onnx_op_types())))


def _suggest(op: str, names: list[str]) -> str:
    """``; did you mean 'X'?`` for the closest of ``names`` (first ones win a tie, case
    ignored), or why ``op`` is unknown when none is close."""
    lowered: dict[str, str] = {}
    for name in names:
        lowered.setdefault(name.lower(), name)
    close = difflib.get_close_matches(op.lower(), list(lowered), n=1)
    if close:
        return f"; did you mean {lowered[close[0]]!r}?"
    return " (neither an ONNX operator nor an op type of the model)"


@functools.lru_cache(maxsize=1)
def onnx_op_types() -> frozenset[str]:
    """The op types of every ONNX domain onnx knows (every opset version)."""
    import onnx.defs

    return frozenset(s.name for s in onnx.defs.get_all_schemas_with_history())


def split_settings(spec: str) -> tuple[str, list[tuple[str, str]]]:
    """``NAME[key=value,...]`` → ``(NAME, [(key, value), ...])`` with quotes removed; a spec
    without brackets has no settings. Unbalanced brackets, an unclosed quote, an item without
    ``=`` and a key given twice are :class:`SelectorError`."""
    if "[" not in spec:
        if "]" in spec:
            raise SelectorError(f"selector spec {spec!r}: ']' without a matching '['")
        return spec, []
    name, _, body = spec.partition("[")
    if "]" in name or not name.strip():
        raise SelectorError(f"selector spec {spec!r}: "
                            + ("']' without a matching '['" if name.strip() else
                               "no selector name before '['"))
    items, end = _scan_items(spec, body)
    if end < len(body) - 1:
        raise SelectorError(f"selector spec {spec!r}: text after the closing ']' "
                            f"({body[end + 1:]!r})")
    out: list[tuple[str, str]] = []
    for key, value in items:
        if any(key == k for k, _ in out):
            raise SelectorError(f"selector spec {spec!r} sets {key!r} twice")
        out.append((key, value))
    return name.strip(), out


def _scan_items(spec: str, body: str) -> tuple[list[tuple[str, str]], int]:
    """The ``key=value`` items of ``body`` (the text after ``[``) up to the closing ``]``, and
    that bracket's position in ``body``."""
    items: list[tuple[str, str]] = []
    key: str | None = None
    buf: list[str] = []
    quote = None
    for pos, ch in enumerate(body):
        if quote:
            if ch == quote:
                quote = None
            else:
                buf.append(ch)
        elif ch in "'\"":
            quote = ch
        elif ch == "=" and key is None:
            key, buf = "".join(buf).strip(), []
        elif ch in ",]":
            text = "".join(buf).strip()
            if key is None and (text or ch == "," or items):
                raise SelectorError(f"selector spec {spec!r}: " + (
                    f"setting {text!r} has no value (write key=value)" if text else
                    "an empty setting (a stray ',')"))
            if key is not None:
                if not key:
                    raise SelectorError(f"selector spec {spec!r}: a setting has no name")
                items.append((key, text))
            key, buf = None, []
            if ch == "]":
                return items, pos
        elif ch == "[":
            raise SelectorError(f"selector spec {spec!r}: '[' inside the settings (quote the "
                                "value if it holds brackets)")
        else:
            buf.append(ch)
    what = f"the quote {quote} is never closed" if quote else "'[' is never closed"
    raise SelectorError(f"selector spec {spec!r}: {what}")


def _known_text(known: list[SelectorSetting] | None) -> str:
    """The settings a selector knows, as an error message lists them."""
    own = ([f"{s.name}=<{s.type_name}>" if s.required else f"{s.name}={format_value(s.default)}"
            for s in known] if known is not None else ["any keyword"])
    return ", ".join(own + [f"{k}=OP|OP" for k in GENERIC_SETTINGS]
                     + [f"{k}=N" for k in LIMIT_SETTINGS])


def _op_filter(name: str, raw: list[tuple[str, str]],
               known: list[SelectorSetting] | None) -> OpFilter | None:
    """The ``exclude``/``include`` settings of a spec (None when it has neither); any other
    key the selector does not know is an error listing the known ones."""
    names = {s.name for s in known} if known is not None else None
    for key, _ in raw:
        if key not in _EVERY_SELECTOR and names is not None and key not in names:
            raise SelectorError(f"selector {name!r} has no setting {key!r} (known: "
                                f"{_known_text(known)})")
    lists = {}
    for key, value in raw:
        if key in ("exclude", "include"):
            ops = [o.strip() for o in value.split("|") if o.strip()]
            if not ops:
                raise SelectorError(f"selector {name!r}: {key}= lists no op types (write "
                                    f"{key}=OP|OP)")
            lists[key] = ops
    if not lists:
        return None
    return OpFilter(lists.get("exclude", ()), lists.get("include"))


def _restricted(prop: SubgraphProperty, ops: OpFilter | None) -> SubgraphProperty:
    return prop if ops is None else OpFilterProperty(prop, ops)


def convert_setting(name: str, key: str, text: str,
                    known: list[SelectorSetting] | None) -> Any:
    """A setting's text as the type of the parameter's default (text when it has none)."""
    setting = next((s for s in known or () if s.name == key), None)
    default = None if setting is None else setting.default
    try:
        return _convert(text, default)
    except ValueError:
        kind = type(default).__name__
        expected = {"bool": "true or false", "int": "an integer", "float": "a number",
                    "tuple": "items separated by '.' or '|'"}.get(kind, kind)
        raise SelectorError(f"selector {name!r}: setting {key} takes {expected} ({kind}, "
                            f"default {format_value(default)}), got {text!r}") from None


def _convert(text: str, default: Any) -> Any:
    if isinstance(default, bool):
        low = text.lower()
        if low not in ("true", "false"):
            raise ValueError(text)
        return low == "true"
    if isinstance(default, (int, float)):
        return type(default)(text)
    if isinstance(default, (tuple, list)):
        parts = text.split("|") if "|" in text else text.split(".")
        if not text or not all(p.strip() for p in parts):
            raise ValueError(text)
        item = default[0] if default else ""
        return type(default)(_convert(p.strip(), item) for p in parts)
    return text


def format_value(value: Any) -> str:
    """A setting's value as a spec writes it (``true``, ``2.49``, ``A|B``, ...)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        sep = "." if all(isinstance(v, int) for v in value) else "|"
        return sep.join(format_value(v) for v in value)
    return "none" if value is None else str(value)


def parse_selectors(specs: list[str]) -> list[SubgraphProperty]:
    """Several specs (priority order); device names must be distinct."""
    props = [parse_selector(s) for s in specs]
    seen: dict[str, str] = {}
    for spec, prop in zip(specs, props):
        if prop.device in seen:
            raise SelectorError(f"selectors {seen[prop.device]!r} and {spec!r} both use device "
                                f"{prop.device!r}; name one, e.g. {_renamed(spec, seen)}")
        seen[prop.device] = spec
    return props


def _renamed(spec: str, used: dict[str, str]) -> str:
    """``spec`` with a device name no other spec uses (``gpu=ops:Relu`` → ``gpu2=ops:Relu``),
    for the hint of a duplicate device."""
    spec = spec.strip()
    head, sep, rest = spec.partition("=")
    device, body = (head, rest) if sep and _DEVICE.match(head) and not os.path.exists(spec) \
        else ("", spec)
    base = device or parse_selector(spec).device
    k = 2
    while f"{base}{k}" in used:
        k += 1
    return f"{base}{k}={body}"


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
