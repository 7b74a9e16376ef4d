"""Backend ``onnxruntime``: a subgraph becomes a standalone ONNX model run by an
``onnxruntime.InferenceSession`` (a real compiled op: onnxruntime optimizes the subgraph and folds
its constants once, at compile time)."""

from __future__ import annotations

import json
import os
import tempfile
import weakref
from functools import lru_cache
from typing import Any, Mapping

import numpy as np

from clusterkit.errors import BackendError
from clusterkit.fusion import StaticInfo, root_of, source_model, subgraph_model
from clusterkit.graph.core import Graph, Node
from clusterkit.graph.subgraph import Subgraph
from clusterkit.runtime.backends.base import Backend, CompiledSubgraph, ValueKind

_LEVELS = {"disable": "ORT_DISABLE_ALL", "basic": "ORT_ENABLE_BASIC",
           "extended": "ORT_ENABLE_EXTENDED", "all": "ORT_ENABLE_ALL"}


@lru_cache(maxsize=None)
def _kernel_ops(provider: str) -> frozenset[tuple[str, str]]:
    """(domain, op type) pairs with a kernel registered for ``provider``."""
    from onnxruntime.capi import onnxruntime_pybind11_state as C

    out = set()
    for k in C.get_all_opkernel_def():
        if k.provider == provider:
            out.add(("" if k.domain == "ai.onnx" else k.domain, k.op_name))
    out.add(("", "Constant"))  # turned into an initializer, never a kernel
    return frozenset(out)


@lru_cache(maxsize=None)
def _function_op(domain: str, op_type: str) -> bool:
    """Is the op defined by an ONNX function body (onnxruntime expands it)?"""
    import onnx.defs

    try:
        schema = onnx.defs.get_schema(op_type, domain=domain)
    except Exception:
        return False
    # both are properties of onnx's OpSchema that its type stubs leave out
    return bool(schema.has_function  # type: ignore[attr-defined]
                or schema.has_context_dependent_function)  # type: ignore[attr-defined]


def _ortvalue_from_numpy(array: Any):
    from onnxruntime import OrtValue

    array = np.asarray(array)
    if not array.flags.c_contiguous:
        array = array.copy()
    return OrtValue.ortvalue_from_numpy(array)  # holds the array it views


def _ortvalue_to_numpy(value: Any) -> np.ndarray:
    held = getattr(value, "_numpy_obj", None)  # an OrtValue made from an array: that array
    return held if held is not None else value.numpy()  # a view that keeps the buffer alive


#: ``onnxruntime.OrtValue`` tensors on the CPU (or the binding's own OrtValues that sessions
#: return): made from numpy arrays and turned back into numpy arrays without copying
ORT_VALUES = ValueKind("onnxruntime.OrtValue", _ortvalue_to_numpy, _ortvalue_from_numpy,
                       lambda value: int(value.tensor_size_in_bytes()))


@lru_cache(maxsize=1)
def _env_allocator() -> bool:
    """Register one CPU arena allocator with the onnxruntime environment (once per process);
    sessions that ask for the environment's allocators share it. False if onnxruntime
    refuses (then every session keeps its own arena)."""
    import onnxruntime as ort

    info = ort.OrtMemoryInfo("Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0,
                             ort.OrtMemType.DEFAULT)
    try:
        ort.create_and_register_allocator(info, None)
    except Exception:  # pragma: no cover - a build without environment allocators
        return False
    return True


def _plain_tensor(type_name: str) -> bool:
    return type_name.startswith("tensor(") and type_name != "tensor(string)"


