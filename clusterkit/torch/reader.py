"""Read a ``torch.fx.GraphModule`` or a ``torch.export.ExportedProgram`` into a clusterkit Graph.

Every ``call_function`` / ``call_module`` / ``call_method`` fx node becomes one clusterkit node of
the same name, producing one tensor of that name; placeholders become graph inputs (or
initializers, for an exported program's lifted parameters, buffers and constants), ``get_attr``
nodes and the parameters of a called module become initializers, and the ``output`` node's inputs
become the graph outputs. The one idea: fx names are unique and fx order is topological, so the
Graph's node indices follow the fx order and a name maps a clusterkit node back to its fx node.
Byte sizes come from ``node.meta["val"]`` (fake tensors of ``torch.export``) or
``node.meta["tensor_meta"]`` (``ShapeProp``); a value whose size is unknown has ``nbytes=None``.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.fx import GraphModule
from torch.fx import Node as FxNode
from torch.fx.node import _get_qualified_name

from clusterkit.errors import GraphError
from clusterkit.graph.core import Graph, Node, Tensor

__all__ = ["CALL_OPS", "op_name", "read_fx", "graph_module_of", "value_nbytes"]

#: the fx node kinds that compute (the others are placeholder, get_attr and output)
CALL_OPS = ("call_function", "call_module", "call_method")


def graph_module_of(module: Any) -> GraphModule:
    """The GraphModule of a GraphModule or of an ExportedProgram; anything else is refused."""
    if isinstance(module, GraphModule):
        return module
    inner = getattr(module, "graph_module", None)
    if isinstance(inner, GraphModule) and hasattr(module, "graph_signature"):
        return inner
    raise GraphError(f"expected a torch.fx.GraphModule or a torch.export.ExportedProgram, got "
                     f"{type(module).__name__}")


def op_name(node: FxNode, modules: dict[str, torch.nn.Module] | None = None) -> str:
    """The op name clusterkit selectors see for fx ``node``: an ATen overload as ``str(target)``
    (``aten.convolution.default``), another function by its qualified name (``torch.relu``,
    ``_operator.getitem``), a called module by its class name (``Conv2d``), a method by its name
    (``view``); placeholder, get_attr and output nodes by their kind."""
    target = node.target
    if node.op == "call_function":
        if isinstance(target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket,
                               torch._ops.HigherOrderOperator)):
            return str(target)
        try:
            return _get_qualified_name(target)
        except Exception:  # an unnamed callable (a lambda in an odd place, a functools.partial)
            return getattr(target, "__name__", type(target).__name__)
    if node.op == "call_module":
        mods = modules if modules is not None else dict(node.graph.owning_module.named_modules())
        sub = mods.get(str(target))
        return type(sub).__name__ if sub is not None else str(target)
    if node.op == "call_method":
        return str(target)
    return node.op


def value_nbytes(node: FxNode) -> tuple[tuple | None, str | None, int | None]:
    """``(shape, dtype, nbytes)`` of the value ``node`` produces, from its metadata; a tuple of
    tensors counts the sum of their sizes, and the shape and dtype of the first."""
    parts = _tensor_parts(node.meta.get("val"))
    if parts is None:
        parts = _tensor_parts(node.meta.get("tensor_meta"))
    if not parts:
        return None, None, None
    total = 0
    for shape, dtype in parts:
        size = _size_of(shape, dtype)
        if size is None:
            return parts[0][0], str(parts[0][1]), None
        total += size
    return parts[0][0], str(parts[0][1]), total


def _tensor_parts(value: Any) -> list[tuple[tuple, torch.dtype]] | None:
    """(shape, dtype) of every tensor in a metadata value; None when there is none."""
    if value is None:
        return None
    if isinstance(value, torch.Tensor):
        return [(tuple(value.shape), value.dtype)]
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is not None and isinstance(dtype, torch.dtype):  # a TensorMetadata
        return [(tuple(shape), dtype)]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        out: list[tuple[tuple, torch.dtype]] = []
        for item in value:
            out.extend(_tensor_parts(item) or [])
        return out or None
    return None


def _size_of(shape: tuple, dtype: torch.dtype) -> int | None:
    try:
        dims = [int(d) for d in shape]  # a symbolic size without a hint raises
    except Exception:
        return None
    itemsize = getattr(dtype, "itemsize", None)
    if itemsize is None:
        itemsize = torch.empty((), dtype=dtype).element_size()
    return math.prod(dims) * int(itemsize)


def _initializer(name: str, value: Any) -> Tensor:
    """An initializer tensor for a parameter, buffer or constant value."""
    if isinstance(value, torch.Tensor):
        return Tensor(name, tuple(value.shape), str(value.dtype),
                      value.numel() * value.element_size(), is_initializer=True)
    return Tensor(name, nbytes=0, is_initializer=True)


def _lifted_inputs(module: Any) -> set[str]:
    """Placeholder names of an exported program's parameters, buffers and constants."""
    sig = getattr(module, "graph_signature", None)
    if sig is None:
        return set()
    names: set[str] = set()
    for attr in ("inputs_to_parameters", "inputs_to_buffers",
                 "inputs_to_lifted_tensor_constants"):
        names.update(getattr(sig, attr, {}) or {})
    return names


