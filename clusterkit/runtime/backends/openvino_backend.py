"""Backend ``openvino``: every subgraph compiled by OpenVINO's own runtime.

Each subgraph becomes an ONNX model of its own (:func:`~clusterkit.fusion.subgraph_model`), read
by OpenVINO's ONNX front end and compiled with ``core.compile_model`` for the backend's
``device`` (``--backend DEVICE=openvino[device=CPU]``). A subgraph OpenVINO cannot read or
compile is a compile failure carrying OpenVINO's message: the executor carves the cluster into
pieces OpenVINO compiles and sends the rest to the host. With ``perf_counts``, the compiled
model's requests are profiled (``ov::enable_profiling``) and each run's counters
(``get_profiling_info()``) are summed per op: HETERO's per-subgraph counters, under the step
they belong to. Computes in float32 by default (``precision=f32``; the CPU plugin would
otherwise pick bf16 where the CPU has it).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from clusterkit.errors import BackendError
from clusterkit.export.openvino_ir import openvino, read_onnx
from clusterkit.fusion import StaticInfo, subgraph_model
from clusterkit.graph.core import Node
from clusterkit.graph.subgraph import Subgraph
from clusterkit.runtime.backends.base import (
    Backend,
    CompiledSubgraph,
    _as_bool,
    require_input_types,
)

_PRECISIONS = {"f32": "fp32", "f16": "fp16", "bf16": "bf16"}


class OpenVinoBackend(Backend):
    """Compiles subgraphs with OpenVINO (see the module docstring).

    Config keys: ``device`` (an OpenVINO device name, default ``CPU``), ``precision``
    (``INFERENCE_PRECISION_HINT``: f32, f16 or bf16; default f32), ``num_threads``
    (``INFERENCE_NUM_THREADS``, 0: OpenVINO's default), ``perf_counts``."""

    name = "openvino"
    CONFIG_DEFAULTS = {"perf_counts": False, "device": "CPU", "precision": "f32",
                       "num_threads": 0}

    def __init__(self, device: str | None = None, restrict: Any = None,
                 config: Mapping[str, Any] | None = None):
        super().__init__(device=device, restrict=restrict, config=config)
        self.core = openvino().Core()
        known = self.core.available_devices
        if self._config["device"] not in known:
            raise BackendError(f"backend 'openvino': OpenVINO has no device "
                               f"{self._config['device']!r} (devices: {', '.join(known)})")

    def _convert(self, key: str, value: Any) -> Any:
        if key == "device":
            if not isinstance(value, str) or not value:
                raise BackendError(f"backend 'openvino': device takes a device name, got "
                                   f"{value!r}")
            return value
        if key == "precision":
            if value not in _PRECISIONS:
                raise BackendError(f"backend 'openvino': precision takes one of "
                                   f"{', '.join(_PRECISIONS)}, got {value!r}")
            return value
        if key == "num_threads":
            try:
                number = int(value)
            except (TypeError, ValueError):
                number = -1
            if isinstance(value, bool) or number < 0:
                raise BackendError(f"backend 'openvino': num_threads takes an int >= 0, got "
                                   f"{value!r}")
            return number
        if key == "perf_counts":
            return _as_bool(value, key, self)
        return super()._convert(key, value)

    @property
    def precision(self) -> str:
        return _PRECISIONS[self._config["precision"]]

    def runs_on(self) -> str:
        return f"OpenVINO:{self._config['device']}"

    def full_device_name(self) -> str:
        ov = openvino()
        return f"OpenVINO {ov.__version__} {self._config['device']} (device {self.device})"

    def supported_ops(self) -> list[str]:
        """Not listed: OpenVINO says what it takes when it reads and compiles."""
        return []

    def supports_op(self, node: Node, opset: Mapping[str, int]) -> bool:
        return True  # OpenVINO is the judge, at compile time

    def properties(self) -> dict[str, Any]:
        """The OpenVINO properties each compile gets."""
        props: dict[str, Any] = {"INFERENCE_PRECISION_HINT": self._config["precision"]}
        if self._config["num_threads"]:
            props["INFERENCE_NUM_THREADS"] = self._config["num_threads"]
        if self._config["perf_counts"]:
            props["PERF_COUNT"] = True
        return props

    def _compile(self, sub: Subgraph, inputs: list[str], outputs: list[str], name: str,
                 static: StaticInfo | None) -> CompiledSubgraph:
        require_input_types(sub, inputs, "OpenVINO")
        model = read_onnx(subgraph_model(sub, outputs, name=name, static=static))
        try:
            compiled = self.core.compile_model(model, self._config["device"], self.properties())
        except Exception as exc:
            text = " ".join(str(exc).split())[:500]
            raise BackendError(f"OpenVINO ({self._config['device']}) cannot compile subgraph "
                               f"{name!r}: {text}") from None
        return _runner(self, name, compiled, inputs, outputs)


def _runner(backend: OpenVinoBackend, name: str, compiled: Any, inputs: list[str],
            outputs: list[str]) -> CompiledSubgraph:
    """The compiled subgraph of an OpenVINO compiled model: one infer request, outputs read
    by their ONNX names, performance counters summed over the runs when profiled."""
    request = compiled.create_infer_request()
    ports = {n: p for p in compiled.outputs for n in p.get_names()}
    missing = [t for t in outputs if t not in ports]
    if missing:
        raise BackendError(f"OpenVINO's compiled subgraph {name!r} has no output {missing[0]!r}")
    out_ports = [ports[t] for t in outputs]
    counters: dict[str, dict[str, Any]] = {}
    profiled = bool(backend.get_config("perf_counts"))

    def run(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        request.infer({t: np.ascontiguousarray(feeds[t]) for t in inputs})
        if profiled:
            _add_counters(counters, request.get_profiling_info())
        return [np.array(request.get_tensor(p).data, copy=True) for p in out_ports]

    out = CompiledSubgraph(name, backend, list(inputs), list(outputs), run,
                           node_timings=lambda: list(counters.values()))
    out.runs_on = "OpenVINO:" + ",".join(compiled.get_property("EXECUTION_DEVICES"))
    return out


def _add_counters(counters: dict[str, dict[str, Any]], infos: Any) -> None:
    """Add one run's profiling info (executed ops only) to the per-op counters."""
    for info in infos:
        if str(info.status).endswith("NOT_RUN"):
            continue
        rec = counters.setdefault(info.node_name, {"node": info.node_name,
                                                   "op_type": info.node_type, "calls": 0,
                                                   "seconds": 0.0,
                                                   "exec_type": info.exec_type})
        rec["calls"] += 1
        rec["seconds"] += info.real_time.total_seconds()
