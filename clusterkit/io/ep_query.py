"""Ask an installed onnxruntime plugin execution provider which nodes of a model it takes.

An EP answers onnxruntime's ``GetCapability`` with groups of nodes, each handed over through the
EP API's ``EpGraphSupportInfo_AddNodesToFuse``; onnxruntime then may refuse a group, and the EP
compiles the rest. onnxruntime's own record (``session.record_ep_graph_assignment_info``) exists
only when the session could be created, so a model the EP answers and then fails to compile (the
OpenVINO NPU without its compiler, an HTP graph finalization error) would leave no answer. The one
idea: the EP library is registered through a small recorder library (``ep_recorder.c``, built
once with the system's C compiler) that loads the real one and records every group the EP hands
over, before anything can fail. The answer is the EP's last GetCapability round: an EP that
prefers another layout (QNN's NHWC) is asked again after onnxruntime's layout transformation,
and that round is the one onnxruntime acts on (QNN's first round varies with what the process
compiled before; its last does not).

The session loads the model with onnxruntime's optimizations off: the caller gives the graph the
EP is to see (for the runtime's view, the graph :func:`~clusterkit.io.optimize.optimize_model`
made at ``basic``), so the answer names exactly that graph's nodes.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import logging
import os
import re
import sys
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping

from clusterkit.errors import BackendError
from clusterkit.io import ep_recorder

if TYPE_CHECKING:
    import onnx

log = logging.getLogger(__name__)
_LOCK = threading.Lock()
_REGISTERED: dict[str, Any] = {}  # EP name → the loaded recorder (ctypes.CDLL) or None
#: a node name onnxruntime's layout transformation gave a copy of a graph node
_TOKEN = re.compile(r"_token_\d+$")


@dataclass(frozen=True)
class PluginEp:
    """An execution provider shipped as a Python package: its EP name, the module that finds
    its library, the clusterkit extra that installs it, whether its devices are virtual (the
    NPU of a machine without one), and how settings become provider options."""

    name: str
    module: str
    extra: str | None = None
    virtual: bool = False
    options: Callable[[Any, dict[str, str]], dict[str, str]] = lambda module, s: dict(s)
    device_type: str | None = None
    #: the arithmetic the EP computes in with these provider options (``fp32``, ``fp16``):
    #: what a comparison of its outputs must allow for
    precision: Callable[[Mapping[str, str]], str] = lambda options: "fp32"
    #: the provider option keys the EP reads (clusterkit's own settings such as QNN's
    #: ``backend`` included), None when clusterkit has no list: then an option it does not
    #: know is passed on with a warning naming it (onnxruntime would ignore a misspelt one)
    option_keys: frozenset[str] | None = None


#: the QNN EP's provider options: those onnxruntime's qnn_execution_provider.cc reads and
#: those onnxruntime-qnn 2.7's library names, with clusterkit's own ``backend`` (htp|gpu|cpu)
#: and ``device_type``
QNN_OPTION_KEYS = frozenset("""
    backend backend_path backend_type device_type profiling_level profiling_file_path
    rpc_control_latency htp_performance_mode htp_graph_finalization_optimization_mode
    qnn_saver_path qnn_context_priority vtcm_mb device_id htp_arch soc_model
    enable_htp_fp16_precision enable_htp_weight_sharing enable_htp_spill_fill_buffer
    offload_graph_io_quantization enable_htp_shared_memory_allocator dump_json_qnn_graph
    json_qnn_graph_dir dump_qnn_ir_dlc dump_qnn_ir_dlc_dir qnn_ir_backend_path kvcache_rewind
    htp_share_resource_optimization enable_vtcm_backup_buffer_sharing
    enable_htp_fp16_clamp_overflow enable_block_quant_weight_optimization
    htp_graph_splitting_num_prepare_threads enable_dx12_shared_memory_allocator genie_log_level
    enable_htp_prepare_only enable_htp_prepare_and_load disable_file_mapped_weights op_packages
    enable_htp_monolithic_lstm num_graph_prepare_threads htp_bf16_enable op_affinity
    enable_framework_op_trace framework_op_trace_dir dump_qnn_ep_input_graph
    dump_qnn_ep_input_graph_dir extended_udma htp_reused_io_limit_mb enable_htp_graph_splitting
    skip_qnn_version_check skip_backend_op_validation""".split())
#: the OpenVINO EP's provider options (onnxruntime's OpenVINO EP documentation, and the names
#: in onnxruntime-ep-openvino 1.8's library)
OPENVINO_OPTION_KEYS = frozenset("""
    device_type precision num_of_threads num_streams cache_dir context load_config
    enable_opencl_throttling enable_qdq_optimizer disable_dynamic_shapes model_priority
    reshape_input layout enable_causallm device_id device_luid""".split())


def _qnn_options(module: Any, settings: dict[str, str]) -> dict[str, str]:
    """QNN provider options: ``backend=htp|gpu`` picks the backend library; ``soc_model``
    defaults to 60 (without it, HTP graph finalization fails on many models offline)."""
    opts = dict(settings)
    backend = opts.pop("backend", "htp")
    path = {"htp": "get_qnn_htp_path", "gpu": "get_qnn_gpu_path", "cpu": "get_qnn_cpu_path"}
    if backend not in path:
        raise BackendError(f"QNNExecutionProvider: backend must be one of {', '.join(path)}, "
                           f"got {backend!r}")
    opts.setdefault("backend_path", getattr(module, path[backend])())
    if not os.path.exists(opts["backend_path"]):
        raise BackendError(f"QNNExecutionProvider: the {backend} backend library is not in "
                           f"the installed onnxruntime-qnn ({opts['backend_path']})")
    opts.setdefault("soc_model", "60")
    if backend == "htp":  # the EP's own default, stated: float32 nodes run on HTP in fp16
        opts.setdefault("enable_htp_fp16_precision", "1")
    return opts


def _qnn_precision(options: Mapping[str, str]) -> str:
    """The arithmetic of the QNN backend ``options`` pick: fp16 on the HTP, else fp32."""
    return "fp16" if "Htp" in os.path.basename(options.get("backend_path", "")) else "fp32"


#: the plugin EPs clusterkit knows by name (others are found by their package, see plugin_eps)
KNOWN_EPS = {
    "QNNExecutionProvider": PluginEp("QNNExecutionProvider", "onnxruntime_qnn", "qnn",
                                     options=_qnn_options, precision=_qnn_precision,
                                     option_keys=QNN_OPTION_KEYS),
    "OpenVINOExecutionProvider": PluginEp("OpenVINOExecutionProvider", "onnxruntime_ep_openvino",
                                          "openvino", virtual=True, device_type="NPU",
                                          precision=lambda options: "fp16",
                                          option_keys=OPENVINO_OPTION_KEYS),
}
_WARNED: set[tuple[str, str]] = set()  # (EP, option) already warned about


@dataclass
class EpAnswer:
    """What an EP said of a model. ``groups``: the node names of each group of its last
    GetCapability answer (``rounds``: how many it gave); ``op_types``: node name → op type as
    the EP saw it; ``compiled``: how many groups onnxruntime asked it to compile (None when
    compilation was not reached); ``assigned``: node names onnxruntime finally ran on the EP
    (None without a session); ``error``: the EP's failure after answering, in one line."""

    ep: str
    version: str
    groups: list[list[str]] = field(default_factory=list)
    op_types: dict[str, str] = field(default_factory=dict)
    compiled: int | None = None
    assigned: list[str] | None = None
    error: str | None = None
    rounds: int = 0
    #: Transposes of an earlier round that a later one no longer names: the layout
    #: transformation cancelled them against its own (they run on the EP as part of its graph)
    absorbed: list[str] = field(default_factory=list)

    @property
    def nodes(self) -> list[str]:
        """Every node of the answer, group by group."""
        return [n for g in self.groups for n in g]

    def refused(self) -> list[str]:
        """Answer nodes onnxruntime did not hand to the EP: all of them when the EP answered
        and onnxruntime compiled nothing and the session ran without it."""
        if self.assigned is not None:
            taken = set(self.assigned)
            return [n for n in self.nodes if n not in taken]
        if self.compiled == 0 or (self.compiled is None and self.error is None):
            return self.nodes
        return []


