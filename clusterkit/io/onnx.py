"""Read ONNX models into a :class:`~clusterkit.graph.core.Graph`.

Shape inference (with data propagation) runs first so that tensor sizes are known wherever the
model allows; symbolic dims the caller fixes (``dims``) are rewritten to static ones before it, as
onnxruntime's ``make_dynamic_shape_fixed`` tool does. A model saved with external data is read
with its weights (relative to the model's folder); shape inference then sees only its small
tensors, the only ones whose values shape inference reads, so models past protobuf's 2 GB limit
are inferred too. An If/Loop/Scan node stays one opaque node; the outer-scope tensors its bodies
read become its ``implicit_inputs``.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import stat
import weakref
from typing import Any, Mapping

import numpy as np
import onnx
from onnx import external_data_helper, helper, shape_inference

from clusterkit.errors import ModelLoadError
from clusterkit.graph.core import Graph, Node, Tensor
from clusterkit.io.files import read_input

#: external tensors up to this size are loaded before shape inference (shape vectors, axes);
#: the larger ones (weights, whose values shape inference never reads) only after it
SHAPE_TENSOR_BYTES = 1 << 16
#: protobuf cannot serialize a message this large, so shape inference cannot take it whole
PROTOBUF_LIMIT = 1 << 31
#: from this size on, shape inference gets the model without its large tensors' data (copying
#: hundreds of MB of weights into shape inference and back costs seconds and tells it nothing)
SET_ASIDE_FROM = 1 << 26

_EXTERNAL: "weakref.WeakSet[Graph]" = weakref.WeakSet()


def load_onnx(model: str | os.PathLike | onnx.ModelProto, infer_shapes: bool = True,
              dims: Mapping[str, int] | None = None) -> Graph:
    """Read an ONNX file (or ModelProto) into a Graph; a file's external data is read from the
    model's folder. ``dims`` fixes symbolic dims of the graph inputs (name → size, see
    :func:`fix_dims`) before shape inference; a ModelProto given is not modified.

    Raises :class:`ModelLoadError` for a missing, unreadable or non-regular file (the model or
    its external data), one that is not ONNX, a model without nodes, or a bad ``dims`` entry,
    and :class:`~clusterkit.errors.GraphError` for a malformed graph (a cycle, a tensor read but
    never produced).
    """
    external = False
    if isinstance(model, onnx.ModelProto):
        proto, name, source = model, model.graph.name or "model", "memory"
        if dims:
            proto = onnx.ModelProto()
            proto.CopyFrom(model)
    else:
        path = os.fspath(model)
        proto = _read_model(path)
        name, source = os.path.splitext(os.path.basename(path))[0], path
        external = _external_tensors(proto, path) != []
    if not proto.graph.node:
        raise ModelLoadError(f"ONNX model {name!r} has no nodes")
    if dims:
        fix_dims(proto, dims)
    if external:
        _load_external_data(proto, path, max_bytes=SHAPE_TENSOR_BYTES)
    inferred = infer_model_shapes(proto) if infer_shapes else proto
    if external:
        _load_external_data(proto, path)
    graph = graph_from_proto(inferred, name=name, source=source, original=proto)
    if external:
        _EXTERNAL.add(graph)
    return graph


def had_external_data(graph: Graph) -> bool:
    """Whether ``graph`` was read from a model file that kept tensors in external data."""
    return graph in _EXTERNAL


def infer_model_shapes(proto: onnx.ModelProto) -> onnx.ModelProto:
    """``proto`` shape-inferred with data propagation (dims computed by shape arithmetic become
    known), else without it when data propagation fails, else ``proto`` itself (sizes unknown).
    A model past :data:`SET_ASIDE_FROM` (64 MB) is inferred with the data of its large tensors
    set aside meanwhile: shape inference reads the values of small tensors only. The copy
    returned gets that data back except for the main graph's initializers: a Graph reads only
    their dims and types from it (their data is in ``proto``), and the copy stays alive as long
    as the Graph's nodes do, so it would hold every weight a second time."""
    with _large_data_set_aside(proto) as stash:
        for data_prop in (True, False):
            try:
                inferred = shape_inference.infer_shapes(proto, data_prop=data_prop)
            except Exception:  # a model shape inference cannot handle still loads
                continue
            # Constant nodes and subgraph bodies are read from the copy: their data goes back
            _put_back(inferred, stash, skip=len(inferred.graph.initializer))
            return inferred
    return proto


def _put_back(model: onnx.ModelProto, stash: list, skip: int = 0) -> None:
    """The raw data set aside from a model, written into the same tensors (by position) of
    ``model``: the model itself, or its inferred copy (inference keeps initializers and nodes
    in order); the first ``skip`` positions are left as they are."""
    if not stash:
        return
    tensors = list(external_data_helper._get_all_tensors(model))
    for k, raw, had_location, location in stash:
        if k < skip:
            continue
        t = tensors[k]
        t.raw_data = raw
        if had_location:
            t.data_location = location
        else:
            t.ClearField("data_location")


