"""Execution backends (plugin style).

A backend is a class deriving from :class:`~clusterkit.runtime.backends.base.Backend`, registered under a
name. Shipped: ``onnxruntime`` (subgraphs become onnxruntime sessions) and ``reference`` (the onnx
package's numpy reference evaluator). :func:`get_backend` makes an instance for one device,
optionally restricted to the op set of a selector's property.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from clusterkit.errors import BackendError
from clusterkit.selection.protocol import SubgraphProperty
from clusterkit.runtime.backends.base import Backend, CompiledSubgraph
from clusterkit.runtime.backends.onnxruntime_backend import OnnxRuntimeBackend
from clusterkit.runtime.backends.reference import ReferenceBackend

_REGISTRY: dict[str, Callable[..., Backend]] = {
    "onnxruntime": OnnxRuntimeBackend,
    "reference": ReferenceBackend,
}


def register_backend(name: str, factory: Callable[..., Backend]) -> None:
    """Register a backend class (or factory taking ``device``, ``restrict``, ``config``)."""
    _REGISTRY[name] = factory


def backend_names() -> list[str]:
    """Registered backend names, sorted."""
    return sorted(_REGISTRY)


def get_backend(name: str, device: str | None = None, restrict: SubgraphProperty | None = None,
                config: Mapping[str, Any] | None = None) -> Backend:
    """A backend instance by name, for ``device`` (restricted to ``restrict``'s op set)."""
    factory = _REGISTRY.get(name)
    if factory is None:
        raise BackendError(f"unknown backend {name!r} (known: {', '.join(backend_names())})")
    backend = factory(device=device, restrict=restrict, config=config)
    if not isinstance(backend, Backend):
        raise BackendError(f"backend factory {name!r} did not build a Backend")
    return backend


__all__ = ["Backend", "BackendError", "CompiledSubgraph", "OnnxRuntimeBackend",
           "ReferenceBackend", "backend_names", "get_backend", "register_backend"]