def plugin_eps() -> dict[str, PluginEp]:
    """The plugin EPs installed here: the known ones whose package imports, and any other
    installed package named ``onnxruntime_ep_*`` or ``onnxruntime_*`` that offers
    ``get_library_path()`` and ``get_ep_names()``."""
    found: dict[str, PluginEp] = {}
    for spec in KNOWN_EPS.values():
        if _import(spec.module) is not None:
            found[spec.name] = spec
    for module_name in _candidate_modules():
        module = _import(module_name)
        if module is None or not callable(getattr(module, "get_ep_names", None)):
            continue
        for name in module.get_ep_names():
            found.setdefault(name, PluginEp(name, module_name))
    return dict(sorted(found.items()))


def _candidate_modules() -> list[str]:
    names = set()
    for dist in importlib.metadata.distributions():
        for top in (dist.read_text("top_level.txt") or "").split():
            if top.startswith("onnxruntime_") and top not in ("onnxruntime_genai",):
                names.add(top)
    return sorted(n for n in names if n not in {s.module for s in KNOWN_EPS.values()})


def _import(name: str) -> Any:
    try:
        module = importlib.import_module(name)
    except ImportError:
        return None
    return module if callable(getattr(module, "get_library_path", None)) else None


def find_ep(name: str) -> PluginEp:
    """The installed plugin EP called ``name``; a missing one is a :class:`BackendError`
    naming the extra that installs it."""
    installed = plugin_eps()
    if name in installed:
        return installed[name]
    spec = KNOWN_EPS.get(name)
    if spec is not None:
        raise BackendError(f"{name} is not installed: pip install 'clusterkit[{spec.extra}]'")
    known = ", ".join(installed) or "none"
    raise BackendError(f"no installed plugin execution provider is named {name!r} "
                       f"(installed: {known})")


