"""Small facts about nodes, shapes and dtypes that every selector rule reads.

Unknown is a value here, not an error: a helper answers ``None`` when the graph does not know
(an unknown rank, a symbolic dim), and the caller decides whether unknown passes.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from clusterkit.graph.core import Node


#: The names of ONNX's default op domain.
DEFAULT_DOMAINS = ("", "ai.onnx")
#: ONNX TensorProto data types used by ``Cast``'s ``to`` attribute.
ONNX_TYPES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32",
              7: "int64", 9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64",
              16: "bfloat16"}
#: The floating-point dtypes.
FLOATS = frozenset({"float32", "float16", "float64", "bfloat16"})


def attr_of(node: "Node", name: str, default: Any = None) -> Any:
    """Attribute ``name`` of ``node``, ``default`` when absent."""
    return node.attrs.get(name, default)


def norm_axis(axis: int, rank: int) -> int:
    """``axis`` counted from the front (a negative axis counts from the end)."""
    return axis + rank if axis < 0 else axis


def dim_at(shape: tuple | None, axis: int) -> Any:
    """``shape[axis]`` (negative counts from the end), ``None`` when unknown or out of range."""
    if shape is None or not isinstance(axis, (int, np.integer)):
        return None
    if not -len(shape) <= axis < len(shape):
        return None
    return shape[axis]


def numel(shape: tuple | None) -> int | None:
    """Element count of a fully static shape (1 for a scalar), else ``None``."""
    if shape is None or not all(isinstance(d, int) for d in shape):
        return None
    return int(np.prod(shape, dtype=np.int64)) if shape else 1


def float_close(a: float, b: float, tol: float = 1e-6) -> bool:
    """``a`` and ``b`` are equal within ``tol`` (relative or absolute)."""
    return math.isclose(float(a), float(b), rel_tol=tol, abs_tol=tol)


def op_label(node: "Node") -> str:
    """The op type, or ``domain:op`` outside the default domain."""
    return node.op_type if node.domain in DEFAULT_DOMAINS else f"{node.domain}:{node.op_type}"


def default_key(node: "Node") -> str | None:
    """Table key of a node in the default scheme: its :func:`op_label`."""
    return op_label(node)