@contextlib.contextmanager
def _large_data_set_aside(proto: onnx.ModelProto):
    """Within the block, a model whose tensors over :data:`SHAPE_TENSOR_BYTES` hold
    :data:`SET_ASIDE_FROM` bytes or more has their raw data removed (marked external, so
    nothing checks it against the dims); it is put back afterwards. Yields what it set aside:
    (tensor position, raw data, location) each."""
    stash = []
    large = [(k, t, size) for k, t in enumerate(external_data_helper._get_all_tensors(proto))
             if t.HasField("raw_data") and (size := _raw_bytes(t)) > SHAPE_TENSOR_BYTES]
    if sum(size for _, _, size in large) >= SET_ASIDE_FROM:
        for k, t, _ in large:
            stash.append((k, t.raw_data, t.HasField("data_location"), t.data_location))
            t.ClearField("raw_data")
            t.data_location = onnx.TensorProto.EXTERNAL
    try:
        yield stash
    finally:
        _put_back(proto, stash)


def _raw_bytes(t: onnx.TensorProto) -> int:
    """The bytes of a tensor's raw data by its dims and type (reading ``raw_data`` copies it),
    measured only for a type numpy has no dtype for."""
    size = _nbytes(tuple(t.dims), _np_dtype(t.data_type))
    return len(t.raw_data) if size is None else size


def symbolic_dims(proto: onnx.ModelProto) -> list[str]:
    """The symbolic dims (``dim_param``) of the model's graph inputs, in order of appearance."""
    inits = {i.name for i in proto.graph.initializer}
    out: list[str] = []
    for vi in proto.graph.input:
        if vi.name in inits or not vi.type.tensor_type.HasField("shape"):
            continue
        for d in vi.type.tensor_type.shape.dim:
            if d.HasField("dim_param") and d.dim_param not in out:
                out.append(d.dim_param)
    return out


def fix_dims(proto: onnx.ModelProto, dims: Mapping[str, int]) -> None:
    """Rewrite the symbolic dims named in ``dims`` to their sizes, in place, wherever a shape
    names them (graph inputs, outputs, value_info, subgraph bodies). A name that is no
    symbolic dim of the graph inputs, or a size that is not a positive integer, is a
    :class:`ModelLoadError`."""
    known = symbolic_dims(proto)
    for dim, size in dims.items():
        if dim not in known:
            raise ModelLoadError(f"dim {dim!r} is not a symbolic dim of the model's inputs "
                                 f"(its symbolic dims: {', '.join(known) or 'none'})")
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise ModelLoadError(f"dim {dim!r} is given size {size!r}; a size must be a positive "
                                 "integer")
    _fix_dims_in(proto.graph, dims)


def _fix_dims_in(graph: onnx.GraphProto, dims: Mapping[str, int]) -> None:
    for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
        if not vi.type.tensor_type.HasField("shape"):
            continue
        for d in vi.type.tensor_type.shape.dim:
            if d.HasField("dim_param") and d.dim_param in dims:
                d.dim_value = int(dims[d.dim_param])  # clears dim_param (one of)
    for node in graph.node:
        for a in node.attribute:
            for body in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
                _fix_dims_in(body, dims)


def _read_model(path: str) -> onnx.ModelProto:
    data = read_input(path, "model")
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except Exception as exc:
        raise ModelLoadError(f"{path!r} is not an ONNX model ({exc.__class__.__name__})") from exc
    if not proto.HasField("graph") or (not proto.graph.node and not proto.opset_import):
        raise ModelLoadError(f"{path!r} is not an ONNX model (no graph)")
    return proto


def _external_tensors(proto: onnx.ModelProto, path: str) -> list[onnx.TensorProto]:
    """The tensors of ``proto`` kept in external data, after checking that every external data
    file is a regular file in reach (:class:`ModelLoadError` naming it otherwise)."""
    tensors = [t for t in external_data_helper._get_all_tensors(proto)
               if external_data_helper.uses_external_data(t)]
    folder = os.path.dirname(os.path.abspath(path))
    for location in sorted({external_data_helper.ExternalDataInfo(t).location for t in tensors}):
        data = os.path.join(folder, location)
        try:
            regular = stat.S_ISREG(os.stat(data).st_mode)
        except OSError as exc:
            reason = "no such file" if isinstance(exc, FileNotFoundError) else exc.strerror
            raise ModelLoadError(f"cannot read external data {location!r} of model {path!r}: "
                                 f"{reason}") from exc
        if not regular:
            raise ModelLoadError(f"cannot read external data {location!r} of model {path!r}: "
                                 "it is not a regular file")
    return tensors


def _load_external_data(proto: onnx.ModelProto, path: str, max_bytes: int | None = None
                        ) -> None:
    """Read the external tensors of ``proto`` (those of at most ``max_bytes`` when given) into
    the model, from files relative to the model's folder."""
    folder = os.path.dirname(os.path.abspath(path))
    for t in _external_tensors(proto, path):
        size = _nbytes(tuple(t.dims), _np_dtype(t.data_type))
        if max_bytes is not None and (size is None or size > max_bytes):
            continue
        location = external_data_helper.ExternalDataInfo(t).location
        try:
            external_data_helper.load_external_data_for_tensor(t, folder)
        except Exception as exc:
            raise ModelLoadError(f"cannot read external data {location!r} of model {path!r} "
                                 f"(tensor {t.name!r}): {exc}") from exc


