"""The backend interface (OpenVINO plugin style) and the compiled-subgraph callable.

A :class:`Backend` has a ``name``; :meth:`Backend.query` says which nodes of a graph it supports;
:meth:`Backend.compile` turns a :class:`~clusterkit.graph.subgraph.Subgraph` into a
:class:`CompiledSubgraph` (a callable from input arrays to output arrays); configuration keys are
read and written with :meth:`Backend.get_config` / :meth:`Backend.set_config` (an unknown key is a
:class:`BackendError` naming the key and the backend); :meth:`Backend.get_metric` reports static
facts (device name, supported ops, config keys...).

Besides the call with named numpy arrays, a compiled subgraph has a positional fast path,
:meth:`CompiledSubgraph.run_values`, on the backend's own tensor values (its
:class:`ValueKind`): the onnxruntime backend passes ``onnxruntime.OrtValue`` objects from session
to session without converting them to numpy or copying them.

A backend instance serves one device. ``restrict`` (a :class:`SubgraphProperty`) narrows it to the
op set of the device a selector defines: ``query`` is then the backend's own support *and* the
property's, and ``compile`` refuses a subgraph holding a node outside it.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from clusterkit.errors import BackendError, ClusterkitError
from clusterkit.fusion import (
    FusedGraph,
    StaticInfo,
    flatten,
    required_inputs,
    root_of,
    runtime_outputs,
)
from clusterkit.graph.core import Graph, Node
from clusterkit.graph.subgraph import Subgraph
from clusterkit.selection.protocol import SubgraphProperty, call_select

#: (rtol, atol) a comparison with onnxruntime's CPU provider allows by the backend's precision.
#: fp32: reassociated float32 sums (different kernels, fused ops). fp16: the HTP computes in
#: fp16, whose unit round-off is 2**-11 (about 4.9e-4); rounding at each of a few tens of
#: layers and in every long accumulation compounds it. Measured on the HTP (random weights,
#: the same on onnxruntime's own QNN route as on clusterkit's): relative to the outputs'
#: magnitude about 5e-4 to 4e-3 (resnet50 3.4e-2 absolute with outputs up to 69), and up to
#: 2.8e-2 absolute where outputs are near zero (efficientnet_b0): 2e-2 relative, 5e-2 absolute
TOLERANCES = {"fp32": (1e-4, 1e-5), "fp16": (2e-2, 5e-2)}

METRICS = ("FULL_DEVICE_NAME", "DEVICE", "BACKEND", "SUPPORTED_OPS", "SUPPORTED_CONFIG_KEYS",
           "SUPPORTED_METRICS")


class ValueKind:
    """How a backend holds the tensors of :meth:`CompiledSubgraph.run_values`: ``to_numpy`` and
    ``from_numpy`` convert one value (without copying when they can), ``nbytes`` is its size."""

    def __init__(self, name: str, to_numpy: Callable[[Any], np.ndarray],
                 from_numpy: Callable[[np.ndarray], Any], nbytes: Callable[[Any], int]):
        self.name = name
        self.to_numpy = to_numpy
        self.from_numpy = from_numpy
        self.nbytes = nbytes

    def converter(self, target: "ValueKind") -> Callable[[Any], Any] | None:
        """A function turning this kind's values into ``target``'s (``None``: same kind)."""
        if target is self:
            return None
        if target is NUMPY_VALUES:
            return self.to_numpy
        if self is NUMPY_VALUES:
            return target.from_numpy
        to_numpy, from_numpy = self.to_numpy, target.from_numpy
        return lambda value: from_numpy(to_numpy(value))

    def __repr__(self) -> str:
        return f"ValueKind({self.name!r})"


#: plain numpy arrays (what :meth:`CompiledSubgraph.__call__` takes and gives)
NUMPY_VALUES = ValueKind("numpy", np.asarray, np.asarray,
                         lambda a: int(getattr(a, "nbytes", 0)))


class CompiledSubgraph:
    """A compiled subgraph: call it with ``{input name: array}``, get ``{output name: array}``.

    ``inputs``/``outputs`` are the boundary tensor names (runtime inputs, runtime outputs);
    ``compile_seconds`` is how long compiling took; :meth:`node_timings` gives per-node
    performance counters when the backend collected them (config ``perf_counts``).
    ``run_values`` (optional) is the backend's positional fast path on values of
    ``value_kind``; without it :meth:`run_values` calls ``run`` with numpy arrays."""

    def __init__(self, name: str, backend: "Backend", inputs: list[str], outputs: list[str],
                 run: Callable[[dict[str, np.ndarray]], list[np.ndarray]],
                 compile_seconds: float = 0.0,
                 node_timings: Callable[[], list[dict[str, Any]]] | None = None,
                 run_values: Callable[[Sequence[Any]], list[Any]] | None = None,
                 value_kind: ValueKind | None = None):
        self.name = name
        self.backend = backend
        self.inputs = inputs
        self.outputs = outputs
        self._run = run
        self.compile_seconds = compile_seconds
        self._node_timings = node_timings
        self._run_values = run_values
        self.value_kind = value_kind if run_values is not None and value_kind else NUMPY_VALUES
        #: the file of the compiled form the backend wrote, when asked (an EP context model)
        self.context: str | None = None
        #: what the runtime's own record says executes it, where the backend reads one (else
        #: None: the backend's :meth:`Backend.runs_on`)
        self.runs_on: str | None = None

    def __call__(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        missing = [t for t in self.inputs if t not in feeds]
        if missing:
            raise BackendError(f"subgraph {self.name!r} ({self.backend.name} on "
                               f"{self.backend.device}) needs input {missing[0]!r}")
        try:
            values = self._run({t: feeds[t] for t in self.inputs})
        except ClusterkitError:
            raise
        except Exception as exc:
            raise self._failed(exc) from exc
        return dict(zip(self.outputs, values))

    def run_values(self, values: Sequence[Any]) -> list[Any]:
        """The fast path: the values of :attr:`inputs` in order, as :attr:`value_kind` values;
        returns the values of :attr:`outputs` in order, of the same kind."""
        try:
            if self._run_values is None:
                return list(self._run(dict(zip(self.inputs, values))))
            return self._run_values(values)
        except ClusterkitError:
            raise
        except Exception as exc:
            raise self._failed(exc) from exc

    def _failed(self, exc: Exception) -> BackendError:
        return BackendError(f"subgraph {self.name!r} failed on backend {self.backend.name!r} "
                            f"(device {self.backend.device!r}): {exc}")

    def node_timings(self) -> list[dict[str, Any]]:
        """Per-node counters ``{"node", "op_type", "calls", "seconds"}`` (empty when not
        collected)."""
        return self._node_timings() if self._node_timings is not None else []

    def __repr__(self) -> str:
        return (f"CompiledSubgraph({self.name!r}, backend={self.backend.name!r}, "
                f"inputs={len(self.inputs)}, outputs={len(self.outputs)})")


class Backend:
    """Base class of the backends. Subclasses set ``name``, extend ``CONFIG_DEFAULTS``, and
    implement :meth:`supports_op`, :meth:`supported_ops` and :meth:`_compile`."""

    name: str = "backend"
    CONFIG_DEFAULTS: dict[str, Any] = {"perf_counts": False}

    def __init__(self, device: str | None = None, restrict: SubgraphProperty | None = None,
                 config: Mapping[str, Any] | None = None):
        self.device = device or getattr(restrict, "device", None) or self.name
        self.restrict = restrict
        self._config = dict(self.CONFIG_DEFAULTS)
        if config:
            self.set_config(config)

    # ------------------------------------------------------------------ configuration
    def get_config(self, key: str) -> Any:
        """The value of a configuration key; unknown keys are a :class:`BackendError`."""
        self._check_key(key)
        return self._config[key]

    def set_config(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        """Set configuration keys (a mapping and/or keywords); every key is checked first, so a
        bad key changes nothing."""
        items = dict(config or {})
        items.update(kwargs)
        for key in items:
            self._check_key(key)
        for key, value in items.items():
            self._config[key] = self._convert(key, value)

    def _check_key(self, key: str) -> None:
        if key not in self.CONFIG_DEFAULTS:
            raise BackendError(f"backend {self.name!r} (device {self.device!r}) has no config key "
                               f"{key!r} (keys: {', '.join(sorted(self.CONFIG_DEFAULTS))})")

    def _convert(self, key: str, value: Any) -> Any:
        """Check/convert a config value; subclasses validate their keys."""
        if key == "perf_counts":
            return _as_bool(value, key, self)
        return value

    @property
    def config(self) -> dict[str, Any]:
        """A copy of the whole configuration."""
        return dict(self._config)

    # ------------------------------------------------------------------ metrics
    def get_metric(self, name: str) -> Any:
        """A metric: FULL_DEVICE_NAME, DEVICE, BACKEND, SUPPORTED_OPS (sorted op types this
        device takes, when it can be listed), SUPPORTED_CONFIG_KEYS, SUPPORTED_METRICS."""
        if name == "FULL_DEVICE_NAME":
            return self.full_device_name()
        if name == "DEVICE":
            return self.device
        if name == "BACKEND":
            return self.name
        if name == "SUPPORTED_OPS":
            ops = self.supported_ops()
            allowed = getattr(self.restrict, "op_types", None)
            if allowed is not None:
                ops = [o for o in ops if o in allowed]
            return sorted(ops)
        if name == "SUPPORTED_CONFIG_KEYS":
            return sorted(self.CONFIG_DEFAULTS)
        if name == "SUPPORTED_METRICS":
            return list(METRICS)
        raise BackendError(f"backend {self.name!r} (device {self.device!r}) has no metric "
                           f"{name!r} (metrics: {', '.join(METRICS)})")

    def metrics(self) -> dict[str, Any]:
        """Every metric by name."""
        return {m: self.get_metric(m) for m in METRICS}

    def full_device_name(self) -> str:
        return f"{self.name} ({self.device})"

    def runs_on(self) -> str:
        """What executes this backend's steps (an onnxruntime execution provider's name for
        the onnxruntime backends): the step table's ``ep`` column."""
        return self.name

    @property
    def precision(self) -> str:
        """The arithmetic the backend computes in (``fp32``, ``fp16``): what a comparison of
        its outputs with the reference must allow for (:data:`TOLERANCES`)."""
        return "fp32"

    # ------------------------------------------------------------------ query / compile
    def supported_ops(self) -> list[str]:
        """Op types (default domain) the backend itself implements."""
        raise NotImplementedError

    def supports_op(self, node: Node, opset: Mapping[str, int]) -> bool:
        """Does the backend itself implement ``node`` (its op type, domain, version)?"""
        raise NotImplementedError

    def query(self, graph: Graph) -> np.ndarray:
        """Bool mask over ``graph``'s nodes: the nodes this device can run. A fused node is
        supported when every original node behind it is."""
        root = root_of(graph)
        mask = self._query_root(root)
        if isinstance(graph, FusedGraph):
            return np.fromiter((bool(mask[m].all()) for m in graph.members), dtype=bool,
                               count=graph.n)
        return mask

    def _implements(self, node: Node, opset: Mapping[str, int],
                    local: set[tuple[str, str]]) -> bool:
        """The backend's own answer; model-local functions are expanded by every backend."""
        return (node.domain, node.op_type) in local or bool(self.supports_op(node, opset))

    def _query_root(self, root: Graph) -> np.ndarray:
        opset, local = _opset_of(root), _local_functions(root)
        cache: dict[tuple[str, str], bool] = {}
        out = np.zeros(root.n, dtype=bool)
        for node in root.nodes:
            key = (node.domain, node.op_type)
            if key not in cache:
                cache[key] = self._implements(node, opset, local)
            out[node.index] = cache[key]
        if self.restrict is not None:
            out &= np.asarray(self.restrict.query(root), dtype=bool)
        return out

    def check_supported(self, sub: Subgraph) -> None:
        """Raise :class:`BackendError` naming the first node of (flattened) ``sub`` this device
        cannot run."""
        root = sub.graph
        opset, local = _opset_of(root), _local_functions(root)
        for v in sub.nodes:
            node = root.nodes[v]
            implemented = self._implements(node, opset, local)
            ok = implemented
            if ok and self.restrict is not None:
                ok = call_select(self.restrict.create_subgraph_selector(), node)
            if not ok:
                why = ("the backend does not implement it" if not implemented
                       else f"it is outside the op set of {self.restrict!r}")
                raise BackendError(f"backend {self.name!r} (device {self.device!r}) cannot run node"
                                   f" {node.name!r} ({node.op_type}): {why}")

    def compile(self, subgraph: Subgraph, name: str | None = None,
                static: StaticInfo | None = None,
                outputs: Sequence[str] | None = None) -> CompiledSubgraph:
        """Compile a subgraph (of an original or a fused graph) into a callable computing
        ``outputs`` (default: :func:`clusterkit.fusion.runtime_outputs`) from the runtime inputs
        they need (:func:`clusterkit.fusion.required_inputs`). ``static`` (values fixed by static
        shapes) is used as known values inside."""
        sub = flatten(subgraph)
        label = name or f"{sub.device}_subgraph_{sub.cluster_id}"
        self.check_supported(sub)
        outputs = list(runtime_outputs(sub, static) if outputs is None else outputs)
        if not outputs:
            raise BackendError(f"subgraph {label!r} has no outputs anyone reads")
        inputs = required_inputs(sub, outputs, static)
        start = time.perf_counter()
        try:
            compiled = self._compile(sub, inputs, outputs, label, static)
        except ClusterkitError:
            raise
        except Exception as exc:
            raise BackendError(f"backend {self.name!r} (device {self.device!r}) failed to compile "
                               f"subgraph {label!r} ({len(sub.nodes)} nodes): {exc}") from exc
        compiled.compile_seconds = time.perf_counter() - start
        return compiled

    def _compile(self, sub: Subgraph, inputs: list[str], outputs: list[str], name: str,
                 static: StaticInfo | None) -> CompiledSubgraph:
        """Backend-specific compile of a flattened subgraph (arguments as :meth:`compile`
        computed them)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(device={self.device!r})"


def _opset_of(root: Graph) -> dict[str, int]:
    model = getattr(root, "model", None)
    out: dict[str, int] = {}
    for op in getattr(model, "opset_import", []) or []:
        out["" if op.domain == "ai.onnx" else op.domain] = int(op.version)
    return out


def _local_functions(root: Graph) -> set[tuple[str, str]]:
    model = getattr(root, "model", None)
    return {(f.domain, f.name) for f in getattr(model, "functions", []) or []}


def _as_bool(value: Any, key: str, backend: Backend) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, str) and value.lower() in ("1", "true", "yes", "on", "0", "false", "no",
                                                    "off"):
        return value.lower() in ("1", "true", "yes", "on")
    if isinstance(value, (int, np.integer)) and value in (0, 1):
        return bool(value)
    raise BackendError(f"backend {backend.name!r}: config key {key!r} takes a bool, got {value!r}")


def require_input_types(sub: Subgraph, inputs: Sequence[str], compiler: str) -> None:
    """A compiler that builds a subgraph before its first run (an EP, OpenVINO) needs each
    runtime input's type; an input without one is a :class:`BackendError` naming it."""
    unknown = [t for t in inputs if sub.graph.tensors[t].dtype is None]
    if unknown:
        raise BackendError(f"{compiler} compiles subgraphs with known input types; "
                           f"{unknown[0]!r} has none")
