"""Timing: the default wall-clock limit of a cpsat run, the share kept after the search for
reading the answer and the acceptance split, and the wall seconds of each step.

A run's ``time_limit`` is wall-clock seconds for all of it; the search ends :func:`reserve`
seconds before it so that what follows (checking, coalescing and splitting the answer) fits, and
the steps that cannot stop halfway (one heuristic of the warm start, one split) overrun it by at
most :data:`OVERHEAD` seconds on the bundled models.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from clusterkit.engines.cpsat.solve import Clock

#: the default ``time_limit``: wall-clock seconds
TIME_LIMIT = 60.0
#: the stated overhead: a run returns within ``time_limit + OVERHEAD`` wall seconds (the largest
#: overrun measured: 2.7 s on llama_48l_dynamic, 11,298 nodes, limit 5 s, on a loaded two-core
#: machine: the models of its components are built before the search can stop)
OVERHEAD = 3.0
#: share of the time limit after which the warm start runs no further heuristic
WARM_SHARE = 0.5
#: share of the time limit kept after the search (at most :data:`RESERVE_MAX` seconds)
RESERVE_SHARE = 0.1
RESERVE_MAX = 5.0


def after_search_reserve(clock: Clock) -> float:
    """Wall seconds the search leaves before the deadline for reading and splitting."""
    return min(RESERVE_SHARE * clock.limit, RESERVE_MAX)


class Phases:
    """The wall seconds of a run's steps, each measured from the end of the one before."""

    def __init__(self, clock: Clock):
        self.clock = clock
        self.last = clock.start
        self.seconds: dict[str, float] = {}

    def mark(self, step: str) -> None:
        """Record ``step`` as ending now."""
        now = time.perf_counter()
        self.seconds[step] = round(now - self.last, 4)
        self.last = now
