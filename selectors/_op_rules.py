"""Rules about particular ONNX ops that several accelerators state alike: reading Resize's
scales, Clip's bounds and a Slice's extent, the Resize downscale rule, an op's ``axis`` (the
Softmax family's opset default, "axis is the last dim"), a Reduce op's empty axes, and a Shape
op's ``start``/``end``.

Each helper answers ``None`` (or passes) when the constant it needs cannot be read.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Iterable, Optional

import numpy as np

from clusterkit.selectors._checks import Check, check
from clusterkit.selectors._context import GraphContext
from clusterkit.selectors._facts import attr_of, dim_at, norm_axis, numel
from clusterkit.selectors._tensor_checks import const

if TYPE_CHECKING:
    from clusterkit.graph.core import Node


def downscale_divides(scales: Iterable[float], dims: Iterable[Any]) -> bool:
    """Resize rule shared by CoreML, NNAPI and XNNPACK: every scale is positive, and a
    downscale (scale < 1) must be 1/k for an integer k that divides the dim (when known)."""
    for scale, dim in zip(scales, dims):
        if scale <= 0:
            return False
        if scale < 1:
            inv = 1 / scale
            if not math.isclose(inv, round(inv), rel_tol=1e-6):
                return False
            if isinstance(dim, int) and dim % round(inv):
                return False
    return True


def scales_pos(ctx: GraphContext, node: "Node") -> int:
    """Position of Resize's ``scales`` input (1 for opset 10 / Upsample, else 2)."""
    if node.op_type == "Upsample" or (ctx.opset is not None and ctx.opset < 11):
        return 1
    return 2


def resize_scales(ctx: GraphContext, node: "Node") -> list[float] | None:
    """Resize scales from the ``scales`` constant or from ``sizes`` and a static input shape."""
    s = ctx.input_value(node, scales_pos(ctx, node))
    if s is not None and s.size:
        return [float(x) for x in s.ravel()]
    sizes = ctx.input_value(node, 3) if scales_pos(ctx, node) == 2 else None
    shape = ctx.shape(node, 0)
    if sizes is None or not sizes.size or shape is None or len(shape) != sizes.size:
        return None
    if not all(isinstance(d, int) and d > 0 for d in shape):
        return None
    return [float(z) / d for z, d in zip(sizes.ravel().tolist(), shape)]


def resize_const() -> Check:
    """Resize: ``scales`` or ``sizes`` is given, and the given one is constant."""
    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        sp = scales_pos(ctx, node)
        given = [p for p in ((sp, 3) if sp == 2 else (sp,)) if ctx.has_input(node, p)
                 and (ctx.shape(node, p) is None or numel(ctx.shape(node, p)) != 0)]
        if not given:
            return "neither scales nor sizes is given"
        return const(*given)(ctx, node)
    return run


def clip_bounds(ctx: GraphContext, node: "Node") -> tuple[float, float] | None:
    """Clip's (min, max) when readable (absent bounds are -inf/+inf)."""
    if ctx.opset is not None and ctx.opset < 11:
        return (float(node.attrs.get("min", -math.inf)), float(node.attrs.get("max", math.inf)))
    out = []
    for pos, default in ((1, -math.inf), (2, math.inf)):
        if not ctx.has_input(node, pos):
            out.append(default)
            continue
        v = ctx.input_value(node, pos)
        if v is None or v.size != 1:
            return None
        out.append(float(v.ravel()[0]))
    return out[0], out[1]


def slice_is_empty(ctx: GraphContext, node: "Node") -> bool | None:
    """Does a Slice select zero elements on some axis? ``None`` when not decidable."""
    shape = ctx.shape(node, 0)
    starts, ends = ctx.input_value(node, 1), ctx.input_value(node, 2)
    if shape is None or starts is None or ends is None:
        return None
    axes = ctx.input_value(node, 3) if ctx.has_input(node, 3) else np.arange(len(starts))
    steps = ctx.input_value(node, 4) if ctx.has_input(node, 4) else np.ones(len(starts), int)
    if axes is None or steps is None:
        return None
    for s, e, a, st in zip(starts.ravel().tolist(), ends.ravel().tolist(),
                           axes.ravel().tolist(), steps.ravel().tolist()):
        dim = dim_at(shape, int(a))
        if not isinstance(dim, int) or st == 0:
            continue
        s = s + dim if s < 0 else s
        e = e + dim if e < 0 else e
        if st > 0:
            s, e = min(max(s, 0), dim), min(max(e, 0), dim)
            if s >= e:
                return True
        else:
            s, e = min(max(s, -1), dim - 1), min(max(e, -1), dim - 1)
            if s <= e:
                return True
    return False


# ---------------------------------------------------------------------- axes
def axis_dim(ctx: GraphContext, node: "Node", default: int = 0) -> Any:
    """Input 0's dim at the node's ``axis`` attribute (``default`` when absent)."""
    return ctx.dim(node, 0, attr_of(node, "axis", default))


def softmax_axis(ctx: GraphContext, node: "Node") -> int:
    """The ``axis`` of a Softmax-family op (Softmax, LogSoftmax, Hardmax) with its opset's
    default: -1 from opset 13 (or an unknown opset), 1 before."""
    return attr_of(node, "axis", -1 if (ctx.opset or 13) >= 13 else 1)


def last_axis(default: int | None = None) -> Check:
    """The ``axis`` attribute (``default`` when absent; ``None``: :func:`softmax_axis`) names
    the last dim of input 0; an unknown rank passes."""
    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        r = ctx.rank(node, 0)
        axis = softmax_axis(ctx, node) if default is None else attr_of(node, "axis", default)
        return None if r is None or norm_axis(axis, r) == r - 1 else "axis is not the last dim"
    return run


def reduce_axes_empty(ctx: GraphContext, node: "Node") -> bool:
    """A Reduce op's axes (attribute, or input 1 from opset 18) are absent or empty."""
    if "axes" in node.attrs:
        return not node.attrs["axes"]
    return not ctx.has_input(node, 1) or numel(ctx.shape(node, 1)) == 0


def shape_slice_nonempty(ctx: GraphContext, node: "Node") -> bool:
    """A Shape op's ``start``/``end`` select at least one dim (unknown rank passes)."""
    r = ctx.rank(node, 0)
    if r is None:
        return True
    start = norm_axis(int(attr_of(node, "start", 0)), r)
    end = norm_axis(int(attr_of(node, "end", r)), r)
    return min(max(end, 0), r) > min(max(start, 0), r)


# ---------------------------------------------------------------------- Resize output
def output_hw_above_one(ctx: GraphContext, node: "Node") -> bool:
    """Output H and W are known and > 1 (what ``pytorch_half_pixel`` needs to equal
    ``half_pixel``)."""
    y = ctx.shape(node, 0, out=True)
    return y is not None and all(isinstance(d, int) and d > 1 for d in y[-2:])


def no_noop_on_empty_axes() -> Check:
    """A Reduce op is refused with ``noop_with_empty_axes=1`` and empty axes."""
    return check(lambda ctx, node: not (attr_of(node, "noop_with_empty_axes", 0) == 1
                                        and reduce_axes_empty(ctx, node)),
                 "empty axes with noop_with_empty_axes=1")
