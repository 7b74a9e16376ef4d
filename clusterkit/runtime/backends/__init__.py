"""Execution backends (plugin style).

A backend is a class deriving from :class:`~clusterkit.runtime.backends.base.Backend`, registered
under a name. Shipped: ``onnxruntime`` (subgraphs become onnxruntime sessions) and ``reference``
(the onnx package's numpy reference evaluator). :func:`get_backend` makes an instance for one
device, optionally restricted to the op set of a selector's property.
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
    "reference": "clusterkit.runtime.backends.reference:ReferenceBackend",
})


def register_backend(name: str, factory: Callable[..., Backend], *,
                     replace: bool = False) -> None:
    """Register a backend class (or factory taking ``device``, ``restrict``, ``config``); a
    name in use needs ``replace=True``."""
    BACKENDS.register(name, factory, replace=replace)


def backend_names() -> list[str]:
    """Registered backend names, sorted."""
    return sorted(BACKENDS.names())


def get_backend(name: str, device: str | None = None, restrict: SubgraphProperty | None = None,
                config: Mapping[str, Any] | None = None) -> Backend:
    """A backend instance by name, for ``device`` (restricted to ``restrict``'s op set)."""
    factory = BACKENDS.get(name)
    backend = factory(device=device, restrict=restrict, config=config)
    if not isinstance(backend, Backend):
        raise BackendError(f"backend factory {name!r} did not build a Backend")
    return backend


__all__ = ["Backend", "BackendError", "CompiledSubgraph", "OnnxRuntimeBackend",
           "ReferenceBackend", "backend_names", "get_backend", "register_backend"]
