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
from clusterkit.passes.acceptable import make_acceptable
from clusterkit.passes.coalesce import coalesce
from clusterkit.passes.devices import choose_devices
from clusterkit.passes.horizontal import merge_levels
from clusterkit.passes.refine import refine
from clusterkit.passes.reject import reject_subgraphs
from clusterkit.result.model import Partition

#: ``pre(problem, **options) -> Problem``
ProblemPass = Callable[..., Problem]
#: ``post(partition, **options) -> Partition``
PartitionPass = Callable[..., Partition]
#: the problem → problem passes by name: the names a pipeline's ``pre`` steps take
PRE_PASSES: dict[str, ProblemPass] = {"choose_devices": choose_devices}
#: the partition → partition passes by name: the names its ``post`` steps take
POST_PASSES: dict[str, PartitionPass] = {
    "coalesce": coalesce, "merge_levels": merge_levels, "refine": refine,
    "make_acceptable": make_acceptable, "reject_subgraphs": reject_subgraphs,
}
#: a pass by name (of :data:`PRE_PASSES` or :data:`POST_PASSES`) and its options
Pass = tuple[str, dict[str, Any]]


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


def run_pass(part: Partition, step: Pass) -> Partition:
    """``part`` through one post-pass, its :class:`PassRecord` appended to ``info["pipeline"]``
    of the result (always a new partition: the record is on it)."""
    name, options = step
    start = time.perf_counter()
    out = POST_PASSES[name](part, **options)
    changed = out is not part and out.clusters != part.clusters  # a copy may change nothing
    record = PassRecord(name, time.perf_counter() - start, changed,
                        (len(part.clusters), len(out.clusters)),
                        (_fallback_nodes(part), _fallback_nodes(out)))
    return out.derive(info={"pipeline": [*part.info.get("pipeline", ()), record.to_info()]})


def _fallback_nodes(part: Partition) -> int:
    return sum(len(c.nodes) for c in part.clusters if c.device == part.fallback)


def run_passes(part: Partition, steps: Sequence[Pass]) -> Partition:
    """``part`` through the post-passes ``steps`` in order, each recorded (:func:`run_pass`)."""
    for step in steps:
        part = run_pass(part, step)
    return part


def run_pipeline(problem: Problem, strategy: Callable[..., Partition], options: dict[str, Any],
                 pre: Sequence[Pass] = (), post: Sequence[Pass] = ()) -> Partition:
    """``pre`` passes on ``problem``, ``strategy(problem, **options)``, then the ``post``
    passes (:func:`run_passes`)."""
    for name, opts in pre:
        problem = PRE_PASSES[name](problem, **opts)
    return run_passes(strategy(problem, **options), post)


__all__ = ["POST_PASSES", "PRE_PASSES", "Pass", "PartitionPass", "PassRecord", "ProblemPass",
           "run_pass", "run_passes", "run_pipeline"]