def _module_parameters(gm: GraphModule, target: str, tensors: dict[str, Tensor],
                       modules: dict[str, torch.nn.Module]) -> list[str]:
    """Initializer tensors for the parameters and buffers of the called module ``target``."""
    sub = modules.get(target)
    if sub is None:
        return []
    names = []
    for kind in (sub.named_parameters(), sub.named_buffers()):
        for pname, value in kind:
            tname = f"{target}.{pname}"
            if tname not in tensors:
                tensors[tname] = _initializer(tname, value)
            names.append(tname)
    return names


def read_fx(module: Any, *, name: str | None = None) -> Graph:
    """A Graph of a GraphModule or an ExportedProgram (see the module docstring)."""
    gm = graph_module_of(module)
    lifted = _lifted_inputs(module)
    modules = dict(gm.named_modules())
    nodes: list[Node] = []
    tensors: dict[str, Tensor] = {}
    inputs: list[str] = []
    outputs: list[str] = []
    for fx in gm.graph.nodes:
        if fx.op == "output":
            outputs.extend(dict.fromkeys(n.name for n in fx.all_input_nodes))
            continue
        shape, dtype, nbytes = value_nbytes(fx)
        if fx.op == "placeholder" and fx.name not in lifted:
            tensors[fx.name] = Tensor(fx.name, shape, dtype, nbytes)
            inputs.append(fx.name)
        elif fx.op == "placeholder":
            tensors[fx.name] = Tensor(fx.name, shape, dtype, nbytes, is_initializer=True)
        elif fx.op == "get_attr":
            tensors[fx.name] = _initializer(fx.name, _fetch_attr(gm, str(fx.target)))
        else:
            ins = list(dict.fromkeys(n.name for n in fx.all_input_nodes))
            if fx.op == "call_module":
                ins += _module_parameters(gm, str(fx.target), tensors, modules)
            target = fx.target if isinstance(fx.target, str) else op_name(fx, modules)
            domain = _domain(fx, modules)
            nodes.append(Node(index=len(nodes), name=fx.name, op_type=op_name(fx, modules),
                              domain=domain, attrs={"fx_op": fx.op, "target": str(target)},
                              inputs=ins, outputs=[fx.name]))
            tensors[fx.name] = Tensor(fx.name, shape, dtype, nbytes)
    label = name or type(gm).__name__
    return Graph.build(nodes, tensors, inputs, outputs, name=label, model=gm, source="torch.fx")


def _domain(fx: FxNode, modules: dict[str, torch.nn.Module]) -> str:
    """Where the op comes from: a called module's Python module, ``torch.Tensor`` for a
    method, empty for a function (its op name is already qualified)."""
    if fx.op == "call_module":
        sub = modules.get(str(fx.target))
        return type(sub).__module__ if sub is not None else ""
    return "torch.Tensor" if fx.op == "call_method" else ""


def _fetch_attr(gm: GraphModule, target: str) -> Any:
    value: Any = gm
    for part in target.split("."):
        value = getattr(value, part, None)
        if value is None:
            return None
    return value
