"""The pass manager: a strategy between its passes, and the record of each.

A strategy returns a partition: its clusters, devices, fallback reasons and a record of its own
in ``info``. :func:`run_pipeline` runs the pre-passes (problem → problem), the strategy and the
post-passes (partition → partition) in order, and keeps one :class:`PassRecord` per pass in
``info["pipeline"]``. Provenance (``strategy``, ``selector``, ``seconds``) is the caller's to set,
once, with :meth:`~clusterkit.result.model.Partition.derive`; the passes carry it through.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from clusterkit.constraints.core import Problem
from clusterkit.result.model import Partition

#: a named pass and its options: ``(name, func, options)``
Step = tuple[str, Callable[..., Any], dict[str, Any]]


@dataclass(frozen=True)
class PassRecord:
    """What one pass did: its name, its seconds and the clusters and fallback nodes before and
    after (``changed``: whether its clusters differ from the ones it was given)."""

    name: str
    seconds: float
    changed: bool
    clusters: tuple[int, int]
    fallback_nodes: tuple[int, int]

    def to_info(self) -> dict[str, Any]:
        return {"name": self.name, "seconds": round(self.seconds, 6), "changed": self.changed,
                "clusters": list(self.clusters), "fallback_nodes": list(self.fallback_nodes)}


def run_pass(part: Partition, step: Step) -> Partition:
    """``part`` through one post-pass, its :class:`PassRecord` appended to ``info["pipeline"]``
    of the result (a pass that changes nothing returns ``part`` itself; the record is on a copy)."""
    name, func, options = step
    start = time.perf_counter()
    out = func(part, **options)
    changed = out is not part and out.clusters != part.clusters  # a copy may change nothing
    record = PassRecord(name, time.perf_counter() - start, changed,
                        (len(part.clusters), len(out.clusters)),
                        (_fallback_nodes(part), _fallback_nodes(out)))
    return out.derive(info={"pipeline": [*part.info.get("pipeline", ()), record.to_info()]})


def _fallback_nodes(part: Partition) -> int:
    return sum(len(c.nodes) for c in part.clusters if c.device == part.fallback)


def run_pipeline(problem: Problem, strategy: Callable[..., Partition], options: dict[str, Any],
                 pre: Sequence[Step] = (), post: Sequence[Step] = ()) -> Partition:
    """``pre`` passes on ``problem``, ``strategy(problem, **options)``, then ``post`` passes in
    order (each recorded: :func:`run_pass`)."""
    for _, func, opts in pre:
        problem = func(problem, **opts)
    part = strategy(problem, **options)
    for step in post:
        part = run_pass(part, step)
    return part


__all__ = ["PassRecord", "Step", "run_pass", "run_pipeline"]