def graph_from_proto(proto: onnx.ModelProto, name: str = "model", source: str = "memory",
                     original: onnx.ModelProto | None = None) -> Graph:
    """Build a Graph from an (ideally shape-inferred) ModelProto."""
    g = proto.graph
    tensors: dict[str, Tensor] = {}
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        tensors[vi.name] = _tensor_from_value_info(vi)
    for init in g.initializer:
        t = tensors.get(init.name)
        shape = tuple(int(d) for d in init.dims)
        dtype = _np_dtype(init.data_type)
        if t is None:
            t = tensors[init.name] = Tensor(init.name)
        t.shape, t.dtype = shape, dtype
        t.nbytes = _nbytes(shape, dtype)
        t.is_initializer = True
    for sp in g.sparse_initializer:
        t = tensors.setdefault(sp.values.name, Tensor(sp.values.name))
        t.is_initializer = True
    init_names = {i.name for i in g.initializer} | {s.values.name for s in g.sparse_initializer}
    # an initializer also listed as a graph input (IR < 4) is a weight with a default: constant
    inputs = [vi.name for vi in g.input if vi.name not in init_names]
    outputs = [vi.name for vi in g.output]
    nodes = []
    for pos, np_ in enumerate(g.node):
        nodes.append(_node_from_proto(np_, pos))
    graph = Graph.build(nodes, tensors, inputs, outputs, name=name,
                        model=original if original is not None else proto, source=source)
    return graph


def _node_from_proto(proto: onnx.NodeProto, pos: int) -> Node:
    attrs: dict[str, Any] = {}
    implicit: list[str] = []
    for a in proto.attribute:
        if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
            attrs[a.name] = a.g if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)
            bodies = [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)
            for body in bodies:
                for t in outer_scope_names(body):
                    if t not in implicit and t not in proto.input:
                        implicit.append(t)
            continue
        value = helper.get_attribute_value(a)
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        elif isinstance(value, list) and value and isinstance(value[0], bytes):
            value = [v.decode("utf-8", "replace") for v in value]
        attrs[a.name] = value
    affinity = None
    for prop in getattr(proto, "metadata_props", []):
        if prop.key == "affinity":
            affinity = prop.value
    if affinity is None and isinstance(attrs.get("affinity"), str):
        affinity = attrs["affinity"]
    name = proto.name or f"{proto.op_type}_{pos}"
    return Node(index=pos, name=name, op_type=proto.op_type, domain=proto.domain, attrs=attrs,
                inputs=list(proto.input), outputs=list(proto.output),
                implicit_inputs=implicit, source_index=pos, affinity=affinity, proto=proto)


def outer_scope_names(body: onnx.GraphProto) -> list[str]:
    """Tensors a subgraph body reads but does not define (recursively through nested bodies)."""
    defined = {i.name for i in body.input} | {i.name for i in body.initializer}
    defined |= {s.values.name for s in body.sparse_initializer}
    used: list[str] = []
    for node in body.node:
        reads = list(node.input)
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                reads += outer_scope_names(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for sub in a.graphs:
                    reads += outer_scope_names(sub)
        for t in reads:
            if t and t not in defined and t not in used:
                used.append(t)
        defined.update(o for o in node.output if o)
    for o in body.output:
        if o.name not in defined and o.name not in used:
            used.append(o.name)
    return used


@functools.lru_cache(maxsize=None)
def _np_dtype(elem_type: int) -> str | None:
    if not elem_type:
        return None
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).name
    except Exception:
        return None


@functools.lru_cache(maxsize=None)
def _itemsize(dtype: str) -> int | None:
    try:
        return np.dtype(dtype).itemsize
    except TypeError:
        return None


def _nbytes(shape: tuple | None, dtype: str | None) -> int | None:
    if shape is None or dtype is None:
        return None
    if not all(isinstance(d, int) and d >= 0 for d in shape):
        return None
    item = _itemsize(dtype)
    if item is None:
        return None
    count = math.prod(shape)
    if count >= 2 ** 63:  # numpy's int64 product wraps around: keep its value
        count = int(np.prod(shape, dtype=np.int64))
    return count * item


def _tensor_from_value_info(vi: onnx.ValueInfoProto) -> Tensor:
    t = Tensor(vi.name)
    tt = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
    if tt is None:
        return t
    t.dtype = _np_dtype(tt.elem_type)
    if tt.HasField("shape"):
        dims: list[int | str | None] = []
        for d in tt.shape.dim:
            if d.HasField("dim_value"):
                dims.append(int(d.dim_value))
            elif d.HasField("dim_param"):
                dims.append(d.dim_param)
            else:
                dims.append(None)
        t.shape = tuple(dims)
        t.nbytes = _nbytes(t.shape, t.dtype)
    return t
