"""Backend ``ep``: every subgraph compiled by an installed onnxruntime plugin execution provider.

Each subgraph becomes its own onnxruntime session with that EP alone
(:func:`~clusterkit.io.ep_query.compile_on_ep`): onnxruntime's CPU fallback is disabled and its
assignment record checked, so a subgraph the EP does not take whole, or fails to compile, is a
compile failure carrying the EP's own message, never a silent CPU run. ``--backend
DEVICE=ep:EPNAME[key=value,...]`` names the EP and its provider options; ``--backend DEVICE=ep``
takes them from the device's selector when it models a real EP (``qnn``: the HTP backend, soc
model 60, fp16 precision; ``ep:NAME`` selectors: their EP and settings).

With ``context_dir`` set, each compile also writes the EP's compiled form there (an EPContext
model, ``embed_context``: its context binary inside, else in a file beside it):
:mod:`clusterkit.export.compiled` assembles them into one deployable model.

A refusal raises :class:`~clusterkit.io.ep_query.EpCompileError` (the EP's message, and the
nodes its GetCapability left out); the executor carves the cluster
(:mod:`clusterkit.runtime.refusals`), which asks each node set once.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from clusterkit.errors import BackendError
from clusterkit.fusion import StaticInfo
from clusterkit.graph.core import Node
from clusterkit.graph.subgraph import Subgraph
from clusterkit.io.ep_query import compile_on_ep, ep_options
from clusterkit.runtime.backends.base import CompiledSubgraph, _as_bool, require_input_types
from clusterkit.runtime.backends.onnxruntime_backend import OnnxRuntimeBackend
from clusterkit.selection.ep_property import ep_of_property


class EpBackend(OnnxRuntimeBackend):
    """Compiles subgraphs with one plugin EP (see the module docstring).

    Config keys: ``ep`` (the EP's name; default: the EP the device's selector models),
    ``options`` (provider options, ``{key: value}``; default: the selector's verified
    settings), and the session keys of the ``onnxruntime`` backend (``perf_counts``, threads,
    ``graph_optimization_level``, ``allow_spinning``, ``declare_shapes``)."""

    name = "ep"
    CONFIG_DEFAULTS = {**{k: v for k, v in OnnxRuntimeBackend.CONFIG_DEFAULTS.items()
                          if k not in ("providers", "shared_allocator")},
                       "ep": None, "options": None, "context_dir": None,
                       "embed_context": False}

    def __init__(self, device: str | None = None, restrict: Any = None,
                 config: Mapping[str, Any] | None = None):
        super().__init__(device=device, restrict=restrict, config=config)
        if self._config["ep"] is None:
            ep, settings = ep_of_property(restrict, f"backend 'ep' of device {self.device!r}")
            self._config["ep"] = ep
            if self._config["options"] is None:
                self._config["options"] = settings
        self.spec, self.provider_options = ep_options(self._config["ep"],
                                                      self._config["options"] or {})
        self._context: str | None = None
        self._contexts = 0

    def _convert(self, key: str, value: Any) -> Any:
        if key == "ep":
            if not isinstance(value, str) or not value:
                raise BackendError(f"backend 'ep': ep takes an EP's name, got {value!r}")
            return value
        if key == "context_dir":
            if value is not None and not os.path.isdir(str(value)):
                raise BackendError(f"backend 'ep': context_dir {value!r} is not a folder")
            return None if value is None else str(value)
        if key == "embed_context":
            return _as_bool(value, key, self)
        if key == "options":
            if not isinstance(value, Mapping):
                raise BackendError(f"backend 'ep': options takes a mapping, got {value!r}")
            return {str(k): str(v) for k, v in value.items()}
        return super()._convert(key, value)

    @property
    def ep(self) -> str:
        """The EP's name."""
        return self.spec.name

    @property
    def precision(self) -> str:
        """The arithmetic the EP computes in with these options (``fp32``, ``fp16``)."""
        return self.spec.precision(self.provider_options)

    def runs_on(self) -> str:
        return self.ep

    def full_device_name(self) -> str:
        opts = ",".join(f"{k}={v}" for k, v in sorted((self._config["options"] or {}).items()))
        return f"{self.ep}{f'[{opts}]' if opts else ''} (device {self.device})"

    def supported_ops(self) -> list[str]:
        """Not listed: the EP says what it takes when it compiles (the device's selector, when
        the backend is restricted to it, says it beforehand)."""
        return []

    def supports_op(self, node: Node, opset: Mapping[str, int]) -> bool:
        return True  # the EP is the judge, at compile time

    def _compile(self, sub: Subgraph, inputs: list[str], outputs: list[str], name: str,
                 static: StaticInfo | None) -> CompiledSubgraph:
        require_input_types(sub, inputs, self.ep)
        self._context = None
        compiled = super()._compile(sub, inputs, outputs, name, static)
        compiled.context = self._context
        return compiled

    def _session(self, model, name: str):
        so = self._profiled(self.session_options(), name)
        folder = self._config["context_dir"]
        if folder is not None:  # the EP writes its compiled form: an EPContext model
            self._contexts += 1
            self._context = os.path.join(folder, f"ctx{self._contexts}_ctx.onnx")
            so.add_session_config_entry("ep.context_enable", "1")
            so.add_session_config_entry("ep.context_file_path", self._context)
            so.add_session_config_entry("ep.context_embed_mode",
                                        "1" if self._config["embed_context"] else "0")
        return compile_on_ep(model.SerializeToString(), self.spec, self.provider_options, so)

    def __repr__(self) -> str:
        return f"EpBackend({self.ep}, device={self.device!r})"
