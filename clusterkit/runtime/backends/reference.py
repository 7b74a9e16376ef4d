"""Backend ``reference``: ONNX ops in numpy, through the onnx package's reference implementation
(:class:`onnx.reference.ReferenceEvaluator`). Slow, but independent of onnxruntime: a second
opinion on what a subgraph computes."""

from __future__ import annotations

import time
from functools import lru_cache
from typing import Any, Mapping

import numpy as np

from clusterkit.fusion import StaticInfo, subgraph_model
from clusterkit.graph.core import Node
from clusterkit.graph.subgraph import Subgraph
from clusterkit.runtime.backends.base import Backend, CompiledSubgraph


@lru_cache(maxsize=None)
def _implemented(op_type: str, version: int) -> bool:
    from onnx.reference import ReferenceEvaluator
    from onnx.reference.ops import load_op

    try:
        load_op("", op_type, version, evaluator_cls=ReferenceEvaluator)
    except Exception as exc:  # context-dependent functions need the node: still implemented
        return type(exc).__name__ == "RuntimeContextError"
    return True


@lru_cache(maxsize=1)
def _all_ops() -> tuple[str, ...]:
    import onnx.defs

    names = sorted({s.name for s in onnx.defs.get_all_schemas() if s.domain == ""})
    version = onnx.defs.onnx_opset_version()
    return tuple(n for n in names if n == "Constant" or _implemented(n, version))


class ReferenceBackend(Backend):
    """Runs subgraphs with ``onnx.reference.ReferenceEvaluator`` (default-domain ops only).

    Config keys: ``perf_counts`` (time every node), ``verbose`` (the evaluator's verbosity)."""

    name = "reference"
    CONFIG_DEFAULTS = {"perf_counts": False, "verbose": 0}

    def _convert(self, key: str, value: Any) -> Any:
        if key == "verbose":
            from clusterkit.errors import BackendError

            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise BackendError(f"backend {self.name!r}: verbose takes an int >= 0, got "
                                   f"{value!r}")
            return int(value)
        return super()._convert(key, value)

    def full_device_name(self) -> str:
        import onnx

        return f"onnx {onnx.__version__} reference evaluator (numpy) (device {self.device})"

    def supported_ops(self) -> list[str]:
        return list(_all_ops())

    def supports_op(self, node: Node, opset: Mapping[str, int]) -> bool:
        if node.domain not in ("", "ai.onnx"):
            return False
        if node.op_type == "Constant":
            return True
        import onnx.defs

        return _implemented(node.op_type, int(opset.get("", onnx.defs.onnx_opset_version())))

    def _compile(self, sub: Subgraph, inputs: list[str], outputs: list[str], name: str,
                 static: StaticInfo | None) -> CompiledSubgraph:
        from onnx.reference import ReferenceEvaluator

        model = subgraph_model(sub, outputs, name=name, static=static)
        evaluator = ReferenceEvaluator(model, verbose=self._config["verbose"])
        counters: dict[str, dict[str, Any]] = {}
        if self._config["perf_counts"]:
            for node in evaluator.rt_nodes_:
                _time_node(node, counters)

        def run(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
            return [np.asarray(v) for v in evaluator.run(outputs, feeds)]

        return CompiledSubgraph(name, self, list(inputs), list(outputs), run,
                                node_timings=lambda: list(counters.values()))


def _time_node(node: Any, counters: dict[str, dict[str, Any]]) -> None:
    """Wrap one evaluator node's ``run`` to accumulate its time."""
    proto = getattr(node, "onnx_node", None)
    label = (proto.name if proto is not None and proto.name else
             f"{node.op_type}_{len(counters)}")
    rec = counters.setdefault(label, {"node": label, "op_type": node.op_type, "calls": 0,
                                      "seconds": 0.0})
    inner = node.run

    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            rec["calls"] += 1
            rec["seconds"] += time.perf_counter() - start

    node.run = timed