def ep_version(spec: PluginEp) -> str:
    """The installed version of the package that ships ``spec``."""
    module = importlib.import_module(spec.module)
    version = getattr(module, "__version__", None)
    if version:
        return str(version)
    try:
        return importlib.metadata.version(spec.module.replace("_", "-"))
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def query_ep(model: onnx.ModelProto, name: str, settings: Mapping[str, str] | None = None, *,
             compile: bool = True) -> EpAnswer:
    """The answer of the installed plugin EP ``name`` (with ``settings`` as provider options)
    on ``model`` as it is (onnxruntime's optimizations off). ``compile=False`` stops the
    session after partitioning (quicker; the stop itself is no ``error``, and ``assigned`` is
    known only when onnxruntime compiled nothing). Raises
    :class:`BackendError` when the EP is not installed, offers no device, or fails before
    answering."""
    spec, options = ep_options(name, settings)
    with _LOCK, _captured_logs() as logs:
        recorder = _register(spec, importlib.import_module(spec.module))
        device = _device(spec, options)
        answer = EpAnswer(spec.name, ep_version(spec))
        recorder.clusterkit_clear()
        recorder.clusterkit_set_skip_compile(0 if compile else 1)
        _run_session(model, device, options, answer)
        _read_answer(ep_recorder.read_record(recorder), answer)
        _debug_log(spec.name, logs.text())
    if not compile and answer.compiled is not None:
        answer.error = None  # the recorder's own stop, not a failure of the EP
    return answer


def _register(spec: PluginEp, module: Any) -> Any:
    """Register the recorder for ``spec`` with onnxruntime once per process."""
    import onnxruntime as ort

    if spec.name in _REGISTERED:
        return _REGISTERED[spec.name]
    if tuple(int(p) for p in re.findall(r"\d+", ort.__version__)[:2]) < (1, 23):
        raise BackendError(f"asking {spec.name} needs onnxruntime >= 1.23 (plugin EPs with "
                           f"recorded graph assignments), found {ort.__version__}")
    path = ep_recorder.build(spec.name)
    lib = ep_recorder.load(path, module.get_library_path())
    reg = spec.name + (".virtual" if spec.virtual else "")
    try:
        ort.register_execution_provider_library(reg, path)
    except Exception as exc:  # onnxruntime raises its own types
        raise BackendError(f"onnxruntime cannot load {spec.name}: {_first_line(exc)}") from exc
    _REGISTERED[spec.name] = lib
    return lib


