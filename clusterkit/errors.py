"""One exception hierarchy for clusterkit.

Every message names the node, op, tensor, selector or constraint at fault, so that a one-line
CLI error is enough to find the problem.
"""

from __future__ import annotations


class ClusterkitError(Exception):
    """Base class of every error clusterkit raises on purpose."""


class ModelLoadError(ClusterkitError):
    """A model file is missing, unreadable, or not in a format clusterkit reads."""


class GraphError(ClusterkitError, ValueError):
    """The graph is malformed: a tensor read but never produced, a duplicate producer, ..."""


class CycleError(GraphError):
    """The input graph has a cycle; ``cycle`` lists node names along it."""

    def __init__(self, message: str, cycle: list[str]):
        super().__init__(message)
        self.cycle = cycle


class SelectorError(ClusterkitError):
    """A selector or property misbehaved (raised, returned a non-bool, bad spec)."""


class ConstraintError(ClusterkitError):
    """Constraints are malformed or contradict each other."""


class PartitionError(ClusterkitError):
    """A partition is invalid; the message gives the precise reason."""


class StrategyError(ClusterkitError):
    """Unknown strategy, bad strategy option, or a strategy that cannot run on this input."""


class BackendError(ClusterkitError):
    """A backend failed to query, compile or run, or got an unknown config key."""


class ExecutionError(ClusterkitError):
    """Running a (fused) graph failed."""
