"""The generic rule vocabulary: a :data:`Check` and the combinators that build one.

A check is a function ``(ctx, node) -> None | reason``: ``None`` when the node passes, else a
short reason naming what failed. The combinators here (``check``, ``when``, ``first``, the opset
and constant-value checks, and the placeholders ``decided_by`` / ``not_a_restriction`` that name
why a documented condition needs no check) compose into the per-op rules of each selector.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional

import numpy as np

from clusterkit.selectors._context import GraphContext

if TYPE_CHECKING:
    from clusterkit.graph.core import Node


#: A check returns ``None`` when the node passes, else a short reason.
Check = Callable[[GraphContext, "Node"], Optional[str]]


def passes() -> Check:
    """A check that always passes."""
    return lambda ctx, node: None


def decided_by(mechanism: str) -> Check:
    """For a condition enforced by another mechanism, named for the reader (op availability
    under the settings, a global rule that reads the per-op data, ...): passes here."""
    return passes()


def not_a_restriction(what: str) -> Check:
    """For a condition that describes extra support or behaviour (a QDQ form the EP also
    takes, a version note, a lowering detail), not a limit: passes."""
    return passes()


def fail(message: str) -> Check:
    """A check that always refuses (e.g. an op not available under the chosen settings)."""
    return lambda ctx, node: message


def setting(ok: bool, message: str) -> Check:
    """A platform condition decided by a constructor parameter."""
    return (lambda ctx, node: None) if ok else (lambda ctx, node: message)


def check(pred: Callable[[GraphContext, "Node"], bool], message: str | Callable) -> Check:
    """Refuse with ``message`` (or ``message(ctx, node)``) when ``pred`` is false."""
    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        if pred(ctx, node):
            return None
        return message(ctx, node) if callable(message) else message
    return run


def when(cond: Callable[[GraphContext, "Node"], bool], *checks: Check) -> Check:
    """Apply ``checks`` only where ``cond`` holds."""
    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        if not cond(ctx, node):
            return None
        return first(*checks)(ctx, node)
    return run


def first(*checks: Check) -> Check:
    """The first refusal among ``checks``."""
    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        for c in checks:
            r = c(ctx, node)
            if r:
                return r
        return None
    return run


def opset_at_least(version: int) -> Check:
    """The model's default-domain opset is at least ``version`` (unknown passes)."""
    return check(lambda ctx, node: ctx.opset is None or ctx.opset >= version,
                 lambda ctx, node: f"model opset {ctx.opset} < {version}")


def opset_at_most(version: int) -> Check:
    """The model's default-domain opset is at most ``version`` (unknown passes)."""
    return check(lambda ctx, node: ctx.opset is None or ctx.opset <= version,
                 lambda ctx, node: f"model opset {ctx.opset} > {version}")


def value(pos: int, pred: Callable[[np.ndarray, GraphContext, "Node"], bool],
          message: str) -> Check:
    """A rule on the contents of constant input ``pos``; absent or unreadable passes."""
    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        v = ctx.input_value(node, pos)
        if v is None:
            return None
        try:
            ok = pred(v, ctx, node)
        except Exception:
            ok = True  # a value the rule cannot interpret is not refused
        if ok:
            return None
        shown = v.tolist() if v.size <= 8 else f"{v.size} values"
        return f"input {pos} value {shown}: {message}"
    return run


def non_negative(pos: int, what: str) -> Check:
    """Every value of constant input ``pos`` is >= 0 (refused as "negative ``what``")."""
    return value(pos, lambda v, ctx, node: bool((v >= 0).all()), f"negative {what}")


def all_zero(pos: int, message: str) -> Check:
    """Every value of constant input ``pos`` is zero (false, for a bool)."""
    return value(pos, lambda v, ctx, node: not v.any(), message)
