"""A cluster its device's compiler refuses: split into pieces the compiler takes.

The device's compiler has the last word on a cluster: when compiling a fused step fails, the
cluster is carved as the acceptable split carves an unacceptable one
(:func:`clusterkit.passes.acceptable.split_cluster`: grown again with the device's selector
from its first remaining node, largest piece first, within the device's limits), with one more
condition on every piece: the backend compiles it. Only the nodes no piece holds fall back to
the host, each with the compiler's message as its reason. Every verdict is asked once per node
set, and a piece that compiled is kept, so no piece is compiled twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from clusterkit.constraints.acceptance import Acceptance, acceptance
from clusterkit.constraints.core import Problem
from clusterkit.passes.acceptable import piece_order, split_cluster


@dataclass
class Carved:
    """What became of a refused cluster: ``units`` in an order every edge between them follows,
    each ``(nodes, compiled)`` — a piece the device compiled (``compiled`` is what the compile
    function returned for it) or a node that falls back (``compiled`` None) —, and each fallen
    node's reason."""

    units: list[tuple[list[int], object | None]] = field(default_factory=list)
    fallen: dict[int, str] = field(default_factory=dict)

    @property
    def pieces(self) -> int:
        return sum(1 for _, c in self.units if c is not None)


class _CompiledAcceptance:
    """A problem's :class:`Acceptance` with the device compiler's verdict as one more
    condition (duck-typed for :func:`split_cluster`: ``problem`` and ``verdict``)."""

    def __init__(self, acc: Acceptance, compile_piece: Callable[[list[int]], object],
                 refused: tuple[list[int], str]):
        self.problem = acc.problem
        self._acc = acc
        self._compile = compile_piece
        self.compiled: dict[tuple[int, ...], object] = {}
        self.refusals: dict[tuple[int, ...], str] = {tuple(refused[0]): refused[1]}

    def verdict(self, nodes: Sequence[int], d: int) -> str | None:
        why = self._acc.verdict(nodes, d)
        if why is not None:
            return why
        key = tuple(nodes)
        if key in self.compiled:
            return None
        if key not in self.refusals:
            try:
                self.compiled[key] = self._compile(list(nodes))
            except Exception as exc:  # the device's compiler refused: its message is the verdict
                self.refusals[key] = _message(exc)
                return self.refusals[key]
            return None
        return self.refusals[key]


def carve_refused(problem: Problem, device: str, nodes: list[int], reason: str,
                  compile_piece: Callable[[list[int]], object],
                  untaken: Sequence[int] = ()) -> Carved:
    """The pieces of the cluster ``nodes`` (sorted) on ``device`` that ``compile_piece``
    compiles (it raises when the device refuses), the cluster itself having been refused for
    ``reason``; the rest falls back. ``untaken``: nodes the device's compiler already said it
    does not take (they fall back at once, and no piece holds them). A carving whose units
    would depend on each other in a cycle sends the whole cluster back, with ``reason``."""
    d = problem.devices.index(device)
    acc = _CompiledAcceptance(acceptance(problem), compile_piece, (nodes, reason))
    left = set(untaken)
    rest = [v for v in nodes if v not in left]
    pieces, fallen = split_cluster(problem, acc, d, rest) if rest else ([], {})  # type: ignore
    fallen = {**dict.fromkeys(sorted(left), reason), **fallen}
    order = piece_order(problem, nodes, pieces)
    if order is None:  # pragma: no cover - split_cluster returns acyclic carvings
        return Carved([([v], None) for v in nodes], dict.fromkeys(nodes, reason))
    units = [(unit, None if len(unit) == 1 and unit[0] in fallen
              else acc.compiled[tuple(unit)]) for unit in order]
    return Carved(units, {v: why or reason for v, why in fallen.items()})


def _message(exc: BaseException) -> str:
    """A compiler's refusal in one line."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:500]
