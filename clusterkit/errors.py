"""One exception hierarchy for clusterkit.

Every message names the node, op, tensor, selector or constraint at fault, so that a one-line
CLI error is enough to find the problem. As in scikit-learn, every class derives from
:class:`ClusterkitError` *and* from the builtin it resembles, so a caller that knows nothing of
clusterkit can still write ``except ValueError``:

=====================  ================  =========================================================
class                  builtin           why
=====================  ================  =========================================================
``ModelLoadError``     ``ValueError``    the model is malformed or in a format clusterkit reads not
``WriteError``         ``OSError``       an output file could not be written (the old one is kept)
``GraphError``         ``ValueError``    a malformed graph (``CycleError`` is one)
``SelectorError``      ``ValueError``    a bad selector spec, or a selector answering wrongly
``ConstraintError``    ``ValueError``    malformed or contradictory constraints
``PartitionError``     ``ValueError``    an invalid partition
``StrategyError``      ``ValueError``    an unknown strategy name or a bad strategy option
``InfeasibleError``    ``ValueError``    a solver found no partition (a ``StrategyError``)
``MemoryShortfall...`` ``ValueError``    ``MemoryShortfallError``: no split fits the memory
``PlatformError``      ``ValueError``    a malformed platform file (a ``ConstraintError``)
``BackendError``       ``RuntimeError``  a backend failed to query, compile or run
``ExecutionError``     ``RuntimeError``  running a graph or a worker process failed
``RenderError``        ``RuntimeError``  a picture could not be drawn (Graphviz missing or failing)
``UsageError``         ``ValueError``    the command line's arguments do not parse
=====================  ================  =========================================================
"""

from __future__ import annotations


class ClusterkitError(Exception):
    """Base class of every error clusterkit raises on purpose."""


class ModelLoadError(ClusterkitError, ValueError):
    """A model file is missing, unreadable, or not in a format clusterkit reads."""


class WriteError(ClusterkitError, OSError):
    """An output file could not be written; the previous file, if any, is left as it was."""


class GraphError(ClusterkitError, ValueError):
    """The graph is malformed: a tensor read but never produced, a duplicate producer, ..."""


class CycleError(GraphError):
    """The input graph has a cycle; ``cycle`` lists node names along it."""

    def __init__(self, message: str, cycle: list[str]):
        super().__init__(message)
        self.cycle = cycle


class SelectorError(ClusterkitError, ValueError):
    """A selector or property misbehaved (raised, returned a non-bool, bad spec)."""


class ConstraintError(ClusterkitError, ValueError):
    """Constraints are malformed or contradict each other."""


class PartitionError(ClusterkitError, ValueError):
    """A partition is invalid; the message gives the precise reason."""


class StrategyError(ClusterkitError, ValueError):
    """Unknown strategy, bad strategy option, or a strategy that cannot run on this input."""


class InfeasibleError(StrategyError):
    """A solver found no partition: the constraints contradict each other (``status``
    ``"INFEASIBLE"``) or none was found in the time given (e.g. ``"UNKNOWN"``). ``reason`` says
    why; ``report`` is the solver's report (cpsat: a ``SolveReport``), or None."""

    def __init__(self, message: str, status: str, reason: str, report: object = None):
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.report = report

    def __reduce__(self):
        """Pickled with its fields (a worker process raises it, the parent reads them)."""
        return type(self), (str(self), self.status, self.reason, self.report)


class MemoryShortfallError(InfeasibleError):
    """No split of a placement instance fits the accelerators' memory (and no CPU takes the
    rest); the message names the device and the bytes over its limit."""

    def __init__(self, message: str, reason: str | None = None):
        super().__init__(message, "INFEASIBLE", reason or message)

    def __reduce__(self):
        return type(self), (str(self), self.reason)


class PlatformError(ConstraintError):
    """A platform file (accelerators, CPUs and their figures) is malformed; the message names
    the file and the field."""


class BackendError(ClusterkitError, RuntimeError):
    """A backend failed to query, compile or run, or got an unknown config key."""


class ExecutionError(ClusterkitError, RuntimeError):
    """Running a (fused) graph, or a task in a worker process, failed."""


class RenderError(ClusterkitError, RuntimeError):
    """A picture could not be drawn: Graphviz's ``dot`` is missing or failed on the graph."""


class UsageError(ClusterkitError, ValueError):
    """The command line's arguments do not parse (an unknown flag, a missing argument, a value
    of the wrong kind); ``prog`` is the (sub)command whose usage applies."""

    def __init__(self, message: str, prog: str = "clusterkit"):
        super().__init__(f"{message} (see '{prog} -h')")
        self.prog = prog


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C during a sweep of many models (not an error: it derives from
    ``KeyboardInterrupt``); ``results`` holds the models finished before it, in their order."""

    def __init__(self, message: str, results: list):
        super().__init__(message)
        self.results = results
