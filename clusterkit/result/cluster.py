"""A cluster, and what the partition's helpers read of a partition.

:class:`PartitionLike` is the part of :class:`~clusterkit.result.model.Partition` that the
placement report, the summary line and the JSON writer read, so that those modules sit below
the class that calls them and no module of the package imports another in a loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, Sequence

if TYPE_CHECKING:
    from clusterkit.constraints.core import Problem
    from clusterkit.graph.core import Graph
    from clusterkit.result.reasons import Reason


@dataclass(frozen=True)
class Cluster:
    """One cluster: ``nodes`` are topological indices, sorted. Frozen: a partition's clusters
    never change once it is made (its views are computed once)."""

    id: int
    device: str
    nodes: tuple[int, ...]


class PartitionLike(Protocol):
    """What the report and JSON writer read of a partition (see
    :class:`~clusterkit.result.model.Partition`)."""

    strategy: str
    selector: str
    seconds: float
    info: dict[str, Any]
    fallback_reasons: dict[int, Reason]

    @property
    def problem(self) -> Problem: ...

    @property
    def clusters(self) -> Sequence[Cluster]: ...

    @property
    def graph(self) -> Graph: ...

    @property
    def fallback(self) -> str: ...

    def metrics(self) -> dict[str, Any]: ...

    def placement(self) -> dict[str, Any]: ...
