"""The graph onnxruntime hands its execution providers: a model after its graph optimizations.

onnxruntime runs its graph transformers (at the basic level: constant folding, shape resolution,
redundant node elimination) inside ``InferenceSession`` before any execution provider's
``GetCapability`` sees the graph, so what an accelerator is offered is that graph, not the raw
export. The one idea: ask onnxruntime itself for it — a CPU session at the requested level with
``optimized_model_filepath`` set writes exactly the transformed graph, which is then read back.
"""

from __future__ import annotations

import os
import tempfile
from typing import Mapping

import onnx

from clusterkit import modes
from clusterkit.errors import ModelLoadError
from clusterkit.io.onnx import PROTOBUF_LIMIT, fix_dims
from clusterkit.modes import OptimizeLevel, check_choice

#: the levels :func:`optimize_model` knows, in order; ``none`` is the raw graph
OPTIMIZE_LEVELS = modes.OPTIMIZE_LEVELS
#: external tensors of the written model: file name, and the size from which a tensor goes there
_DATA_FILE = "optimized.onnx.data"
_DATA_MIN_BYTES = "1024"


def optimize_model(model: str | os.PathLike | onnx.ModelProto, level: OptimizeLevel = "basic",
                   dims: Mapping[str, int] | None = None) -> onnx.ModelProto:
    """The ModelProto onnxruntime's ``level`` optimizations make of ``model`` (a path, whose
    external data is read from its folder, or a ModelProto, not modified), with every tensor
    loaded. ``dims`` fixes symbolic input dims first (see :func:`~clusterkit.io.onnx.fix_dims`).
    ``level="none"`` gives the raw model (with ``dims`` fixed).

    Raises :class:`ModelLoadError` for an unknown level, a model that cannot be read, or one
    onnxruntime cannot load (with onnxruntime's first message line)."""
    check_choice("optimize", level, OPTIMIZE_LEVELS, ModelLoadError)
    label = _label(model)
    proto = _read(model, label)
    if dims:
        fix_dims(proto, dims)
    if level == "none":
        return proto
    with tempfile.TemporaryDirectory(prefix="clusterkit-optimize-") as tmp:
        out = os.path.join(tmp, "optimized.onnx")
        _run_session(_session_source(model, proto, bool(dims), label), out, level, label)
        try:
            optimized = onnx.load(out, load_external_data=True)
        except Exception as exc:  # onnx raises several types for a bad file
            raise ModelLoadError(f"cannot read the model onnxruntime optimized from {label}: "
                                 f"{_first_line(exc)}") from exc
    _drop_folded_inputs(optimized, {t.name for t in proto.graph.initializer})
    declare_initializers(optimized)
    return optimized


def _drop_folded_inputs(optimized: onnx.ModelProto, initializers: set[str]) -> None:
    """Below IR version 4 every initializer is also a graph input; onnxruntime's folding drops
    the initializers it used up but keeps their inputs, which would then be graph inputs that
    nothing gives (the light ``shufflenet``'s 251): they go too."""
    kept = {t.name for t in optimized.graph.initializer}
    gone = [vi for vi in optimized.graph.input if vi.name in initializers and vi.name not in kept]
    for vi in gone:
        optimized.graph.input.remove(vi)


def declare_initializers(proto: onnx.ModelProto) -> None:
    """Below IR version 4 an initializer must also be a graph input, and shape inference reads
    its type only from there; onnxruntime writes the initializers its folding made (the
    ``onnx`` light models' weights) without that input, so each gets one here, with the
    tensor's type and dims: the shapes onnxruntime knows stay known."""
    if proto.ir_version >= 4:
        return
    declared = {vi.name for vi in proto.graph.input}
    for init in proto.graph.initializer:
        if init.name not in declared:
            proto.graph.input.append(
                onnx.helper.make_tensor_value_info(init.name, init.data_type, list(init.dims)))


def _session_source(model: str | os.PathLike | onnx.ModelProto, proto: onnx.ModelProto,
                    modified: bool, label: str) -> str | bytes:
    """What the session loads: ``proto`` serialized (every tensor inline, so onnxruntime's
    shape inference reads the small external ones too), or past protobuf's 2 GB limit the
    unmodified model's path (onnxruntime then reads the external data itself)."""
    if proto.ByteSize() < PROTOBUF_LIMIT:
        return proto.SerializeToString()
    if modified or isinstance(model, onnx.ModelProto):
        raise ModelLoadError(f"model {label} is too large to optimize in memory with fixed dims"
                             " or from a ModelProto; give the path of a model saved with "
                             "external data")
    return os.fspath(model)


def _run_session(model: str | bytes, out: str, level: str, label: str) -> None:
    """Build a CPU session at ``level`` whose optimized graph is written to ``out``."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = {"basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC}[level]
    opts.optimized_model_filepath = out
    opts.add_session_config_entry("session.optimized_model_external_initializers_file_name",
                                  _DATA_FILE)
    opts.add_session_config_entry(
        "session.optimized_model_external_initializers_min_size_in_bytes", _DATA_MIN_BYTES)
    opts.log_severity_level = 3
    try:
        ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own types (Fail, InvalidGraph, ...)
        raise ModelLoadError(f"onnxruntime cannot load {label}: {_first_line(exc)}") from exc


def _read(model: str | os.PathLike | onnx.ModelProto, label: str) -> onnx.ModelProto:
    """A copy of ``model`` (or the file read with its external data) to modify."""
    if isinstance(model, onnx.ModelProto):
        proto = onnx.ModelProto()
        proto.CopyFrom(model)
        return proto
    try:
        return onnx.load(os.fspath(model), load_external_data=True)
    except FileNotFoundError:
        raise ModelLoadError(f"cannot read model {label}: no such file") from None
    except Exception as exc:  # protobuf DecodeError, OSError, onnx's ValidationError
        raise ModelLoadError(f"cannot read model {label}: {_first_line(exc)}") from exc


def _label(model: str | os.PathLike | onnx.ModelProto) -> str:
    if isinstance(model, onnx.ModelProto):
        return f"model {model.graph.name or 'model'!r}"
    return repr(os.fspath(model))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
