"""How a selector ties checks to its table: :class:`Rule` (a check deciding the conditions whose
text contains a fragment), :class:`Note` (why conditions stay undecided) and :class:`Fusion`
(an op taken only inside one of the table's fusion patterns).

Rules name their conditions by a text fragment that is matched against the table when the
property is built, so the rules cannot silently drift from the data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional

from clusterkit.selectors._checks import Check
from clusterkit.selectors._context import GraphContext

if TYPE_CHECKING:
    from clusterkit.graph.core import Node


EACH = "<each op having the condition>"
"""Pass as ``ops`` to a :class:`Rule` to cover every op that has a matching condition."""


@dataclass(frozen=True)
class Rule:
    """``check`` decides the table condition(s) of ``ops`` whose text contains ``covers``.

    ``ops`` is a table key, a list of keys, ``"*"`` (a global condition: the check runs for
    every op except ``skip``) or :data:`EACH`. ``count`` is how many conditions of each op the
    fragment must match (default exactly one). ``fused`` marks a fusion-context rule: it may
    consult whether neighbours are taken (see :func:`in_pattern`), so it is skipped when a
    neighbour's own acceptance is asked.
    """

    ops: Any
    covers: str
    check: Check
    count: int = 1
    skip: tuple = ()
    fused: bool = False


@dataclass(frozen=True)
class Note:
    """Why the condition(s) of ``ops`` containing ``covers`` are not decided (they stay in
    :attr:`TableProperty.undecidable`)."""

    ops: Any
    covers: str
    why: str
    count: int = 1


R = Rule


N = Note


@dataclass(frozen=True)
class Fusion:
    """A fusion-only op: ``op`` is taken only inside a chain match of one of ``patterns``
    (indices into the table's patterns) whose other nodes this property also takes, and for
    which ``where(ctx, match)`` holds. The match's nodes must share the op's cluster."""

    op: str
    patterns: tuple[int, ...]
    where: Optional[Callable[[GraphContext, tuple[int, ...]], bool]] = None


def in_pattern(fusion: Fusion, message: str) -> Check:
    """The check of a :class:`Fusion` (used in a ``fused=True`` rule)."""
    def run(ctx: GraphContext, node: "Node") -> Optional[str]:
        return None if ctx.prop.partner_sets(ctx, node, fusion) else message
    return run


def constant_inputs_only(subgraph: Any) -> Optional[str]:
    """A subgraph rule: onnxruntime folds a partition whose inputs are all constant (or that
    has none) instead of handing it to the execution provider."""
    if not subgraph.inputs:
        return "every input of the partition is a constant"
    return None
