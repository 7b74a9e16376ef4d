"""Checks on a node's attributes (an absent attribute takes the ONNX default given)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional

from clusterkit.selectors._checks import Check, check
from clusterkit.selectors._context import GraphContext
from clusterkit.selectors._facts import attr_of

if TYPE_CHECKING:
    from clusterkit.graph.core import Node


def attr_in(name: str, allowed: Iterable[Any], default: Any = None) -> Check:
    """Attribute ``name`` (``default`` when absent) is one of ``allowed``."""
    allowed = tuple(allowed)

    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        v = attr_of(node, name, default)
        if v in allowed:
            return None
        return f"attribute {name}={v!r} not in {list(allowed)}"
    return run


def attr_is(name: str, value: Any, default: Any = None) -> Check:
    """Attribute ``name`` (``default`` when absent) equals ``value``."""
    return attr_in(name, [value], default)


def attr_absent(name: str) -> Check:
    """Attribute ``name`` is not given."""
    return check(lambda ctx, node: name not in node.attrs,
                 lambda ctx, node: f"attribute {name}={node.attrs[name]!r} is not supported")


def attr_all(name: str, pred: Callable[[Any], bool], message: str) -> Check:
    """Every entry of list attribute ``name`` (absent passes) satisfies ``pred``."""
    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        v = node.attrs.get(name)
        if v is None or all(pred(x) for x in v):
            return None
        return f"attribute {name}={list(v)!r}: {message}"
    return run


def default_dilations() -> Check:
    """Every dilation is 1 (absent passes)."""
    return attr_all("dilations", lambda x: x == 1, "dilations must be 1")


def kernel_2d(not_1x1: bool = False) -> Check:
    """``kernel_shape`` has two entries (``not_1x1``: and is not 1x1)."""
    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        k = node.attrs.get("kernel_shape")
        if k is None or len(k) != 2:
            return f"kernel_shape {k!r} is not 2-D"
        if not_1x1 and list(k) == [1, 1]:
            return "kernel_shape 1x1 is not supported"
        return None
    return run
