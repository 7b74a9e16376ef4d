"""Read ONNX models into a :class:`~clusterkit.graph.core.Graph`.

Shape inference (with data propagation) runs first so that tensor sizes are known wherever the
model allows. An If/Loop/Scan node stays one opaque node; the outer-scope tensors its bodies read
become its ``implicit_inputs``.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import onnx
from onnx import helper, shape_inference

from clusterkit.errors import ModelLoadError
from clusterkit.graph.core import Graph, Node, Tensor
from clusterkit.io.files import read_input


def load_onnx(model: str | os.PathLike | onnx.ModelProto, infer_shapes: bool = True) -> Graph:
    """Read an ONNX file (or ModelProto) into a Graph.

    Raises :class:`ModelLoadError` for a missing, unreadable or non-regular file, one that is not
    ONNX, or a model without nodes, and :class:`~clusterkit.errors.GraphError` for a malformed
    graph (a cycle, a tensor read but never produced).
    """
    if isinstance(model, onnx.ModelProto):
        proto, name, source = model, model.graph.name or "model", "memory"
    else:
        path = os.fspath(model)
        proto = _read_model(path)
        name, source = os.path.splitext(os.path.basename(path))[0], path
    if not proto.graph.node:
        raise ModelLoadError(f"ONNX model {name!r} has no nodes")
    inferred = proto
    if infer_shapes:
        try:
            inferred = shape_inference.infer_shapes(proto, data_prop=True)
        except Exception:  # a model shape inference cannot handle still loads, sizes unknown
            inferred = proto
    return graph_from_proto(inferred, name=name, source=source, original=proto)


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


def _np_dtype(elem_type: int) -> str | None:
    if not elem_type:
        return None
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).name
    except Exception:
        return None


def _nbytes(shape: tuple | None, dtype: str | None) -> int | None:
    if shape is None or dtype is None:
        return None
    if not all(isinstance(d, int) and d >= 0 for d in shape):
        return None
    try:
        item = np.dtype(dtype).itemsize
    except TypeError:
        return None
    return int(np.prod(shape, dtype=np.int64)) * item


def _tensor_from_value_info(vi: onnx.ValueInfoProto) -> Tensor:
    t = Tensor(vi.name)
    tt = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
    if tt is None:
        return t
    t.dtype = _np_dtype(tt.elem_type)
    if tt.HasField("shape"):
        dims = []
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