def _ortvalue_runner(sess, inputs: list[str], outputs: list[str]):
    """The positional fast path of a session (OrtValues in, OrtValues out), or ``None`` when
    one of its inputs or outputs is not a numeric tensor (strings, sequences, maps).

    It calls the binding's ``run_with_ort_values`` directly: the public
    ``InferenceSession.run_with_ort_values`` checks every value's session compatibility in
    Python, which costs more than a small session's whole run."""
    from onnxruntime import OrtValue

    metas = list(sess.get_inputs()) + list(sess.get_outputs())
    if not all(_plain_tensor(m.type) for m in metas):
        return None
    names = list(inputs)
    fetch = list(outputs)
    binding = getattr(sess, "_sess", None)
    if binding is None or not hasattr(binding, "run_with_ort_values"):  # pragma: no cover
        def run_public(values):
            return sess.run_with_ort_values(fetch, {
                n: v if isinstance(v, OrtValue) else OrtValue(v) for n, v in zip(names, values)})

        return run_public
    run = binding.run_with_ort_values

    def run_values(values):
        feeds = {n: v._get_c_value() if isinstance(v, OrtValue) else v
                 for n, v in zip(names, values)}
        return list(run(feeds, fetch, None))

    return run_values


class OnnxRuntimeBackend(Backend):
    """Compiles subgraphs into onnxruntime sessions.

    Config keys: ``perf_counts`` (per-node timings through onnxruntime's profiler),
    ``intra_op_num_threads`` / ``inter_op_num_threads`` (0 = onnxruntime's default),
    ``graph_optimization_level`` (disable, basic, extended, all), ``providers`` (execution
    providers, default CPU), ``allow_spinning`` (let idle pool threads spin-wait; off by
    default: the executor runs many sessions one after another and spinning pools of idle
    sessions steal the cores of the running one, 20x slower on resnet18 singleton clusters),
    ``declare_shapes`` (declare the parent's shapes on the subgraph inputs),
    ``shared_allocator`` (on by default: CPU sessions take their memory from one arena
    registered with the onnxruntime environment, so a buffer one step frees is reused, still in
    cache, by the next step instead of each session keeping its own arena)."""

    name = "onnxruntime"
    CONFIG_DEFAULTS = {"perf_counts": False, "intra_op_num_threads": 0,
                       "inter_op_num_threads": 0, "graph_optimization_level": "all",
                       "providers": ("CPUExecutionProvider",), "allow_spinning": False,
                       "declare_shapes": True, "shared_allocator": True}

    def _convert(self, key: str, value: Any) -> Any:
        if key in ("intra_op_num_threads", "inter_op_num_threads"):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise BackendError(f"backend {self.name!r}: {key} takes an int >= 0, got {value!r}")
            return int(value)
        if key == "graph_optimization_level":
            if value not in _LEVELS:
                raise BackendError(f"backend {self.name!r}: graph_optimization_level takes one of "
                                   f"{', '.join(_LEVELS)}, got {value!r}")
            return value
        if key == "providers":
            import onnxruntime as ort

            provs = (value,) if isinstance(value, str) else tuple(value)
            known = ort.get_available_providers()
            bad = [p for p in provs if p not in known]
            if bad or not provs:
                raise BackendError(f"backend {self.name!r}: provider {bad[0] if bad else None!r} is"
                                   f" not available (available: {', '.join(known)})")
            return provs
        if key in ("allow_spinning", "declare_shapes", "shared_allocator"):
            from clusterkit.runtime.backends.base import _as_bool

            return _as_bool(value, key, self)
        return super()._convert(key, value)

    def runs_on(self) -> str:
        return "+".join(self._config["providers"])

    def full_device_name(self) -> str:
        import onnxruntime as ort

        return (f"onnxruntime {ort.__version__} {'+'.join(self._config['providers'])} "
                f"(device {self.device})")

    def supported_ops(self) -> list[str]:
        ops: set[str] = set()
        for prov in self._config["providers"]:
            ops.update(op for dom, op in _kernel_ops(prov) if dom == "")
        return sorted(ops)

    def supports_op(self, node: Node, opset: Mapping[str, int]) -> bool:
        domain = "" if node.domain == "ai.onnx" else node.domain
        for prov in self._config["providers"]:
            if (domain, node.op_type) in _kernel_ops(prov):
                return True
        return domain in ("", "ai.onnx.ml") and _function_op(domain, node.op_type)

    def session_options(self):
        """onnxruntime SessionOptions built from the configuration."""
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = self._config["intra_op_num_threads"]
        so.inter_op_num_threads = self._config["inter_op_num_threads"]
        so.graph_optimization_level = getattr(ort.GraphOptimizationLevel,
                                              _LEVELS[self._config["graph_optimization_level"]])
        so.log_severity_level = 3
        if not self._config["allow_spinning"]:
            so.add_session_config_entry("session.intra_op.allow_spinning", "0")
            so.add_session_config_entry("session.inter_op.allow_spinning", "0")
        if (self._config.get("shared_allocator")
                and "CPUExecutionProvider" in self._config.get("providers", ())):
            if _env_allocator():
                so.add_session_config_entry("session.use_env_allocators", "1")
        return so

    def _compile(self, sub: Subgraph, inputs: list[str], outputs: list[str], name: str,
                 static: StaticInfo | None) -> CompiledSubgraph:
        unknown = [t for t in inputs if sub.graph.tensors[t].dtype is None]
        state: dict[str, Any] = {}

        def build(dtypes: dict[str, str] | None = None):
            model = subgraph_model(sub, outputs, input_dtypes=dtypes, name=name,
                                   shapes=self._config["declare_shapes"], static=static)
            state["session"] = self._session(model, name)

        def run(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
            sess = state.get("session")
            if sess is None:  # input types only known now
                build({t: np.asarray(feeds[t]).dtype.name for t in unknown})
                sess = state["session"]
            return sess.run(outputs, feeds)

        fast = None
        if not unknown:
            build()
            fast = _ortvalue_runner(state["session"], inputs, outputs)
        return CompiledSubgraph(name, self, list(inputs), list(outputs), run,
                                node_timings=lambda: self._node_timings(state),
                                run_values=fast, value_kind=ORT_VALUES)

    def _profiled(self, so, name: str):
        """``so`` with onnxruntime's profiler on when ``perf_counts`` is set."""
        if self._config["perf_counts"]:
            so.enable_profiling = True
            folder = tempfile.mkdtemp(prefix="clusterkit_prof_")
            so.profile_file_prefix = os.path.join(folder, "".join(
                c if c.isalnum() else "_" for c in name))
        return so

    def _session(self, model, name: str):
        import onnxruntime as ort

        so = self._profiled(self.session_options(), name)
        try:
            return ort.InferenceSession(model.SerializeToString(), so,
                                        providers=list(self._config["providers"]))
        except Exception as exc:
            raise BackendError(f"onnxruntime rejected subgraph {name!r} (device {self.device!r}):"
                               f" {str(exc).strip()[:500]}") from exc

    @staticmethod
    def _node_timings(state: dict[str, Any]) -> list[dict[str, Any]]:
        """End profiling (once) and sum the kernel times per node."""
        if "timings" in state:
            return state["timings"]
        sess = state.get("session")
        if sess is None or not sess.get_session_options().enable_profiling:
            return []
        path = sess.end_profiling()
        try:
            with open(path, encoding="utf-8") as fh:
                events = json.load(fh)
        finally:
            try:
                os.remove(path)
                os.rmdir(os.path.dirname(path))
            except OSError:
                pass
        per: dict[str, dict[str, Any]] = {}
        for ev in events:
            if ev.get("cat") != "Node" or not str(ev.get("name", "")).endswith("_kernel_time"):
                continue
            node = ev["name"][: -len("_kernel_time")]
            rec = per.setdefault(node, {"node": node,
                                        "op_type": ev.get("args", {}).get("op_name", ""),
                                        "calls": 0, "seconds": 0.0})
            rec["calls"] += 1
            rec["seconds"] += float(ev.get("dur", 0)) * 1e-6
        state["timings"] = list(per.values())
        return state["timings"]


# ---------------------------------------------------------------------- static values
#: constants bigger than this (bytes) are handed to the probe session as inputs, not folded again
PROBE_CUT_BYTES = 4096
#: optimizers that remove or rename folded tensors (the probe reads every value by its name)
PROBE_DISABLED = ["CommonSubexpressionElimination", "ConstantSharing", "ReshapeFusion",
                  "UnsqueezeElimination", "ConcatSliceElimination", "EliminateSlice",
                  "NoopElimination", "DivMulFusion", "EliminateIdentity"]
_STATIC: "weakref.WeakKeyDictionary[Graph, StaticInfo | None]" = weakref.WeakKeyDictionary()


def static_info(graph: Graph) -> StaticInfo | None:
    """What onnxruntime knows about a model before running it, when every graph input has a
    static shape (``None`` otherwise, or when the probe fails): the values it folds that are not
    constants (Reshape targets computed from shapes, masks built from shapes...) and the static
    shapes it infers. Found with one probe session at the basic optimization level (constant
    folding) that saves its optimized model, without the passes that drop folded values into
    their consumers (:data:`PROBE_DISABLED`: a Reshape target fused into its Reshape would be
    lost, and the shape arithmetic feeding it computed at every run); the big constants
    (weights) are given to the probe as inputs with their shapes, so it does not fold them
    again. Cached per original graph."""
    root = root_of(graph)
    if root in _STATIC:
        return _STATIC[root]
    result = None
    shapes = [root.tensors[t].shape for t in root.inputs]
    if all(s is not None and all(isinstance(d, int) and d >= 0 for d in s) for s in shapes):
        try:
            result = _probe(root)
        except Exception:  # an optimization only: without it every step computes its values
            result = None
    _STATIC[root] = result
    return result


def _probe(root: Graph) -> StaticInfo:
    """The values and static shapes onnxruntime's constant folding finds (see
    :func:`static_info`)."""
    optimized = _folded_model(_probe_model(root))
    values = {}
    for t in optimized.graph.initializer:
        ten = root.tensors.get(t.name)
        if ten is not None and not ten.is_constant and ten.producer is not None:
            values[t.name] = t
    shapes = {}
    for vi in optimized.graph.value_info:
        ten = root.tensors.get(vi.name)
        tt = vi.type.tensor_type
        if ten is None or not vi.type.HasField("tensor_type") or not tt.HasField("shape"):
            continue
        if all(d.HasField("dim_value") for d in tt.shape.dim):
            shapes[vi.name] = vi
    return StaticInfo(values, shapes)


def _probe_model(root: Graph):
    """The source model with its big constants (weights) turned into inputs."""
    from onnx import helper

    from clusterkit.fusion import value_info

    model = source_model(root)

    def big(t: str) -> bool:
        ten = root.tensors[t]
        return ten.dtype is not None and (ten.nbytes is None or ten.nbytes > PROBE_CUT_BYTES)

    cut: list[str] = []
    nodes = []
    for nd in root.nodes:
        outs = [o for o in nd.outputs if o]
        if nd.is_constant and outs and all(big(o) for o in outs):
            cut.extend(o for o in outs if root.tensors[o].consumers)
        else:
            nodes.append(nd.proto)
    inits = []
    for t in model.graph.initializer:
        if t.name in root.tensors and big(t.name) and root.tensors[t.name].consumers:
            cut.append(t.name)
        else:
            inits.append(t)
    cut_set = set(cut)
    inputs = [vi for vi in model.graph.input if vi.name in set(root.inputs)]
    inputs += [value_info(root.tensors[t]) for t in cut]
    g = helper.make_graph(nodes, "probe", inputs, list(model.graph.output), initializer=inits)
    g.value_info.extend(vi for vi in model.graph.value_info if vi.name not in cut_set)
    probe = helper.make_model(g, opset_imports=list(model.opset_import))
    probe.ir_version = max(int(model.ir_version), 4)
    probe.functions.extend(model.functions)
    return probe


def _folded_model(probe):
    """``probe`` after onnxruntime's basic optimizations (constant folding), read back from the
    optimized model file one session writes (into a temporary folder removed afterwards)."""
    import onnx
    import onnxruntime as ort

    with tempfile.TemporaryDirectory(prefix="clusterkit_probe_") as folder:
        path = os.path.join(folder, "optimized.onnx")
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        so.optimized_model_filepath = path
        so.intra_op_num_threads = 1
        so.log_severity_level = 3
        ort.InferenceSession(probe.SerializeToString(), so, providers=["CPUExecutionProvider"],
                             disabled_optimizers=PROBE_DISABLED)
        return onnx.load(path)
