"""Checks on a node's input and output tensors: constness, rank, static dims, dtypes, counts,
and the quantization of inputs coming from ``DequantizeLinear``.

Policy: an absent optional tensor passes, and an unknown rank/dim/dtype passes unless the check
is asked to require it (``required=True``, :func:`static`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterable, Optional, Sequence

from clusterkit.selectors._checks import Check, check
from clusterkit.selectors._context import GraphContext
from clusterkit.selectors._facts import numel

if TYPE_CHECKING:
    from clusterkit.graph.core import Node



def _present(ctx: GraphContext, node: "Node", pos: int, out: bool) -> bool:
    """Is input (or output) ``pos`` given?"""
    return bool(pos < len(node.outputs) and node.outputs[pos]) if out else ctx.has_input(node, pos)

def const(*positions: int, required: bool = False) -> Check:
    """Inputs at ``positions`` must be constant when present (``required``: and present)."""
    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        for p in positions:
            if not ctx.has_input(node, p):
                if required:
                    return f"input {p} must be given (as a constant)"
                continue
            t = ctx.input(node, p)
            if t is None or not t.is_constant:
                return f"input {p} ({node.inputs[p]!r}) must be constant"
        return None
    return run


def not_const(pos: int = 0) -> Check:
    """Input ``pos`` must not be a constant."""
    # (None is tested first: mypy does not narrow a call made twice)
    return check(lambda ctx, node: not (ctx.input(node, pos) is not None
                                        and ctx.input(node, pos).is_constant),  # type: ignore[union-attr]
                 f"input {pos} must not be a constant/initializer")


def absent_input(pos: int) -> Check:
    """Input ``pos`` is not given."""
    return check(lambda ctx, node: not ctx.has_input(node, pos),
                 f"input {pos} is not supported")


def rank(pos: int = 0, lo: int | None = None, hi: int | None = None,
         allowed: Iterable[int] | None = None, out: bool = False,
         required: bool = False) -> Check:
    """Rank of input (or output) ``pos`` in ``[lo, hi]`` / in ``allowed``; unknown passes
    unless ``required``; an absent tensor passes."""
    allowed = None if allowed is None else frozenset(allowed)
    what = "output" if out else "input"

    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        if not _present(ctx, node, pos, out):
            return None
        r = ctx.rank(node, pos, out)
        if r is None:
            return f"{what} {pos} has unknown rank" if required else None
        if allowed is not None and r not in allowed:
            return f"{what} {pos} has rank {r}, needs {' or '.join(map(str, sorted(allowed)))}"
        if lo is not None and r < lo:
            return f"{what} {pos} has rank {r} < {lo}"
        if hi is not None and r > hi:
            return f"{what} {pos} has rank {r} > {hi}"
        return None
    return run


def all_inputs(check_one: Callable[[int], Check]) -> Check:
    """Apply a per-position check to every present input."""
    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        for p, name in enumerate(node.inputs):
            if name:
                r = check_one(p)(ctx, node)
                if r:
                    return r
        return None
    return run


def static(pos: int = 0, dims: Sequence[int] | None = None, out: bool = False) -> Check:
    """Input/output ``pos`` has a known shape whose ``dims`` (all when None; negative indices
    count from the end) are known integers."""
    what = "output" if out else "input"

    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        if not _present(ctx, node, pos, out):
            return None
        s = ctx.shape(node, pos, out)
        if s is None:
            return f"{what} {pos} has unknown shape"
        idx = range(len(s)) if dims is None else dims
        for d in idx:
            if -len(s) <= d < len(s) and not isinstance(s[d], int):
                return f"{what} {pos} dim {d} is not static ({s[d]!r})"
        return None
    return run


def all_static(outputs: bool = False) -> Check:
    """Every present input (and output when asked) has a fully static shape."""
    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        for p, name in enumerate(node.inputs):
            if name:
                r = static(p)(ctx, node)
                if r:
                    return r
        if outputs:
            for p, name in enumerate(node.outputs):
                if name:
                    r = static(p, out=True)(ctx, node)
                    if r:
                        return r
        return None
    return run


def no_zero_dims(positions: Sequence[int] | None = None) -> Check:
    """No zero-sized dim in the given inputs (all present inputs when None)."""
    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        for p in (range(len(node.inputs)) if positions is None else positions):
            s = ctx.shape(node, p) if ctx.has_input(node, p) else None
            if s is not None and any(d == 0 for d in s):
                return f"input {p} has a zero-sized dim {tuple(s)}"
        return None
    return run


def dtype_in(pos: int, allowed: Iterable[str], out: bool = False) -> Check:
    """Dtype of input/output ``pos`` in ``allowed`` (unknown or absent passes)."""
    allowed = frozenset(allowed)
    what = "output" if out else "input"

    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        d = ctx.dtype(node, pos, out)
        if d is None or d in allowed:
            return None
        return f"{what} {pos} dtype {d} not in {sorted(allowed)}"
    return run


def same_dtype(positions: Sequence[int]) -> Check:
    """The given inputs at ``positions`` share one dtype (unknown passes)."""
    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        ds = {ctx.dtype(node, p) for p in positions if ctx.has_input(node, p)} - {None}
        if len(ds) > 1:
            return f"inputs {list(positions)} have different dtypes {sorted(ds)}"  # type: ignore[type-var]  # None removed
        return None
    return run


def table_dtypes(pos: int = 0, aliases: dict[str, str] | None = None) -> Check:
    """Input ``pos`` dtype in the op's table ``dtypes`` (qualifiers resolved by the property's
    settings); ``aliases`` maps a dtype to one it is accepted as (e.g. float64 -> float32)."""
    aliases = aliases or {}

    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        allowed = ctx.prop.allowed_dtypes(ctx.prop.key_of(node) or "")
        d = ctx.dtype(node, pos)
        if allowed is None or d is None or d in allowed or aliases.get(d) in allowed:
            return None
        return f"input {pos} dtype {d} not in {sorted(allowed)}"
    return run


def per_tensor_dq(positions: Sequence[int], only_nonconst: bool = False) -> Check:
    """Inputs produced by a DequantizeLinear must be per-tensor quantized (scalar scale)."""
    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        for p in positions:
            dq = ctx.dq_producer(node, p)
            if dq is None:
                continue
            if only_nonconst:
                src = ctx.input(dq, 0)
                if src is not None and src.is_constant:
                    continue
            n = numel(ctx.shape(dq, 1))
            if n is not None and n > 1:
                return f"input {p} is per-channel quantized ({n} scales); per-tensor only"
        return None
    return run


def no_external_initializers() -> Check:
    """No input is an initializer stored as external data."""
    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        for name in node.inputs:
            t = ctx.tensor(name)
            if t is not None and t.is_initializer and ctx.external(name):
                return f"initializer {name!r} is stored as external data"
        return None
    return run


def outputs_used_at_most(count: int) -> Check:
    """Only the first ``count`` outputs may be present and read."""
    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        for p in range(count, len(node.outputs)):
            if node.outputs[p] and ctx.used(node, p):
                return f"output {p} ({node.outputs[p]!r}) is used; only {count} supported"
        return None
    return run


def outputs_at_most(count: int) -> Check:
    """At most ``count`` outputs are given."""
    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        n = sum(1 for o in node.outputs if o)
        return None if n <= count else f"node has {n} outputs, only {count} supported"
    return run


def inputs_between(lo: int, hi: int | None = None) -> Check:
    """The node has ``lo`` to ``hi`` (unbounded when ``None``) given inputs."""
    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        n = sum(1 for i in node.inputs if i)
        if n < lo or (hi is not None and n > hi):
            want = f"{lo}" if hi == lo else f"{lo}..{hi if hi is not None else ''}"
            return f"node has {n} inputs, needs {want}"
        return None
    return run


def io_dtypes_in(allowed: Iterable[str], suffix: str = "is not supported") -> Check:
    """Every known dtype among the node's inputs and outputs is in ``allowed``."""
    allowed = frozenset(allowed)

    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        # (None removed from the set)
        bad = sorted({t.dtype for t in ctx.io_tensors(node)} - allowed - {None})  # type: ignore[type-var]
        return f"tensor type {bad} {suffix}" if bad else None
    return run


def io_rank_at_most(hi: int) -> Check:
    """Every known input and output tensor of the node has rank at most ``hi`` (an unknown
    shape passes); the refusal names the first tensor above it."""
    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        for t in ctx.io_tensors(node):
            if t.shape is not None and len(t.shape) > hi:
                return f"tensor {t.name!r} has rank {len(t.shape)} > {hi}"
        return None
    return run