def _device(spec: PluginEp, options: dict[str, str]) -> Any:
    """The EP's first device (of ``device_type``, an option or the spec's default)."""
    import onnxruntime as ort

    wanted = options.pop("device_type", None) or spec.device_type
    devices = [d for d in ort.get_ep_devices() if d.ep_name == spec.name]
    if wanted:
        devices = [d for d in devices if d.device.type.name == wanted.upper()]
    if not devices:
        what = f" of type {wanted}" if wanted else ""
        raise BackendError(f"{spec.name} offers no device{what} on this machine")
    return devices[0]


def _run_session(model: onnx.ModelProto, device: Any, options: dict[str, str],
                 answer: EpAnswer) -> None:
    """Create the session; record onnxruntime's assignment, or the failure after answering."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.log_severity_level = 4
    opts.intra_op_num_threads = 1  # nothing is run: no thread pool to start
    _add_ep(opts, device, options)
    try:
        session = ort.InferenceSession(model.SerializeToString(), opts)
    except Exception as exc:  # EP_FAIL, Fail, ...: the EP answered (or not) and then failed
        answer.error = _failure_text(exc)
        return
    answer.assigned = [n.name for sub in session.get_provider_graph_assignment_info()
                       if sub.ep_name == answer.ep for n in sub.get_nodes()]


def _read_answer(events: list, answer: EpAnswer) -> None:
    """The last GetCapability round of ``events`` (the one onnxruntime acts on: an EP that
    prefers another layout is asked again after the layout transformation, whose copies of
    graph nodes carry a ``_token_N`` suffix, see :func:`graph_node_name`), and the number of
    groups sent to compile. A round ends where a node repeats."""
    rounds: list[list[list[tuple[str, str]]]] = [[]]
    seen: set[str] = set()
    for kind, items in events:
        if kind == "compile":
            answer.compiled = (answer.compiled or 0) + int(items[0][0])
            continue
        names = {n for n, _ in items}
        if seen.intersection(names):
            rounds.append([])
            seen = set()
        seen.update(names)
        rounds[-1].append(items)
    answer.rounds = len(rounds) if rounds[0] else 0
    last = {m for group in rounds[-1] for n, _ in group for m in (n, _TOKEN.sub("", n))}
    answer.absorbed = list(dict.fromkeys(
        n for r in rounds[:-1] for group in r for n, op in group
        if op == "Transpose" and n not in last))
    for group in rounds[-1]:
        answer.groups.append(list(dict.fromkeys(n for n, _ in group)))
        answer.op_types.update(group)
    if answer.compiled is None and answer.assigned is not None:
        answer.compiled = 1 if answer.assigned else 0


def _add_ep(opts: Any, device: Any, options: dict[str, str]) -> None:
    """Give session options ``opts`` the EP on ``device`` with provider ``options``, and ask
    onnxruntime to record which EP takes each node."""
    opts.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    opts.add_provider_for_devices([device], options)


class EpCompileError(BackendError):
    """An EP refused to compile a model whole (``reason``: the EP's own message, one line)."""

    def __init__(self, ep: str, reason: str, untaken: list[str] | None = None):
        super().__init__(f"{ep} did not compile it: {reason}")
        self.ep = ep
        self.reason = reason
        #: the computing nodes (names) the EP's GetCapability left out, when it answered
        self.untaken = list(untaken or [])


def ep_options(name: str, settings: Mapping[str, Any] | None = None
               ) -> tuple[PluginEp, dict[str, str]]:
    """The installed EP ``name`` and the provider options ``settings`` become (a missing EP is
    a :class:`BackendError` naming its extra)."""
    spec = find_ep(name)
    check_option_keys(spec, settings or {})
    module = importlib.import_module(spec.module)
    return spec, spec.options(module, {k: str(v) for k, v in (settings or {}).items()})


def check_option_keys(spec: PluginEp, settings: Mapping[str, Any]) -> None:
    """Refuse a provider option the EP does not read (onnxruntime would silently ignore it), by
    name, with the closest key and the EP's list; for an EP without a list
    (:attr:`PluginEp.option_keys`), warn once per option that it is passed on unchecked."""
    import difflib

    keys = spec.option_keys
    if keys is None:
        for key in settings:
            if key != "device_type" and (spec.name, key) not in _WARNED:
                _WARNED.add((spec.name, key))
                log.warning("%s: provider option %r is passed on unchecked (clusterkit has no "
                            "list of this EP's options; a misspelt one is ignored)", spec.name,
                            key)
        return
    unknown = [k for k in settings if k not in keys]
    if unknown:
        close = difflib.get_close_matches(unknown[0], sorted(keys), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise BackendError(f"{spec.name} has no provider option {unknown[0]!r}{hint} (options: "
                           f"{', '.join(sorted(keys))})")


def compile_on_ep(data: bytes, spec: PluginEp, options: Mapping[str, str], opts: Any = None):
    """An ``onnxruntime.InferenceSession`` of the serialized model ``data`` on the plugin EP
    ``spec`` alone, with its provider ``options`` (as :func:`ep_options` made them):
    onnxruntime's CPU fallback is disabled (``session.disable_cpu_ep_fallback``) and its
    assignment record is checked, so a model the EP does not take whole, or fails to compile,
    raises :class:`EpCompileError` with the EP's own message (never a silent CPU run).
    ``opts``: the ``onnxruntime.SessionOptions`` to start from (threads, profiling, EP context
    entries)."""
    import onnxruntime as ort

    options = dict(options)  # _device takes device_type out
    opts = opts if opts is not None else ort.SessionOptions()
    opts.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    with _LOCK, _captured_logs() as logs:
        recorder = _register(spec, importlib.import_module(spec.module))
        _add_ep(opts, _device(spec, options), options)
        recorder.clusterkit_clear()
        recorder.clusterkit_set_skip_compile(0)
        try:
            session = ort.InferenceSession(data, opts)
        except Exception as exc:  # onnxruntime's own types
            untaken = _untaken(data, ep_recorder.read_record(recorder))
            raise EpCompileError(spec.name, _ep_message(logs.text(), exc, untaken),
                                 [nd.name for nd in untaken]) from None
        logged = logs.text()
    _debug_log(spec.name, logged)
    others = [(p.ep_name, n) for p in session.get_provider_graph_assignment_info()
              if p.ep_name != spec.name for n in p.get_nodes()]
    if others:
        ep, node = others[0]
        raise EpCompileError(spec.name, f"{len(others)} of the nodes ran on {ep} (first "
                             f"{node.name!r}, {node.op_type})")
    return session


#: an onnxruntime log line: colour codes, time, severity and source location before the text
_LOG_LINE = re.compile(r"^(?:\x1b\[[0-9;]*m)?\S+ \S+ \[(?P<sev>[EW]):onnxruntime:[^\]]*\] "
                       r"(?:\S+:\d+ \S+\] )?(?P<text>.*?)(?:\x1b\[[0-9;]*m)?$")
#: onnxruntime's own words when the EP left nodes to the disabled CPU fallback
_GENERIC = "fallback to CPU EP has been explicitly disabled"


def _untaken(data: bytes, events: list) -> list[Any]:
    """The computing nodes of the serialized model ``data`` (not those computed from constants
    alone, which onnxruntime folds before the EP sees them) that no group the EP handed over
    holds."""
    import onnx

    graph = onnx.load_from_string(data).graph
    taken = {_TOKEN.sub("", n) for kind, items in events if kind == "group" for n, _ in items}
    fixed = {t.name for t in graph.initializer} | {""}
    left = []
    for nd in graph.node:
        if all(t in fixed for t in nd.input):
            fixed.update(nd.output)
        elif nd.name not in taken:
            left.append(nd)
    return left


def _untaken_text(untaken: list[Any]) -> str | None:
    """The nodes the EP left out, in a phrase (None: it took every one and failed later)."""
    if not untaken:
        return None
    first = ", ".join(f"{nd.name!r} ({nd.op_type})" for nd in untaken[:3])
    return (f"it does not take {len(untaken)} of the nodes: {first}"
            f"{', ...' if len(untaken) > 3 else ''}")


def _ep_message(logged: str, exc: BaseException, untaken: list[Any]) -> str:
    """The EP's own reason for a failed session: its error lines in the log (onnxruntime's
    generic "fallback disabled" line left out), else the nodes it did not take (``untaken``),
    else the exception's text; one line."""
    found: list[str] = []
    for line in logged.splitlines():
        m = _LOG_LINE.match(line.strip())
        if m and m["sev"] == "E" and _GENERIC not in m["text"]:
            text = " ".join(m["text"].split())
            if not any(seen in text for seen in found):  # a line repeating an earlier one
                found.append(text)
    if found:
        return "; ".join(found[:2])[:400]
    return _untaken_text(untaken) or _failure_text(exc)


class _Logs:
    """The text written to the process's stderr (and stdout) within :func:`_captured_logs`."""

    def __init__(self, file: Any):
        self.file = file

    def text(self) -> str:
        sys.stderr.flush()
        self.file.seek(0)
        return self.file.read().decode("utf-8", "replace")


@contextlib.contextmanager
def _captured_logs():
    """Within the block, what native code writes on stderr and stdout (onnxruntime's log, the
    QNN libraries' banner) goes to a temporary file, read by the :class:`_Logs` yielded."""
    import tempfile

    with tempfile.TemporaryFile() as tmp:
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            saved = os.dup(1), os.dup(2)
        except OSError:  # no standard streams to redirect
            yield _Logs(tmp)
            return
        try:
            os.dup2(tmp.fileno(), 1)
            os.dup2(tmp.fileno(), 2)
            yield _Logs(tmp)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def _debug_log(ep: str, text: str) -> None:
    """What onnxruntime and the EP's libraries printed (their log, the QNN banner): kept out
    of clusterkit's output, shown with ``-v``."""
    if text.strip():
        log.debug("%s printed:\n%s", ep, text.rstrip())


def graph_node_name(name: str, names: Mapping[str, Any]) -> str | None:
    """The node of ``names`` an answer's node ``name`` is: itself, or the node the layout
    transformation copied (``NAME_token_N``); None for a node the transformation inserted."""
    if name in names:
        return name
    base = _TOKEN.sub("", name)
    return base if base in names else None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return " ".join(text.splitlines()[0].split())[:300]


def _failure_text(exc: BaseException) -> str:
    """An EP failure in one line: its first line and, for a chained message (OpenVINO's
    "Exception from ..." lines), the last line, where the cause is."""
    lines = [" ".join(ln.split()) for ln in str(exc).splitlines() if ln.strip()]
    if not lines:
        return type(exc).__name__
    text = lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1]}"
    return text[:400]


def answer_by_position(model: onnx.ModelProto, name: str,
                       settings: Mapping[str, str] | None = None, *, compile: bool = False
                       ) -> tuple[EpAnswer, list[list[int]]]:
    """The EP's answer on ``model`` and its groups as positions in ``model.graph.node``: the
    EP is asked about a copy whose nodes are named by position, so unnamed or twice-named
    nodes are told apart (``model`` is not modified)."""
    import onnx  # here, not at import: `import clusterkit` stays light

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for i, node in enumerate(copy.graph.node):
        node.name = f"n{i}"
    answer = query_ep(copy, name, settings, compile=compile)
    positions = {f"n{i}": i for i in range(len(copy.graph.node))}
    groups = []
    for group in answer.groups:
        found = {positions[m] for m in (graph_node_name(n, positions) for n in group) if m}
        if found:
            groups.append(sorted(found))
    return answer, groups
