"""Execution backends (plugin style).

A backend is a class deriving from :class:`~clusterkit.runtime.backends.base.Backend`, registered
under a name. Shipped: ``onnxruntime`` (subgraphs become onnxruntime sessions), ``ep`` (each
subgraph compiled by an installed onnxruntime plugin EP alone: ``ep:EPNAME[key=value,...]``) and
``reference`` (the onnx package's numpy reference evaluator) and ``openvino`` (each subgraph
compiled by OpenVINO's runtime: ``openvino[device=CPU,...]``). :func:`get_backend` makes an
instance for one device, optionally restricted to the op set of a selector's property; it takes
a backend's name or a spec (:func:`parse_backend_spec`).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from clusterkit.errors import BackendError
from clusterkit.registry import Registry
from clusterkit.runtime.backends.base import Backend, CompiledSubgraph
from clusterkit.runtime.backends.onnxruntime_backend import OnnxRuntimeBackend
from clusterkit.runtime.backends.reference import ReferenceBackend
from clusterkit.selection.protocol import SubgraphProperty

BACKENDS: Registry[Callable[..., Backend]] = Registry("backend", BackendError, {
    "onnxruntime": "clusterkit.runtime.backends.onnxruntime_backend:OnnxRuntimeBackend",
    "ep": "clusterkit.runtime.backends.ep_backend:EpBackend",
    "reference": "clusterkit.runtime.backends.reference:ReferenceBackend",
    "openvino": "clusterkit.runtime.backends.openvino_backend:OpenVinoBackend",
})


def register_backend(name: str, factory: Callable[..., Backend], *,
                     replace: bool = False) -> None:
    """Register a backend class (or factory taking ``device``, ``restrict``, ``config``); a
    name in use needs ``replace=True``."""
    BACKENDS.register(name, factory, replace=replace)


def backend_names() -> list[str]:
    """Registered backend names, sorted."""
    return sorted(BACKENDS.names())


def parse_backend_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """A backend spec → (backend name, config): ``NAME`` (no config), ``NAME[key=value,...]``
    (config keys of that backend, e.g. ``openvino[device=CPU]``), or ``ep:EPNAME`` with
    ``[key=value,...]`` provider options (``{"ep": EPNAME, "options": {...}}``). A malformed
    spec is a :class:`BackendError`."""
    from clusterkit.errors import SelectorError
    from clusterkit.selection.specs import split_settings

    name, colon, rest = spec.strip().partition(":")
    if colon and name != "ep":
        raise BackendError(f"backend spec {spec!r}: only 'ep:' takes an EP's name (backends: "
                           f"{', '.join(backend_names())})")
    try:
        head, items = split_settings(rest if colon else name)
    except SelectorError as exc:
        raise BackendError(str(exc).replace("selector spec", "backend spec")) from None
    if not colon:
        return head, dict(items)
    if not head:
        raise BackendError(f"backend spec {spec!r}: no EP name after 'ep:'")
    return "ep", {"ep": head, "options": dict(items)}


def get_backend(name: str, device: str | None = None, restrict: SubgraphProperty | None = None,
                config: Mapping[str, Any] | None = None) -> Backend:
    """A backend instance by name or spec (:func:`parse_backend_spec`), for ``device``
    (restricted to ``restrict``'s op set); ``config`` is set after the spec's own."""
    name, own = parse_backend_spec(name)
    factory = BACKENDS.get(name)
    backend = factory(device=device, restrict=restrict, config={**own, **(config or {})})
    if not isinstance(backend, Backend):
        raise BackendError(f"backend factory {name!r} did not build a Backend")
    return backend


__all__ = ["Backend", "BackendError", "CompiledSubgraph", "OnnxRuntimeBackend",
           "ReferenceBackend", "backend_names", "get_backend", "parse_backend_spec",
           "register_backend"]
