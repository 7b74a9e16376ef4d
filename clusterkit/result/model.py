"""The partition: a cluster and a device for every node, its constructors and derived views.

A partition's clusters cannot be edited: :class:`Cluster` is frozen, its ``nodes`` and
``Partition.clusters`` are tuples, and ``clusters`` (like ``problem``) cannot be reassigned, so
every view derived from them (assignment, devices, edges, order, metrics) is made once and never
goes stale. A partition that changes is a new one: :meth:`Partition.derive` makes it from the
old one, carrying its provenance (strategy, selector, seconds, solver report, info, fallback
reasons); the placement report and the metrics are views of the clusters, never copied. Any
node ids can be given, so a hand-made (possibly invalid) partition can be represented and
:meth:`Partition.validate` can say exactly what is wrong with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np

from clusterkit._deprecated import renamed_attribute
from clusterkit.constraints.core import Problem
from clusterkit.errors import PartitionError
from clusterkit.graph.algorithms import fifo_order, gc_paused, quotient_edges
from clusterkit.graph.core import HOST, Graph
from clusterkit.result.cluster import Cluster
from clusterkit.result.json_format import cluster_nodes, partition_json, read_partition_json
from clusterkit.result.metrics import figures_of, partition_metrics
from clusterkit.result.reasons import Reason
from clusterkit.result.report import placement_report, summary_line
from clusterkit.result.validate import assignment_of, check_partition

#: the fields the derived views depend on: set once, when the partition is made
_FIXED = frozenset({"problem", "clusters", "fallback_reasons"})


@dataclass
class Partition:
    """A partition of ``problem.graph``. Build one with :meth:`from_assignment` (engines) or
    :meth:`from_clusters` (anything hand-made); check it with :meth:`validate`."""

    problem: Problem
    clusters: tuple[Cluster, ...]
    strategy: str = "manual"
    selector: str = ""
    solve_report: Any = field(default=None, kw_only=True)  # an exact engine's typed figures
    seconds: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)
    #: why each fallback node the engine can explain is there
    #: (see :mod:`clusterkit.result.reasons`)
    fallback_reasons: dict[int, Reason] = field(default_factory=dict)
    #: views derived from ``clusters`` (assignment, device per cluster, metrics), each made
    #: once: the clusters never change
    _views: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.clusters, tuple):  # any iterable of clusters is taken
            self.__dict__["clusters"] = tuple(self.clusters)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _FIXED and name in self.__dict__:
            raise AttributeError(f"Partition.{name} cannot be changed: make a new Partition "
                                 "(Partition.derive)")
        super().__setattr__(name, value)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_assignment(cls, problem: Problem, labels: Sequence[int] | np.ndarray,
                        devices: Sequence[int] | np.ndarray, **kwargs) -> "Partition":
        """Build from a cluster label per node and a device index per node (-1 = fallback).
        Fallback nodes become singleton clusters, except that a together group on the fallback
        stays one cluster. Cluster ids are renumbered in order of their first node."""
        labels = np.asarray(labels, dtype=np.int64)
        devices = np.asarray(devices, dtype=np.int64)
        n = problem.n
        if labels.shape != (n,) or devices.shape != (n,):
            raise PartitionError(f"expected {n} labels and devices, got {labels.shape}, "
                                 f"{devices.shape}")
        if n == 0:
            return cls(problem, (), **kwargs)
        key = labels.copy()
        fb = devices < 0
        # fallback nodes: a key of their own, unless in a together group
        base = int(labels.max()) + 1
        gkey = np.where(problem.group_of >= 0, base + problem.group_of,
                        base + len(problem.groups) + np.arange(n))
        key[fb] = gkey[fb]
        # one sort (by key, members ascending) instead of one array per cluster: 1e6 nodes
        order = np.argsort(key, kind="stable")
        sk = key[order]
        starts = np.flatnonzero(np.concatenate(([True], sk[1:] != sk[:-1])))
        ends = np.append(starts[1:], n)
        first = order[starts]
        mixed = np.flatnonzero(devices[order] != np.repeat(devices[first], ends - starts))
        if len(mixed):
            v = int(order[mixed[0]])
            raise PartitionError(f"node {problem.graph.nodes[v].name!r} has label {labels[v]} "
                                 "but another device than the rest of its cluster")
        rank = np.argsort(first, kind="stable")  # cluster ids in order of their first node
        names = list(problem.devices) + [problem.fallback]  # index -1 = fallback
        dev_of = devices[first][rank]
        flat = tuple(order.tolist())  # a slice of a tuple is a tuple: the clusters' nodes
        st, en = starts[rank].tolist(), ends[rank].tolist()
        with gc_paused():  # millions of small lists; map() builds them at C speed
            clusters = tuple(map(Cluster, range(len(st)), map(names.__getitem__, dev_of.tolist()),
                                 map(flat.__getitem__, map(slice, st, en))))
        out = cls(problem, clusters, **kwargs)
        pos = np.empty(len(rank), dtype=np.int64)
        pos[rank] = np.arange(len(rank), dtype=np.int64)
        assignment = np.empty(n, dtype=np.int64)
        assignment[order] = np.repeat(pos, ends - starts)
        out._views["assignment"], out._views["devices"] = assignment, dev_of
        return out

    def derive(self, labels: Sequence[int] | np.ndarray | None = None,
               devices: Sequence[int] | np.ndarray | None = None, *,
               clusters: Iterable[Cluster] | None = None, problem: Problem | None = None,
               info: dict[str, Any] | None = None, keep_info: bool = True,
               reasons: dict[int, Reason] | None = None, **changes: Any) -> "Partition":
        """A new partition made from this one, the one way partitions are derived: its
        clusters from a cluster label and a device index per node (:meth:`from_assignment`),
        or ``clusters``, or this one's; on ``problem`` (default: this one's); the provenance
        carried (strategy, selector, seconds, solver report), ``info`` and the fallback
        reasons copied and updated with ``info`` and ``reasons`` (``keep_info=False``: ``info``
        replaces this one's, a strategy's own record); ``changes``: other fields."""
        problem = self.problem if problem is None else problem
        carried = {"strategy": self.strategy, "selector": self.selector,
                   "seconds": self.seconds, "solve_report": self.solve_report,
                   "info": {**(self.info if keep_info else {}), **(info or {})},
                   "fallback_reasons": {**self.fallback_reasons, **(reasons or {})}, **changes}
        if labels is not None:
            if devices is None:
                raise PartitionError("Partition.derive: labels need devices")
            return Partition.from_assignment(problem, labels, devices, **carried)
        out = Partition(problem, self.clusters if clusters is None else tuple(clusters),
                        **carried)
        if clusters is None and problem is self.problem:  # the same clusters: the same views
            out._views.update(self._views)
            if reasons:
                out._views.pop("placement", None)
        return out

    @classmethod
    def from_clusters(cls, problem: Problem, clusters: Iterable[tuple[str, Iterable[int]]],
                      **kwargs) -> "Partition":
        """Build from ``(device, node ids)`` pairs, as given (not checked: see validate)."""
        out = tuple(Cluster(k, dev, tuple(sorted(int(v) for v in nodes)))
                    for k, (dev, nodes) in enumerate(clusters))
        return cls(problem, out, **kwargs)

    @classmethod
    def from_json(cls, problem: Problem, data: dict | str, *, strategy: str | None = None
                  ) -> "Partition":
        """Read a partition JSON, a file or its loaded dict (docs/design.md format; ``nodes`` are
        source indices), as given (not checked: see validate); ``strategy`` names it (default:
        the file's strategy)."""
        data = read_partition_json(data)
        g = problem.graph
        clusters = [(dev, g.source_to_index[nodes].tolist())
                    for dev, nodes in cluster_nodes(data, g.n, "partition JSON")]
        label = str(data.get("strategy", "plan")) if strategy is None else strategy
        return cls.from_clusters(problem, clusters, strategy=label,
                                 selector=str(data.get("selector", "")))

    # ------------------------------------------------------------------ views
    @property
    def graph(self) -> Graph:
        return self.problem.graph

    @property
    def fallback(self) -> str:
        return self.problem.fallback

    def assignment(self) -> np.ndarray:
        """Cluster position per node (a new array); raises if a node is in no cluster or in
        two."""
        views = self._views
        if "assignment" not in views:
            views["assignment"] = assignment_of(self.graph, self.clusters)
        return views["assignment"].copy()

    def device_indices(self) -> np.ndarray:
        """Device index per cluster position (a new array; -1 for the fallback)."""
        views = self._views
        if "devices" not in views:
            p = self.problem
            views["devices"] = np.asarray([p.device_index(c.device) for c in self.clusters],
                                          dtype=np.int64)
        return views["devices"].copy()

    def cluster_edges(self) -> tuple[np.ndarray, np.ndarray]:
        """The distinct edges between clusters, as arrays of cluster positions (sorted)."""
        views = self._views
        if "edges" not in views:
            g = self.graph
            views["edges"] = quotient_edges(self.assignment(), g.edge_src, g.edge_dst)
        src, dst = views["edges"]
        return src.copy(), dst.copy()

    def cluster_order(self) -> list[int]:
        """A topological order of the cluster positions (a new list): the one recorded with
        :meth:`record_order`, else Kahn's, first in first out; raises
        :class:`~clusterkit.errors.CycleError` when the clusters form a cycle."""
        views = self._views
        if "order" not in views:
            views["order"] = fifo_order(len(self.clusters), *self.cluster_edges())
        return list(views["order"])

    def record_order(self, order: np.ndarray) -> bool:
        """Keep ``order`` (cluster positions) as :meth:`cluster_order` when it is a topological
        order of the clusters (checked on :meth:`cluster_edges`), for a maker that has one at
        hand; returns whether it was kept."""
        k = len(self.clusters)
        order = np.asarray(order, dtype=np.int64)
        if order.shape != (k,) or (k and (order.min() < 0 or order.max() >= k)):
            return False
        pos = np.full(k, -1, dtype=np.int64)
        pos[order] = np.arange(k, dtype=np.int64)
        src, dst = self.cluster_edges()
        if (pos < 0).any() or not bool(np.all(pos[src] < pos[dst])):
            return False
        self._views["order"] = order.tolist()
        return True

    def device_of_nodes(self) -> list[str]:
        """Device name per node."""
        out = [""] * self.graph.n
        for c in self.clusters:
            for v in c.nodes:
                out[v] = c.device
        return out

    def transfer_units(self, assignment: np.ndarray | None = None) -> np.ndarray:
        """Transfer unit per node (one side of a transfer in ``cut_bytes``): the cluster position
        for offloaded clusters, HOST (-1) for every fallback node."""
        a = self.assignment() if assignment is None else assignment
        return np.where(~self._on_device()[a], HOST, a)

    units = renamed_attribute("transfer_units")

    def _on_device(self) -> np.ndarray:
        """Whether each cluster (by position) is on an accelerator rather than the fallback."""
        views = self._views
        if "devices" in views:
            return views["devices"] >= 0
        return np.asarray([c.device != self.fallback for c in self.clusters], dtype=bool)

    def offloaded_clusters(self) -> list[Cluster]:
        """Clusters on a non-fallback device."""
        return [c for c in self.clusters if c.device != self.fallback]

    accelerator_clusters = renamed_attribute("offloaded_clusters")

    def cluster_graph(self):
        """The graph of clusters as a networkx DiGraph (nodes = cluster positions)."""
        import networkx as nx

        a = self.assignment()
        g = nx.DiGraph()
        for k, c in enumerate(self.clusters):
            g.add_node(k, device=c.device, size=len(c.nodes))
        cu, cv = a[self.graph.edge_src], a[self.graph.edge_dst]
        keep = cu != cv
        g.add_edges_from(zip(cu[keep].tolist(), cv[keep].tolist()))
        return g

    # ------------------------------------------------------------------ validation
    def validate(self) -> "Partition":
        """Raise :class:`PartitionError` with the precise reason if invalid; return self
        (the checks: :func:`clusterkit.result.validate.check_partition`)."""
        check_partition(self.problem, self.clusters, self.assignment())
        return self

    def is_valid(self) -> bool:
        """True when :meth:`validate` passes."""
        try:
            self.validate()
        except PartitionError:
            return False
        return True

    # ------------------------------------------------------------------ metrics and output
    def figures(self) -> tuple[int, int, int]:
        """(fallback nodes, cut_bytes, partitions) from :meth:`metrics`: the key by which
        ``auto`` and the cost device choice rank partitions."""
        return figures_of(self.metrics())

    def metrics(self) -> dict[str, Any]:
        """docs/design.md metrics: partitions, cut_bytes, largest_cluster, nodes_offloaded, ...;
        ``folded_nodes`` (see :attr:`Graph.folded`) are left out of ``compute_nodes`` and of the
        ``offloaded_share`` (``compute_offloaded / compute_nodes``)."""
        views = self._views
        if "metrics" not in views:
            a = self.assignment()
            views["metrics"] = partition_metrics(self.graph, a, self._on_device(),
                                                 self.transfer_units(a))
        return dict(views["metrics"])

    def placement(self) -> dict[str, Any]:
        """The placement report (:func:`clusterkit.result.report.placement_report`), made once
        from the clusters and the fallback reasons: what the partition JSON carries for every
        strategy."""
        views = self._views
        if "placement" not in views:
            with gc_paused():  # a million small dicts and lists: collections would free none
                views["placement"] = placement_report(self)
        return views["placement"]

    def to_json(self, model: str | None = None) -> dict[str, Any]:
        """The partition JSON of docs/design.md (``nodes`` are source indices); see
        :func:`clusterkit.result.json_format.partition_json`."""
        return partition_json(self, model)

    def summary(self) -> str:
        """One line for people (:func:`clusterkit.result.report.summary_line`): its figures
        count compute nodes only, so they mean the same for every selector and with
        ``--optimize``."""
        return summary_line(self)
